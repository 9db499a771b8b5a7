"""How a prediction is reported: AdmissionResponse warnings, the pod annotation and audit annotations.

Warnings obey the API server's limits: each under 120 characters, all together within 4,096, most
important first (the API server truncates beyond that, so we drop the least important ones ourselves).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from webhook.preemption.preview import build_preview
from webhook.preemption.results import PREEMPTS, UNSCHEDULABLE_OUTCOME, PreemptionResult, VictimInfo

PREDICTION_ANNOTATION = "preemptguard.io/prediction"
MAX_WARNING_LENGTH = 119  # "each under 120 characters"
MAX_WARNINGS_TOTAL = 4096
_ELLIPSIS = "..."


def truncate(text: str, limit: int = MAX_WARNING_LENGTH) -> str:
    """Cut ``text`` to at most ``limit`` characters, marking the cut with ``...``."""
    if len(text) <= limit:
        return text
    return text[: limit - len(_ELLIPSIS)] + _ELLIPSIS


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def fit_warnings(candidates: Sequence[str], total_limit: int = MAX_WARNINGS_TOTAL) -> tuple[str, ...]:
    """Keep warnings in order while they fit; the dropped tail is replaced by one ``... and N more`` line."""
    warnings = [truncate(w) for w in candidates if w]
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


def namespace_breakdown(counts: Mapping[str, int], budget: int = 60) -> str:
    """``3 in team-b, 1 in team-c`` (most victims first) within ``budget`` characters."""
    return join_limited([f"{count} in {ns}" for ns, count in counts.items()], budget)


def count_by_namespace(victims: Iterable[VictimInfo]) -> dict[str, int]:
    """Victim counts per namespace, most victims first (then by name)."""
    counts: dict[str, int] = {}
    for victim in victims:
        counts[victim.namespace] = counts.get(victim.namespace, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def namespaces_affected(outcome: PreemptionResult) -> list[str]:
    return sorted({v.namespace for v in outcome.victims})


def pdb_note(count: int) -> str:
    return f" ({plural(count, 'PDB violation')})" if count else ""


def preemption_summary(outcome: PreemptionResult) -> str:
    """The headline warning, e.g. ``would preempt 3 pods in team-b on node-7 (1 PDB violation)``."""
    counts = count_by_namespace(outcome.victims)
    head = f"would preempt {plural(len(outcome.victims), 'pod')} "
    # The node and the PDB count always survive; the namespace list gets what is left.
    tail = f" on {truncate(outcome.node or '?', 30)}{pdb_note(outcome.pdb_violations)}"
    budget = MAX_WARNING_LENGTH - len(head) - len(tail)
    if len(counts) == 1:
        where = truncate(f"in {next(iter(counts))}", budget)
    else:
        where = f"({namespace_breakdown(counts, budget - 2)})"
    return truncate(head + where + tail)


def victim_line(victim_namespace: str, victim_name: str, priority: int, pdb_violation: bool) -> str:
    note = ", PDB violation" if pdb_violation else ""
    return truncate(f"victim {victim_namespace}/{victim_name} (priority {priority}{note})")


def prediction_warnings(outcome: PreemptionResult) -> list[str]:
    """What the prediction says, most important first: the headline, then victims (PDB violators first)."""
    if outcome.outcome == UNSCHEDULABLE_OUTCOME:
        reason = f": {outcome.message}" if outcome.message else ""
        return [truncate(f"no node fits this pod even after preemption; it would stay Pending{reason}")]
    if outcome.outcome != PREEMPTS or not outcome.victims:
        return []
    victims = sorted(outcome.victims, key=lambda v: not v.pdb_violation)  # stable: keeps upstream order
    return [preemption_summary(outcome),
            *(victim_line(v.namespace, v.name, v.priority, v.pdb_violation) for v in victims)]


def compact_prediction(outcome: PreemptionResult) -> dict[str, Any]:
    return {
        "outcome": outcome.outcome,
        "node": outcome.node,
        "victims": len(outcome.victims),
        "namespacesAffected": namespaces_affected(outcome),
        "pdbViolations": outcome.pdb_violations,
    }


def to_json(value: object) -> str:
    """Compact JSON (keys in insertion order, non-ASCII as UTF-8)."""
    return orjson.dumps(value).decode()


def prediction_annotation(outcome: PreemptionResult, *, dry_run: bool = False, compact_json: str | None = None) -> str:
    """The ``preemptguard.io/prediction`` value: compact JSON, or the full PreemptionPreview on a dry run
    (what ``kubectl preempt-preview`` reads back from the server-side dry run).

    ``compact_json``: ``to_json(compact_prediction(outcome))`` when the caller has encoded it already.
    """
    if dry_run:
        return to_json(build_preview([outcome]))
    return compact_json if compact_json is not None else to_json(compact_prediction(outcome))


def csv(items: Iterable[str]) -> str:
    return ",".join(items)
