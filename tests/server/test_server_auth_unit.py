"""The /preview authentication pieces: bearer tokens, TokenReview answers, SubjectAccessReviews, redaction."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.errors import Unauthorized
from webhook.identity import UserInfo
from webhook.server.auth import (
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
