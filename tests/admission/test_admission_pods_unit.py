"""The pure pod pipeline and review plumbing: patch shapes, names in messages, UPDATE rules, response building."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from webhook.admission.outcome import AdmissionOutcome
from webhook.admission.patch import JsonPatchBuilder, json_pointer
from webhook.admission.pods import admit_pod, priority_class_to_fetch
from webhook.admission.priorityclasses import admit_priority_class
from webhook.admission.review import build_admission_response, decode_json, parse_admission_review
from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.errors import InvalidInput
from webhook.server.testing import admission_review


def state_with(*classes: PriorityClass) -> ClusterState:
    state = ClusterState()
    for pc in classes:
        state.upsert(pc)
    return state


def pod_request(operation: str = "CREATE", *, spec: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
                old_spec: dict[str, Any] | None = None, name: str = "") -> Any:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta or {}}
    if spec is not None:
        obj["spec"] = spec
    old = None if old_spec is None else {"apiVersion": "v1", "kind": "Pod", "metadata": meta or {}, "spec": old_spec}
    return parse_admission_review(admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": name, "namespace": "ns", "operation": operation, "object": obj, "oldObject": old,
    }, uid="u"))


D1 = PriorityClass("default1", 1000, global_default=True)


def test_create_adds_fields_and_rewrites_class_name_to_the_default() -> None:
    outcome = admit_pod(pod_request(spec={"containers": []}), state_with(D1))
    assert outcome.allowed
    assert list(outcome.patch) == [
        {"op": "add", "path": "/spec/priority", "value": 1000},
        {"op": "add", "path": "/spec/preemptionPolicy", "value": "PreemptLowerPriority"},
        {"op": "add", "path": "/spec/priorityClassName", "value": "default1"},
    ]


def test_present_null_and_empty_fields_are_replaced_and_missing_spec_is_added() -> None:
    outcome = admit_pod(pod_request(spec={"priority": None, "priorityClassName": ""}), state_with(D1))
    assert [op["op"] for op in outcome.patch] == ["replace", "add", "replace"]
    outcome = admit_pod(pod_request(spec=None), state_with())
    assert list(outcome.patch) == [{"op": "add", "path": "/spec", "value": {"priority": 0}},
                                   {"op": "add", "path": "/spec/preemptionPolicy", "value": "PreemptLowerPriority"}]


def test_consistent_pod_needs_no_patch() -> None:
    spec = {"priorityClassName": "default1", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority"}
    assert admit_pod(pod_request(spec=spec), state_with(D1)) == AdmissionOutcome.allow()


@pytest.mark.parametrize(
    ("meta", "name", "shown"),
    [({"name": "a"}, "", "a"), ({"generateName": "web-"}, "", "web-"), ({}, "", "Unknown"), ({}, "req", "req")],
)
def test_forbidden_message_names_the_pod(meta: dict[str, str], name: str, shown: str) -> None:
    outcome = admit_pod(pod_request(spec={"priorityClassName": "x"}, meta=meta, name=name), state_with())
    assert outcome.status is not None
    assert outcome.status.message == f'pods "{shown}" is forbidden: no PriorityClass with name x was found'


def test_update_restores_old_values_and_rejects_changes() -> None:
    old = {"priorityClassName": "default1", "priority": 1000, "preemptionPolicy": "Never"}
    outcome = admit_pod(pod_request("UPDATE", spec={"priorityClassName": "default1"}, old_spec=old, meta={"name": "p"}),
                        state_with())
    assert outcome.allowed and [op["path"] for op in outcome.patch] == ["/spec/priority", "/spec/preemptionPolicy"]
    outcome = admit_pod(pod_request("UPDATE", spec={**old, "preemptionPolicy": "PreemptLowerPriority"}, old_spec=old,
                                    meta={"name": "p"}), state_with())
    assert outcome.status is not None and outcome.status.code == 422
    assert outcome.status.message.startswith('Pod "p" is invalid: spec: Forbidden: pod updates may not change fields '
                                             'other than `spec.containers[*].image`')


def test_update_without_old_object_and_non_pod_objects_are_invalid_input() -> None:
    with pytest.raises(InvalidInput, match=r"request\.oldObject"):
        admit_pod(pod_request("UPDATE", spec={}), state_with())
    request = parse_admission_review(admission_review({
        "kind": {"kind": "Pod"}, "resource": {"resource": "pods"}, "operation": "CREATE",
        "object": {"kind": "ConfigMap", "data": {}}}))
    with pytest.raises(InvalidInput, match="not a Pod"):
        admit_pod(request, state_with())


def test_missing_class_is_reported_for_lookup_only_when_absent() -> None:
    assert priority_class_to_fetch(pod_request(spec={"priorityClassName": "late"}), state_with()) == "late"
    assert priority_class_to_fetch(pod_request(spec={"priorityClassName": "default1"}), state_with(D1)) is None
    assert priority_class_to_fetch(pod_request(spec={}), state_with()) is None
    late = PriorityClass("late", 7)
    outcome = admit_pod(pod_request(spec={"priorityClassName": "late"}), state_with(), fetched_classes={"late": late})
    assert outcome.allowed and outcome.patch[0] == {"op": "add", "path": "/spec/priority", "value": 7}


def test_priority_class_delete_uses_request_name() -> None:
    request = parse_admission_review(admission_review({
        "kind": {"group": "scheduling.k8s.io", "version": "v1", "kind": "PriorityClass"},
        "resource": {"group": "scheduling.k8s.io", "version": "v1", "resource": "priorityclasses"},
        "name": "system-node-critical", "operation": "DELETE", "object": None, "oldObject": None}))
    outcome = admit_priority_class(request, {})
    assert outcome.status is not None and outcome.status.code == 403
    assert outcome.status.message == ('priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: '
                                      'this is a system priority class and cannot be deleted')


def test_patch_builder_is_copy_on_write_and_escapes_pointers() -> None:
    original: dict[str, Any] = {"metadata": {"annotations": {}}}
    builder = JsonPatchBuilder(original)
    builder.set(("metadata", "annotations", "preemptguard.io/x~y"), "1")
    builder.set(("metadata", "annotations", "preemptguard.io/x~y"), "1")
    assert builder.operations == [{"op": "add", "path": "/metadata/annotations/preemptguard.io~1x~0y", "value": "1"}]
    assert original == {"metadata": {"annotations": {}}}
    assert json_pointer(["a/b", "c~d"]) == "/a~1b/c~0d"
    builder = JsonPatchBuilder({"spec": {"priority": 0}})
    builder.set(("spec", "priority"), False)  # a bool is not the integer 0
    assert builder.operations == [{"op": "replace", "path": "/spec/priority", "value": False}]


def test_response_shape() -> None:
    outcome = AdmissionOutcome.allow([{"op": "add", "path": "/spec/priority", "value": 1}], warnings=["w"])
    review = build_admission_response("abc", outcome)
    response = review["response"]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert response["uid"] == "abc" and response["allowed"] is True and response["warnings"] == ["w"]
    assert json.loads(base64.b64decode(response["patch"])) == [{"op": "add", "path": "/spec/priority", "value": 1}]
    assert "status" not in build_admission_response("abc", AdmissionOutcome.allow())["response"]


@pytest.mark.parametrize("body", [b"NaN", b'{"a": -Infinity}', b"\xff", b"[" * 100_000 + b"]" * 100_000, b""])
def test_decode_json_rejects_non_json(body: bytes) -> None:
    with pytest.raises(InvalidInput):
        decode_json(body)
