"""Malformed input never gets a 5xx or a hang: hypothesis drives /mutate/pods over real TLS."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cluster.snapshot import ClusterState
from webhook.routes import MUTATE_PODS_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.settings import MAX_BODY_BYTES
from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.sources.source import MemorySource

VALID_REVIEW = admission_review(
    {
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "",
        "name": "web-0",
        "namespace": "team-a",
        "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["dev"], "extra": {"scopes": ["a"]}},
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "team-a", "generateName": "web-"},
            "spec": {"containers": [{"name": "c"}], "priorityClassName": "", "priority": 0,
                     "preemptionPolicy": "PreemptLowerPriority"},
        },
        "oldObject": None,
        "dryRun": False,
        "options": {},
    },
    uid="fuzz",
)

# Every field the server reads, to be replaced by a value of any type (or removed).
FIELD_PATHS: list[tuple[str, ...]] = [
    ("apiVersion",), ("kind",), ("request",), ("request", "uid"), ("request", "kind"), ("request", "kind", "kind"),
    ("request", "kind", "group"), ("request", "resource"), ("request", "resource", "resource"),
    ("request", "resource", "group"), ("request", "subResource"), ("request", "name"), ("request", "namespace"),
    ("request", "operation"), ("request", "userInfo"), ("request", "userInfo", "username"),
    ("request", "userInfo", "groups"), ("request", "userInfo", "extra"), ("request", "object"),
    ("request", "object", "kind"), ("request", "object", "apiVersion"), ("request", "object", "metadata"),
    ("request", "object", "metadata", "name"), ("request", "object", "metadata", "generateName"),
    ("request", "object", "spec"), ("request", "object", "spec", "priority"),
    ("request", "object", "spec", "priorityClassName"), ("request", "object", "spec", "preemptionPolicy"),
    ("request", "oldObject"), ("request", "dryRun"), ("request", "options"), ("request", "requestKind"),
    ("request", "requestResource"),
]
OPERATIONS = ["CREATE", "UPDATE", "DELETE", "CONNECT"]

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40),
    st.sampled_from([*OPERATIONS, "Pod", "pods", "v1", "admission.k8s.io/v1", "AdmissionReview", ""]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


def _set(document: dict[str, Any], path: tuple[str, ...], value: object, remove: bool) -> dict[str, Any]:
    document = copy.deepcopy(document)
    parent: Any = document
    for token in path[:-1]:
        if not isinstance(parent, dict) or not isinstance(parent.get(token), dict):
            return document
        parent = parent[token]
    if remove:
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value
    return document


@st.composite
def mutated_reviews(draw: st.DrawFn) -> bytes:
    review = copy.deepcopy(VALID_REVIEW)
    review["request"]["operation"] = draw(st.sampled_from(OPERATIONS))
    if draw(st.booleans()):
        review["request"]["oldObject"] = copy.deepcopy(review["request"]["object"])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(FIELD_PATHS))
        review = _set(review, path, draw(json_values), remove=draw(st.booleans()))
    return json.dumps(review).encode()


def _deep(depth: int, kind: str) -> bytes:
    return (("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)).encode()


def _deep_inside(depth: int) -> bytes:
    review = copy.deepcopy(VALID_REVIEW)
    review["request"]["object"]["spec"]["nested"] = "@@"
    return json.dumps(review).encode().replace(b'"@@"', _deep(depth, "list"))


bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    mutated_reviews(),
    mutated_reviews().map(lambda b: b.replace(b"web-0", b"\xff\xfeweb")),  # invalid UTF-8 inside strings
    st.integers(min_value=1, max_value=200_000).flatmap(
        lambda d: st.sampled_from([_deep(d, "list"), _deep(d, "dict"), _deep_inside(d)])
    ),
    st.integers(min_value=1, max_value=MAX_BODY_BYTES // 4).map(
        lambda n: json.dumps(_set(VALID_REVIEW, ("request", "object", "spec", "priorityClassName"), "x" * n, False))
        .encode()
    ),
    st.sampled_from([b"", b"null", b"NaN", b'{"apiVersion": Infinity}', b"1" * 5000, b'"\\ud800"']),
)


@pytest.fixture
async def hook() -> AsyncIterator[LoopbackWebhook]:
    async with LoopbackWebhook(MemorySource(ClusterState())) as running:
        yield running


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=bodies, endpoint=st.sampled_from([MUTATE_PODS_PATH, MUTATE_PODS_PATH, VALIDATE_PRIORITYCLASSES_PATH]))
async def test_malformed_bodies_get_200_400_or_413(hook: LoopbackWebhook, body: bytes, endpoint: str) -> None:
    status, payload = await hook.post(endpoint, body)
    assert status in (200, 400, 413), (status, payload[:300])
    decoded = json.loads(payload)
    if status == 200:
        # A 200 means the body was a well-formed review: the response answers that request's uid.
        assert decoded["response"]["uid"] == json.loads(body)["request"]["uid"]
    else:
        assert isinstance(decoded["error"], str) and decoded["error"]


async def test_still_healthy_after_garbage(hook: LoopbackWebhook) -> None:
    for body in (b"\x00" * 100, _deep(100_000, "list"), b"{" * 10):
        status, _ = await hook.post(MUTATE_PODS_PATH, body)
        assert status == 400
    assert await hook.get("/healthz") == (200, "ok")
    status, body = await hook.post_json(MUTATE_PODS_PATH, VALID_REVIEW)
    assert status == 200 and body["response"]["allowed"] is True


async def test_body_over_3_mib_is_413(hook: LoopbackWebhook) -> None:
    filler = "x" * (MAX_BODY_BYTES + 1024)
    oversized = json.dumps({"filler": filler, **VALID_REVIEW})  # no review head in its first bytes
    status, payload = await hook.post(MUTATE_PODS_PATH, oversized.encode())
    assert status == 413
    assert "exceeds" in json.loads(payload)["error"]
    assert await hook.get("/healthz") == (200, "ok")


async def test_a_pod_review_over_3_mib_is_answered_from_its_head(hook: LoopbackWebhook) -> None:
    """A 413 would be the API server's failurePolicy (Ignore: admitted unchecked); the review's fields before its
    object (uid, namespace, operation) are enough to answer it as a pod that could not be predicted."""
    filler = "x" * (MAX_BODY_BYTES + 1024)
    oversized = json.dumps(_set(VALID_REVIEW, ("request", "object", "metadata", "annotations"), {"a": filler}, False))
    status, payload = await hook.post(MUTATE_PODS_PATH, oversized.encode())
    assert status == 200
    response = json.loads(payload)["response"]
    assert response["uid"] == VALID_REVIEW["request"]["uid"]
    assert any("admission review is over the webhook's size limit" in w for w in response["warnings"])
    assert response["auditAnnotations"]["prediction-skipped"] == "too-large"
    assert await hook.get("/healthz") == (200, "ok")


async def test_body_of_exactly_3_mib_is_accepted(hook: LoopbackWebhook) -> None:
    base = json.dumps(_set(VALID_REVIEW, ("request", "object", "metadata", "annotations"), {"a": ""}, False))
    padded = base.replace('"a": ""', '"a": "' + "x" * (MAX_BODY_BYTES - len(base)) + '"').encode()
    assert len(padded) == MAX_BODY_BYTES
    status, payload = await hook.post(MUTATE_PODS_PATH, padded)
    assert status == 200, payload[:200]


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (("apiVersion",), "admission.k8s.io/v1beta1", "apiVersion"),
        (("kind",), "Pod", "kind"),
        (("request",), None, "request is required"),
        (("request", "uid"), None, "request.uid"),
        (("request", "operation"), 7, "request.operation: expected a string, got int"),
        (("request", "object"), [1], "request.object: expected an object, got list"),
        (("request", "object", "kind"), "ConfigMap", "not a Pod"),
        (("request", "object", "spec", "priority"), "high", "request.object.spec.priority"),
        (("request", "object", "spec", "priority"), 2**40, "32-bit"),
        (("request", "userInfo", "groups"), "dev", "request.userInfo.groups"),
    ],
)
async def test_bad_fields_are_400_naming_the_field(
    hook: LoopbackWebhook, path: tuple[str, ...], value: object, fragment: str
) -> None:
    status, body = await hook.post_json(MUTATE_PODS_PATH, _set(VALID_REVIEW, path, value, False))
    assert status == 400
    assert fragment in body["error"]


