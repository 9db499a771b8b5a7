"""Hostile HTTP inputs for every endpoint (hypothesis strategies), shared by tests/fuzz and bench/fuzz.py.

One drawn ``FuzzCase`` is a method, a path, headers and a body; ``variants`` derives more bodies from it
(truncated, bytes flipped, keys duplicated, nested deeper, wrapped as another endpoint's document), so one
hypothesis example yields several inputs. ``allowed_statuses`` is the contract: 200/400 (413 for a body over
the limit) on the POST endpoints, 200 on the health checks, 404 for unknown paths, 405 for wrong methods.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

MUTATE = "/mutate/pods"
VALIDATE = "/validate/priorityclasses"
PREVIEW = "/preview"
HEALTH = ("/healthz", "/readyz")
POST_ENDPOINTS = (MUTATE, VALIDATE, PREVIEW)
UNKNOWN_PATHS = ("/", "/mutate", "/mutate/pods/extra", "/validate/pods", "/metrics", "/previews", "/healthz/",
                 "/%2e%2e/etc/passwd", "/mutate%2Fpods", "/" + "a" * 2000, "/preview?x=" + "%00" * 10)
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
MAX_BODY = 3 * 1024 * 1024


@dataclass(frozen=True)
class FuzzCase:
    method: str
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    hostile_headers: bool = False


def allowed_statuses(case: FuzzCase) -> set[int]:
    """The statuses the contract allows for ``case`` (interfaces §2 plus 404/405/413)."""
    path = case.path.split("?", 1)[0]
    if path in POST_ENDPOINTS:
        allowed = {200, 400, 413} if case.method == "POST" else {405}
    elif path in HEALTH:
        allowed = {200} if case.method in ("GET", "HEAD") else {405}
    else:
        allowed = {404}
    if case.hostile_headers:
        allowed |= {400}  # the HTTP parser refuses them before any handler
    return allowed


def may_be_cut_off(case: FuzzCase) -> bool:
    """A body in a Content-Encoding the server cannot decode is refused (400) and the connection closed while
    the client may still be sending, so the client can see a reset instead of the answer."""
    return "Content-Encoding" in case.headers


# ---- documents --------------------------------------------------------------------------------------
def _pod(name: str = "web-0", namespace: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"priorityClassName": "high", "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def pod_review(uid: str = "fuzz") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "", "name": "web-0",
        "namespace": "team-a", "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["dev"], "extra": {"scopes": ["a"]}},
        "object": _pod(), "oldObject": None, "dryRun": False, "options": {}}}


def priority_class_review(uid: str = "fuzz") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "scheduling.k8s.io", "version": "v1", "kind": "PriorityClass"},
        "resource": {"group": "scheduling.k8s.io", "version": "v1", "resource": "priorityclasses"},
        "name": "new", "operation": "CREATE", "userInfo": {"username": "admin"},
        "object": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "new"},
                   "value": 1000, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority"}}}


def preview_request() -> dict[str, Any]:
    return {"pod": _pod(), "namespace": "team-a", "replicas": 2}


VALID_DOCUMENTS = {MUTATE: pod_review, VALIDATE: priority_class_review, PREVIEW: preview_request}

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30),
    st.sampled_from(["CREATE", "UPDATE", "Pod", "pods", "v1", "admission.k8s.io/v1", "AdmissionReview", "", "high",
                     "system-node-critical", "-1", "1e309", "100m", "1Ei", "\u0000", "\ud7ff\ue000", "é", "🦀"]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=5),
                               st.dictionaries(st.text(max_size=10), children, max_size=5)),
    max_leaves=15,
)
PATHS_IN_DOCUMENTS: dict[str, list[tuple[str, ...]]] = {
    MUTATE: [("apiVersion",), ("kind",), ("request",), ("request", "uid"), ("request", "kind"),
             ("request", "resource"), ("request", "operation"), ("request", "namespace"), ("request", "userInfo"),
             ("request", "object"), ("request", "object", "metadata"), ("request", "object", "spec"),
             ("request", "object", "spec", "priority"), ("request", "object", "spec", "priorityClassName"),
             ("request", "object", "spec", "containers"), ("request", "object", "spec", "preemptionPolicy"),
             ("request", "oldObject"), ("request", "dryRun"), ("request", "subResource")],
    VALIDATE: [("request",), ("request", "object"), ("request", "object", "value"),
               ("request", "object", "globalDefault"), ("request", "object", "metadata"),
               ("request", "object", "preemptionPolicy"), ("request", "oldObject"), ("request", "operation")],
    PREVIEW: [("pod",), ("namespace",), ("replicas",), ("priorityClassName",), ("pod", "kind"), ("pod", "spec"),
              ("pod", "metadata"), ("pod", "spec", "containers"), ("pod", "spec", "replicas"), ("extra",)],
}


def _set(document: Any, path: tuple[str, ...], value: object, remove: bool) -> None:
    parent = document
    for token in path[:-1]:
        if not isinstance(parent, dict) or not isinstance(parent.get(token), dict):
            return
        parent = parent[token]
    if not isinstance(parent, dict):
        return
    if remove:
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value


@st.composite
def mutated_documents(draw: st.DrawFn, endpoint: str) -> bytes:
    """A valid document of ``endpoint`` with one to four fields replaced by anything, or removed."""
    document = VALID_DOCUMENTS[endpoint]()
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(PATHS_IN_DOCUMENTS[endpoint]))
        _set(document, path, draw(json_values), remove=draw(st.booleans()))
    return json.dumps(document).encode()


def deep(depth: int, kind: str) -> bytes:
    if kind == "list":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


@st.composite
def hostile_bodies(draw: st.DrawFn, endpoint: str) -> bytes:
    valid = json.dumps(VALID_DOCUMENTS[endpoint]()).encode()
    kind = draw(st.sampled_from(["deep", "deep-inside", "huge-string", "huge-array", "unicode", "base64", "dupes",
                                 "numbers", "binary", "oversized"]))
    if kind == "deep":
        return deep(draw(st.integers(1, 300_000)), draw(st.sampled_from(["list", "dict"])))
    if kind == "deep-inside":
        return valid[:-1] + b',"nested":' + deep(draw(st.integers(500, 100_000)), "list") + b"}"
    if kind == "huge-string":
        return valid[:-1] + b',"s":"' + b"x" * draw(st.integers(1, 2_500_000)) + b'"}'
    if kind == "huge-array":
        return valid[:-1] + b',"a":[' + b",".join([b"0"] * draw(st.integers(1, 400_000))) + b"]}"
    if kind == "unicode":
        text = draw(st.text(min_size=1, max_size=50))
        escaped = draw(st.sampled_from(['"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', '"\\uffff"', json.dumps(text)]))
        return valid.replace(b'"web-0"', escaped.encode(), 1).replace(b'"new"', escaped.encode(), 1)
    if kind == "base64":
        junk = draw(st.sampled_from(["!!!", "YWJj=", "====", "YQ", base64.b64encode(b"\xff" * 40).decode() + "*"]))
        document = VALID_DOCUMENTS[endpoint]()
        document["patch"] = junk
        document.setdefault("request", {})["object"] = {"kind": "Secret", "data": {"k": junk}} \
            if draw(st.booleans()) else document.get("request", {}).get("object")
        return json.dumps(document).encode()
    if kind == "dupes":
        key = draw(st.sampled_from([b'"request"', b'"apiVersion"', b'"kind"', b'"pod"', b'"uid"']))
        return b"{" + key + b":1," + valid[1:]
    if kind == "numbers":
        number = draw(st.sampled_from([b"1e999999", b"-0", b"1" * 5000, b"0.0000000000000000000001", b"NaN",
                                       b"Infinity", b"-Infinity", b"1E400", b"01", b"1."]))
        return valid.replace(b"1000", number, 1).replace(b": 2}", b": " + number + b"}", 1)
    if kind == "binary":
        return draw(st.binary(max_size=400))
    return b'{"a":"' + b"x" * (MAX_BODY + draw(st.integers(1, 100_000))) + b'"}'


def bodies_for(endpoint: str) -> st.SearchStrategy[bytes]:
    return st.one_of(
        mutated_documents(endpoint),
        hostile_bodies(endpoint),
        json_values.map(lambda value: json.dumps(value).encode()),
        st.just(json.dumps(VALID_DOCUMENTS[endpoint]()).encode()),
        st.sampled_from([b"", b"null", b"{}", b"[]", b'"', b"{", b'{"a":1,}', b"\xef\xbb\xbf{}", b"\x00" * 64]),
    )


HOSTILE_HEADERS = st.sampled_from([
    {"X-Long": "a" * 9000},
    {"Content-Type": "text/plain"},
    {"Content-Type": "application/json; charset=latin-1"},
    {"Content-Encoding": "gzip"},
    {"Content-Encoding": "br"},
    {"Content-Encoding": "deflate"},
    {"Expect": "100-continue"},
    {"Authorization": "Bearer " + "x" * 4000},
    {"Connection": "close"},
])


@st.composite
def fuzz_cases(draw: st.DrawFn) -> FuzzCase:
    roll = draw(st.integers(0, 9))
    if roll <= 5:
        endpoint = draw(st.sampled_from(POST_ENDPOINTS))
        method, path, body = "POST", endpoint, draw(bodies_for(endpoint))
    elif roll == 6:
        method, path, body = draw(st.sampled_from(["GET", "HEAD"])), draw(st.sampled_from(HEALTH)), b""
    elif roll == 7:
        method = draw(st.sampled_from(METHODS))
        path = draw(st.sampled_from([*POST_ENDPOINTS, *HEALTH]))
        if (method == "POST") == (path in POST_ENDPOINTS) or (path in HEALTH and method == "GET"):
            method = "PUT"
        body = draw(st.binary(max_size=100))
    else:
        method, path, body = draw(st.sampled_from(METHODS)), draw(st.sampled_from(UNKNOWN_PATHS)), b"{}"
    headers: dict[str, str] = {"Content-Type": "application/json"}
    hostile = draw(st.integers(0, 9)) == 0
    if hostile:
        headers.update(draw(HOSTILE_HEADERS))
    return FuzzCase(method, path, body, headers, hostile)


def variants(case: FuzzCase, seed: int, count: int) -> list[FuzzCase]:
    """``case`` plus ``count - 1`` bodies derived from it (deterministic for ``seed``)."""
    rng = random.Random(seed)
    out = [case]
    body = case.body
    for i in range(count - 1):
        mode = i % 5
        if not body:
            derived = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        elif mode == 0:
            derived = body[: rng.randrange(len(body))]
        elif mode == 1:
            flipped = bytearray(body[:200_000])
            for _ in range(rng.randrange(1, 8)):
                flipped[rng.randrange(len(flipped))] = rng.randrange(256)
            derived = bytes(flipped)
        elif mode == 2:
            derived = b'{"kind":"x",' + body[1:] if body.startswith(b"{") else b"[" + body + b"]"
        elif mode == 3:
            derived = b'{"wrapped":' * 50 + body + b"}" * 50
        else:
            derived = body.replace(b'"', b"'", rng.randrange(1, 4))
        out.append(FuzzCase(case.method, case.path, derived, case.headers, case.hostile_headers))
    return out


def small_cluster_objects() -> list[dict[str, Any]]:
    """Two classes, two namespaces, three nodes and a few pods: previews over it are cheap."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10,
         "globalDefault": True},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}},
    ]
    for n in range(3):
        objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{n}"},
                        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}})
        objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"batch-{n}", "namespace": "team-b"},
                        "spec": {"nodeName": f"node-{n}", "priorityClassName": "low", "priority": 10,
                                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]},
                        "status": {"phase": "Running", "startTime": "2024-05-01T10:00:00Z"}})
    return objects


def small_cluster_state() -> Any:
    from webhook.cluster.reader import object_from_dict
    from webhook.cluster.snapshot import ClusterState

    state = ClusterState()
    for raw in small_cluster_objects():
        obj = object_from_dict(raw)
        assert obj is not None
        state.upsert(obj)
    return state
