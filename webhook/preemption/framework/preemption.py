"""The preemption ``Evaluator`` and the policy it runs (pkg/scheduler/framework/preemption/preemption.go,
docs/preemption.md §2-§9).

``Evaluator.preempt`` is upstream's ``Preempt`` up to the choice of a node: eligibility, the potential nodes
(``nodes_where_preemption_might_help``), the dry run over them (``dry_run_preemption``) and the pick
(``pick_one_node_for_preemption``). What a release or a plugin may do differently is the ``Interface``
(upstream ``preemption.Interface``): who may preempt, the victims on one node, how many candidates upstream samples
and how candidates are ordered; DefaultPreemption (plugins/defaultpreemption) implements it, and another release's
rules are another implementation, not a branch here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from webhook.cluster.model import Pod
from webhook.preemption.deadline import DEADLINE_STRIDE
from webhook.preemption.framework.context import PredictionContext
from webhook.preemption.framework.status import ERROR, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.types import START_NOW_NS, fit_error_message, start_key

ERR_NOT_HELPFUL = "Preemption is not helpful for scheduling"
# A node the Filter pass left without a status is UnschedulableAndUnresolvable (NodeToStatus, v1.31+).
ABSENT_STATUS = Status(UNSCHEDULABLE_AND_UNRESOLVABLE)
NOT_HELPFUL = Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_NOT_HELPFUL,))
# pickOneNodeForPreemption adds MaxInt32+1 per victim so every term of the sum is non-negative.
PRIORITY_SUM_OFFSET = 2**31


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where preemption makes room: its victims (most important first) and PDB violations."""

    node: str
    victims: tuple[Pod, ...]
    violating: frozenset[str]  # keys of victims classified as PDB-violating
    num_pdb_violations: int


@dataclass(frozen=True, slots=True)
class VictimSelection:
    """``SelectVictimsOnNode``'s answer for one node: a candidate, or the status saying why the node is none."""

    candidate: Candidate | None
    status: Status


class CandidateScore(NamedTuple):
    """``pickOneNodeForPreemption``'s default criteria in order (docs/preemption.md §9): smaller is better, field
    by field."""

    pdb_violations: int
    top_priority: int  # the highest victim priority
    priority_sum: int  # Σ(priority + 2^31) over the victims
    victim_count: int
    # Minus the earliest start among the highest-priority victims: upstream prefers the node where it is latest.
    negated_earliest_start: int


# ``CandidateScore(...)`` runs the NamedTuple's Python-level __new__; code that makes one per dry run calls the
# tuple's: ``new_score(CandidateScore, (...))``.
new_score = tuple.__new__

# The smallest ``negated_earliest_start`` possible: every start is at most START_NOW_NS.
LOWEST_NEGATED_START = -START_NOW_NS


@dataclass(slots=True)
class DryRun:
    """The dry run over the potential nodes: candidates found (all of them when exhaustive), the best and the
    nodes tying with it, and the status of each node that is not a candidate.

    A bounded dry run fills ``statuses`` only when no node is a candidate (the only time they are read), and then
    only for the nodes it checked one by one: the others are in ``counts`` alone.
    """

    candidates: list[Candidate]
    statuses: dict[str, Status]
    candidate_count: int
    best: Candidate | None = None
    tied: tuple[str, ...] = ()
    # How many nodes have each status (those of ``statuses`` included), when the dry run counted them already.
    counts: Counter[Status] | None = None


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    candidate: Candidate | None
    tied: tuple[str, ...]
    candidate_count: int
    potential_count: int
    eligible: bool
    # "" when a node is nominated; otherwise the "preemption: ..." status message.
    message: str
    # How many candidates upstream's dry run collects before it may stop (``Interface.num_candidates``).
    num_candidates: int = 0
    # Every candidate that ties with ``candidate`` on all criteria (itself included), by node name: upstream picks
    # one of them at random, and evicts that one's victims.
    tied_candidates: tuple[Candidate, ...] = ()


class Interface(Protocol):
    """What a preemption policy decides (upstream ``preemption.Interface``)."""

    def pod_eligible_to_preempt_others(self, ctx: PredictionContext, nominated_node_status: Status) -> tuple[bool, str]:
        """Whether the pod may preempt at all; the reason is "" when it may (``PodEligibleToPreemptOthers``)."""
        ...

    def select_victims_on_node(self, ctx: PredictionContext, name: str) -> VictimSelection:
        """The fewest victims on node ``name`` that make the pod fit (``SelectVictimsOnNode``)."""
        ...

    def num_candidates(self, potential_nodes: int) -> int:
        """How many candidates upstream's dry run collects before it may stop (``GetOffsetAndNumCandidates``;
        PreemptGuard dry-runs every node and reports when the sample may differ, docs/preemption.md §5)."""
        ...

    def candidate_score(self, candidate: Candidate) -> CandidateScore:
        """The candidate's place in the pick, smaller is better (``OrderedScoreFuncs``, folded into one key)."""
        ...

    def bounded_dry_run(self, ctx: PredictionContext, potential: Collection[str]) -> DryRun | None:
        """The dry run and the pick at once, without dry-running every node, where the policy can prove the
        answer equals the node-by-node one; None: the Evaluator dry-runs every node."""
        ...


def nodes_where_preemption_might_help(statuses: Mapping[str, Status], node_names: Iterable[str]) -> list[str]:
    """Nodes whose status is exactly Unschedulable; an absent status is UU (NodeToStatus, v1.31+)."""
    return [n for n in node_names if statuses.get(n, ABSENT_STATUS).code == UNSCHEDULABLE]


def default_candidate_score(candidate: Candidate) -> CandidateScore:
    """The default criteria of ``pickOneNodeForPreemption``; smaller is better.

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

    __slots__ = ("candidates", "score", "score_of")

    def __init__(self, score_of: Callable[[Candidate], CandidateScore] = default_candidate_score) -> None:
        self.score_of = score_of
        self.score: CandidateScore | None = None
        self.candidates: list[Candidate] = []

    def offer(self, candidate: Candidate) -> None:
        score = self.score_of(candidate)
        if self.score is None or score < self.score:
            self.score = score
            self.candidates = [candidate]
        elif score == self.score:
            self.candidates.append(candidate)

    def beats(self, bound: CandidateScore) -> bool:
        """Whether a node whose score is at least ``bound`` can neither win nor tie."""
        return self.score is not None and self.score < bound

    def pick(self) -> tuple[Candidate, tuple[str, ...]] | None:
        """The first tied candidate by node name, and every tied node."""
        if not self.candidates:
            return None
        tied = sorted(self.candidates, key=lambda c: c.node)
        return tied[0], tuple(c.node for c in tied)


def pick_one_node_for_preemption(
    candidates: Iterable[Candidate], score_of: Callable[[Candidate], CandidateScore] = default_candidate_score,
) -> tuple[Candidate, tuple[str, ...]] | None:
    """The best candidate and every node tying with it on all criteria; the name-ascending first one wins.

    Upstream picks among full ties in Go map order (effectively at random).
    """
    best = BestCandidates(score_of)
    for candidate in candidates:
        if candidate.victims:  # else never a candidate: DryRunPreemption makes it an Error (no_victim_error)
            best.offer(candidate)
    return best.pick()


def no_victim_error(node_name: str) -> Status:
    """DryRunPreemption's Error for a node where victim selection succeeded but evicts nobody."""
    return Status(ERROR, (f'expected at least one victim pod on node "{node_name}"',))


def victim_selection(candidate: Candidate, status: Status) -> VictimSelection:
    """The dry run's answer for a node, refusing a candidate without victims as upstream does."""
    if not candidate.victims:
        return VictimSelection(None, no_victim_error(candidate.node))
    return VictimSelection(candidate, status)


class Evaluator:
    """Runs a preemption policy (upstream ``Evaluator``, which embeds the ``Interface``)."""

    __slots__ = ("interface",)

    def __init__(self, interface: Interface) -> None:
        self.interface = interface

    def preempt(self, ctx: PredictionContext, statuses: Mapping[str, Status], *,
                potential: Collection[str] | None = None) -> PostFilterResult:
        """The PostFilter given the Filter statuses of every node (absent = UU); ``potential``: the nodes whose status
        is Unschedulable, when the Filter pass counted them already."""
        eligible, reason = self.interface.pod_eligible_to_preempt_others(
            ctx, statuses.get(ctx.pod.nominated_node_name, ABSENT_STATUS))
        if not eligible:
            return PostFilterResult(None, (), 0, 0, False, f"preemption: {reason}")
        names = ctx.view.node_names
        if potential is None:
            potential = nodes_where_preemption_might_help(statuses, names)
        if not potential:
            message = fit_error_message(len(names), {NOT_HELPFUL: len(names)})
            return PostFilterResult(None, (), 0, 0, True, f"preemption: {message}")
        dry = self.dry_run_preemption(ctx, potential)
        num_candidates = self.interface.num_candidates(len(potential))
        if dry.best is None:
            counts = Counter(dry.statuses.values()) if dry.counts is None else Counter(dry.counts)
            errors = sorted(r for s, n in counts.items() if s.code == ERROR for r in s.reasons for _ in range(n))
            if errors:
                # Upstream: with no candidate, DryRunPreemption's errors become PostFilter's Error status.
                return PostFilterResult(None, (), 0, len(potential), True, f"preemption: {'; '.join(errors)}",
                                        num_candidates)
            counts[NOT_HELPFUL] += len(names) - counts.total()
            return PostFilterResult(None, (), 0, len(potential), True,
                                    f"preemption: {fit_error_message(len(names), counts)}", num_candidates)
        tied = set(dry.tied)
        return PostFilterResult(dry.best, dry.tied, dry.candidate_count, len(potential), True, "", num_candidates,
                                tuple(sorted((c for c in dry.candidates if c.node in tied), key=lambda c: c.node)))

    def dry_run_preemption(self, ctx: PredictionContext, potential: Collection[str], *,
                           exhaustive: bool = False) -> DryRun:
        """Dry-run every potential node (no sampling) and pick the best; ``exhaustive`` keeps every candidate
        (else the policy's bounded dry run may answer without dry-running every node)."""
        if not exhaustive:
            bounded = self.interface.bounded_dry_run(ctx, potential)
            if bounded is not None:
                return bounded
        candidates: list[Candidate] = []
        statuses: dict[str, Status] = {}
        for i, name in enumerate(sorted(potential)):
            if not i % DEADLINE_STRIDE:
                ctx.check_deadline()
            selection = self.interface.select_victims_on_node(ctx, name)
            if selection.candidate is not None:
                candidates.append(selection.candidate)
            else:
                statuses[name] = selection.status
        picked = self.select_candidate(candidates)
        best, tied = picked if picked is not None else (None, ())
        return DryRun(candidates, statuses, len(candidates), best, tied)

    def select_candidate(self, candidates: Iterable[Candidate]) -> tuple[Candidate, tuple[str, ...]] | None:
        """The best candidate by the policy's order, and every node tying with it (``SelectCandidate``)."""
        return pick_one_node_for_preemption(candidates, self.interface.candidate_score)
