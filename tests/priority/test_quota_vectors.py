"""Every case of tests/vectors/quota.yaml through the quota admission decision."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from quota_vectors import QuotaVector, load_quota_vectors

from webhook.cluster.model import PriorityClass, ResourceQuota
from webhook.cluster.reader import object_from_dict, pod_from_dict
from webhook.config import DEFAULT_CONFIG, parse_config
from webhook.priority.quota import admit_pod_quota
from webhook.priority.resolution import effective_priority_classes, resolve_pod_priority

VECTORS = load_quota_vectors()


def test_vector_file_has_all_cases() -> None:
    assert len(VECTORS) == 24
    assert len({v.name for v in VECTORS}) == 24


def _mutated_pod(vector: QuotaVector, classes: dict[str, PriorityClass]) -> dict[str, Any]:
    """The pod as the Priority plugin leaves it (the quota check sees the mutated object)."""
    pod = copy.deepcopy(vector.object)
    if vector.operation != "CREATE":
        return pod
    spec = pod.setdefault("spec", {})
    resolved = resolve_pod_priority(spec.get("priorityClassName") or "", spec.get("priority"),
                                    spec.get("preemptionPolicy"), effective_priority_classes(classes))
    if resolved.priority_class_name:
        spec["priorityClassName"] = resolved.priority_class_name
    spec["priority"] = resolved.priority
    spec["preemptionPolicy"] = resolved.preemption_policy
    return pod


@pytest.mark.parametrize("vector", VECTORS, ids=[v.name.split(" ")[0] for v in VECTORS])
def test_quota_vector(vector: QuotaVector) -> None:
    objects = [object_from_dict(doc) for doc in vector.snapshot_documents]
    classes = {o.name: o for o in objects if isinstance(o, PriorityClass)}
    quotas = [o for o in objects if isinstance(o, ResourceQuota) and o.namespace == vector.namespace]
    config = parse_config(vector.config_document, vector.name) if vector.config_document else DEFAULT_CONFIG
    pod = _mutated_pod(vector, classes)
    expect = vector.expect
    if expect.get("priority") is not None:
        assert pod["spec"]["priority"] == expect["priority"]

    denial = admit_pod_quota(pod_from_dict(pod), namespace=vector.namespace, namespace_labels={},
                             operation=vector.operation, subresource=vector.subresource, quotas=quotas,
                             config=config.quota)

    if expect["allowed"]:
        assert denial is None, denial
        return
    assert denial is not None
    assert expect["message_contains"] in denial.message
    if expect.get("http_code") is not None:
        assert denial.code == expect["http_code"]
    if denial.code == 500:
        assert denial.reason == ""
        assert " is forbidden: " not in denial.message
    else:
        name = pod["metadata"].get("name") or pod["metadata"].get("generateName")
        assert denial.message.startswith(f'pods "{name}" is forbidden: ')
        assert denial.reason == "Forbidden"
