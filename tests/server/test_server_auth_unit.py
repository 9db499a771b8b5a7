"""The /preview authentication pieces: bearer tokens, TokenReview answers, SubjectAccessReviews, redaction."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import pytest

from webhook.cluster.snapshot import ClusterState
from webhook.errors import ClusterUnavailable, Unauthorized
from webhook.identity import UserInfo
from webhook.kubeapi import KubeClient
from webhook.server.auth import (
    ACCESS_REVIEWS_AT_ONCE,
    REFRESHES_IN_FLIGHT,
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
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import MemorySource


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


class ClosedAuthenticator(NoAuthentication):
    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


async def test_the_app_closes_any_authenticator_on_shutdown() -> None:
    # Not only KubernetesAuthenticator: whatever the app is given runs its own close() once, when the server stops.
    authenticator = ClosedAuthenticator()
    async with LoopbackWebhook(MemorySource(ClusterState()), authenticator=authenticator):
        assert authenticator.closed == 0
    assert authenticator.closed == 1


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
        self.held: asyncio.Event | None = None  # when set: every answer waits for it

    async def post(self, path: str, body: Mapping[str, Any], timeout: float | None = None) -> Mapping[str, Any]:
        if self.held is not None:
            await self.held.wait()
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


async def turns(count: int = 5) -> None:
    """Let background tasks (the refreshes) run."""
    for _ in range(count):
        await asyncio.sleep(0)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_review_answers_are_reused_for_ten_seconds_then_asked_again() -> None:
    api, clock = ReviewingApi({"t-alice": "alice"}, {("alice", "team-a")}), Clock()
    authenticator = reviewing(api, clock)
    alice = await authenticator.authenticate(bearer("t-alice"))
    assert alice == UserInfo("alice")
    assert [await authenticator.is_allowed(alice, "list", "pods", ns) for ns in ("team-a", "team-b")] == [True, False]
    clock.now += 4.9  # the first half of the ten seconds: answered from the cache, nothing asked again
    assert await authenticator.authenticate(bearer("t-alice")) == alice
    assert [await authenticator.is_allowed(alice, "list", "pods", ns) for ns in ("team-a", "team-b")] == [True, False]
    await turns()
    assert api.asked == ["TokenReview", "SubjectAccessReview alice team-a", "SubjectAccessReview alice team-b"]
    # Past the ten seconds (not used meanwhile) a revoked token and a removed RoleBinding are honoured.
    clock.now += 5.2
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


async def test_an_access_answer_used_in_its_second_half_is_asked_again_in_the_background() -> None:
    api, clock = ReviewingApi({}, {("alice", "team-a")}), Clock()
    authenticator = reviewing(api, clock)
    alice = UserInfo("alice")
    assert await authenticator.is_allowed(alice, "list", "pods", "team-a") is True
    clock.now += 5.0
    api.allowed.clear()  # the RoleBinding is removed
    # Answered at once from the cache (no round trip in this request), asked again behind it, once.
    for _ in range(3):
        assert await authenticator.is_allowed(alice, "list", "pods", "team-a") is True
    assert api.asked == ["SubjectAccessReview alice team-a"]
    await turns()
    assert api.asked == ["SubjectAccessReview alice team-a"] * 2
    assert await authenticator.is_allowed(alice, "list", "pods", "team-a") is False  # the refreshed answer
    # The refresh restarted the answer's age: at 9.9 s after it, still cached and not asked again.
    clock.now += 4.9
    assert await authenticator.is_allowed(alice, "list", "pods", "team-a") is False
    await turns()
    assert len(api.asked) == 2


async def test_a_failed_refresh_leaves_the_answer_to_expire_at_its_time() -> None:
    api, clock = ReviewingApi({}, {("alice", "team-a")}), Clock()
    authenticator = reviewing(api, clock)
    alice = UserInfo("alice")
    assert await authenticator.is_allowed(alice, "list", "pods", "team-a") is True
    clock.now += 6.0
    api.down = True
    assert await authenticator.is_allowed(alice, "list", "pods", "team-a") is True
    await turns()
    assert not authenticator._refreshing
    clock.now += 3.9  # 9.9 s old: still the answer
    assert await authenticator.is_allowed(alice, "list", "pods", "team-a") is True
    await turns()
    clock.now += 0.2  # 10.1 s old: gone, and asking fails now (503), never an answer older than ten seconds
    with pytest.raises(ClusterUnavailable):
        await authenticator.is_allowed(alice, "list", "pods", "team-a")


async def test_refreshes_in_flight_are_bounded_and_cancelled_on_close() -> None:
    api, clock = ReviewingApi({}, set()), Clock()
    authenticator = reviewing(api, clock)
    alice = UserInfo("alice")
    namespaces = [f"team-{i:02d}" for i in range(REFRESHES_IN_FLIGHT + 10)]
    for ns in namespaces:
        await authenticator.is_allowed(alice, "list", "pods", ns)
    clock.now += 5.0
    api.held = asyncio.Event()
    for ns in namespaces:
        assert await authenticator.is_allowed(alice, "list", "pods", ns) is False
    await turns()
    assert len(authenticator._refreshing) == REFRESHES_IN_FLIGHT
    tasks = list(authenticator._refreshing.values())
    await authenticator.close()
    assert all(task.cancelled() for task in tasks) and not authenticator._refreshing
    assert len(api.asked) == len(namespaces)  # none of the cancelled refreshes was answered
    # Closed before a refresh had its first turn: nothing is left behind either.
    clock.now += 1.0
    api.held = None
    await authenticator.is_allowed(alice, "list", "pods", namespaces[0])
    assert len(authenticator._refreshing) == 1
    await authenticator.close()
    assert not authenticator._refreshing


class ConcurrentAuthenticator(NoAuthentication):
    """Answers after a turn of the loop, counting the questions open at once; ``failing``: namespaces whose
    question fails (the API server unavailable)."""

    def __init__(self, allowed: set[str], failing: set[str] | None = None) -> None:
        self.allowed, self.failing = allowed, failing or set()
        self.open = self.most_open = 0
        self.answered: list[str] = []

    async def is_allowed(self, caller: UserInfo, verb: str, resource: str, namespace: str) -> bool:
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        await turns(2)
        self.open -= 1
        self.answered.append(namespace)
        if namespace in self.failing:
            raise ClusterUnavailable("cannot create a SubjectAccessReview: connection refused")
        return namespace in self.allowed


async def test_a_previews_namespaces_are_asked_about_at_once_up_to_a_bound() -> None:
    namespaces = [f"team-{i:02d}" for i in range(ACCESS_REVIEWS_AT_ONCE * 2 + 3)]
    authenticator = ConcurrentAuthenticator(set(namespaces[::2]))
    visibility = NamespaceVisibility(authenticator, UserInfo("alice"))
    assert await visibility.hidden_namespaces(namespaces + namespaces[:3]) == set(namespaces[1::2])
    assert authenticator.most_open == ACCESS_REVIEWS_AT_ONCE
    assert sorted(authenticator.answered) == namespaces  # each once


async def test_a_failed_namespace_question_fails_the_preview_after_the_others_end() -> None:
    namespaces = [f"team-{i:02d}" for i in range(5)]
    authenticator = ConcurrentAuthenticator(set(namespaces), failing={"team-01"})
    visibility = NamespaceVisibility(authenticator, UserInfo("alice"))
    with pytest.raises(ClusterUnavailable, match="SubjectAccessReview"):
        await visibility.hidden_namespaces(namespaces)
    assert sorted(authenticator.answered) == namespaces and authenticator.open == 0


class TickingClock(Clock):
    """A clock that moves on by ``step`` each time it is read, as a real one does between two cache lookups."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


async def test_a_token_expiring_between_two_reads_of_the_cache_is_reviewed_again_not_a_500() -> None:
    # Found by bench/scale.py's probes at 15,000 nodes: /preview answered HTTP 500 (KeyError) once, when the
    # cached answer expired between the cache's membership test and its read.
    api, clock = ReviewingApi({"t-alice": "alice"}, set()), TickingClock(0.0)
    authenticator = reviewing(api, clock)
    alice = await authenticator.authenticate(bearer("t-alice"))
    clock.now += 10.0 - 1.5e-6  # a first look at the clock 0.5 us before the expiry, a second 0.5 us after it
    clock.step = 1e-6
    assert await authenticator.authenticate(bearer("t-alice")) == alice
    assert api.asked == ["TokenReview"]  # one look, while fresh


async def test_an_access_answer_expiring_between_two_reads_of_the_cache_is_asked_again_not_a_500() -> None:
    api, clock = ReviewingApi({}, {("alice", "team-a")}), TickingClock(0.0)
    authenticator = reviewing(api, clock)
    assert await authenticator.is_allowed(UserInfo("alice"), "list", "pods", "team-a") is True
    clock.now += 10.0 - 1.5e-6
    clock.step = 1e-6
    assert await authenticator.is_allowed(UserInfo("alice"), "list", "pods", "team-a") is True
    await turns()
    assert api.asked == ["SubjectAccessReview alice team-a"] * 2  # fresh at one look, refreshed in its second half
