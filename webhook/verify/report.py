"""The ``VerificationReport`` (docs/interfaces.md §8): ``-o json`` and ``-o table``, and the exit status."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from webhook.observe.compare import ERROR, NODE_NOT_COMPARED, SAMPLING, fits_node_compared
from webhook.preemption.results import Outcome
from webhook.verify.runner import VerifyResult

API_VERSION = "preemptguard.io/v1alpha1"
KIND = "VerificationReport"
OUTPUTS = ("table", "json")
EXIT_AGREE, EXIT_DISAGREE, EXIT_ERROR = 0, 1, 2


def is_tied(result: VerifyResult) -> bool:
    """A preemption, or a pod that fits, whose node upstream picks at random among several that tie on every
    criterion (preemption's candidate order; the Score plugins' total)."""
    predicted = result.predicted
    return (predicted is not None and predicted.outcome in (Outcome.PREEMPTS, Outcome.FITS)
            and len(predicted.tied_nodes) > 1)


def node_not_compared(result: VerifyResult) -> bool:
    """A ``Fits`` agreeing on the outcome whose node was not held against the scheduler's (no node claimed: the
    scheduler scores a sample of the feasible nodes, or no Score plugin runs)."""
    return (result.observed.outcome == Outcome.FITS and result.comparison.agree
            and not fits_node_compared(result.comparison))


def result_json(result: VerifyResult) -> dict[str, Any]:
    predicted, observed, comparison = result.predicted, result.observed, result.comparison
    entry: dict[str, Any] = {"scenario": result.scenario} if result.scenario else {}
    entry["pod"] = result.pod
    entry["predicted"] = None if predicted is None else {
        "outcome": predicted.outcome, "node": predicted.node, "victims": list(predicted.victims),
        "tiedNodes": list(predicted.tied_nodes), "candidateNodes": predicted.candidate_nodes,
        "message": predicted.message,
    }
    if predicted is not None and len(predicted.tied_nodes) > 1:
        entry["predicted"]["tiedNodeVictims"] = {node: list(victims) for node, victims in predicted.tied_victims}
    entry["observed"] = {"outcome": observed.outcome, "node": observed.node, "victims": list(observed.victims),
                         "message": observed.message}
    if observed.bound_node:
        entry["observed"]["boundNode"] = observed.bound_node
    if observed.log_only_victims:
        entry["observed"]["logOnlyVictims"] = list(observed.log_only_victims)
    entry.update(agree=comparison.agree, why=comparison.why, verdict=str(comparison.verdict),
                 compared=list(comparison.compared))
    if node_not_compared(result):
        entry["notCompared"] = NODE_NOT_COMPARED
    if result.fidelity:
        entry["fidelity"] = list(result.fidelity)
    if comparison.explained_by:
        entry["explainedBy"] = comparison.explained_by
    return entry


def summary(results: Sequence[VerifyResult]) -> dict[str, Any]:
    return {
        "pods": len(results),
        "agree": sum(r.comparison.agree for r in results),
        "disagree": sum(not r.comparison.agree and r.observed.outcome != ERROR for r in results),
        "errors": sum(r.observed.outcome == ERROR for r in results),
        "tied": sum(is_tied(r) for r in results),
        "explainedBySampling": sum(r.comparison.explained_by == SAMPLING for r in results),
        "scenarios": len(dict.fromkeys(r.scenario for r in results)),
        "nodeNotCompared": sum(node_not_compared(r) for r in results),
        "scenariosWithFidelityNotes": len({r.scenario for r in results if r.fidelity}),
    }


def report_json(results: Sequence[VerifyResult], kubernetes_version: str,
                prediction_release: str = "") -> dict[str, Any]:
    report: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "kubernetesVersion": kubernetes_version}
    if prediction_release:
        report["predictionRelease"] = prediction_release
    report.update(results=[result_json(r) for r in results], summary=summary(results))
    return report


def exit_status(results: Sequence[VerifyResult]) -> int:
    """0 every pod agrees; 1 a disagreement; 2 an observation could not be made (or nothing was verified)."""
    if not results or any(r.observed.outcome == ERROR for r in results):
        return EXIT_ERROR
    return EXIT_AGREE if all(r.comparison.agree for r in results) else EXIT_DISAGREE


def _columns(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def _victims(victims: Sequence[str]) -> str:
    return str(len(victims))


def format_table(results: Sequence[VerifyResult], kubernetes_version: str, prediction_release: str = "") -> str:
    scenarios = any(r.scenario for r in results)
    head = [*(["SCENARIO"] if scenarios else []), "POD", "PREDICTED", "NODE", "VICTIMS", "OBSERVED", "NODE",
            "VICTIMS", "AGREE"]
    rows = [head]
    for r in results:
        p, o = r.predicted, r.observed
        rows.append([*([r.scenario or "-"] if scenarios else []), r.pod,
                     p.outcome if p else "-", (p.node or "<none>") if p else "-", _victims(p.victims) if p else "-",
                     o.outcome, o.node or "<none>", _victims(o.victims),
                     "yes" if r.comparison.agree else ("error" if o.outcome == ERROR else "NO")])
    lines = [_columns(rows), ""] if results else []
    notes = [r for r in results if r.comparison.why]
    for r in notes:
        where = f"{r.scenario} " if r.scenario else ""
        lines.append(f"{where}{r.pod}: {r.comparison.why}")
    if notes:
        lines.append("")
    fidelity = {(r.scenario, note): None for r in results for note in r.fidelity}
    for scenario, note in fidelity:
        lines.append(f"fidelity{' ' + scenario if scenario else ''}: {note}")
    if fidelity:
        lines.append("")
    s = summary(results)
    not_compared = f", {s['nodeNotCompared']} Fits: {NODE_NOT_COMPARED}" if s["nodeNotCompared"] else ""
    predicted_as = "" if not prediction_release or kubernetes_version.startswith(prediction_release + ".") else (
        f" (predicted as {prediction_release})")
    lines.append(f"kube-scheduler {kubernetes_version}{predicted_as}: {s['agree']}/{s['pods']} pods agree"
                 f" ({s['disagree']} disagree, {s['errors']} not observed, {s['tied']} tied{not_compared})")
    return "\n".join(lines)


def render(results: Sequence[VerifyResult], kubernetes_version: str, output: str, *,
           prediction_release: str = "") -> str:
    if output == "json":
        return json.dumps(report_json(results, kubernetes_version, prediction_release), indent=2)
    return format_table(results, kubernetes_version, prediction_release)
