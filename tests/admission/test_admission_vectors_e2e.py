"""Every case of tests/vectors/admission.yaml through the real endpoints of a server on loopback over TLS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from admission_vectors import apply_json_patch, decode_patch, load_vectors, snapshot_source

from webhook.routes import MUTATE_PODS_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.testing import LoopbackWebhook, admission_review

VECTORS = load_vectors("admission.yaml")

# kind -> (endpoint, resource group, resource) as the webhook configurations route them.
ROUTES: dict[str, tuple[str, str, str]] = {
    "Pod": (MUTATE_PODS_PATH, "", "pods"),
    "Binding": (MUTATE_PODS_PATH, "", "pods"),  # pods/binding subresource
    "ConfigMap": (MUTATE_PODS_PATH, "", "configmaps"),
    "PriorityClass": (VALIDATE_PRIORITYCLASSES_PATH, "scheduling.k8s.io", "priorityclasses"),
}


def review_request(case: dict[str, Any], obj: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The endpoint and AdmissionReview request the kube-apiserver would send for a vector."""
    path, group, resource = ROUTES[case["kind"]]
    obj = case["object"] if obj is None else obj
    named = obj if obj is not None else case["old_object"]
    api_version = (named or {}).get("apiVersion", "v1")
    version = api_version.rsplit("/", 1)[-1]
    request = {
        "kind": {"group": group if case["kind"] != "Binding" else "", "version": version, "kind": case["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "subResource": case.get("subresource") or "",
        "name": ((named or {}).get("metadata") or {}).get("name", ""),
        "namespace": case["namespace"],
        "operation": case["operation"],
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": obj,
        "oldObject": case["old_object"],
        "dryRun": False,
    }
    return path, request


async def post_case(hook: LoopbackWebhook, case: dict[str, Any], obj: dict[str, Any] | None = None) -> dict[str, Any]:
    path, request = review_request(case, obj)
    review = admission_review(request)
    status, body = await hook.post_json(path, review)
    assert status == 200, body
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response: dict[str, Any] = body["response"]
    assert response["uid"] == review["request"]["uid"]
    return response


def assert_pod_fields(pod: dict[str, Any], expect: dict[str, Any]) -> None:
    spec = pod.get("spec") or {}
    if expect.get("priority") is not None:
        assert spec.get("priority") == expect["priority"]
    if expect.get("preemptionPolicy") is not None:
        assert spec.get("preemptionPolicy") == expect["preemptionPolicy"]
    if "priorityClassName" in expect:
        assert spec.get("priorityClassName", "") == expect["priorityClassName"]


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"].split(" ")[0] for c in VECTORS])
async def test_admission_vector(case: dict[str, Any], tmp_path: Path) -> None:
    expect = case["expect"]
    async with LoopbackWebhook(snapshot_source(tmp_path, case["existing_priority_classes"])) as hook:
        response = await post_case(hook, case)
        assert response["allowed"] is expect["allowed"], response.get("status")
        patch = decode_patch(response)
        if not expect["allowed"]:
            status = response["status"]
            assert status["message"].find(expect["message_contains"]) >= 0, status["message"]
            if expect.get("http_code") is not None:
                assert status["code"] == expect["http_code"]
            assert status["reason"] == {403: "Forbidden", 422: "Invalid", 409: "AlreadyExists"}[status["code"]]
            assert not patch
            return
        assert "status" not in response
        if expect.get("mutated") is False or case["kind"] != "Pod" or case["operation"] not in ("CREATE", "UPDATE"):
            assert patch == []
            return
        mutated = apply_json_patch(case["object"], patch)
        assert_pod_fields(mutated, expect)
        # Reinvocation (reinvocationPolicy: IfNeeded): the mutated pod passes again with nothing to change.
        again = await post_case(hook, case, mutated)
        assert again["allowed"] is True
        assert decode_patch(again) == []


def test_vectors_cover_every_route() -> None:
    assert {c["kind"] for c in VECTORS} <= set(ROUTES)
    assert len(VECTORS) >= 50


async def test_delete_collection_of_priority_classes_reaches_system_classes_as_upstream(tmp_path: Path) -> None:
    """`kubectl delete pc --all`: the API server sends one DELETE per item with an empty request name (the
    collection's), and upstream's system-class guard (the registry's Delete by name) does not run."""
    case = next(c for c in VECTORS if c["name"].startswith("pc-46"))
    async with LoopbackWebhook(snapshot_source(tmp_path, case["existing_priority_classes"])) as hook:
        by_name = await post_case(hook, case)
        path, request = review_request(case)
        status, body = await hook.post_json(path, admission_review({**request, "name": ""}))
    assert by_name["allowed"] is False and by_name["status"]["code"] == 403
    assert status == 200 and body["response"]["allowed"] is True and "status" not in body["response"]
