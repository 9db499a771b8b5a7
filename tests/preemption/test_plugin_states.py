"""The PreFilter states of InterPodAffinity and PodTopologySpread, updated as pods come and go (AddPod /
RemovePod during the dry run), and a node's full status with the two-pass nominated-pod rule."""

from __future__ import annotations

from typing import Any

from webhook.cluster.model import EMPTY_LABELS, Node
from webhook.cluster.reader import node_from_dict, pod_from_dict
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import UNSCHEDULABLE
from webhook.preemption.framework.types import NodeInfo
from webhook.preemption.plugins.interpodaffinity import (
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ERR_POD_ANTI_AFFINITY,
)
from webhook.preemption.plugins.interpodaffinity import AffinityState
from webhook.preemption.plugins.noderesources import ERR_TOO_MANY_PODS
from webhook.preemption.plugins.podtopologyspread import ERR_REASON_CONSTRAINTS_NOT_MATCH as ERR_SPREAD
from webhook.preemption.plugins.podtopologyspread import new_spread_state
from webhook.preemption.plugins.registry import default_framework


def node(name: str, zone: str, pods: str = "10") -> Node:
    return node_from_dict({"metadata": {"name": name, "labels": {"zone": zone}},
                           "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": pods}}})


def pod(name: str, *, node_name: str = "", labels: dict[str, str] | None = None, **spec: Any) -> Any:
    return pod_from_dict({"metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
                          "spec": {"nodeName": node_name, "containers": [{"name": "c"}], **spec}})


ANTI = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}}
SPREAD = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                         "labelSelector": {"matchLabels": {"app": "web"}}}]}


def test_anti_affinity_counts_follow_removals_and_additions() -> None:
    incoming = pod("db-new", labels={"app": "db"}, **ANTI)
    a, b = node("a", "z1"), node("b", "z2")
    existing = pod("db-0", node_name="a", labels={"app": "db"})
    state = AffinityState(incoming, lambda _: EMPTY_LABELS)
    state.update_incoming(existing, a, 1)
    assert state.filter(a).code == UNSCHEDULABLE and state.filter(a).reasons == (ERR_POD_ANTI_AFFINITY,)
    assert state.filter(b).ok
    copy = state.copy()
    copy.update(existing, a, -1)  # the dry run removes db-0 from node a: the copy fits, the original still not
    assert copy.filter(a).ok and not state.filter(a).ok


def test_topology_spread_skew_over_domains() -> None:
    incoming = pod("web-new", labels={"app": "web"}, **SPREAD)
    nodes = [node("a", "z1"), node("b", "z2")]
    bound = {"a": [pod("web-0", node_name="a", labels={"app": "web"})], "b": []}
    state = new_spread_state(incoming, nodes, lambda name: bound[name])
    assert state is not None
    assert state.filter(nodes[0]).reasons == (ERR_SPREAD,)  # z1 would hold 2 against 0 in z2
    assert state.filter(nodes[1]).ok
    state.update(bound["a"][0], nodes[0], -1)
    assert state.filter(nodes[0]).ok


def test_nominated_pods_of_equal_or_higher_priority_count_in_the_first_pass() -> None:
    small = node("a", "z1", pods="2")
    info = NodeInfo.build(small, [pod("p0", node_name="a")])
    incoming = pod("new")
    framework = default_framework()
    assert framework.run_filter_plugins_with_nominated_pods(CycleState(), incoming, info, []).ok
    status = framework.run_filter_plugins_with_nominated_pods(CycleState(), incoming, info, [pod("nominated")])
    assert status.code == UNSCHEDULABLE and status.reasons == (ERR_TOO_MANY_PODS,)
