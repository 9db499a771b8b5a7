"""The /preview authentication pieces: bearer tokens, TokenReview answers, SubjectAccessReviews, redaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest

from webhook.errors import ClusterUnavailable, Unauthorized
from webhook.identity import UserInfo
from webhook.kubeapi import KubeClient
from webhook.server.auth import (
    SUBJECT_ACCESS_REVIEW_PATH,
    TOKEN_CACHE_ENTRIES,
    TOKEN_REVIEW_PATH,
    KubernetesAuthenticator,
    NamespaceVisibility,
    NoAuthentication,
    bearer_token,
    caller_from_token_review,
    redact_preview,
    subject_access_review,
)


def test_bearer_token_parsing_never_echoes_the_header() -> None:
    assert bearer_token({"Authorization": "Bearer abc.def"}) == "abc.def"
    assert bearer_token({"Authorization": "bearer  xyz "}) == "xyz"
    for value in ("", "Basic dXNlcjpwYXNz", "Bearer ", "Token secret-value"):
        with pytest.raises(Unauthorized) as raised:
            bearer_token({"Authorization": value} if value else {})
        assert "secret-value" not in str(raised.value) and "dXNlcjpwYXNz" not in str(raised.value)


def test_caller_from_token_review() -> None:
    answer = {"status": {"authenticated": True, "user": {"username": "alice", "uid": "1", "groups": ["g"],
                                                          "extra": {"scopes": ["a", "b"]}}}}
    assert caller_from_token_review(answer) == UserInfo("alice", "1", ("g",), {"scopes": ("a", "b")})
    assert caller_from_token_review({"status": {"authenticated": False, "error": "expired"}}) is None
    assert caller_from_token_review({}) is None


def test_subject_access_review_carries_the_whole_identity() -> None:
    review = subject_access_review(UserInfo("alice", "1", ("g",), {"scopes": ("a",)}), "list", "pods", "team-b")
    assert review == {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": "alice", "uid": "1", "groups": ["g"], "extra": {"scopes": ["a"]},
        "resourceAttributes": {"namespace": "team-b", "verb": "list", "group": "", "resource": "pods"}}}


PREVIEW: dict[str, Any] = {"kind": "PreemptionPreview", "summary": {"victims": 3}, "results": [
    {"pod": "a/x", "victims": [
        {"namespace": "b", "name": "b1", "pdbViolation": True},
        {"namespace": "c", "name": "c1", "pdbViolation": False},
        {"namespace": "b", "name": "b2", "pdbViolation": False}]},
    {"pod": "a/y", "victims": []}]}


def test_redaction_keeps_counts_and_drops_names() -> None:
    redacted = redact_preview(PREVIEW, {"b"})
    first, second = redacted["results"]
    assert first["victims"] == [{"namespace": "c", "name": "c1", "pdbViolation": False}]
    assert first["redactedVictims"] == [{"namespace": "b", "count": 2, "pdbViolations": 1}]
    assert "redactedVictims" not in second and redacted["redactedNamespaces"] == ["b"]
    assert redacted["summary"] == {"victims": 3} and "b1" not in str(redacted)
    assert redact_preview(PREVIEW, set()) == PREVIEW
    assert PREVIEW["results"][0]["victims"][0]["name"] == "b1"  # the input is not modified


class CountingAuthenticator(NoAuthentication):
    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.asked: list[str] = []

    async def is_allowed(self, caller: UserInfo, verb: str, resource: str, namespace: str) -> bool:
        self.asked.append(namespace)
        return namespace in self.allowed


async def test_one_subject_access_review_per_namespace_per_request() -> None:
    authenticator = CountingAuthenticator({"c"})
    visibility = NamespaceVisibility(authenticator, UserInfo("alice"))
    assert await visibility.hidden_namespaces(["b", "c", "b"]) == {"b"}
    assert await visibility.may_list_pods("b") is False
    assert authenticator.asked == ["b", "c"]


class ReviewingApi:
    """The API server's TokenReview and SubjectAccessReview endpoints, counting what they are asked: ``users``
    maps tokens to usernames, ``allowed`` holds the (username, namespace) pairs that may list pods."""

    def __init__(self, users: dict[str, str], allowed: set[tuple[str, str]]) -> None:
        self.users = users
        self.allowed = allowed
        self.asked: list[str] = []
        self.down = False

    async def post(self, path: str, body: Mapping[str, Any], timeout: float | None = None) -> Mapping[str, Any]:
        if self.down:
            raise ClusterUnavailable("connection refused")
        spec = body["spec"]
        if path == TOKEN_REVIEW_PATH:
            self.asked.append("TokenReview")
            user = self.users.get(spec["token"])
            return {"status": {"authenticated": True, "user": {"username": user}} if user else {"authenticated": False}}
        assert path == SUBJECT_ACCESS_REVIEW_PATH
        namespace = spec["resourceAttributes"]["namespace"]
        self.asked.append(f"SubjectAccessReview {spec['user']} {namespace}")
        return {"status": {"allowed": (spec["user"], namespace) in self.allowed}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reviewing(api: ReviewingApi, clock: Clock, cache_seconds: float = 10.0) -> KubernetesAuthenticator:
    return KubernetesAuthenticator(cast(KubeClient, api), cache_seconds=cache_seconds, clock=clock)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_review_answers_are_reused_for_ten_seconds_then_asked_again() -> None:
    api, clock = ReviewingApi({"t-alice": "alice"}, {("alice", "team-a")}), Clock()
    authenticator = reviewing(api, clock)
    alice = await authenticator.authenticate(bearer("t-alice"))
    assert alice == UserInfo("alice")
    assert [await authenticator.is_allowed(alice, "list", "pods", ns) for ns in ("team-a", "team-b")] == [True, False]
    clock.now += 9.9
    assert await authenticator.authenticate(bearer("t-alice")) == alice
    assert [await authenticator.is_allowed(alice, "list", "pods", ns) for ns in ("team-a", "team-b")] == [True, False]
    assert api.asked == ["TokenReview", "SubjectAccessReview alice team-a", "SubjectAccessReview alice team-b"]
    # Past the ten seconds a revoked token and a removed RoleBinding are honoured.
    clock.now += 0.2
    api.users.clear()
    api.allowed.clear()
    with pytest.raises(Unauthorized):
        await authenticator.authenticate(bearer("t-alice"))
    assert await authenticator.is_allowed(alice, "list", "pods", "team-a") is False
    assert api.asked[3:] == ["TokenReview", "SubjectAccessReview alice team-a"]


async def test_a_rejected_token_is_rejected_from_the_cache_and_never_kept_in_clear() -> None:
    api, clock = ReviewingApi({}, set()), Clock()
    authenticator = reviewing(api, clock)
    for _ in range(2):
        with pytest.raises(Unauthorized) as raised:
            await authenticator.authenticate(bearer("forged-secret"))
        assert "forged-secret" not in str(raised.value)
    assert api.asked == ["TokenReview"]
    assert not any(b"forged-secret" in key for key in authenticator._tokens)


async def test_the_whole_caller_decides_an_access_answer() -> None:
    api, clock = ReviewingApi({}, {("alice", "team-a")}), Clock()
    authenticator = reviewing(api, clock)
    assert await authenticator.is_allowed(UserInfo("alice"), "list", "pods", "team-a") is True
    # Another identity with the same name (other groups, uid or extra) is asked about on its own.
    for other in (UserInfo("alice", groups=("system:authenticated",)), UserInfo("alice", uid="2"),
                  UserInfo("alice", extra={"scopes": ("x",)})):
        await authenticator.is_allowed(other, "list", "pods", "team-a")
    await authenticator.is_allowed(UserInfo("alice"), "get", "pods", "team-a")
    assert len(api.asked) == 5


async def test_failures_to_ask_are_not_cached_and_zero_seconds_asks_every_time() -> None:
    api, clock = ReviewingApi({"t": "bob"}, set()), Clock()
    authenticator = reviewing(api, clock)
    api.down = True
    with pytest.raises(ClusterUnavailable):
        await authenticator.authenticate(bearer("t"))
    api.down = False
    assert await authenticator.authenticate(bearer("t")) == UserInfo("bob")
    uncached = reviewing(api, clock, cache_seconds=0)
    for _ in range(3):
        await uncached.authenticate(bearer("t"))
        await uncached.is_allowed(UserInfo("bob"), "list", "pods", "team-a")
    assert api.asked.count("TokenReview") == 1 + 3 and api.asked.count("SubjectAccessReview bob team-a") == 3


async def test_a_flood_of_distinct_tokens_holds_bounded_memory() -> None:
    api, clock = ReviewingApi({"t-alice": "alice"}, set()), Clock()
    authenticator = reviewing(api, clock)
    await authenticator.authenticate(bearer("t-alice"))
    for i in range(TOKEN_CACHE_ENTRIES + 100):
        with pytest.raises(Unauthorized):
            await authenticator.authenticate(bearer(f"garbage-{i}"))
    assert len(authenticator._tokens) == TOKEN_CACHE_ENTRIES
    # The oldest answer went first: alice is asked about again, and answered.
    assert await authenticator.authenticate(bearer("t-alice")) == UserInfo("alice")
    assert api.asked.count("TokenReview") == TOKEN_CACHE_ENTRIES + 100 + 2
