"""tests/vectors/runtimeclass.yaml, case by case: upstream's setOverhead, setScheduling and validateOverhead on the
objects as built, and the plugin's Admit and Validate as the admission chain runs them (webhook.priority.chain)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.priority.chain_vectors import load, quantities, undefaulted_resources
from webhook.cluster.reader import pod_from_dict, runtime_class_from_dict
from webhook.cluster.reader_constraints import checked_tolerations, read_labels
from webhook.cluster.snapshot import ClusterState
from webhook.priority.chain import Admitted, Refused, admit_pod
from webhook.priority.runtimeclass import same_overhead, set_overhead, set_scheduling, validate_overhead

VECTORS = load("runtimeclass.yaml")


def run(case: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(refused, the pod's fields after the function)."""
    runtime_class = None if case["runtime_class"] is None else runtime_class_from_dict(case["runtime_class"])
    raw = {"apiVersion": "v1", "kind": "Pod", **case["pod"]}
    function = case["function"]
    if function in ("Admit", "Validate"):
        state = ClusterState()
        if runtime_class is not None:
            state.upsert(runtime_class)
        entry = admit_pod(state, pod_from_dict(raw))
        return isinstance(entry, Refused), {}
    spec = undefaulted_resources(case["pod"])
    assert runtime_class is not None or function == "ValidateOverhead"
    if function == "SetOverhead":
        assert runtime_class is not None
        overhead, error = set_overhead(spec.overhead, runtime_class)
        return error is not None, {"overhead": overhead}
    if function == "SetScheduling":
        assert runtime_class is not None
        node_selector = read_labels(raw["spec"].get("nodeSelector"), "spec.nodeSelector")
        tolerations = checked_tolerations(raw["spec"].get("tolerations"), "spec.tolerations")
        node_selector, tolerations, error = set_scheduling(node_selector, tolerations, runtime_class)
        return error is not None, {"nodeSelector": dict(node_selector), "tolerations": tolerations}
    return validate_overhead(spec.overhead, runtime_class) is not None, {}


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_runtime_class_vector(case: dict[str, Any]) -> None:
    refused, after = run(case)
    expect = case["expect"]
    assert refused == expect["error"]
    if "overhead" in expect:
        assert same_overhead(after["overhead"], quantities(expect["overhead"]))
    if "nodeSelector" in expect:
        assert after["nodeSelector"] == expect["nodeSelector"]
        assert after["tolerations"] == checked_tolerations(expect["tolerations"], "expect.tolerations")


def test_admit_sets_the_class_overhead_and_scheduling_on_the_pod() -> None:
    state = ClusterState()
    state.upsert(runtime_class_from_dict({"metadata": {"name": "kata"}, "handler": "kata",
                                          "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
                                          "scheduling": {"nodeSelector": {"runtime": "kata"},
                                                         "tolerations": [{"key": "kata", "operator": "Exists"}]}}))
    raw = {"kind": "Pod", "metadata": {"name": "web", "namespace": "a"},
           "spec": {"runtimeClassName": "kata", "nodeSelector": {"zone": "a"},
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    entry = admit_pod(state, pod_from_dict(raw))
    assert isinstance(entry, Admitted)
    pod = entry.pod
    assert (pod.requests.milli_cpu, pod.requests.memory) == (1250, 2**30 + 64 * 2**20)
    assert dict(pod.node_selector) == {"zone": "a", "runtime": "kata"}
    assert [t.key for t in pod.tolerations] == ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                                                "kata"]
