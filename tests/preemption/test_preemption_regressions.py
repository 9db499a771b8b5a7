"""Regressions found by the newcomer/audit review and the host-port report, each held to upstream behaviour.

- host ports: only app containers and sidecars (``restartPolicy: Always`` init containers) hold them
  (``GetHostPorts``, pkg/scheduler/util/utils.go);
- a pod the Priority plugin rejects gets its own ``Rejected`` and takes no place among the other pods;
- a pod with ``spec.nodeName`` is never scheduled, so nothing is preempted for it: the kubelet admits it or not;
- a dry run that evicts nobody is DryRunPreemption's error "expected at least one victim pod on node";
- a PDB whose selector ``LabelSelectorAsSelector`` refuses is skipped (it protects nobody).
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.cluster.loader import parse_documents
from webhook.cluster.model import Pod
from webhook.cluster.reader import pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.filters import ERROR, CycleState, NodeInfo
from webhook.preemption.pdb import PdbIndex
from webhook.preemption.predictor import predict_pods
from webhook.preemption.preview import preview_object, preview_objects
from webhook.preemption.results import FITS, PREEMPTS, REJECTED, UNSCHEDULABLE_OUTCOME, Candidate
from webhook.preemption.selection import pick_preemption_node
from webhook.preemption.victims import select_victims_on_node

CLASSES = """
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: 10}
"""


def _state(items: str) -> ClusterState:
    state = ClusterState()
    for obj in parse_documents(f"apiVersion: v1\nkind: List\nitems:\n{CLASSES}{items}", "snapshot"):
        state.upsert(obj)
    return state


def _node(name: str, cpu: str = "4", pods: int = 10, extra: str = "") -> str:
    return f"""
- apiVersion: v1
  kind: Node
  metadata: {{name: {name}}}
  spec: {{{extra}}}
  status: {{allocatable: {{cpu: "{cpu}", memory: 8Gi, pods: "{pods}"}}}}
"""


def _bound(name: str, node: str, cpu: str = "1", priority: int = 10, labels: str = "{}", spec: str = "") -> str:
    return f"""
- apiVersion: v1
  kind: Pod
  metadata: {{name: {name}, namespace: batch, labels: {labels}}}
  spec: {{nodeName: {node}, priority: {priority},
          containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]{spec}}}
  status: {{phase: Running, startTime: "2024-01-01T00:00:00Z"}}
"""


def _pod(name: str = "web", cpu: str = "1", cls: str | None = "high", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}
    if cls:
        body["priorityClassName"] = cls
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"}, "spec": body}


def _port(port: int, **extra: Any) -> dict[str, Any]:
    return {"containerPort": port, "hostPort": port, **extra}


# ---- host ports (issue: only app containers and sidecars hold them) ----------------------------------------

def _holder(init_restart_policy: str | None) -> str:
    """A low-priority pod on n1 whose only host port 8080 is declared by an init container."""
    restart = f", restartPolicy: {init_restart_policy}" if init_restart_policy else ""
    init = f", initContainers: [{{name: i, ports: [{{containerPort: 8080, hostPort: 8080}}]{restart}}}]"
    return _node("n1") + _bound("holder", "n1", spec=init)


def test_a_regular_init_containers_host_port_is_free_once_the_pod_runs() -> None:
    state = _state(_holder(None))
    (result,) = preview_object(state, _pod(containers=[{"name": "c", "ports": [_port(8080)]}]))["results"]
    assert (result["outcome"], result["node"], result["victims"]) == (FITS, "n1", [])


def test_a_sidecars_host_port_is_held_for_the_life_of_the_pod() -> None:
    state = _state(_holder("Always"))
    (result,) = preview_object(state, _pod(containers=[{"name": "c", "ports": [_port(8080)]}]))["results"]
    assert result["outcome"] == PREEMPTS
    assert [v["name"] for v in result["victims"]] == ["holder"]


def test_the_preemptors_own_init_container_ports_count_only_for_sidecars() -> None:
    ports = ", containers: [{name: c, ports: [{hostPort: 80, containerPort: 80}]}]"
    state = _state(_node("n1") + _bound("web-server", "n1", spec=ports))
    regular = _pod(initContainers=[{"name": "i", "ports": [_port(80)]}])
    sidecar = _pod(initContainers=[{"name": "i", "restartPolicy": "Always", "ports": [_port(80)]}])
    assert preview_object(state, regular)["results"][0]["outcome"] == FITS
    assert preview_object(state, sidecar)["results"][0]["outcome"] == PREEMPTS


@pytest.mark.parametrize(("want", "have", "conflict"), [
    ({"hostIP": "10.0.0.1"}, {"hostIP": "10.0.0.2"}, False),
    ({"hostIP": "10.0.0.1"}, {}, True),  # an empty hostIP is 0.0.0.0: every address
    ({}, {"hostIP": "10.0.0.2"}, True),
    ({"protocol": "UDP"}, {}, False),
    ({"protocol": "TCP"}, {}, True),  # the protocol defaults to TCP
])
def test_host_port_conflict_semantics(want: dict[str, Any], have: dict[str, Any], conflict: bool) -> None:
    raw_have = [{"name": "c", "ports": [_port(9000, **have)]}]
    state = ClusterState()
    for obj in parse_documents(f"apiVersion: v1\nkind: List\nitems:\n{CLASSES}{_node('n1')}", "snapshot"):
        state.upsert(obj)
    holder = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder", "namespace": "batch"},
              "spec": {"nodeName": "n1", "priority": 10, "containers": raw_have}, "status": {"phase": "Running"}}
    state.upsert(pod_from_dict(holder))
    (result,) = preview_object(state, _pod(containers=[{"name": "c", "ports": [_port(9000, **want)]}]))["results"]
    assert result["outcome"] == (PREEMPTS if conflict else FITS)


def test_host_port_zero_declares_nothing() -> None:
    pod = pod_from_dict({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "ports": [{"containerPort": 80, "hostPort": 0}, {"containerPort": 81}]}]}})
    assert pod.host_ports == ()


# ---- one rejected pod does not reject the batch -------------------------------------------------------------

def test_each_pod_gets_its_own_outcome_and_a_rejected_pod_takes_no_place() -> None:
    state = _state(_node("n1", cpu="2"))
    fits = _pod("fits", cpu="1500m")
    unknown = _pod("unknown", cpu="1500m", cls="gold")
    results = preview_objects(state, [unknown, fits])["results"]
    assert [(r["pod"], r["outcome"]) for r in results] == [("team-a/unknown", REJECTED), ("team-a/fits", FITS)]
    assert "no PriorityClass with name gold was found" in results[0]["message"]
    assert results[1]["message"] == preview_object(state, fits)["results"][0]["message"]


def test_rejections_keep_their_own_messages_in_order() -> None:
    state = _state(_node("n1"))
    pods = [pod_from_dict(_pod(f"p{i}", cls=cls)) for i, cls in enumerate(["gold", "high", "silver", "low"])]
    results = predict_pods(state, pods)
    assert [r.outcome for r in results] == [REJECTED, FITS, REJECTED, FITS]
    assert ["gold" in results[0].message, "silver" in results[2].message] == [True, True]
    assert [r.pod for r in results] == [f"team-a/p{i}" for i in range(4)]


# ---- spec.nodeName: the scheduler never handles the pod -----------------------------------------------------

NODE_NAME_CLUSTER = _node("n1", cpu="2") + _node("n2", cpu="2") + _bound("batch-1", "n1", cpu="1500m")


def test_a_pod_bound_by_node_name_that_fits_there_fits_there() -> None:
    (result,) = preview_object(_state(NODE_NAME_CLUSTER), _pod(cpu="1", nodeName="n2"))["results"]
    assert (result["outcome"], result["node"], result["victims"]) == (FITS, "n2", [])


def test_a_pod_bound_by_node_name_that_does_not_fit_is_never_preempted_for() -> None:
    (result,) = preview_object(_state(NODE_NAME_CLUSTER), _pod(cpu="1", nodeName="n1"))["results"]
    assert (result["outcome"], result["node"], result["victims"]) == (UNSCHEDULABLE_OUTCOME, None, [])
    assert "kubelet will reject it" in result["message"] and "Insufficient cpu" in result["message"]
    assert "evict" not in result["message"]


def test_a_critical_pod_bound_by_node_name_may_make_the_kubelet_evict() -> None:
    (result,) = preview_object(_state(NODE_NAME_CLUSTER),
                               _pod(cpu="1", cls="system-node-critical", nodeName="n1"))["results"]
    assert result["outcome"] == UNSCHEDULABLE_OUTCOME
    assert "kubelet will reject it" in result["message"] and "kubelet may instead evict pods" in result["message"]


def test_a_pod_bound_to_a_missing_node() -> None:
    (result,) = preview_object(_state(NODE_NAME_CLUSTER), _pod(nodeName="gone"))["results"]
    assert result["outcome"] == UNSCHEDULABLE_OUTCOME and "node gone does not exist" in result["message"]


def test_the_kubelet_ignores_cordons_and_no_schedule_taints_but_not_no_execute() -> None:
    cordoned = _node("c1", extra="unschedulable: true, taints: [{key: k, effect: NoSchedule}]")
    draining = _node("d1", extra="taints: [{key: k, effect: NoExecute}]")
    state = _state(cordoned + draining)
    assert preview_object(state, _pod(nodeName="c1"))["results"][0]["outcome"] == FITS
    (result,) = preview_object(state, _pod(nodeName="d1"))["results"]
    assert result["outcome"] == UNSCHEDULABLE_OUTCOME and "NoExecute" in result["message"]


def test_a_bound_pod_holds_its_place_for_the_next_replica() -> None:
    state = _state(NODE_NAME_CLUSTER)
    results = preview_objects(state, [_pod("a", cpu="1500m", nodeName="n2"), _pod("b", cpu="1500m", nodeName="n2")])
    assert [r["outcome"] for r in results["results"]] == [FITS, UNSCHEDULABLE_OUTCOME]


# ---- a dry run without victims ------------------------------------------------------------------------------

def _model(raw: dict[str, Any]) -> Pod:
    return pod_from_dict(raw)


def test_a_dry_run_that_evicts_nobody_is_upstreams_error_not_a_crash() -> None:
    state = _state(_node("n1") + _bound("small", "n1", cpu="100m"))
    pod = _model({**_pod(cpu="1"), "spec": {**_pod(cpu="1")["spec"], "priority": 1000}})
    info = NodeInfo.build(state.nodes["n1"], state.pods_by_node["n1"].values())
    pdbs = PdbIndex([], empty_matches_all=False, stop_at_first=True)
    outcome = select_victims_on_node(pod, info, CycleState(), [], pdbs)
    assert outcome.candidate is None
    assert outcome.status.code == ERROR
    assert outcome.status.reasons == ('expected at least one victim pod on node "n1"',)


def test_node_selection_never_indexes_an_empty_victim_list() -> None:
    victim = _model({"metadata": {"name": "v", "namespace": "batch"}, "spec": {"priority": 5, "containers": []}})
    empty = Candidate("a-node", (), frozenset(), 0)
    real = Candidate("b-node", (victim,), frozenset(), 0)
    picked = pick_preemption_node([empty, real])
    assert picked is not None and picked[0].node == "b-node" and picked[1] == ("b-node",)
    assert pick_preemption_node([empty]) is None


# ---- PDBs with selectors upstream cannot convert ------------------------------------------------------------

@pytest.mark.parametrize("expression", [
    "{key: app, operator: In, values: []}",
    "{key: app, operator: NotIn, values: []}",
    "{key: app, operator: Exists, values: [batch]}",
    "{key: app, operator: DoesNotExist, values: [x]}",
    "{key: app, operator: Gt, values: ['1']}",
])
def test_a_pdb_with_an_invalid_selector_protects_nobody(expression: str) -> None:
    pdb = f"""
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {{name: broken, namespace: batch}}
  spec: {{selector: {{matchLabels: {{app: batch}}, matchExpressions: [{expression}]}}}}
  status: {{disruptionsAllowed: 0}}
"""
    valid = pdb.replace("name: broken", "name: fine").replace(f", matchExpressions: [{expression}]", "")
    cluster = _node("n1", cpu="2") + _bound("batch-1", "n1", cpu="1500m", labels="{app: batch}")
    (broken,) = preview_object(_state(cluster + pdb), _pod(cpu="1"))["results"]
    assert broken["outcome"] == PREEMPTS and broken["pdbViolations"] == 0
    (protected,) = preview_object(_state(cluster + valid), _pod(cpu="1"))["results"]
    assert protected["pdbViolations"] == 1  # the same PDB with a valid selector does protect the pod
