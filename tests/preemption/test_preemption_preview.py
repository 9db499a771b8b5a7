"""The public entry points: priority resolution, replicas, workloads, the PreemptionPreview and the plugin."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.cluster.loader import parse_documents
from webhook.cluster.snapshot import ClusterState
from webhook.errors import InvalidInput
from webhook.preemption.predictor import predict_preemption
from webhook.preemption.preview import build_preview, preview_object
from webhook.preemption.results import FITS, PREEMPTS, REJECTED, UNSCHEDULABLE_OUTCOME, PreemptionArgs
from webhook.preemption.workloads import expand_object

SNAPSHOT = """
apiVersion: v1
kind: List
items:
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: 10, globalDefault: true}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high-never}, value: 1000,
   preemptionPolicy: Never}
- apiVersion: v1
  kind: Node
  metadata: {name: node-1}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
- apiVersion: v1
  kind: Node
  metadata: {name: node-2}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
- apiVersion: v1
  kind: Pod
  metadata: {name: batch-1, namespace: team-b, labels: {app: batch}}
  spec:
    nodeName: node-1
    priority: 10
    terminationGracePeriodSeconds: 90
    containers: [{name: c, resources: {requests: {cpu: 1500m}}}]
  status: {phase: Running, startTime: "2024-01-01T00:00:00Z"}
- apiVersion: v1
  kind: Pod
  metadata: {name: batch-2, namespace: team-c}
  spec: {nodeName: node-2, priority: 10, containers: [{name: c, resources: {requests: {cpu: 1500m}}}]}
  status: {phase: Running, startTime: "2024-01-02T00:00:00Z"}
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {name: batch, namespace: team-b}
  spec: {selector: {matchLabels: {app: batch}}}
  status: {disruptionsAllowed: 0}
"""


def _state() -> ClusterState:
    state = ClusterState()
    for obj in parse_documents(SNAPSHOT, "snapshot"):
        state.upsert(obj)
    return state


def _pod(cpu: str = "1", cls: str | None = "high", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}
    if cls:
        body["priorityClassName"] = cls
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "team-a"}, "spec": body}


def test_preempting_pod_prefers_the_node_without_pdb_violation() -> None:
    preview = preview_object(_state(), _pod())
    (result,) = preview["results"]
    assert result["outcome"] == PREEMPTS
    assert result["node"] == "node-2"  # node-1's victim is protected by a PDB with no budget left
    assert result["victims"] == [{"namespace": "team-c", "name": "batch-2", "node": "node-2", "priority": 10,
                                  "pdbViolation": False}]
    assert result["candidateNodes"] == 2
    assert result["tiedNodes"] == ["node-2"]
    assert result["expectedDelaySeconds"] == 30
    assert preview["apiVersion"] == "preemptguard.io/v1alpha1" and preview["kind"] == "PreemptionPreview"
    assert preview["summary"]["namespacesAffected"] == ["team-c"]


def test_replicas_are_simulated_in_order_without_mutating_the_state() -> None:
    state = _state()
    version = state.version
    preview = preview_object(state, _pod("1500m"), replicas=3)
    outcomes = [(r["pod"], r["outcome"], r["node"]) for r in preview["results"]]
    assert outcomes[0] == ("team-a/web-0", PREEMPTS, "node-2")
    # The second replica sees node-2 full with an equal-priority pod; node-1 is left (with a PDB violation).
    assert outcomes[1] == ("team-a/web-1", PREEMPTS, "node-1")
    assert preview["results"][1]["pdbViolations"] == 1
    assert preview["results"][1]["expectedDelaySeconds"] == 90
    assert outcomes[2][1] == UNSCHEDULABLE_OUTCOME
    assert preview["summary"] == {"pods": 3, "fits": 0, "preempting": 2, "unschedulable": 1, "rejected": 0,
                                  "victims": 2, "pdbViolations": 1, "namespacesAffected": ["team-b", "team-c"]}
    assert state.version == version and len(state.pods_by_node["node-1"]) == 1


def test_unknown_priority_class_is_rejected_with_the_admission_message() -> None:
    (result,) = preview_object(_state(), _pod(cls="nope"))["results"]
    assert result["outcome"] == REJECTED
    assert result["message"] == "no PriorityClass with name nope was found"


def test_global_default_class_applies_and_a_small_pod_fits() -> None:
    (result,) = preview_object(_state(), _pod(cpu="100m", cls=None))["results"]
    assert (result["outcome"], result["node"], result["priority"], result["priorityClassName"]) == (
        FITS, "node-1", 10, "low")


def test_priority_class_override_and_never_policy() -> None:
    state = _state()
    (result,) = preview_object(state, _pod(cls=None), priority_class="high")["results"]
    assert result["outcome"] == PREEMPTS
    (result,) = predict_preemption(state, expand_object(_pod(cls="high-never"))[0])
    assert (result.outcome, result.preemption_policy) == (UNSCHEDULABLE_OUTCOME, "Never")
    assert result.message.endswith("preemption: not eligible due to preemptionPolicy=Never.")


def test_unmodeled_feature_is_named_in_the_message() -> None:
    pod = _pod(volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    (result,) = preview_object(_state(), pod)["results"]
    assert result["outcome"] == PREEMPTS
    assert "Not modelled" in result["message"] and "persistentVolumeClaim" in result["message"]


def test_sampling_note_when_candidates_exceed_upstream_sample() -> None:
    args = PreemptionArgs(min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=1)
    (result,) = predict_preemption(_state(), expand_object(_pod())[0], args=args)
    assert result.sampled and "upstream may choose a different node" in result.message
    (result,) = predict_preemption(_state(), expand_object(_pod())[0])
    assert not result.sampled


@pytest.mark.parametrize(("obj", "names"), [
    ({"kind": "Deployment", "metadata": {"name": "d", "namespace": "x"},
      "spec": {"replicas": 2, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}},
     ["x/d-0", "x/d-1"]),
    ({"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": {"spec": {}}}}, ["default/s"]),
    ({"kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": 5, "completions": 3,
                                                         "template": {"spec": {}}}}, ["default/j-0", "default/j-1",
                                                                                     "default/j-2"]),
    ({"kind": "CronJob", "metadata": {"name": "c"},
      "spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}, ["default/c"]),
    ({"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}},
                                {"kind": "ReplicaSet", "metadata": {"name": "r"},
                                 "spec": {"replicas": 0, "template": {"spec": {}}}}]}, ["default/p"]),
])
def test_workloads_expand_to_their_replicas(obj: dict[str, Any], names: list[str]) -> None:
    assert [p.key for p in expand_object(obj)] == names


def test_workload_labels_and_namespace_override() -> None:
    deployment = {"kind": "Deployment", "metadata": {"name": "d", "namespace": "x"},
                  "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {}}}}
    (pod,) = expand_object(deployment, namespace="y", replicas=1)
    assert (pod.namespace, dict(pod.labels)) == ("y", {"app": "web"})
    with pytest.raises(InvalidInput, match="unsupported kind"):
        expand_object({"kind": "Service", "metadata": {"name": "s"}})


def test_build_preview_of_nothing() -> None:
    assert build_preview([])["summary"]["pods"] == 0
