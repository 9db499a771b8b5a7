"""tests/vectors/resize.yaml: a running pod's requests as kube-scheduler v1.37 counts them (in-place resize), through
the cluster state's reader (its whole-units fast path) and through the checked exact reading."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cluster.reader import state_pod_from_dict
from webhook.cluster.reader_resources import quantity_map, read_pod_requests_with_status
from webhook.cluster.resources import requests_as_resources

VECTORS = yaml.safe_load((Path(__file__).parents[1] / "vectors" / "resize.yaml").read_text())


def bound_pod(case: dict[str, Any]) -> dict[str, Any]:
    spec = {**case["pod"]["spec"], "nodeName": "node-1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec,
            "status": case["pod"]["status"]}


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_resize_vector(case: dict[str, Any]) -> None:
    expected = requests_as_resources(quantity_map(case["expect"]["requests"], "expect.requests"))
    raw = bound_pod(case)
    assert state_pod_from_dict(raw).requests == expected
    assert read_pod_requests_with_status(raw["spec"], raw["status"]) == expected


def test_the_vectors_cover_each_upstream_test() -> None:
    sources = {c["source"].split(" (")[0] for c in VECTORS}
    assert sources == {
        "pkg/scheduler/framework/types_test.go TestCalculatePodResourcesWithResize",
        "staging/src/k8s.io/component-helpers/resource/helpers_test.go TestPodResourceRequests",
        "staging/src/k8s.io/component-helpers/resource/helpers_test.go TestPodRequestsAndLimitsVerticalScalingWrappers",
    }


def test_a_pending_pod_under_prediction_ignores_its_status() -> None:
    """The API server drops the status of a pod it creates: the pod under prediction counts its spec only."""
    from webhook.cluster.reader import pod_from_dict
    raw = bound_pod(VECTORS[6])  # Pod with infeasible resize: 500m counted on the node
    assert state_pod_from_dict(raw).requests.milli_cpu == 500
    assert pod_from_dict(raw).requests.milli_cpu == 700
