"""The ``PreemptionPreview`` document (docs/interfaces.md §4): the JSON edge of the predictor for /preview and
the plugin."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.cluster.snapshot import ClusterState
from webhook.preemption.results import Outcome, PreemptionArgs, PreemptionResult
from webhook.preemption.simulate import predict_objects

API_VERSION = "preemptguard.io/v1alpha1"
KIND = "PreemptionPreview"


def result_json(result: PreemptionResult) -> dict[str, Any]:
    entry = _result_fields(result)
    if result.placement:
        entry.update(placement_json(result))
    if result.depends_on:
        entry["dependsOn"] = list(result.depends_on)
    return entry


def placement_json(result: PreemptionResult) -> dict[str, Any]:
    """How a ``Fits`` pod's node was chosen (docs/interfaces.md §4): ``placement`` (``nominated``, ``only``,
    ``scored``, ``sampled``, ``unscored``), how many feasible nodes were scored, and the best of them with each
    Score plugin's weighted share, as kube-scheduler-simulator annotates a pod. Node names and scores only: no
    pod of anyone is named."""
    return {"placement": result.placement, "scoredNodes": result.scored_nodes,
            "topNodes": [{"node": t.node, "score": t.total, "scores": dict(t.scores)} for t in result.top_nodes]}


def _result_fields(result: PreemptionResult) -> dict[str, Any]:
    return {
        "pod": result.pod,
        "priority": result.priority,
        "priorityClassName": result.priority_class_name,
        "preemptionPolicy": result.preemption_policy,
        "outcome": str(result.outcome),  # a plain str (the StrEnum's value): YAML and JSON writers take it
        "node": result.node,
        "victims": [{"namespace": v.namespace, "name": v.name, "node": v.node, "priority": v.priority,
                     "pdbViolation": v.pdb_violation} for v in result.victims],
        "pdbViolations": result.pdb_violations,
        "candidateNodes": result.candidate_nodes,
        "tiedNodes": list(result.tied_nodes),
        "expectedDelaySeconds": result.expected_delay_seconds,
        "message": result.message,
    }


def summarize(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``summary`` of a PreemptionPreview, from its ``results`` as JSON: the one summary of the server,
    the admission webhook's dry-run annotation and the plugin (which combines results from several answers).

    ``victims`` counts every victim: those named; those ``/preview`` redacted, counted per namespace in
    ``redactedVictims`` (their namespaces stay in ``namespacesAffected``, as before redaction); and those of
    other tenants the admission webhook only counted in ``otherTenantVictims`` (docs/interfaces.md §7), whose
    total is also ``summary.otherTenantVictims`` and whose namespaces are never named."""
    outcomes = [r.get("outcome") for r in results]
    named = [v for r in results for v in r.get("victims") or []]
    redacted = [h for r in results for h in r.get("redactedVictims") or []]
    others = sum(int((r.get("otherTenantVictims") or {}).get("count") or 0) for r in results)
    summary: dict[str, Any] = {
        "pods": len(results),
        "fits": outcomes.count(Outcome.FITS),
        "preempting": outcomes.count(Outcome.PREEMPTS),
        "unschedulable": outcomes.count(Outcome.UNSCHEDULABLE),
        "rejected": outcomes.count(Outcome.REJECTED),
        "gated": outcomes.count(Outcome.GATED),
        "notScheduled": outcomes.count(Outcome.NOT_SCHEDULED),
        "victims": len(named) + sum(int(h.get("count") or 0) for h in redacted) + others,
        "pdbViolations": sum(int(r.get("pdbViolations") or 0) for r in results),
        "namespacesAffected": sorted({str(v.get("namespace")) for v in [*named, *redacted]}),
    }
    if others:
        summary["otherTenantVictims"] = others
    return summary


def preview_document(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The PreemptionPreview of results already in JSON (one entry per pod, in order)."""
    return {"apiVersion": API_VERSION, "kind": KIND, "results": list(results), "summary": summarize(results)}


def build_preview(results: Sequence[PreemptionResult]) -> dict[str, Any]:
    """The PreemptionPreview for the results of one simulation (one entry per replica, in order)."""
    return preview_document([result_json(r) for r in results])


def preview_objects(state: ClusterState, objects: Iterable[Mapping[str, Any]], *, namespace: str | None = None,
                    replicas: int | None = None, priority_class: str | None = None,
                    args: PreemptionArgs | None = None, deadline: float | None = None) -> dict[str, Any]:
    """The PreemptionPreview of ``predict_objects``: every object expanded into pods, all simulated in order."""
    return build_preview(predict_objects(state, objects, namespace=namespace, replicas=replicas,
                                         priority_class=priority_class, args=args, deadline=deadline))


def preview_exit_code(preview: Mapping[str, Any]) -> int:
    """Plugin exit status (docs/interfaces.md §5): 0 when every pod fits without evicting anyone, else 1."""
    return 0 if all(r["outcome"] == Outcome.FITS for r in preview["results"]) else 1
