"""A DaemonSet's pods as its controller makes them (upstream pkg/controller/daemon): the daemon tolerations,
the nodes it runs on, and the node affinity that pins each pod."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.cluster.reader import node_from_dict, pod_from_dict
from webhook.errors import InvalidInput
from webhook.preemption.daemonset import daemon_pod_spec, node_should_run_daemon_pod, pinned_to_node
from webhook.preemption.workloads import expand_object


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> Any:
    return node_from_dict({"metadata": {"name": name, "labels": labels or {}},
                           "spec": {"taints": taints or []},
                           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})


def daemon_pod(spec: dict[str, Any]) -> Any:
    return pod_from_dict({"metadata": {"name": "d", "namespace": "ns"}, "spec": daemon_pod_spec(spec)})


def test_daemon_tolerations_are_added_once_and_network_unavailable_only_for_host_network() -> None:
    own = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    spec = daemon_pod_spec({"containers": [], "tolerations": [own]})
    keys = [t["key"] for t in spec["tolerations"]]
    assert keys.count("node.kubernetes.io/unschedulable") == 1 and len(keys) == 6
    assert "node.kubernetes.io/network-unavailable" not in keys
    host = daemon_pod_spec({"containers": [], "hostNetwork": True})
    assert host["tolerations"][-1]["key"] == "node.kubernetes.io/network-unavailable"


@pytest.mark.parametrize(("spec", "target", "runs"), [
    ({}, node("n"), True),
    ({}, node("n", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]), True),  # cordoned
    ({}, node("n", taints=[{"key": "gpu", "effect": "NoSchedule"}]), False),
    ({}, node("n", taints=[{"key": "gpu", "effect": "PreferNoSchedule"}]), True),  # only NoSchedule/NoExecute count
    ({"tolerations": [{"key": "gpu", "operator": "Exists"}]},
     node("n", taints=[{"key": "gpu", "effect": "NoSchedule"}]), True),
    ({"nodeSelector": {"pool": "a"}}, node("n", {"pool": "b"}), False),
    ({"nodeName": "other"}, node("n"), False),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}}},
     node("n", {"pool": "a"}), True),
])
def test_node_should_run_daemon_pod(spec: dict[str, Any], target: Any, runs: bool) -> None:
    assert node_should_run_daemon_pod(daemon_pod({"containers": [], **spec}), target) is runs


def test_pinning_replaces_the_required_terms_and_keeps_the_rest() -> None:
    preferred = [{"weight": 1, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}]
    spec = {"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": preferred}}}
    pinned = pinned_to_node(spec, "n1")["affinity"]["nodeAffinity"]
    assert pinned["requiredDuringSchedulingIgnoredDuringExecution"] == {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    assert pinned["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    assert "nodeAffinity" in spec["affinity"] and "matchFields" not in str(spec)  # the template is not changed


def test_expand_object_makes_one_pod_per_eligible_node_and_needs_the_nodes() -> None:
    ds = {"kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "ns"},
          "spec": {"template": {"spec": {"containers": [], "nodeSelector": {"pool": "a"}}}}}
    nodes = [node("b-1", {"pool": "a"}), node("a-1", {"pool": "a"}), node("c-1", {"pool": "c"})]
    pods = expand_object(ds, nodes=nodes)
    assert [p.name for p in pods] == ["agent-a-1", "agent-b-1"]
    assert [[f.values for t in p.required_node_affinity or () for f in t.match_fields] for p in pods] == [
        [("a-1",)], [("b-1",)]]
    with pytest.raises(InvalidInput, match="needs the cluster's nodes"):
        expand_object(ds)
