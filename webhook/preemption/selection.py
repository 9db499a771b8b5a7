"""``pickOneNodeForPreemption`` (docs/preemption.md §9) over every candidate, with a deterministic tie-break.

pkg/scheduler/framework/preemption/preemption.go (pickOneNodeForPreemption).
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.preemption.results import PRIORITY_SUM_OFFSET, Candidate, CandidateScore, new_score, start_key


def candidate_score(candidate: Candidate) -> CandidateScore:
    """The candidate's place in upstream's order; smaller is better.

    The last term is the earliest start among the node's highest-priority victims; upstream prefers
    the node where that time is latest. An unset start time is "now".
    """
    victims = candidate.victims
    top = victims[0].effective_priority
    total = sum(v.effective_priority + PRIORITY_SUM_OFFSET for v in victims)
    earliest = min(start_key(v) for v in victims if v.effective_priority == top)
    return new_score(CandidateScore, (candidate.num_pdb_violations, top, total, len(victims), -earliest))


class BestCandidates:
    """The best score seen so far and every candidate that has it (the running minimum of the pick)."""

    __slots__ = ("candidates", "score")

    def __init__(self) -> None:
        self.score: CandidateScore | None = None
        self.candidates: list[Candidate] = []

    def offer(self, candidate: Candidate) -> None:
        score = candidate_score(candidate)
        if self.score is None or score < self.score:
            self.score = score
            self.candidates = [candidate]
        elif score == self.score:
            self.candidates.append(candidate)

    def beats(self, bound: CandidateScore) -> bool:
        """Whether a node whose score is at least ``bound`` can neither win nor tie."""
        return self.score is not None and self.score < bound

    def pick(self) -> tuple[Candidate, tuple[str, ...]] | None:
        """The name-ascending first best candidate and the nodes of every best one; None without candidates."""
        if not self.candidates:
            return None
        tied = sorted(self.candidates, key=lambda c: c.node)
        return tied[0], tuple(c.node for c in tied)


def pick_preemption_node(candidates: Iterable[Candidate]) -> tuple[Candidate, tuple[str, ...]] | None:
    """The best candidate and every node tying with it on all criteria; the name-ascending first one wins.

    Upstream picks among full ties in Go map order (effectively at random).
    """
    best = BestCandidates()
    for candidate in candidates:
        if candidate.victims:  # else never a candidate: DryRunPreemption makes it an Error (victims.candidate_outcome)
            best.offer(candidate)
    return best.pick()
