"""Test support for the predictor: hypothesis strategies for random small clusters and informer events, and the
fast predictor's result in the shape of ``reference.reference_predict``."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from webhook.cluster.model import EMPTY_LABELS, FrozenMap, Namespace, Node, Pod, PodDisruptionBudget, Resources
from webhook.cluster.reader import label_selector, node_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.results import (
    DEFAULT_SCORE_WEIGHTS,
    PreemptionArgs,
    PreemptionResult,
    ResourceSpec,
    ScoringArgs,
    ScoringStrategy,
)

NAMESPACES = ("default", "other")
APPS = ("a", "b")


def _term(app: str, topology: str, namespaces: list[str] | None) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology}
    if namespaces is not None:
        term["namespaces"] = namespaces
    return term


GPU = "example.com/gpu"


def _container(cpu: int, memory: int, gpus: int = 0) -> dict[str, Any]:
    requests = {"cpu": f"{cpu}m", "memory": str(memory)}
    if gpus:
        requests[GPU] = str(gpus)
    return {"name": "c", "resources": {"requests": requests}}


HOST_PORT = [{"containerPort": 80, "hostPort": 8080}]


@st.composite
def pod_extras(draw: st.DrawFn, spec: dict[str, Any]) -> None:
    """Widen a pod spec: extended resources, init containers and sidecars (with host ports), overhead."""
    if draw(st.integers(0, 5)) == 0:
        spec["containers"][0]["resources"]["requests"][GPU] = str(draw(st.integers(1, 2)))
    init: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 2))):
        ctr = _container(draw(st.sampled_from([100, 500, 1500])), draw(st.sampled_from([0, 300, 1500])))
        ctr["name"] = f"init{i}"
        if draw(st.booleans()):
            ctr["restartPolicy"] = "Always"  # a sidecar: runs (and holds its host ports) for the pod's life
        if draw(st.integers(0, 3)) == 0:
            ctr["ports"] = HOST_PORT
        init.append(ctr)
    if init:
        spec["initContainers"] = init
    if draw(st.integers(0, 5)) == 0:
        spec["overhead"] = {"cpu": f"{draw(st.sampled_from([50, 250]))}m", "memory": "50"}


terms = st.builds(_term, st.sampled_from(APPS), st.sampled_from(["hostname", "zone"]),
                  st.one_of(st.none(), st.just(["default", "other"])))
IMAGES = ("img/a:1", "img/b:1", "img/c")
# Around ImageLocality's thresholds: under 23 MB scores nothing, 1,000 MB per image is the top.
IMAGE_SIZES = {"img/a:1": 300 * 1024 * 1024, "img/b:1": 900 * 1024 * 1024, "img/c:latest": 20 * 1024 * 1024}


@st.composite
def preferred_pod_terms(draw: st.DrawFn, affinity: dict[str, Any]) -> None:
    """Preferred pod affinity and anti-affinity terms (InterPodAffinity's Score), sometimes with a namespaceSelector."""
    for kind in ("podAffinity", "podAntiAffinity"):
        if draw(st.integers(0, 3)) == 0:
            weighted = []
            for _ in range(draw(st.integers(1, 2))):
                term = draw(terms)
                if draw(st.integers(0, 4)) == 0:
                    term.pop("namespaces", None)
                    term["namespaceSelector"] = draw(st.sampled_from([{}, {"matchLabels": {"team": "b"}}]))
                weighted.append({"weight": draw(st.sampled_from([1, 5, 50, 100])), "podAffinityTerm": term})
            affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = weighted


@st.composite
def pod_dicts(draw: st.DrawFn, name: str, nodes: list[str], *, bound: bool) -> dict[str, Any]:
    app = draw(st.sampled_from([None, *APPS, *APPS]))
    spec: dict[str, Any] = {
        "containers": [_container(draw(st.sampled_from([0, 100, 300, 500, 1000])),
                                  draw(st.sampled_from([0, 100, 300, 500, 1000])))],
        "priority": draw(st.sampled_from([-10, 0, 100, 1000])),
    }
    if draw(st.integers(0, 9)) == 0:
        spec["containers"][0]["ports"] = HOST_PORT
    draw(pod_extras(spec))
    affinity: dict[str, Any] = {}
    if draw(st.integers(0, 5)) == 0:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [draw(terms)]}
    draw(preferred_pod_terms(affinity))
    if draw(st.integers(0, 7)) == 0:  # required affinity of an existing pod: hardPodAffinityWeight scores it
        affinity.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [draw(terms)]
    if affinity:
        spec["affinity"] = affinity
    if draw(st.booleans()):
        spec["terminationGracePeriodSeconds"] = draw(st.sampled_from([0, 10, 60]))
    status: dict[str, Any] = {"phase": "Running" if bound else "Pending"}
    start = draw(st.sampled_from([None, 1, 2, 3, 4]))
    if start is not None:
        status["startTime"] = f"2024-01-01T00:00:0{start}Z"
    deleting = draw(st.integers(0, 7)) == 0
    if bound:
        spec["nodeName"] = draw(st.sampled_from(nodes))
        if deleting and draw(st.booleans()):
            status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    else:
        status["nominatedNodeName"] = draw(st.sampled_from(nodes))
        if draw(st.integers(0, 2)) == 0:  # a nomination that only v1.37 records while the pod is gated
            spec["schedulingGates"] = [{"name": "example.com/hold"}]
    meta: dict[str, Any] = {"name": name, "namespace": draw(st.sampled_from(NAMESPACES)), "uid": f"uid-{name}",
                            "labels": {"app": app} if app else {}}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-02T00:00:00Z"
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": status}


@st.composite
def preemptors(draw: st.DrawFn, nodes: list[str], roomy: bool = False) -> dict[str, Any]:
    app = draw(st.sampled_from([None, *APPS]))
    spec: dict[str, Any] = {
        "containers": [_container(draw(st.sampled_from([0, 300, 700, 1500, 700, 300, 5000] if not roomy
                                                       else [0, 100, 300, 700])),
                                  draw(st.sampled_from([0, 300, 700, 1500] if not roomy else [0, 100, 300, 700])))],
        "priority": draw(st.sampled_from([0, 100, 500, 1000, 2000])),
    }
    if draw(st.integers(0, 9)) == 0:
        spec["preemptionPolicy"] = "Never"
    if draw(st.integers(0, 4)) == 0:
        spec["containers"][0]["ports"] = HOST_PORT
    draw(pod_extras(spec))
    if draw(st.integers(0, 4)) == 0:
        spec["nodeSelector"] = {"zone": draw(st.sampled_from(["z1", "z2"]))}
    if draw(st.integers(0, 9)) == 0:
        spec["nodeName"] = draw(st.sampled_from(nodes))
    if draw(st.booleans()):
        spec["tolerations"] = [draw(st.sampled_from([
            {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
            {"operator": "Exists"},
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        ]))]
    affinity: dict[str, Any] = {}
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    if draw(st.integers(0, 4)) == 0:
        operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        expression: dict[str, Any] = {"key": draw(st.sampled_from(["zone", "gpu"])), "operator": operator}
        if operator in ("In", "NotIn"):
            expression["values"] = draw(st.sampled_from([["z1"], ["z2", "yes"]]))
        affinity["nodeAffinity"] = {required: {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}
    if draw(st.integers(0, 3)) == 0:
        affinity["podAntiAffinity"] = {required: [draw(terms)]}
    if draw(st.integers(0, 5)) == 0:
        affinity["podAffinity"] = {required: [draw(terms)]}
    if draw(st.integers(0, 2)) == 0:
        preferred = []
        for _ in range(draw(st.integers(1, 3))):
            key, values = draw(st.sampled_from([("zone", ["z1"]), ("zone", ["z2"]), ("gpu", ["yes"]),
                                                ("hostname", ["n0", "n1"])]))
            preferred.append({"weight": draw(st.sampled_from([1, 10, 100])), "preference": {"matchExpressions": [
                {"key": key, "operator": draw(st.sampled_from(["In", "NotIn"])), "values": values}]}})
        affinity.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    draw(preferred_pod_terms(affinity))
    if affinity:
        spec["affinity"] = affinity
    spec["containers"][0]["image"] = draw(st.sampled_from(IMAGES))
    if draw(st.integers(0, 3)) == 0:
        spec["initContainers"] = [*spec.get("initContainers", ()), {"name": "init-image",
                                                                   "image": draw(st.sampled_from(IMAGES))}]
    if draw(st.integers(0, 3)) == 0:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": draw(st.integers(1, 2)), "topologyKey": draw(st.sampled_from(["zone", "hostname"])),
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway", "ScheduleAnyway"])),
            "labelSelector": draw(st.sampled_from([{"matchLabels": {"app": "a"}}, {}])),
        }]
        if draw(st.booleans()):
            spec["topologySpreadConstraints"].append({
                "maxSkew": 1, "topologyKey": draw(st.sampled_from(["zone", "kubernetes.io/hostname"])),
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "b"}}})
    status: dict[str, Any] = {"phase": "Pending"}
    if draw(st.integers(0, 4)) == 0:
        status["nominatedNodeName"] = draw(st.sampled_from(nodes))
    meta: dict[str, Any] = {"name": "new", "namespace": "default", "labels": {"app": app} if app else {}}
    if app and draw(st.booleans()):  # a ReplicaSet's pod: the system default spreading applies
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs",
                                    "controller": True}]
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": status}


@st.composite
def scenarios(draw: st.DrawFn, roomy: bool = False, twins: bool = False,
              ) -> tuple[ClusterState, list[Pod], dict[str, Any]]:
    """A small cluster and a pod (or 2-3 replicas) to predict. ``roomy``: nodes with room to spare, so the pod
    mostly fits on several nodes and the Score step decides (else mostly tight clusters, for preemption).
    ``twins``: every node has a twin (``n0`` and ``n0t``: same labels but the hostname, taints, size, images, and a
    copy of each pod bound or nominated there), so a pod that fits on both ties on every Score plugin: the draw
    of ties that upstream's selectHost resolves at random."""
    state = ClusterState()
    state.upsert(Namespace("default", {"team": "a"}))
    state.upsert(Namespace("other", {"team": "b"}))
    node_names = [f"n{i}" for i in range(draw(st.sampled_from([1, 2, 3, 4, 4, 8, 12] if not roomy
                                                               else [2, 3, 4, 6, 8])))]
    for name in node_names:
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if draw(st.integers(0, 7)) == 0 else []
        if draw(st.integers(0, 4)) == 0:
            taints.append({"key": draw(st.sampled_from(["dedicated", "spot"])), "value": "x",
                           "effect": "PreferNoSchedule"})
        labels = {"hostname": name, "kubernetes.io/hostname": name}
        if draw(st.integers(0, 7)):  # some nodes miss the zone: spreading and affinity by zone skip them
            labels["zone"] = labels["topology.kubernetes.io/zone"] = draw(st.sampled_from(["z1", "z2"]))
        allocatable = {"cpu": f"{draw(st.sampled_from([1000, 2000]))}m",
                       "memory": str(draw(st.sampled_from([1000, 2000]))), "pods": str(draw(st.integers(2, 6)))}
        if roomy:  # uneven sizes, so the resource scores differ between nodes
            allocatable = {"cpu": f"{draw(st.sampled_from([3000, 4000, 6000]))}m",
                           "memory": str(draw(st.sampled_from([3000, 4000, 8000]))), "pods": "20"}
        if draw(st.integers(0, 2)) == 0:
            labels["gpu"] = "yes"
            allocatable[GPU] = str(draw(st.integers(1, 4)))
        images = [{"names": [image], "sizeBytes": IMAGE_SIZES[image]}
                  for image in draw(st.lists(st.sampled_from(sorted(IMAGE_SIZES)), max_size=3, unique=True))]
        node = {"kind": "Node", "metadata": {"name": name, "labels": labels},
                "spec": {"taints": taints, "unschedulable": draw(st.integers(0, 9)) == 0},
                "status": {"allocatable": allocatable, "images": images}}
        state.upsert(node_from_dict(node))
        if twins:
            twin = f"{name}t"
            state.upsert(node_from_dict({**node, "metadata": {
                "name": twin, "labels": {**labels, "hostname": twin, "kubernetes.io/hostname": twin}}}))
    pod_dicts_drawn = [draw(pod_dicts(f"p{i}", node_names, bound=True))
                       for i in range(draw(st.integers(2, (3 if roomy else 5) * len(node_names))))]
    pod_dicts_drawn += [draw(pod_dicts(f"nom{i}", node_names, bound=False)) for i in range(draw(st.integers(0, 2)))]
    for pod_dict in pod_dicts_drawn:
        state.upsert(pod_from_dict(pod_dict))
        if twins:
            state.upsert(pod_from_dict(_twin_pod(pod_dict)))
    if twins:
        node_names = sorted(state.nodes)
    for i in range(draw(st.integers(0, 3))):
        selector = draw(st.sampled_from([None, {}, {"matchLabels": {"app": "a"}}, {"matchLabels": {"app": "b"}}]))
        state.upsert(PodDisruptionBudget(
            f"pdb{i}", draw(st.sampled_from(NAMESPACES)), label_selector(selector, "selector"),
            disruptions_allowed=draw(st.sampled_from([0, 0, 1, 2])),
            disrupted_pods=frozenset(draw(st.lists(st.sampled_from(["p0", "p1", "p2"]), max_size=1)))))
    pod = pod_from_dict(draw(preemptors(node_names, roomy)))
    replicas = draw(st.integers(1, 3))
    pods = [pod] if replicas == 1 else [
        Pod(**{**{f: getattr(pod, f) for f in pod.__dataclass_fields__}, "name": f"new-{i}"}) for i in range(replicas)]
    options = {"empty_selector_matches_all": draw(st.booleans()), "stop_at_first": draw(st.booleans()),
               "gated_reserve": draw(st.booleans()),
               "scoring": draw(scoring_args())}
    return state, pods, options


def _twin_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The copy of a drawn pod on its node's twin (``scenarios(twins=True)``)."""
    name = f"{pod['metadata']['name']}t"
    spec, status = dict(pod["spec"]), dict(pod["status"])
    if "nodeName" in spec:
        spec["nodeName"] = f"{spec['nodeName']}t"
    if "nominatedNodeName" in status:
        status["nominatedNodeName"] = f"{status['nominatedNodeName']}t"
    return {**pod, "metadata": {**pod["metadata"], "name": name, "uid": f"uid-{name}"}, "spec": spec,
            "status": status}


@st.composite
def scoring_args(draw: st.DrawFn) -> ScoringArgs:
    """The profile's scoring: mostly the default, else another strategy, weights, a plugin disabled."""
    if draw(st.booleans()):
        return ScoringArgs()
    kind = draw(st.sampled_from(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]))
    resources = draw(st.sampled_from([(ResourceSpec("cpu", 1), ResourceSpec("memory", 1)),
                                      (ResourceSpec("cpu", 3), ResourceSpec("memory", 1)),
                                      (ResourceSpec("cpu", 1), ResourceSpec("memory", 1), ResourceSpec(GPU, 2))]))
    shape = ((0, 0), (100, 10)) if draw(st.booleans()) else ((0, 10), (50, 3), (100, 0))
    weights = dict(DEFAULT_SCORE_WEIGHTS)
    if draw(st.booleans()):
        weights.pop(draw(st.sampled_from(sorted(weights))))
    if draw(st.booleans()):
        weights[draw(st.sampled_from(sorted(weights)))] = draw(st.integers(1, 5))
    return ScoringArgs(weights=tuple(weights.items()),
                       fit_strategy=ScoringStrategy(kind, resources,
                                                    shape if kind == "RequestedToCapacityRatio" else ()),
                       hard_pod_affinity_weight=draw(st.sampled_from([0, 1, 10])),
                       ignore_preferred_terms_of_existing_pods=draw(st.integers(0, 4)) == 0)


def as_dict(result: PreemptionResult) -> dict[str, Any]:
    return {
        "outcome": result.outcome, "node": result.node,
        "victims": [(v.namespace, v.name, v.priority, v.pdb_violation) for v in result.victims],
        "pdb_violations": result.pdb_violations, "candidate_nodes": result.candidate_nodes,
        "tied_nodes": list(result.tied_nodes), "expected_delay_seconds": result.expected_delay_seconds,
        "preemption_status": result.preemption_status,
        "tied_victims": {node: [(v.namespace, v.name, v.effective_priority) for v in victims]
                         for node, victims in result.tied_victims},
    }


@st.composite
def changes(draw: st.DrawFn, state: ClusterState) -> list[tuple[str, Any]]:
    """A few informer events on the state: ("upsert", object) or ("delete", kind, key)."""
    nodes = sorted(state.nodes)
    events: list[tuple[str, Any]] = []
    for i in range(draw(st.integers(1, 6))):
        what = draw(st.sampled_from(["pod", "pod", "pod", "delete-pod", "node", "relabel", "delete-node", "pdb",
                                     "nominated", "pod-labels", "pod-labels", "pod-restart"]))
        pods = sorted(state.pods)
        if what == "pod" and nodes:
            events.append(("upsert", pod_from_dict(draw(pod_dicts(f"c{i}", nodes, bound=True)))))
        elif what == "pod" and pods:
            events.append(("upsert", dataclasses.replace(state.pods[draw(st.sampled_from(pods))], labels=EMPTY_LABELS)))
        elif what == "pod-labels" and pods:  # what most updates of a running pod change: nothing the sums read
            pod = state.pods[draw(st.sampled_from(pods))]
            labels = draw(st.sampled_from([EMPTY_LABELS, FrozenMap({**pod.labels, "generation": str(i)})]))
            events.append(("upsert", dataclasses.replace(pod, labels=labels)))
        elif what == "pod-restart" and pods:  # a new start, or requests resized in place: the sums move
            pod = state.pods[draw(st.sampled_from(pods))]
            if draw(st.booleans()):
                events.append(("upsert", dataclasses.replace(pod, start_time_ns=draw(st.sampled_from(
                    [None, 1, (pod.start_time_ns or 0) + 10**9])))))
            else:
                events.append(("upsert", dataclasses.replace(pod, requests=dataclasses.replace(
                    pod.requests, milli_cpu=draw(st.sampled_from([0, 100, pod.requests.milli_cpu + 500]))))))
        elif what == "delete-pod" and pods:
            events.append(("delete", "Pod", draw(st.sampled_from(pods))))
        elif what == "node" and nodes:
            node = state.nodes[draw(st.sampled_from(nodes))]
            alloc = node.allocatable
            cpu = draw(st.sampled_from([500, 1000, 3000]))
            events.append(("upsert", dataclasses.replace(
                node, allocatable=Resources(milli_cpu=cpu, memory=alloc.memory, pods=alloc.pods),
                unschedulable=draw(st.booleans()) and not node.unschedulable)))
        elif what == "relabel" and nodes:
            node = state.nodes[draw(st.sampled_from(nodes))]
            labels = {**node.labels, "zone": draw(st.sampled_from(["z1", "z2"]))}
            if draw(st.booleans()):
                labels.pop("gpu", None)
            events.append(("upsert", dataclasses.replace(node, labels=FrozenMap(labels))))
        elif what == "delete-node" and len(nodes) > 1:
            events.append(("delete", "Node", draw(st.sampled_from(nodes))))
        elif what == "pdb":
            pdbs = [p for per_ns in state.pdbs_by_namespace.values() for p in per_ns.values()]
            if pdbs:
                pdb = draw(st.sampled_from(pdbs))
                events.append(("upsert", dataclasses.replace(pdb, disruptions_allowed=draw(st.integers(0, 2)))))
        elif what == "nominated" and nodes:
            events.append(("upsert", pod_from_dict(draw(pod_dicts(f"m{i}", nodes, bound=False)))))
    return events


def apply_events(state: ClusterState, events: list[tuple[str, Any]]) -> None:
    for event in events:
        if event[0] == "upsert":
            state.upsert(event[1])
        else:
            state.delete(event[1], event[2])


def ladder_cluster(nodes: int) -> ClusterState:
    """``nodes`` nodes of 1000m cpu, each full but for one low-priority pod (900m, 899m, ... cpu)."""
    state = ClusterState()
    for i in range(nodes):
        state.upsert(Node(f"n{i:03d}", allocatable=Resources(milli_cpu=1000, memory=1000, pods=10)))
        state.upsert(Pod(f"low{i}", "default", node_name=f"n{i:03d}", priority=0,
                         requests=Resources(milli_cpu=900 - i, memory=100)))
    return state


def args_of(options: dict[str, Any]) -> PreemptionArgs:
    """The predictor's arguments for a scenario's drawn options (the reference takes them as keywords)."""
    return PreemptionArgs(pdb_empty_selector_matches_all=options["empty_selector_matches_all"],
                          pdb_stop_at_first_violation=options["stop_at_first"],
                          gated_nominations_reserve=options["gated_reserve"], scoring=options["scoring"])
