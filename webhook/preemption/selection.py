"""``pickOneNodeForPreemption`` (docs/preemption.md §9) over every candidate, with a deterministic tie-break."""

from __future__ import annotations

from collections.abc import Iterable

from webhook.preemption.results import PRIORITY_SUM_OFFSET, Candidate, ScoreTuple, start_key


def candidate_score(candidate: Candidate) -> ScoreTuple:
    """Smaller is better: (PDB violations, highest victim priority, Σ(priority + 2^31), victims, -latest start).

    The last term is the earliest start among the node's highest-priority victims; upstream prefers
    the node where that time is latest. An unset start time is "now".
    """
    victims = candidate.victims
    top = victims[0].effective_priority
    total = sum(v.effective_priority + PRIORITY_SUM_OFFSET for v in victims)
    earliest = min(start_key(v) for v in victims if v.effective_priority == top)
    return (candidate.num_pdb_violations, top, total, len(victims), -earliest)


def pick_preemption_node(candidates: Iterable[Candidate]) -> tuple[Candidate, tuple[str, ...]] | None:
    """The best candidate and every node tying with it on all criteria; the name-ascending first one wins.

    Upstream picks among full ties in Go map order (effectively at random).
    """
    best: ScoreTuple | None = None
    tied: list[Candidate] = []
    for candidate in candidates:
        if not candidate.victims:
            continue  # never a candidate: DryRunPreemption turns it into an Error status (victims.candidate_outcome)
        score = candidate_score(candidate)
        if best is None or score < best:
            best, tied = score, [candidate]
        elif score == best:
            tied.append(candidate)
    if not tied:
        return None
    tied.sort(key=lambda c: c.node)
    return tied[0], tuple(c.node for c in tied)
