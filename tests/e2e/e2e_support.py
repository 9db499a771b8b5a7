"""Shared helpers for the end-to-end tests: in-memory cluster sources, AdmissionReviews, response decoding."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.cluster.reader import object_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.config import Config, parse_config
from webhook.routes import MUTATE_PODS_PATH, PREDICTION_ANNOTATION
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook, admission_review

JsonDict = dict[str, Any]
ADMIN = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
DEVELOPER = {"username": "dev@example.com", "uid": "42", "groups": ["system:authenticated", "developers"]}


def settings(**overrides: Any) -> ServerSettings:
    values: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "metrics_port": 0, "tls_self_signed": True}
    values.update(overrides)
    return ServerSettings(**values)


# Tests about what a prediction says must not depend on the machine's load: unless a test sets its own
# budget (the budget tests do), predictions get seconds instead of the default 250 ms.
GENEROUS_BUDGET = {"budgetMilliseconds": 5000}


def config(document: Mapping[str, Any] | None = None) -> Config:
    document = dict(document or {})
    document.setdefault("prediction", GENEROUS_BUDGET)
    return parse_config(document, "test-config")


def state_of(objects: Iterable[Mapping[str, Any]]) -> ClusterState:
    state = ClusterState()
    for raw in objects:
        obj = object_from_dict(dict(raw))
        if obj is not None:
            state.upsert(obj)
    return state


# ---- objects ----------------------------------------------------------------------------------
def priority_class(name: str, value: int, *, global_default: bool = False,
                   policy: str = "PreemptLowerPriority") -> JsonDict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": global_default, "preemptionPolicy": policy}


def namespace(name: str, **labels: str) -> JsonDict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}}


def node(name: str, cpu: str = "4", memory: str = "16Gi", pods: str = "110") -> JsonDict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "capacity": {"cpu": cpu, "memory": memory, "pods": pods}}}


def pod(name: str, ns: str, *, cpu: str = "100m", memory: str = "64Mi", node_name: str = "",
        priority_class_name: str = "", priority: int | None = None, labels: Mapping[str, str] | None = None,
        start: str = "2024-05-01T10:00:00Z") -> JsonDict:
    spec: JsonDict = {"containers": [{"name": "main", "image": "registry.example/app:1",
                                      "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    if priority is not None:
        spec["priority"] = priority
        spec["preemptionPolicy"] = "PreemptLowerPriority"
    manifest: JsonDict = {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {"app": name})},
                          "spec": spec}
    if node_name:
        manifest["status"] = {"phase": "Running", "startTime": start}
    return manifest


def pdb(name: str, ns: str, match_labels: Mapping[str, str], allowed: int) -> JsonDict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": dict(match_labels)}, "maxUnavailable": 0},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2}}


# ---- reviews --------------------------------------------------------------------------------------
def create_review(obj: Mapping[str, Any], *, ns: str | None = None, user: Mapping[str, Any] | None = None,
                  dry_run: bool = False) -> JsonDict:
    """The AdmissionReview the kube-apiserver sends to /mutate/pods for a pod CREATE."""
    meta = obj.get("metadata") or {}
    return admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "",
        "name": meta.get("name", ""),
        "namespace": ns if ns is not None else meta.get("namespace", "default"),
        "operation": "CREATE",
        "userInfo": dict(user or ADMIN),
        "object": dict(obj),
        "oldObject": None,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    })


async def admit(hook: LoopbackWebhook, review: Mapping[str, Any]) -> JsonDict:
    """POST a review to /mutate/pods; the response, checked for the AdmissionReview envelope."""
    status, body = await hook.post_json(MUTATE_PODS_PATH, review)
    assert status == 200, body
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response: JsonDict = body["response"]
    assert response["uid"] == review["request"]["uid"]
    return response


def patch_operations(response: Mapping[str, Any]) -> list[JsonDict]:
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    operations: list[JsonDict] = json.loads(base64.b64decode(response["patch"], validate=True))
    return operations


def prediction_annotation(response: Mapping[str, Any]) -> str | None:
    """The ``preemptguard.io/prediction`` value the patch sets (None when it sets none)."""
    pointer = "/metadata/annotations/" + PREDICTION_ANNOTATION.replace("/", "~1")
    for operation in patch_operations(response):
        if operation["path"] == pointer:
            return str(operation["value"])
        if operation["path"] == "/metadata/annotations" and PREDICTION_ANNOTATION in operation["value"]:
            return str(operation["value"][PREDICTION_ANNOTATION])
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
