"""AdmissionReview plumbing: parsing, PriorityClass delete names, the JSONPatch builder, response building."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from webhook.admission.decision import AdmissionDecision
from webhook.admission.patch import JsonPatchBuilder, json_pointer
from webhook.admission.priorityclasses import admit_priority_class
from webhook.admission.review import build_admission_response, decode_json, parse_admission_review
from webhook.errors import InvalidInput
from webhook.server.testing import admission_review


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
    outcome = AdmissionDecision.allow(warnings=["w"]).with_patch([{"op": "add", "path": "/spec/priority", "value": 1}])
    review = build_admission_response("abc", outcome)
    response = review["response"]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert response["uid"] == "abc" and response["allowed"] is True and response["warnings"] == ["w"]
    assert json.loads(base64.b64decode(response["patch"])) == [{"op": "add", "path": "/spec/priority", "value": 1}]
    assert "status" not in build_admission_response("abc", AdmissionDecision.allow())["response"]


@pytest.mark.parametrize("body", [b"NaN", b'{"a": -Infinity}', b"\xff", b"[" * 100_000 + b"]" * 100_000, b""])
def test_decode_json_rejects_non_json(body: bytes) -> None:
    with pytest.raises(InvalidInput):
        decode_json(body)
