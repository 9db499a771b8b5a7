"""DefaultPreemption's PostFilter (docs/preemption.md §2-§9): eligibility, potential nodes, the dry run, the pick.

pkg/scheduler/framework/preemption/preemption.go (Preempt, findCandidates, DryRunPreemption) and
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go (PodEligibleToPreemptOthers). Each
step is a function tests can call on its own: ``pod_eligible_to_preempt_others`` →
``nodes_where_preemption_might_help`` → ``dry_run_preemption`` → ``pick_preemption_node``; ``preempt`` runs them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from webhook.cluster.model import PREEMPT_NEVER
from webhook.preemption.context import DEADLINE_STRIDE, PredictionContext
from webhook.preemption.filtering import FilterOutcome, node_info
from webhook.preemption.filters import ERR_NOT_HELPFUL, ERROR, UNRESOLVABLE, UNSCHEDULABLE, Status
from webhook.preemption.results import Candidate
from webhook.preemption.search import bounded_dry_run
from webhook.preemption.selection import pick_preemption_node
from webhook.preemption.victims import DryRun, DryRunOutcome, select_victims_by_resources, select_victims_on_node

ABSENT_STATUS = Status(UNRESOLVABLE)
NOT_HELPFUL = Status(UNRESOLVABLE, (ERR_NOT_HELPFUL,))
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."


# ---- step 1: eligibility ----------------------------------------------------------------------------

def pod_eligible_to_preempt_others(ctx: PredictionContext, statuses: Mapping[str, Status]) -> tuple[bool, str]:
    """``PodEligibleToPreemptOthers`` (docs/preemption.md §3); the reason is "" when eligible."""
    pod = ctx.pod
    if pod.preemption_policy == PREEMPT_NEVER:
        return False, NOT_ELIGIBLE_NEVER
    nominated = pod.nominated_node_name
    if nominated:
        if statuses.get(nominated, ABSENT_STATUS).code == UNRESOLVABLE:
            return True, ""
        if nominated in ctx.view.state.nodes:
            for other in ctx.view.pods_on(nominated):
                if other.effective_priority < ctx.priority and other.deleting and other.preempted_by_scheduler:
                    return False, NOT_ELIGIBLE_TERMINATING
    return True, ""


# ---- step 2: potential nodes -----------------------------------------------------------------------

def nodes_where_preemption_might_help(statuses: Mapping[str, Status], node_names: Iterable[str]) -> list[str]:
    """Nodes whose status is exactly Unschedulable; an absent status is UU (NodeToStatus, v1.31+)."""
    return [n for n in node_names if statuses.get(n, ABSENT_STATUS).code == UNSCHEDULABLE]


# ---- step 3: dry run ---------------------------------------------------------------------------------

def dry_run_node(ctx: PredictionContext, name: str) -> DryRunOutcome:
    """``SelectVictimsOnNode`` on one node (fast arithmetic when the pod is resource-only)."""
    nominated = ctx.nominated_pods(name)
    if ctx.resource_only:
        return select_victims_by_resources(ctx.pod, ctx.view.summary(name), nominated, ctx.pdbs)
    return select_victims_on_node(ctx.pod, node_info(ctx, name), ctx.cycle, nominated, ctx.pdbs)


def dry_run_preemption(ctx: PredictionContext, potential: Collection[str], *, exhaustive: bool = False) -> DryRun:
    """Dry-run every potential node (no sampling) and pick the best; ``exhaustive`` keeps every candidate.

    For resource-only pods (unless ``exhaustive``) the branch and bound of search.py skips exact victim
    selection on the nodes that can neither win nor tie.
    """
    if ctx.resource_only and not exhaustive:
        return bounded_dry_run(ctx, potential)
    candidates: list[Candidate] = []
    statuses: dict[str, Status] = {}
    for i, name in enumerate(sorted(potential)):
        if not i % DEADLINE_STRIDE:
            ctx.check_deadline()
        outcome = dry_run_node(ctx, name)
        if outcome.candidate is not None:
            candidates.append(outcome.candidate)
        else:
            statuses[name] = outcome.status
    picked = pick_preemption_node(candidates)
    best, tied = picked if picked is not None else (None, ())
    return DryRun(candidates, statuses, len(candidates), best, tied)


# ---- step 4: the whole PostFilter ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PostFilterResult:
    candidate: Candidate | None
    tied: tuple[str, ...]
    candidate_count: int
    potential_count: int
    eligible: bool
    # "" when a node is nominated; otherwise the "preemption: ..." status message.
    message: str
    # Every candidate that ties with ``candidate`` on all criteria (itself included), by node name.
    tied_candidates: tuple[Candidate, ...] = ()


def nodes_available_message(total: int, statuses: Iterable[Status]) -> str:
    """FitError text: ``0/N nodes are available: <count reason, ...>.`` (reasons sorted as strings)."""
    return nodes_available_message_from_counts(total, Counter(statuses))


def nodes_available_message_from_counts(total: int, statuses: Mapping[Status, int]) -> str:
    """``nodes_available_message`` given how many nodes have each status."""
    counts: Counter[str] = Counter()
    for status, n in statuses.items():
        for reason in status.reasons:
            counts[reason] += n
    histogram = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items() if n))
    return f"0/{total} nodes are available: {histogram}." if histogram else f"0/{total} nodes are available."


def preempt(ctx: PredictionContext, statuses: Mapping[str, Status], *,
            filtered: FilterOutcome | None = None) -> PostFilterResult:
    """DefaultPreemption's PostFilter given the Filter statuses of every node (absent = UU).

    ``filtered`` (the outcome that produced ``statuses``) lends its precomputed potential nodes.
    """
    eligible, reason = pod_eligible_to_preempt_others(ctx, statuses)
    if not eligible:
        return PostFilterResult(None, (), 0, 0, False, f"preemption: {reason}")
    names = ctx.view.node_names
    potential: Collection[str]
    if filtered is not None and filtered.potential is not None:
        potential = filtered.potential
    else:
        potential = nodes_where_preemption_might_help(statuses, names)
    if not potential:
        message = nodes_available_message_from_counts(len(names), {NOT_HELPFUL: len(names)})
        return PostFilterResult(None, (), 0, 0, True, f"preemption: {message}")
    dry = dry_run_preemption(ctx, potential)
    errors = sorted(r for s in dry.statuses.values() if s.code == ERROR for r in s.reasons)
    if dry.best is None and errors:
        # Upstream: with no candidate, DryRunPreemption's errors become PostFilter's Error status.
        return PostFilterResult(None, (), 0, len(potential), True, f"preemption: {'; '.join(errors)}")
    if dry.best is None:
        counts = Counter(dry.statuses.values()) if dry.counts is None else Counter(dry.counts)
        counts[NOT_HELPFUL] += len(names) - len(dry.statuses)
        return PostFilterResult(None, (), 0, len(potential), True,
                                f"preemption: {nodes_available_message_from_counts(len(names), counts)}")
    tied = set(dry.tied)
    return PostFilterResult(dry.best, dry.tied, dry.candidate_count, len(potential), True, "",
                            tuple(sorted((c for c in dry.candidates if c.node in tied), key=lambda c: c.node)))
