"""How a prediction is reported: AdmissionResponse warnings, the pod annotation and audit annotations.

Everything here is told to an ``Audience`` (``disclosure.py``): victims of other tenants are counted, never
named. Warnings obey the API server's limits: each under 120 characters (the pending reason up to 256, what the
API server keeps of one warning), all together within 4,096, most important first (the API server truncates
beyond that, so we drop the least important ones ourselves).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from webhook.guardrails.disclosure import (
    Audience,
    count_by_namespace,
    other_tenants_phrase,
    plural,
    redact_preview_document,
)
from webhook.preemption.preview import build_preview
from webhook.preemption.results import Outcome, PreemptionResult, VictimInfo

MAX_WARNING_LENGTH = 119  # "each under 120 characters"
# What the API server keeps of one warning when it has to cut (apiserver endpoints/filters/warning.go,
# truncateItemRunes): why a pod would stay Pending is the scheduler's whole message, one count per filter.
API_SERVER_WARNING_LENGTH = 256
MAX_WARNINGS_TOTAL = 4096
_ELLIPSIS = "..."


def truncate(text: str, limit: int = MAX_WARNING_LENGTH) -> str:
    """Cut ``text`` to at most ``limit`` characters, marking the cut with ``...``."""
    if len(text) <= limit:
        return text
    return text[: limit - len(_ELLIPSIS)] + _ELLIPSIS


def fit_warnings(candidates: Sequence[str], total_limit: int = MAX_WARNINGS_TOTAL) -> tuple[str, ...]:
    """Keep warnings in order while they fit; the dropped tail is replaced by one ``... and N more`` line."""
    warnings = [truncate(w, API_SERVER_WARNING_LENGTH) for w in candidates if w]
    if sum(map(len, warnings)) <= total_limit:
        return tuple(warnings)
    kept: list[str] = []
    used = 0
    for index, warning in enumerate(warnings):
        remaining_after = len(warnings) - index - 1
        reserve = len(_more_warnings(remaining_after)) if remaining_after else 0
        if used + len(warning) + reserve > total_limit:
            # The previous step reserved room for exactly this line.
            kept.append(_more_warnings(len(warnings) - index))
            break
        kept.append(warning)
        used += len(warning)
    return tuple(kept)


def _more_warnings(count: int) -> str:
    return f"... and {plural(count, 'more warning')}"


def join_limited(items: Sequence[str], budget: int) -> str:
    """``a, b, c`` within ``budget`` characters, ending in ``+N more`` when items had to be left out."""
    text = ", ".join(items)
    if len(text) <= budget:
        return text
    for count in range(len(items) - 1, -1, -1):
        head = ", ".join(truncate(item, 40) for item in items[:count])
        rest = f"+{len(items) - count} more"
        candidate = f"{head}, {rest}" if head else rest
        if len(candidate) <= budget:
            return candidate
    return truncate(f"+{len(items)} more", budget)


def namespace_breakdown(counts: Mapping[str, int], budget: int = 60, hidden: int = 0,
                        unnamed: str = "of other tenants") -> str:
    """``3 in team-b, 1 in team-c`` (most victims first) within ``budget`` characters; ``hidden`` victims of
    other tenants end it as ``2 of other tenants`` (always kept: the cut falls on the named part)."""
    tail = f"{hidden} {unnamed}" if hidden else ""
    if not counts:
        return tail
    if tail:
        budget -= len(tail) + 2
    named = join_limited([f"{count} in {ns}" for ns, count in counts.items()], max(budget, 8))
    return f"{named}, {tail}" if tail else named


def victims_breakdown(victims: Sequence[VictimInfo], audience: Audience, budget: int = 60) -> str:
    """``namespace_breakdown`` of ``victims`` as ``audience`` may hear it."""
    named, hidden = audience.split(victims)
    return namespace_breakdown(count_by_namespace(named), budget, len(hidden), audience.unnamed)


def pdb_note(count: int) -> str:
    return f" ({plural(count, 'PDB violation')})" if count else ""


def preemption_summary(outcome: PreemptionResult, audience: Audience) -> str:
    """The headline warning, e.g. ``would preempt 3 pods in team-b on node-7 (1 PDB violation)``, or ``... 3 pods
    of other tenants ...`` when none of them is in the requester's tenant."""
    named, hidden = audience.split(outcome.victims)
    counts = count_by_namespace(named)
    head = f"would preempt {plural(len(outcome.victims), 'pod')} "
    # The node and the PDB count always survive; the namespace list gets what is left.
    tail = f" on {truncate(outcome.node or '?', 30)}{pdb_note(outcome.pdb_violations)}"
    budget = MAX_WARNING_LENGTH - len(head) - len(tail)
    if len(counts) == 1 and not hidden:
        where = truncate(f"in {next(iter(counts))}", budget)
    elif not counts:
        where = audience.unnamed
    else:
        where = f"({namespace_breakdown(counts, budget - 2, len(hidden), audience.unnamed)})"
    return truncate(head + where + tail)


def victim_line(victim_namespace: str, victim_name: str, priority: int, pdb_violation: bool) -> str:
    note = ", PDB violation" if pdb_violation else ""
    return truncate(f"victim {victim_namespace}/{victim_name} (priority {priority}{note})")


def prediction_warnings(outcome: PreemptionResult, audience: Audience) -> list[str]:
    """What the prediction says, most important first: the headline, then the victims ``audience`` may hear
    named (PDB violators first), then one line counting the victims of other tenants."""
    if outcome.outcome == Outcome.UNSCHEDULABLE:
        reason = f": {outcome.message}" if outcome.message else ""
        return [truncate(f"no node fits this pod even after preemption; it would stay Pending{reason}",
                         API_SERVER_WARNING_LENGTH)]
    if outcome.outcome in (Outcome.GATED, Outcome.NOT_SCHEDULED):
        # Neither is a preemption (no guardrail applies); the message names only the pod's own gates or scheduler.
        return [truncate(outcome.message, API_SERVER_WARNING_LENGTH)] if outcome.message else []
    if outcome.outcome != Outcome.PREEMPTS or not outcome.victims:
        return []
    named, hidden = audience.split(outcome.victims)
    named.sort(key=lambda v: not v.pdb_violation)  # stable: keeps upstream order
    lines = [preemption_summary(outcome, audience),
             *(victim_line(v.namespace, v.name, v.priority, v.pdb_violation) for v in named)]
    if hidden and named:  # with no victim named, the headline already says "of other tenants"
        lines.append(truncate(f"and {other_tenants_phrase(hidden, audience.unnamed)}"))
    return lines


def compact_prediction(outcome: PreemptionResult, audience: Audience) -> dict[str, Any]:
    named, hidden = audience.split(outcome.victims)
    compact: dict[str, Any] = {
        "outcome": outcome.outcome,
        "node": outcome.node,
        "victims": len(outcome.victims),
        "namespacesAffected": sorted({v.namespace for v in named}),
        "pdbViolations": outcome.pdb_violations,
    }
    if hidden:
        compact["otherTenantVictims"] = len(hidden)
    return compact


def to_json(value: object) -> str:
    """Compact JSON (keys in insertion order, non-ASCII as UTF-8)."""
    return orjson.dumps(value).decode()


def prediction_annotation(outcome: PreemptionResult, audience: Audience, *, dry_run: bool = False,
                          compact_json: str | None = None) -> str:
    """The ``preemptguard.io/prediction`` value: compact JSON, or on a dry run the PreemptionPreview (what
    ``kubectl preempt-preview`` reads back from the server-side dry run), both as ``audience`` may see them.

    ``compact_json``: ``to_json(compact_prediction(outcome, audience))`` when the caller has encoded it already.
    """
    if dry_run:
        return to_json(redact_preview_document(build_preview([outcome]), [outcome], audience))
    return compact_json if compact_json is not None else to_json(compact_prediction(outcome, audience))


def csv(items: Iterable[str]) -> str:
    return ",".join(items)
