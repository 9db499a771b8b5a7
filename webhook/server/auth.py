"""Who may call ``POST /preview`` and what they may see.

In cluster the caller presents a bearer token (``Authorization: Bearer <token>``). It is verified with a
TokenReview (authentication.k8s.io/v1) and the caller is authorised with SubjectAccessReviews
(authorization.k8s.io/v1), both created through the cluster source's API client (``webhook.kubeapi``: the
webhook's own service account, which RBAC allows to create both). Serving from a snapshot file there is no
cluster to ask, so no authentication (``NoAuthentication``).

Tokens are never logged, never put in an error message and never kept after the request. Answers are: a
TokenReview's for ``REVIEW_CACHE_SECONDS`` under an HMAC of the token (a key drawn per process, never the token
itself), a SubjectAccessReview's as long under the caller and the question, as an aggregated API server that
delegates both to kube-apiserver keeps them (``DelegatingAuthenticationOptions.CacheTTL``,
``DelegatingAuthorizationOptions.AllowCacheTTL`` / ``DenyCacheTTL``, k8s.io/apiserver/pkg/server/options: 10 s
each; the token cache keyed the same way, token/cache/cached_token_authenticator.go). A revoked token or a
removed RoleBinding is honoured within those 10 s. Failures to ask (API server unavailable) are never cached. A
SubjectAccessReview answer used in the second half of its 10 s is asked again in the background
(``REFRESH_AFTER_FRACTION``), so a caller who keeps previewing does not wait for the API server every 10 s.

Redaction: victims in namespaces where the caller may not ``list pods`` are removed from ``victims`` and
reported per namespace without names. The shape, added to each ``results[]`` entry that hid something::

    "victims": [ ...only victims in namespaces the caller may list pods in... ],
    "redactedVictims": [{"namespace": "team-b", "count": 2, "pdbViolations": 1}],

and at the top level ``"redactedNamespaces": ["team-b"]``. Counts in ``summary`` and the rest of each result
(``node``, ``pdbViolations``, ``expectedDelaySeconds``, ``message``) are unchanged: they name no victim.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from cachetools import TTLCache

from webhook.errors import ApiError, ClusterUnavailable, Unauthorized
from webhook.identity import ANONYMOUS, UserInfo
from webhook.kubeapi import KubeClient

log = logging.getLogger(__name__)

TOKEN_REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
BEARER_PREFIX = "bearer "

# How long a TokenReview's or a SubjectAccessReview's answer is reused (module doc). Measured
# (bench/scale.py's prober, 2,000 nodes, 500 pod writes/s on the API server): asking for every /preview put two API
# server round trips in each one, preview p99 ~120 ms under churn; reused, ~12 ms.
REVIEW_CACHE_SECONDS = 10.0
# Entries held at most, the least recently used going first (upstream's token cache is an LRU too): a flood of
# distinct tokens costs bounded memory and only pushes out older answers.
TOKEN_CACHE_ENTRIES = 4096
ACCESS_CACHE_ENTRIES = 16384
# A SubjectAccessReview answer served from the cache past this fraction of its ``cache_seconds`` is asked again in
# the background, so a caller who keeps previewing never waits for the API server once its answers are cached: an
# answer expiring put a round trip in the preview that found it gone, and under 290 pod writes/s (bench/scale.py's
# cluster, 5,000 nodes) such round trips took 36 ms (p50) to 138 ms and made the preview p99 35-40 ms against 6-8
# idle. No answer is ever older than ``cache_seconds``: each refresh restarts its age, a failed one leaves it to
# expire. Tokens are not refreshed so (that would keep a token after its request, see the module doc).
REFRESH_AFTER_FRACTION = 0.5
REFRESHES_IN_FLIGHT = 16
# SubjectAccessReviews one preview asks at once (one per namespace of its victims, when not cached).
ACCESS_REVIEWS_AT_ONCE = 8


class Authenticator(Protocol):
    """Authentication and authorisation of /preview callers."""

    async def authenticate(self, headers: Mapping[str, str]) -> UserInfo:
        """The caller of a request; raises ``Unauthorized`` (401)."""
        ...

    async def is_allowed(self, caller: UserInfo, verb: str, resource: str, namespace: str) -> bool:
        """Whether ``caller`` may ``verb`` core-group ``resource`` in ``namespace``."""
        ...

    async def close(self) -> None:
        """Ends whatever the authenticator runs in the background (the app calls it on shutdown)."""
        ...


class NoAuthentication:
    """Snapshot mode: everyone may preview and see everything."""

    async def authenticate(self, headers: Mapping[str, str]) -> UserInfo:
        return ANONYMOUS

    async def is_allowed(self, caller: UserInfo, verb: str, resource: str, namespace: str) -> bool:
        return True

    async def close(self) -> None:
        return None


def bearer_token(headers: Mapping[str, str]) -> str:
    """The token of ``Authorization: Bearer <token>``; raises ``Unauthorized`` without one."""
    value = headers.get("Authorization", "")
    if not value.lower().startswith(BEARER_PREFIX) or not value[len(BEARER_PREFIX):].strip():
        raise Unauthorized("Unauthorized: /preview needs a bearer token (Authorization: Bearer <token>)")
    return value[len(BEARER_PREFIX):].strip()


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def caller_from_token_review(review: Mapping[str, Any]) -> UserInfo | None:
    """The user of an answered TokenReview, or None when the token was not authenticated."""
    status = review.get("status")
    if not isinstance(status, Mapping) or status.get("authenticated") is not True:
        return None
    user = status.get("user")
    if not isinstance(user, Mapping):
        return None
    extra = user.get("extra")
    return UserInfo(
        username=str(user.get("username") or ""),
        uid=str(user.get("uid") or ""),
        groups=_strings(user.get("groups")),
        extra={str(k): _strings(v) for k, v in extra.items()} if isinstance(extra, Mapping) else {},
    )


def subject_access_review(caller: UserInfo, verb: str, resource: str, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "user": caller.username,
        "groups": list(caller.groups),
        "resourceAttributes": {"namespace": namespace, "verb": verb, "group": "", "resource": resource},
    }
    if caller.uid:
        spec["uid"] = caller.uid
    if caller.extra:
        spec["extra"] = {k: list(v) for k, v in caller.extra.items()}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


AccessQuestion = tuple[str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], str, str, str]


def access_question(caller: UserInfo, verb: str, resource: str, namespace: str) -> AccessQuestion:
    """What a SubjectAccessReview asks, as a cache key: the whole caller (groups and extra decide too)."""
    extra = tuple(sorted((key, tuple(values)) for key, values in caller.extra.items()))
    return caller.username, caller.uid, tuple(caller.groups), extra, verb, resource, namespace


_NOT_CACHED: Any = object()


class KubernetesAuthenticator:
    """TokenReview + SubjectAccessReview through the live cluster source's API client (open once it started),
    each answer reused for ``cache_seconds`` (0: ask every time)."""

    def __init__(self, api: KubeClient, *, timeout_seconds: float = 5.0,
                 cache_seconds: float = REVIEW_CACHE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.timeout_seconds = timeout_seconds
        self.cache_seconds = cache_seconds
        self._token_key = secrets.token_bytes(32)
        ttl = max(cache_seconds, 1e-9)  # TTLCache needs a positive ttl; unused when cache_seconds is 0
        # The caller a token was accepted as, None when it was not.
        self._tokens: TTLCache[bytes, UserInfo | None] = TTLCache(TOKEN_CACHE_ENTRIES, ttl, timer=clock)
        # Each answer with when it was asked (``clock``), for REFRESH_AFTER_FRACTION.
        self._access: TTLCache[AccessQuestion, tuple[bool, float]] = TTLCache(ACCESS_CACHE_ENTRIES, ttl, timer=clock)
        self._refreshing: dict[AccessQuestion, asyncio.Task[None]] = {}
        self.clock = clock

    async def _create(self, path: str, body: Mapping[str, Any], what: str) -> Mapping[str, Any]:
        """POST one review object; any failure is ``ClusterUnavailable`` (503), never echoing the body."""
        try:
            return await self.api.post(path, dict(body), timeout=self.timeout_seconds)
        except ApiError as exc:
            log.warning("the API server refused a %s: HTTP %s %s", what, exc.code, exc.message)
            raise ClusterUnavailable(f"cannot create a {what}: the API server answered HTTP {exc.code}") from None
        except ClusterUnavailable as exc:
            raise ClusterUnavailable(f"cannot create a {what}: {exc}") from None

    async def authenticate(self, headers: Mapping[str, str]) -> UserInfo:
        token = bearer_token(headers)
        key = hmac.new(self._token_key, token.encode(), hashlib.sha256).digest()
        # ``get`` holds the cache's clock still (cachetools' _TimedCache); ``key in`` and then ``[key]`` read it
        # twice, and an answer expiring between the two raised KeyError, an HTTP 500 instead of a new review
        # (bench/scale.py's probes met it at 15,000 nodes). None is a rejected token, cached too.
        caller = self._tokens.get(key, _NOT_CACHED) if self.cache_seconds > 0 else _NOT_CACHED
        if caller is _NOT_CACHED:
            review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
            caller = caller_from_token_review(await self._create(TOKEN_REVIEW_PATH, review, "TokenReview"))
            if self.cache_seconds > 0:
                self._tokens[key] = caller
        if caller is None:
            raise Unauthorized("Unauthorized: the bearer token was not accepted")
        return caller

    async def is_allowed(self, caller: UserInfo, verb: str, resource: str, namespace: str) -> bool:
        question = access_question(caller, verb, resource, namespace)
        if self.cache_seconds > 0:
            found = self._access.get(question)
            if found is not None:
                allowed, asked_at = found
                if self.clock() - asked_at >= self.cache_seconds * REFRESH_AFTER_FRACTION:
                    self._refresh(question, caller, verb, resource, namespace)
                return allowed
        asked_at = self.clock()
        allowed = await self._ask_access(caller, verb, resource, namespace)
        if self.cache_seconds > 0:
            self._access[question] = (allowed, asked_at)
        return allowed

    async def _ask_access(self, caller: UserInfo, verb: str, resource: str, namespace: str) -> bool:
        review = subject_access_review(caller, verb, resource, namespace)
        answer = await self._create(SUBJECT_ACCESS_REVIEW_PATH, review, "SubjectAccessReview")
        status = answer.get("status")
        return isinstance(status, Mapping) and status.get("allowed") is True

    def _refresh(self, question: AccessQuestion, caller: UserInfo, verb: str, resource: str, namespace: str) -> None:
        """Ask ``question`` again in the background (once at a time, at most REFRESHES_IN_FLIGHT questions)."""
        if question in self._refreshing or len(self._refreshing) >= REFRESHES_IN_FLIGHT:
            return

        async def refresh() -> None:
            asked_at = self.clock()
            try:
                allowed = await self._ask_access(caller, verb, resource, namespace)
            except ClusterUnavailable as exc:  # the answer held expires at its time; the next caller asks
                log.debug("refreshing a SubjectAccessReview answer failed: %s", exc)
                return
            finally:
                del self._refreshing[question]
            self._access[question] = (allowed, asked_at)

        self._refreshing[question] = asyncio.get_running_loop().create_task(refresh())

    async def close(self) -> None:
        """Cancel the refreshes in flight (before the API client closes)."""
        tasks = list(self._refreshing.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._refreshing.clear()  # a task cancelled before its first step never ran its own removal


class NamespaceVisibility:
    """Which namespaces' pods one caller may list: one SubjectAccessReview per namespace, per request."""

    def __init__(self, authenticator: Authenticator, caller: UserInfo) -> None:
        self.authenticator = authenticator
        self.caller = caller
        self._answers: dict[str, bool] = {}

    async def may_list_pods(self, namespace: str) -> bool:
        found = self._answers.get(namespace)
        if found is None:
            found = await self.authenticator.is_allowed(self.caller, "list", "pods", namespace)
            self._answers[namespace] = found
        return found

    async def hidden_namespaces(self, namespaces: Iterable[str]) -> set[str]:
        """The namespaces among ``namespaces`` whose pods the caller may not list, asked at once (up to
        ACCESS_REVIEWS_AT_ONCE): one after another, each uncached namespace added an API server round trip."""
        wanted = sorted(set(namespaces))
        slots = asyncio.Semaphore(ACCESS_REVIEWS_AT_ONCE)

        async def hidden(namespace: str) -> bool:
            async with slots:
                return not await self.may_list_pods(namespace)

        # Every question runs to its end (each has its timeout); the first failure, if any, is the answer.
        answers = await asyncio.gather(*(hidden(ns) for ns in wanted), return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        return {ns for ns, answer in zip(wanted, answers, strict=True) if answer}


def victim_namespaces(preview: Mapping[str, Any]) -> set[str]:
    return {str(v.get("namespace", "")) for r in preview.get("results") or () for v in r.get("victims") or ()}


def redact_preview(preview: Mapping[str, Any], hidden: Iterable[str]) -> dict[str, Any]:
    """The preview with the victims of ``hidden`` namespaces reduced to counts (shape in the module doc)."""
    hidden = set(hidden)
    if not hidden:
        return dict(preview)
    results = []
    for result in preview.get("results") or ():
        shown = [v for v in result.get("victims") or () if v.get("namespace") not in hidden]
        counts: dict[str, list[int]] = {}
        for victim in result.get("victims") or ():
            namespace = victim.get("namespace")
            if namespace in hidden:
                count = counts.setdefault(namespace, [0, 0])
                count[0] += 1
                count[1] += 1 if victim.get("pdbViolation") else 0
        entry = {**result, "victims": shown}
        if counts:
            entry["redactedVictims"] = [{"namespace": ns, "count": c[0], "pdbViolations": c[1]}
                                        for ns, c in sorted(counts.items())]
        results.append(entry)
    return {**preview, "results": results, "redactedNamespaces": sorted(hidden & victim_namespaces(preview))}

