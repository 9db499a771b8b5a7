"""The Score plugins against upstream's own unit-test vectors (v1.37.2, pkg/scheduler/framework/plugins/<name>/
*_test.go, each case named by its test function and ``name``): the expected scores are upstream's, copied from
its tables, never computed by our code. Each case scores its nodes through the profile with only that plugin
enabled (weight 1, every feasible node scored), so PreScore, Score and NormalizeScore run as upstream runs them.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.cluster.reader import node_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.framework.index import state_index
from webhook.preemption.framework.types import NodeScores
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.results import PreemptionArgs, ResourceSpec, ScoringArgs, ScoringStrategy
from webhook.preemption.schedule_one import new_context, prioritize_nodes

MB = 1024 * 1024
BIG = {"cpu": "100000", "memory": str(10**15), "pods": "110"}


def node(name: str, *, cpu: str | None = None, memory: str | None = None, labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None, images: list[tuple[list[str], int]] | None = None,
         ) -> dict[str, Any]:
    """``st.MakeNode().Capacity(...)`` / ``makeNode`` / ``makeImageNode``: allocatable as given (else plenty)."""
    allocatable = dict(BIG)
    if cpu is not None:
        allocatable["cpu"] = cpu
    if memory is not None:
        allocatable["memory"] = memory
    return {"kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or []},
            "status": {"allocatable": allocatable,
                       "images": [{"names": names, "sizeBytes": size} for names, size in images or []]}}


def pod(name: str = "incoming", *, requests: list[dict[str, str]] | None = None, node_name: str | None = None,
        images: list[str] | None = None, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """``st.MakePod().Req(r1).Req(r2)``: one container per ``Req``; none at all when nothing is requested."""
    containers = [{"name": f"c{i}", "image": "pause", "resources": {"requests": r}}
                  for i, r in enumerate(requests or [])]
    containers += [{"name": f"i{i}", "image": image} for i, image in enumerate(images or [])]
    body: dict[str, Any] = {"containers": containers, **spec}
    if node_name:
        body["nodeName"] = node_name
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                                        "labels": labels or {}}, "spec": body,
            "status": {"phase": "Running" if node_name else "Pending"}}


def scores(plugin: str, nodes: list[dict[str, Any]], incoming: dict[str, Any],
           existing: list[dict[str, Any]] | None = None, **scoring: Any) -> dict[str, int]:
    state = ClusterState()
    for n in nodes:
        state.upsert(node_from_dict(n))
    for i, p in enumerate(existing or []):
        state.upsert(pod_from_dict({**p, "metadata": {**p["metadata"], "name": f"e{i}", "uid": f"uid-e{i}"}}))
    args = PreemptionArgs(scoring=ScoringArgs(weights=((plugin, 1),), percentage_of_nodes_to_score=100, **scoring))
    ctx = new_context(ClusterView(state, state_index(state)), pod_from_dict(incoming), args)
    result = prioritize_nodes(ctx, [n["metadata"]["name"] for n in nodes])
    return dict(zip(result.names, result.totals, strict=True))


def cpu_mem(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


R1, R2 = cpu_mem("1000", "2000"), cpu_mem("2000", "3000")  # least/most_allocated_test.go's two containers

# (test, name) -> nodes, incoming, existing, expected
FIT_CASES: list[tuple[str, str, str, list[dict[str, Any]], dict[str, Any], list[dict[str, Any]], dict[str, int]]] = [
    ("TestLeastAllocatedScoringStrategy", "LeastAllocated",
     "nothing scheduled, resources requested, differently sized nodes",
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")],
     pod(requests=[R1, R2]), [], {"node1": 37, "node2": 50}),
    ("TestLeastAllocatedScoringStrategy", "LeastAllocated", "no resources requested, pods scheduled with resources",
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="20000")],
     pod(), [pod(requests=[cpu_mem("3000", "0")], node_name="node1"),
             pod(requests=[cpu_mem("3000", "0")], node_name="node1"),
             pod(requests=[cpu_mem("3000", "0")], node_name="node2"),
             pod(requests=[cpu_mem("3000", "5000")], node_name="node2")], {"node1": 70, "node2": 57}),
    ("TestLeastAllocatedScoringStrategy", "LeastAllocated", "resources requested, pods scheduled with resources",
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="20000")],
     pod(requests=[R1, R2]), [pod(requests=[cpu_mem("3000", "0")], node_name="node1"),
                              pod(requests=[cpu_mem("3000", "5000")], node_name="node2")],
     {"node1": 57, "node2": 45}),
    ("TestLeastAllocatedScoringStrategy", "LeastAllocated",
     "resources requested, pods scheduled with resources, differently sized nodes",
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="50000")],
     pod(requests=[R1, R2]), [pod(requests=[cpu_mem("3000", "0")], node_name="node1"),
                              pod(requests=[cpu_mem("3000", "5000")], node_name="node2")],
     {"node1": 57, "node2": 60}),
    ("TestMostAllocatedScoringStrategy", "MostAllocated",
     "nothing scheduled, resources requested, differently sized nodes",
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")],
     pod(requests=[R1, R2]), [], {"node1": 62, "node2": 50}),
    ("TestMostAllocatedScoringStrategy", "MostAllocated", "no resources requested, pods scheduled with resources",
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="20000")],
     pod(), [pod(requests=[cpu_mem("3000", "0")], node_name="node1"),
             pod(requests=[cpu_mem("3000", "0")], node_name="node1"),
             pod(requests=[cpu_mem("3000", "0")], node_name="node2"),
             pod(requests=[cpu_mem("3000", "5000")], node_name="node2")], {"node1": 30, "node2": 42}),
]


@pytest.mark.parametrize(("strategy", "nodes", "incoming", "existing", "expected"), [c[1:2] + c[3:] for c in FIT_CASES],
                         ids=[f"{c[0]}/{c[2]}" for c in FIT_CASES])
def test_node_resources_fit_scoring_strategies(strategy: str, nodes: list[dict[str, Any]], incoming: dict[str, Any],
                                               existing: list[dict[str, Any]], expected: dict[str, int]) -> None:
    assert scores("NodeResourcesFit", nodes, incoming, existing, fit_strategy=ScoringStrategy(strategy)) == expected


def cpu_only(cpu: str) -> dict[str, str]:
    return {"cpu": cpu}


BR1, BR2 = cpu_mem("1000m", "2000"), cpu_mem("2000m", "3000")  # balanced_allocation_test.go's containers

BALANCED_CASES = [
    ("nothing scheduled, resources requested, differently sized nodes",
     [node("node1", cpu="4000m", memory="10000"), node("node2", cpu="6000m", memory="10000")],
     pod(requests=[BR1, BR2]), [], {"node1": 68, "node2": 75}),
    ("resources requested, pods scheduled with resources",
     [node("node1", cpu="10000m", memory="20000"), node("node2", cpu="10000m", memory="20000")],
     pod(requests=[BR1, BR2]), [pod(requests=[cpu_only("1000m"), cpu_only("2000m")], node_name="node1"),
                                pod(requests=[BR1, BR2], node_name="node2")], {"node1": 73, "node2": 74}),
    ("resources requested, pods scheduled with resources, differently sized nodes",
     [node("node1", cpu="10000m", memory="20000"), node("node2", cpu="10000m", memory="50000")],
     pod(requests=[BR1, BR2]), [pod(requests=[cpu_only("1000m"), cpu_only("2000m")], node_name="node1"),
                                pod(requests=[BR1, BR2], node_name="node2")], {"node1": 73, "node2": 70}),
    ("resources requested, pods scheduled with resources, nodes to reach min/max score",
     [node("node1", cpu="3000m", memory="5000"), node("node2", cpu="3000m", memory="5000")],
     pod(requests=[{"memory": "2000"}, {"memory": "3000"}]),
     [pod(requests=[cpu_only("1000m"), cpu_only("2000m")], node_name="node1")], {"node1": 100, "node2": 50}),
    ("requested resources at node capacity",
     [node("node1", cpu="6000m", memory="10000"), node("node2", cpu="6000m", memory="10000")],
     pod(requests=[cpu_only("1000m"), cpu_only("2000m")]),
     [pod(requests=[cpu_only("1000m"), cpu_only("2000m")], node_name="node1"),
      pod(requests=[BR1, BR2], node_name="node2")], {"node1": 62, "node2": 62}),
]


@pytest.mark.parametrize(("nodes", "incoming", "existing", "expected"), [c[1:] for c in BALANCED_CASES],
                         ids=[f"TestNodeResourcesBalancedAllocation/{c[0]}" for c in BALANCED_CASES])
def test_balanced_allocation(nodes: list[dict[str, Any]], incoming: dict[str, Any], existing: list[dict[str, Any]],
                             expected: dict[str, int]) -> None:
    assert scores("NodeResourcesBalancedAllocation", nodes, incoming, existing) == expected


def prefer(key: str, value: str, effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tolerate(key: str, value: str) -> dict[str, str]:
    return {"key": key, "operator": "Equal", "value": value, "effect": "PreferNoSchedule"}


TAINT_CASES = [
    ("node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
     [tolerate("foo", "bar")], [[prefer("foo", "bar")], [prefer("foo", "blah")]], [100, 0]),
    ("the nodes that all of their taints are tolerated by the pod, get the same score, no matter how many tolerable"
     " taints a node has", [tolerate("cpu-type", "arm64"), tolerate("disk-type", "ssd")],
     [[], [prefer("cpu-type", "arm64")], [prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]], [100, 100, 100]),
    ("the more intolerable taints a node has, the lower score it gets.", [tolerate("foo", "bar")],
     [[], [prefer("cpu-type", "arm64")], [prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]], [100, 50, 0]),
    ("only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations priority"
     " function", [{**tolerate("cpu-type", "arm64"), "effect": "NoSchedule"},
                   {**tolerate("disk-type", "ssd"), "effect": "NoSchedule"}],
     [[], [prefer("cpu-type", "arm64", "NoSchedule")], [prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]],
     [100, 100, 0]),
]


@pytest.mark.parametrize(("tolerations", "taints", "expected"), [c[1:] for c in TAINT_CASES],
                         ids=[f"TestTaintTolerationScore/{c[0][:60]}" for c in TAINT_CASES])
def test_taint_toleration(tolerations: list[dict[str, str]], taints: list[list[dict[str, str]]],
                          expected: list[int]) -> None:
    names = ["nodeA", "nodeB", "nodeC"][:len(taints)]
    got = scores("TaintToleration", [node(n, taints=t) for n, t in zip(names, taints, strict=True)],
                 pod(tolerations=tolerations))
    assert got == dict(zip(names, expected, strict=True))


def preferred(weight: int, **labels: str) -> dict[str, Any]:
    return {"weight": weight, "preference": {"matchExpressions": [
        {"key": k, "operator": "In", "values": [v]} for k, v in labels.items()]}}


AFFINITY1 = [preferred(2, foo="bar")]
AFFINITY2 = [preferred(2, foo="bar"), preferred(4, key="value"), preferred(5, foo="bar", key="value", az="az1")]
LABEL1, LABEL2, LABEL3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
LABEL4, LABEL5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}

AFFINITY_CASES = [
    ("no node matches preferred scheduling requirements in NodeAffinity of pod so all nodes' priority is zero",
     AFFINITY1, [("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)], [0, 0, 0]),
    ("only node1 matches the preferred scheduling requirements of pod", AFFINITY1,
     [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)], [100, 0, 0]),
    ("all nodes matches the preferred scheduling requirements of pod but with different priorities ", AFFINITY2,
     [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)], [18, 100, 36]),
]


@pytest.mark.parametrize(("terms", "nodes", "expected"), [c[1:] for c in AFFINITY_CASES],
                         ids=[f"TestNodeAffinityPriority/{c[0][:60]}" for c in AFFINITY_CASES])
def test_node_affinity(terms: list[dict[str, Any]], nodes: list[tuple[str, dict[str, str]]],
                       expected: list[int]) -> None:
    incoming = pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}})
    got = scores("NodeAffinity", [node(n, labels=labels) for n, labels in nodes], incoming)
    assert got == {n: s for (n, _), s in zip(nodes, expected, strict=True)}


NODE_40_300_2000 = [(["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
                    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB), (["gcr.io/2000:latest"], 2000 * MB)]
NODE_250_10 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]

IMAGE_CASES = [
    ("two images spread on two nodes, prefer the larger image one", ["gcr.io/40", "gcr.io/250"],
     [NODE_40_300_2000, NODE_250_10], [0, 5]),
    ("two images on one node, prefer this node", ["gcr.io/40", "gcr.io/300"], [NODE_40_300_2000, NODE_250_10],
     [7, 0]),
    ("if exceed limit, use limit", ["gcr.io/4000", "gcr.io/10"], [NODE_4000_30, NODE_250_10], [100, 0]),
]


@pytest.mark.parametrize(("images", "node_images", "expected"), [c[1:] for c in IMAGE_CASES],
                         ids=[f"TestImageLocalityPriority/{c[0]}" for c in IMAGE_CASES])
def test_image_locality(images: list[str], node_images: list[list[tuple[list[str], int]]],
                        expected: list[int]) -> None:
    got = scores("ImageLocality", [node(f"node{i + 1}", images=im) for i, im in enumerate(node_images)],
                 pod(images=images))
    assert got == {f"node{i + 1}": s for i, s in enumerate(expected)}


def test_resource_weights_change_the_fit_score() -> None:
    """TestLeastAllocatedScoringStrategy "resources requested with more weight on cpu"-style arithmetic: node1's
    cpu 25 x 3 + memory 50 x 1 over weight 4 = 31 (least_allocated.go: the weighted mean, integer division)."""
    strategy = ScoringStrategy("LeastAllocated", (ResourceSpec("cpu", 3), ResourceSpec("memory", 1)))
    got = scores("NodeResourcesFit", [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000",
                                                                                     memory="10000")],
                 pod(requests=[R1, R2]), fit_strategy=strategy)
    assert got == {"node1": (25 * 3 + 50) // 4, "node2": (50 * 3 + 50) // 4}


def in_region(weight: int, security: str) -> dict[str, Any]:
    """interpodaffinity/scoring_test.go's stayWithS1InRegion / stayWithS2InRegion."""
    return {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": {
        "labelSelector": {"matchExpressions": [{"key": "security", "operator": "In", "values": [security]}]},
        "topologyKey": "region"}}]}}


CHINA, INDIA, AZ1 = {"region": "China"}, {"region": "India"}, {"az": "az1"}
S1, S2 = {"security": "S1"}, {"security": "S2"}

INTER_POD_CASES = [
    ("Affinity: pod that matches topology key & pods in nodes will get high score comparing to otherswhich doesn't"
     " match either pods in nodes or in topology key", in_region(5, "S1"), S1,
     [("node1", CHINA), ("node2", INDIA), ("node3", AZ1)], [("node1", S1), ("node2", S2), ("node3", S1)], [100, 0, 0]),
    ("All the nodes that have the same topology key & label value with one of them has an existing pod that match"
     " the affinity rules, have the same score", in_region(5, "S1"), {},
     [("node1", CHINA), ("node2", {**CHINA, **AZ1}), ("node3", INDIA)], [("node1", S1)], [100, 100, 0]),
    ("Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more"
     " matches will get high score", in_region(6, "S2"), S1,
     [("node1", CHINA), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA), ("node5", INDIA)],
     [("node1", S2), ("node1", S2), ("node2", S2), ("node3", S2), ("node4", S2), ("node5", S2)],
     [100, 0, 100, 100, 0]),
]


@pytest.mark.parametrize(("affinity", "labels", "nodes", "existing", "expected"), [c[1:] for c in INTER_POD_CASES],
                         ids=[f"TestPreferredAffinity/{c[0][:60]}" for c in INTER_POD_CASES])
def test_inter_pod_affinity(affinity: dict[str, Any], labels: dict[str, str], nodes: list[tuple[str, dict[str, str]]],
                            existing: list[tuple[str, dict[str, str]]], expected: list[int]) -> None:
    got = scores("InterPodAffinity", [node(n, labels=lb) for n, lb in nodes], pod(labels=labels, affinity=affinity),
                 [pod(node_name=n, labels=lb) for n, lb in existing])
    assert got == {n: s for (n, _), s in zip(nodes, expected, strict=True)}


def spread(max_skew: int, selector: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``SpreadConstraint(maxSkew, hostname, ScheduleAnyway, selector, ...)``."""
    constraint: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": "kubernetes.io/hostname",
                                  "whenUnsatisfiable": "ScheduleAnyway"}
    if selector is not None:
        constraint["labelSelector"] = selector
    return [constraint]


FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}  # scoring_test.go's fooSelector
SPREAD_EXISTING = {"node-a": 2, "node-b": 1, "node-d": 3}

SPREAD_CASES = [
    ("one constraint on node, all 4 nodes are candidates", spread(1, FOO), [20, 60, 100, 0]),
    ("one constraint on node, null selector", spread(1, None), [100, 100, 100, 100]),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=2", spread(2, FOO), [33, 66, 100, 16]),
]


@pytest.mark.parametrize(("constraints", "expected"), [c[1:] for c in SPREAD_CASES],
                         ids=[f"TestPodTopologySpreadScore/{c[0]}" for c in SPREAD_CASES])
def test_pod_topology_spread(constraints: list[dict[str, Any]], expected: list[int]) -> None:
    names = ["node-a", "node-b", "node-c", "node-d"]
    existing = [pod(node_name=n, labels={"foo": ""}) for n, count in SPREAD_EXISTING.items() for _ in range(count)]
    got = scores("PodTopologySpread", [node(n) for n in names],
                 pod(labels={"foo": ""}, topologySpreadConstraints=constraints), existing)
    assert got == dict(zip(names, expected, strict=True))


def test_pod_topology_spread_system_default_constraints() -> None:
    """TestPodTopologySpreadScore "system defaulting, nodes don't have zone, pods match service": matching pods
    spread 4/3/2/1 score 44/66/77/100 under the system default constraints (hostname maxSkew 3, zone maxSkew 5,
    ScheduleAnyway). Upstream's DefaultSelector there comes from a Service; here from the pod's ReplicaSet (the same
    selector: the pod's labels), which a Deployment's replica carries (workloads.controller_owner)."""
    names = ["node-a", "node-b", "node-c", "node-d"]
    existing = [pod(node_name=n, labels={"foo": ""}) for n, count in zip(names, (4, 3, 2, 1), strict=True)
                for _ in range(count)]
    incoming = pod(labels={"foo": ""})
    incoming["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1",
                                                "uid": "u", "controller": True}]
    got = scores("PodTopologySpread", [node(n) for n in names], incoming, existing)
    assert got == dict(zip(names, [44, 66, 77, 100], strict=True))
    # Without a controller (nor a Service, which a snapshot does not hold), no default constraint: no score.
    bare = scores("PodTopologySpread", [node(n) for n in names], pod(labels={"foo": ""}), existing)
    assert bare == dict.fromkeys(names, 0)


@pytest.mark.parametrize(("totals", "limit", "ranked"), [
    # the names run n5..n0 against the totals' order: ties go by name, not by position
    ([5, 9, 7, 9, 1, 7], 3, ["n2", "n4", "n0"]),
    ([5, 9, 7, 9, 1, 7], 1, ["n2"]),
    # a tie across the limit: the names decide which of the equal totals stay
    ([3, 3, 3, 3], 2, ["n0", "n1"]),
    ([0, 2, 1], 5, ["n1", "n0", "n2"]),
    ([4], 0, []),
    ([], 5, []),
])
def test_ranked_nodes_are_the_highest_totals_ties_by_name(totals: list[int], limit: int, ranked: list[str]) -> None:
    names = [f"n{i}" for i in reversed(range(len(totals)))]
    scores = NodeScores(names, ("P",), [list(totals)], list(totals))
    assert [names[i] for i in scores.ranked(limit)] == ranked
