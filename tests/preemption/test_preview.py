"""preview.py and the entry points behind it: priority resolution, replicas, the PreemptionPreview document."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from webhook.cluster.copying import replace_fields
from webhook.cluster.snapshot import ClusterState
from webhook.errors import PredictionTimeout
from webhook.preemption.preview import build_preview, preview_exit_code, preview_objects, result_json, summarize
from webhook.preemption.results import Outcome, PreemptionArgs
from webhook.preemption.simulate import predict_pods, replica_pods
from webhook.preemption.workloads import expand_object
from webhook.sources.loader import parse_documents

from .support import ladder_cluster

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
    preview = preview_objects(_state(), [_pod()])
    (result,) = preview["results"]
    assert result["outcome"] == Outcome.PREEMPTS
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
    preview = preview_objects(state, [_pod("1500m")], replicas=3)
    outcomes = [(r["pod"], r["outcome"], r["node"]) for r in preview["results"]]
    assert outcomes[0] == ("team-a/web-0", Outcome.PREEMPTS, "node-2")
    # The second replica sees node-2 full with an equal-priority pod; node-1 is left (with a PDB violation).
    assert outcomes[1] == ("team-a/web-1", Outcome.PREEMPTS, "node-1")
    assert preview["results"][1]["pdbViolations"] == 1
    assert preview["results"][1]["expectedDelaySeconds"] == 90
    assert outcomes[2][1] == Outcome.UNSCHEDULABLE
    assert preview["summary"] == {"pods": 3, "fits": 0, "preempting": 2, "unschedulable": 1, "rejected": 0,
                                  "gated": 0, "notScheduled": 0, "victims": 2, "pdbViolations": 1,
                                  "namespacesAffected": ["team-b", "team-c"]}
    assert state.version == version and len(state.pods_by_node["node-1"]) == 1


def test_unknown_priority_class_is_rejected_with_the_admission_message() -> None:
    (result,) = preview_objects(_state(), [_pod(cls="nope")])["results"]
    assert result["outcome"] == Outcome.REJECTED
    # The API server's words, in full.
    assert result["message"] == 'pods "web" is forbidden: no PriorityClass with name nope was found'


def test_global_default_class_applies_and_a_small_pod_fits() -> None:
    (result,) = preview_objects(_state(), [_pod(cpu="100m", cls=None)])["results"]
    assert (result["outcome"], result["node"], result["priority"], result["priorityClassName"]) == (
        Outcome.FITS, "node-1", 10, "low")


def test_priority_class_override_and_never_policy() -> None:
    state = _state()
    (result,) = preview_objects(state, [_pod(cls=None)], priority_class="high")["results"]
    assert result["outcome"] == Outcome.PREEMPTS
    (result,) = predict_pods(state, expand_object(_pod(cls="high-never")))
    assert (result.outcome, result.preemption_policy) == (Outcome.UNSCHEDULABLE, "Never")
    assert result.message.endswith("preemption: not eligible due to preemptionPolicy=Never.")


def test_a_gated_pod_is_gated_not_an_unmodelled_feature() -> None:
    """Scheduling gates were a "Not modelled" note; since #26 they are the outcome itself (nothing is preempted
    for the pod until every gate is gone)."""
    pod = _pod(schedulingGates=[{"name": "example.com/wait"}])
    (result,) = preview_objects(_state(), [pod])["results"]
    assert result["outcome"] == Outcome.GATED and "example.com/wait" in result["message"]
    assert "Not modelled" not in result["message"] and not result["victims"]


def test_unmodeled_feature_is_named_in_the_message() -> None:
    """A feature the reader marks as not modelled is still named in the result's message."""
    (pod,) = expand_object(_pod())
    (result,) = predict_pods(_state(), [replace_fields(pod, unmodeled=("spec.example (a future feature)",))])
    assert "Not modelled" in result.message and "spec.example" in result.message


def test_claims_a_snapshot_does_not_hold_are_named_as_not_known() -> None:
    """A snapshot taken without persistentvolumeclaims (the documented command before #27) cannot tell a missing
    claim from one it did not dump: the prediction ignores the claim and says so."""
    pod = _pod(volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    state = _state()
    state.unknown_kinds.add("PersistentVolumeClaim")  # as the loader marks a file holding none (tests/sources)
    (result,) = preview_objects(state, [pod])["results"]
    assert result["outcome"] == Outcome.PREEMPTS
    assert "Not known: the snapshot holds no PersistentVolumeClaims" in result["message"]
    (known,) = preview_objects(_state(), [pod])["results"]  # listed, and none: the claim is missing
    assert known["outcome"] == Outcome.UNSCHEDULABLE and 'persistentvolumeclaim "data" not found' in known["message"]


def test_sampling_note_when_candidates_exceed_upstream_sample() -> None:
    args = PreemptionArgs(min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=1)
    (result,) = predict_pods(_state(), expand_object(_pod()), args=args)
    assert result.sampled and "upstream may choose a different node" in result.message
    (result,) = predict_pods(_state(), expand_object(_pod()))
    assert not result.sampled


def test_build_preview_of_nothing() -> None:
    assert build_preview([])["summary"]["pods"] == 0


def test_the_summary_is_computed_from_the_json_results() -> None:
    results = predict_pods(_state(), replica_pods(expand_object(_pod("1500m"))[0], 3))
    assert build_preview(results)["summary"] == summarize([result_json(r) for r in results])


def _victim(namespace: str, name: str) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "node": "n1", "priority": 1, "pdbViolation": False}


def test_the_summary_counts_victims_redacted_or_of_other_tenants() -> None:
    """Named, redacted by /preview (namespaces kept, as before redaction) and counted for another tenant (no
    namespace; the total repeated as ``otherTenantVictims``)."""
    results = [
        {"outcome": "Preempts", "pdbViolations": 2, "victims": [_victim("team-a", "x")],
         "otherTenantVictims": {"count": 3, "pdbViolations": 1}},
        {"outcome": "Preempts", "pdbViolations": 1, "victims": [],
         "redactedVictims": [{"namespace": "team-z", "count": 2, "pdbViolations": 1}]},
        {"outcome": "Fits", "victims": []}, {"outcome": "Rejected"}, {"outcome": "Unschedulable", "victims": []},
        {"outcome": "Gated", "victims": []}, {"outcome": "NotScheduled", "victims": []},
    ]
    assert summarize(results) == {"pods": 7, "fits": 1, "preempting": 2, "unschedulable": 1, "rejected": 1,
                                  "gated": 1, "notScheduled": 1, "victims": 6, "pdbViolations": 3,
                                  "namespacesAffected": ["team-a", "team-z"],
                                  "otherTenantVictims": 3}
    assert "otherTenantVictims" not in summarize(results[1:])


def test_preview_object_honours_the_deadline() -> None:
    state = ladder_cluster(5)
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    with pytest.raises(PredictionTimeout):
        preview_objects(state, [pod], deadline=time.monotonic() - 1)
    assert preview_objects(state, [pod], deadline=time.monotonic() + 60)["summary"]["fits"] == 1


def test_the_document_holds_plain_strings_and_the_exit_code_follows_the_outcomes() -> None:
    fits = preview_objects(_state(), [_pod(cpu="100m")])
    assert type(fits["results"][0]["outcome"]) is str and fits["results"][0]["outcome"] == "Fits"
    assert yaml.safe_load(yaml.safe_dump(fits)) == fits
    assert preview_exit_code(fits) == 0
    assert preview_exit_code(preview_objects(_state(), [_pod()])) == 1
