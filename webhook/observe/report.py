"""A decided prediction as it is reported: tenant-redacted (docs/interfaces.md §7), and the summary kept for
``GET /debug/predictions``.

The log line and the Event on the pod name victims only in the preemptor's own tenant; victims of other tenants
are counts (``otherTenantVictims``), with no namespace name; under ``guardrails.disclosure: cluster`` everything
is named. The summary names no pod or namespace at all. Node names are no tenant's secret (the pod annotation
carries them too).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from webhook.cluster.model import Namespace
from webhook.config import GuardrailsConfig
from webhook.guardrails.disclosure import COUNTS_ONLY, Audience, audience_of, plural
from webhook.observe.compare import ERROR, Verdict
from webhook.observe.tracker import Decision

API_VERSION = "preemptguard.io/v1alpha1"
SUMMARY_KIND = "PredictionSummary"
# How many of the latest mismatches GET /debug/predictions lists.
DEFAULT_RECENT_MISMATCHES = 20
# An Event's note is at most 1 KiB (pkg/apis/core/validation/events.go, NoteLengthLimit); one line is enough.
EVENT_MESSAGE_LIMIT = 1024


def audience_for(decision: Decision, namespaces: Mapping[str, Namespace], guardrails: GuardrailsConfig) -> Audience:
    """The preemptor's tenant: who may read its Events, and what its logs and summary may name."""
    return audience_of(decision.record.namespace, namespaces, guardrails.tenant_label, guardrails.disclosure)


def _split(victims: Sequence[str], audience: Audience) -> tuple[list[str], int]:
    named = [v for v in victims if audience.names_namespace(v.partition("/")[0])]
    return named, len(victims) - len(named)


def _side(outcome: str, node: str | None, victims: Sequence[str], audience: Audience) -> dict[str, Any]:
    named, hidden = _split(victims, audience)
    side: dict[str, Any] = {"outcome": outcome, "node": node, "victims": named}
    if hidden:
        side["otherTenantVictims"] = hidden
    return side


def _victims_phrase(victims: Sequence[str], audience: Audience) -> str:
    named, hidden = _split(victims, audience)
    parts = [*sorted(named), *([f"{plural(hidden, 'pod')} of other tenants"] if hidden else [])]
    return ", ".join(parts) if parts else "none"


def redacted_why(decision: Decision, audience: Audience) -> str:
    """``compare``'s reason, unless it names a victim the audience may not see (only ``victims_differ`` names
    victims): then the same facts with other tenants' victims as counts."""
    comparison = decision.comparison
    predicted, observed = decision.record.predicted, decision.observed
    if comparison.verdict != Verdict.VICTIMS_DIFFER:
        return comparison.why
    if not (_split(predicted.victims, audience)[1] or _split(observed.victims, audience)[1]):
        return comparison.why
    return (f"on {observed.node} the scheduler evicted {_victims_phrase(observed.victims, audience)};"
            f" predicted on {predicted.node}: {_victims_phrase(predicted.victims, audience)}.")


def render_decision(decision: Decision, audience: Audience) -> dict[str, Any]:
    """The JSON fields of one decision (the log line's fields, one entry of the summary)."""
    record, observed, comparison = decision.record, decision.observed, decision.comparison
    predicted = record.predicted
    entry: dict[str, Any] = {
        "namespace": record.namespace,
        "pod": decision.pod,
        "predictionId": record.prediction_id,
        "verdict": str(comparison.verdict),
        "why": redacted_why(decision, audience),
        "predicted": {**_side(predicted.outcome, predicted.node, predicted.victims, audience),
                      "tiedNodes": list(predicted.tied_nodes)},
        "observed": {**_side(observed.outcome, observed.node, observed.victims, audience),
                     "message": observed.message},
        "seconds": round(decision.seconds, 3),
    }
    if comparison.explained_by:
        entry["explainedBy"] = comparison.explained_by
    return entry


def anonymous_decision(decision: Decision) -> dict[str, Any]:
    """A decision as ``GET /debug/predictions`` lists it: the verdict, nodes and outcomes, every victim counted
    (``otherTenantVictims``) and no pod or namespace named, since nobody authenticated its reader."""
    entry = render_decision(decision, COUNTS_ONLY)
    del entry["namespace"], entry["pod"]
    return entry


def mismatch_line(decision: Decision, audience: Audience) -> str:
    """One readable line (the log message, the Event's message): what was predicted, what happened, why."""
    predicted, observed = decision.record.predicted, decision.observed
    said = f"PreemptGuard predicted {predicted.outcome}"
    if predicted.node:
        said += f" on {predicted.node}"
    if predicted.victims:
        said += f" evicting {_victims_phrase(predicted.victims, audience)}"
    if observed.outcome == ERROR:
        did = f"the scheduler's decision was not observed ({observed.message})"
    else:
        did = f"the scheduler's outcome was {observed.outcome}"
        if observed.node:
            did += f" on {observed.node}"
        if observed.victims:
            did += f" evicting {_victims_phrase(observed.victims, audience)}"
    why = redacted_why(decision, audience)
    line = f"{said}; {did} [{decision.comparison.verdict}]" + (f": {why}" if why else "")
    return line if len(line) <= EVENT_MESSAGE_LIMIT else line[:EVENT_MESSAGE_LIMIT - 3] + "..."


class PredictionSummary:
    """Counts per verdict since start-up and the latest mismatches, already anonymous (``GET /debug/predictions``)."""

    def __init__(self, recent: int = DEFAULT_RECENT_MISMATCHES) -> None:
        self.counts: dict[Verdict, int] = dict.fromkeys(Verdict, 0)
        self.recent: deque[dict[str, Any]] = deque(maxlen=recent)

    def add(self, decision: Decision, rendered: Mapping[str, Any], at: datetime) -> None:
        verdict = decision.comparison.verdict
        self.counts[verdict] += 1
        if verdict != Verdict.AGREE:
            self.recent.appendleft({"decidedAt": at.isoformat(timespec="seconds"), **rendered})

    def agreement(self) -> float | None:
        """agree / (every verdict but unobserved): the share of observed predictions that were right."""
        observed = sum(count for verdict, count in self.counts.items() if verdict != Verdict.UNOBSERVED)
        return self.counts[Verdict.AGREE] / observed if observed else None

    def document(self, *, observing: bool, following: int, window_seconds: float | None) -> dict[str, Any]:
        return {"apiVersion": API_VERSION, "kind": SUMMARY_KIND, "observing": observing, "following": following,
                "windowSeconds": window_seconds, "verdicts": {str(v): n for v, n in self.counts.items()},
                "agreement": self.agreement(), "recentMismatches": list(self.recent)}
