"""The preemption predictor: what kube-scheduler's DefaultPreemption would do for a new pod.

Pipeline per replica (spec §2-§9), each step a function tests can call on its own:
``filter_nodes`` → ``pod_eligible_to_preempt_others`` → ``nodes_where_preemption_might_help`` →
``dry_run_preemption`` → ``pick_preemption_node``. ``predict_preemption`` resolves the priority
like the Priority admission plugin and simulates N replicas in order on a ``ClusterView``.

Fits: the pod's own nominated node if it passes, else the first passing node by name (which node
the default scoring would pick is out of scope). Each replica that fits or preempts is bound to its
node in the view before the next replica is predicted; a replica that stays pending changes nothing.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.cluster.model import PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER, Node, Pod, Taint
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.filters import (
    ERR_NOT_HELPFUL,
    ERROR,
    OK,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    AffinityState,
    CycleState,
    NodeInfo,
    SpreadState,
    Status,
    hard_spread_constraints,
    new_spread_state,
    nominated_pods_for,
    resource_fit_status,
    status_with_nominated,
    tolerates_unschedulable,
)
from webhook.preemption.pdb import PdbIndex, classify_violations
from webhook.preemption.results import (
    DEFAULT_GRACE_PERIOD_SECONDS,
    FITS,
    PREEMPTS,
    PRIORITY_SUM_OFFSET,
    REJECTED,
    UNSCHEDULABLE_OUTCOME,
    Candidate,
    PreemptionArgs,
    PreemptionResult,
    ScoreTuple,
    VictimInfo,
    importance_key,
)
from webhook.preemption.selection import candidate_score, pick_preemption_node
from webhook.preemption.selectors import first_untolerated_taint, required_node_affinity_matches
from webhook.preemption.victims import NO_VICTIMS, DryRunOutcome, select_victims_on_node
from webhook.preemption.view import ClusterView, NodeSummary
from webhook.priority.resolution import PriorityRejection, effective_priority_classes, resolve_pod_priority

ABSENT_STATUS = Status(UNRESOLVABLE)
RESOURCE_REASONS = ("Too many pods", "Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage")
NOT_HELPFUL = Status(UNRESOLVABLE, (ERR_NOT_HELPFUL,))
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_NODES_AVAILABLE = "no nodes available to schedule pods"


# ---- the per-prediction context ---------------------------------------------------------------------

@dataclass(slots=True)
class PredictionContext:
    """Everything one replica's prediction reuses across nodes (upstream: the CycleState of the pod)."""

    view: ClusterView
    pod: Pod
    priority: int
    args: PreemptionArgs
    pdbs: PdbIndex
    cycle: CycleState
    # No host ports, no scalar requests, no inter-pod (anti-)affinity or spread state: fit is pure arithmetic.
    resource_only: bool
    tolerates_unschedulable: bool
    taint_memo: dict[tuple[Taint, ...], bool] = field(default_factory=dict)


def new_context(view: ClusterView, pod: Pod, args: PreemptionArgs) -> PredictionContext:
    """PreFilter: the inter-pod affinity and topology-spread states, and the PDB list (read once)."""
    pdbs = view.index.pdb_index(args)
    cycle = CycleState(affinity=_affinity_state(view, pod), spread=_spread_state(view, pod))
    resource_only = (cycle.affinity is None and cycle.spread is None and not pod.host_ports
                     and not pod.requests.scalar)
    return PredictionContext(view, pod, pod.effective_priority, args, pdbs, cycle, resource_only,
                             tolerates_unschedulable(pod))


def _affinity_state(view: ClusterView, pod: Pod) -> AffinityState | None:
    state = AffinityState(pod, view.namespace_labels)
    for other in view.anti_affinity_pods():
        state.update_existing_anti_affinity(other, view.node(other.node_name), 1)
    if pod.pod_affinity or pod.pod_anti_affinity:
        for other in _pods_in_term_namespaces(view, pod):
            state.update_incoming(other, view.node(other.node_name), 1)
    elif not state.existing_anti_affinity_counts and not view.has_nominated_anti_affinity():
        return None  # PreFilter Skip: nothing can make InterPodAffinity fail
    return state


def _pods_in_term_namespaces(view: ClusterView, pod: Pod) -> Iterable[Pod]:
    terms = (*pod.pod_affinity, *pod.pod_anti_affinity)
    if any(t.namespace_selector is not None for t in terms):
        namespaces: set[str] = set(view.state.pods_by_namespace)
    else:
        namespaces = {ns for t in terms for ns in (t.namespaces or (pod.namespace,))}
    for namespace in sorted(namespaces):
        yield from view.bound_pods_in(namespace)


def _spread_state(view: ClusterView, pod: Pod) -> SpreadState | None:
    if not hard_spread_constraints(pod):
        return None
    by_node: dict[str, list[Pod]] = {}
    for other in view.bound_pods_in(pod.namespace):
        by_node.setdefault(other.node_name, []).append(other)
    nodes = (view.node(n) for n in view.node_names)
    return new_spread_state(pod, nodes, lambda name: by_node.get(name, ()))


# ---- step 0: Filter (does the pod fit anywhere?) -------------------------------------------------------

def node_static_status(ctx: PredictionContext, node: Node) -> Status:
    """NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (all UU), memoised per taint set."""
    pod = ctx.pod
    if node.unschedulable and not ctx.tolerates_unschedulable:
        return Status(UNRESOLVABLE, ("node(s) were unschedulable",))
    if pod.node_name and pod.node_name != node.name:
        return Status(UNRESOLVABLE, ("node(s) didn't match the requested node name",))
    if node.taints:
        tolerated = ctx.taint_memo.get(node.taints)
        if tolerated is None:
            tolerated = first_untolerated_taint(node.taints, pod.tolerations) is None
            ctx.taint_memo[node.taints] = tolerated
        if not tolerated:
            return Status(UNRESOLVABLE, ("node(s) had untolerated taint(s)",))
    if (pod.node_selector or pod.required_node_affinity is not None) and not required_node_affinity_matches(pod, node):
        return Status(UNRESOLVABLE, ("node(s) didn't match Pod's node affinity/selector",))
    return OK


def node_info(ctx: PredictionContext, name: str) -> NodeInfo:
    return NodeInfo.build(ctx.view.node(name), ctx.view.pods_on(name))


def node_fit_status(ctx: PredictionContext, name: str) -> Status:
    """Every Filter plugin on one node, with the two-pass nominated-pod rule."""
    view = ctx.view
    node = view.node(name)
    status = node_static_status(ctx, node)
    if not status.ok:
        return status
    nominated = nominated_pods_for(ctx.pod, ctx.priority, view.nominated_on(name)) if view.index.has_nominated else []
    if ctx.resource_only and name not in view.touched:
        usage = view.state.node_usage.get(name)
        cpu, mem, eph, count = (usage.milli_cpu, usage.memory, usage.ephemeral_storage,
                                usage.pod_count) if usage else (0, 0, 0, 0)
        # Pass 1 (with nominated pods) is the stricter one for pure resource arithmetic.
        for other in nominated:
            cpu += other.requests.milli_cpu
            mem += other.requests.memory
            eph += other.requests.ephemeral_storage
            count += 1
        return resource_fit_status(ctx.pod.requests, node.allocatable, cpu, mem, eph, count, {})
    return status_with_nominated(ctx.pod, node_info(ctx, name), ctx.cycle, nominated)


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    fit_node: str | None
    statuses: dict[str, Status]


def filter_nodes(ctx: PredictionContext) -> FilterOutcome:
    """The scheduling attempt: the pod's nominated node first, then every node in name order."""
    statuses: dict[str, Status] = {}
    nominated = ctx.pod.nominated_node_name
    if nominated and nominated in ctx.view.state.nodes:
        status = node_fit_status(ctx, nominated)
        if status.ok:
            return FilterOutcome(nominated, {})
        statuses[nominated] = status
    if ctx.resource_only:
        return _filter_resource_only(ctx, statuses)
    for name in ctx.view.node_names:
        if name == nominated:
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            return FilterOutcome(name, statuses)
        statuses[name] = status
    return FilterOutcome(None, statuses)


def _filter_resource_only(ctx: PredictionContext, statuses: dict[str, Status]) -> FilterOutcome:
    """``filter_nodes`` for resource-only pods over precomputed free capacity (same statuses, less work)."""
    view = ctx.view
    pod = ctx.pod
    req = pod.requests
    rc, rm, re = req.milli_cpu, req.memory, req.ephemeral_storage
    zero = not (rc or rm or re)
    per_node_static = bool(pod.node_name or pod.node_selector or pod.required_node_affinity is not None)
    static_memo: dict[tuple[bool, tuple[Taint, ...]], Status] = {}
    resource_memo: dict[tuple[bool, ...], Status] = {}
    slow = view.touched | view.index.nominated_nodes
    skip = pod.nominated_node_name
    alloc_of = view.state.nodes
    for name, node, fc, fm, fe, fp in view.index.records():
        if name == skip:
            continue
        if name in slow:
            status = node_fit_status(ctx, name)
            if status.ok:
                return FilterOutcome(name, statuses)
            statuses[name] = status
            continue
        if per_node_static:
            status = node_static_status(ctx, node)
        else:
            sig = (node.unschedulable, node.taints)
            status = static_memo.get(sig)  # type: ignore[assignment]
            if status is None:
                status = static_memo[sig] = node_static_status(ctx, node)
        if not status.ok:
            statuses[name] = status
            continue
        if fp >= 1 and (not rc or rc <= fc) and (not rm or rm <= fm) and (not re or re <= fe):
            return FilterOutcome(name, statuses)
        if zero:
            key: tuple[bool, ...] = (fp < 1,)
        else:
            alloc = alloc_of[name].allocatable
            key = (fp < 1, rc > 0 and fc < rc, rm > 0 and fm < rm, re > 0 and fe < re,
                   rc > alloc.milli_cpu, rm > alloc.memory, re > alloc.ephemeral_storage)
        status = resource_memo.get(key)  # type: ignore[assignment]
        if status is None:
            status = resource_memo[key] = _resource_status_from_key(key)
        statuses[name] = status
    return FilterOutcome(None, statuses)


def _resource_status_from_key(key: tuple[bool, ...]) -> Status:
    reasons = [reason for short, reason in zip(key[:4], RESOURCE_REASONS, strict=False) if short]
    unresolvable = any(short and over for short, over in zip(key[1:4], key[4:], strict=False))
    return Status(UNRESOLVABLE if unresolvable else UNSCHEDULABLE, tuple(reasons))


# ---- step 1: eligibility ----------------------------------------------------------------------------

def pod_eligible_to_preempt_others(ctx: PredictionContext, statuses: Mapping[str, Status]) -> tuple[bool, str]:
    """``PodEligibleToPreemptOthers`` (spec §3); the reason is "" when eligible."""
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

@dataclass(slots=True)
class DryRun:
    """Candidates found (all of them when exhaustive) and the status of each node that is not one."""

    candidates: list[Candidate]
    statuses: dict[str, Status]
    candidate_count: int
    best: Candidate | None = None
    tied: tuple[str, ...] = ()


def dry_run_node(ctx: PredictionContext, name: str) -> DryRunOutcome:
    """``SelectVictimsOnNode`` on one node (fast arithmetic when the pod is resource-only)."""
    view = ctx.view
    nominated = nominated_pods_for(ctx.pod, ctx.priority, view.nominated_on(name)) if view.index.has_nominated else []
    if ctx.resource_only:
        return _resource_dry_run(ctx, view.summary(name), nominated, None)
    return select_victims_on_node(ctx.pod, node_info(ctx, name), ctx.cycle, nominated, ctx.pdbs)


def dry_run_preemption(ctx: PredictionContext, potential: Sequence[str], *, exhaustive: bool = False) -> DryRun:
    """Dry-run every potential node (no sampling) and pick the best; ``exhaustive`` keeps every candidate.

    The fast path for resource-only pods bounds each node from below by its lowest possible
    highest-victim priority and skips exact victim selection where that cannot win or tie.
    """
    if ctx.resource_only and not exhaustive:
        return _bounded_dry_run(ctx, potential)
    candidates: list[Candidate] = []
    statuses: dict[str, Status] = {}
    for name in potential:
        outcome = dry_run_node(ctx, name)
        if outcome.candidate is not None:
            candidates.append(outcome.candidate)
        else:
            statuses[name] = outcome.status
    picked = pick_preemption_node(candidates)
    best, tied = picked if picked is not None else (None, ())
    return DryRun(candidates, statuses, len(candidates), best, tied)


def _used_with(summary: NodeSummary, nominated: list[Pod]) -> tuple[int, int, int, int]:
    cpu, mem, eph, count = summary.used
    for other in nominated:
        cpu += other.requests.milli_cpu
        mem += other.requests.memory
        eph += other.requests.ephemeral_storage
        count += 1
    return cpu, mem, eph, count


def _fits_after_freeing(ctx: PredictionContext, summary: NodeSummary, used: tuple[int, int, int, int],
                        freed: tuple[int, int, int, int]) -> bool:
    req = ctx.pod.requests
    alloc = summary.node.allocatable
    return (used[3] - freed[3] + 1 <= alloc.pods
            and (req.milli_cpu == 0 or req.milli_cpu <= alloc.milli_cpu - used[0] + freed[0])
            and (req.memory == 0 or req.memory <= alloc.memory - used[1] + freed[1])
            and (req.ephemeral_storage == 0 or req.ephemeral_storage <= alloc.ephemeral_storage - used[2] + freed[2]))


def _resource_dry_run(ctx: PredictionContext, summary: NodeSummary, nominated: list[Pod],
                      levels_below: int | None) -> DryRunOutcome:
    """SelectVictimsOnNode with running totals: same answer as the general path for resource-only pods."""
    below = summary.lower_priority_count(ctx.priority) if levels_below is None else levels_below
    if below == 0:
        return DryRunOutcome(None, NO_VICTIMS)
    used = _used_with(summary, nominated)
    freed = summary.cumulative[below - 1]
    req = ctx.pod.requests
    alloc = summary.node.allocatable
    if not _fits_after_freeing(ctx, summary, used, freed):
        return DryRunOutcome(None, resource_fit_status(req, alloc, used[0] - freed[0], used[1] - freed[1],
                                                       used[2] - freed[2], used[3] - freed[3], {}))
    first = len(summary.pods) - freed[3]
    potential = summary.pods[first:]
    matches = summary.pdb_matches(ctx.pdbs)[first:]
    flags = classify_violations(matches, ctx.pdbs.budgets, stop_at_first=ctx.pdbs.stop_at_first) \
        if any(matches) else None
    order = potential if flags is None else (
        [p for p, bad in zip(potential, flags, strict=True) if bad]
        + [p for p, bad in zip(potential, flags, strict=True) if not bad])
    free_cpu = alloc.milli_cpu - used[0] + freed[0] - req.milli_cpu
    free_mem = alloc.memory - used[1] + freed[1] - req.memory
    free_eph = alloc.ephemeral_storage - used[2] + freed[2] - req.ephemeral_storage
    free_pods = alloc.pods - used[3] + freed[3] - 1
    check_cpu, check_mem, check_eph = req.milli_cpu > 0, req.memory > 0, req.ephemeral_storage > 0
    victims: list[Pod] = []
    for pod in order:
        r = pod.requests
        if (free_pods >= 1 and (not check_cpu or free_cpu >= r.milli_cpu) and (not check_mem or free_mem >= r.memory)
                and (not check_eph or free_eph >= r.ephemeral_storage)):
            free_pods -= 1
            free_cpu -= r.milli_cpu
            free_mem -= r.memory
            free_eph -= r.ephemeral_storage
        else:
            victims.append(pod)
    violating: frozenset[str] = frozenset()
    if flags is not None:
        bad_keys = {p.key for p, bad in zip(potential, flags, strict=True) if bad}
        violating = frozenset(v.key for v in victims if v.key in bad_keys)
        victims.sort(key=importance_key)
    return DryRunOutcome(Candidate(summary.node.name, tuple(victims), violating, len(violating)), OK)


def _minimum_victims(ctx: PredictionContext, summary: NodeSummary, used: tuple[int, int, int, int],
                     level: int) -> int:
    """Fewest pods at or below ``levels[level]`` whose removal can cover every resource deficit."""
    req = ctx.pod.requests
    alloc = summary.node.allocatable
    count = max(1, used[3] + 1 - alloc.pods)
    deficits = (used[0] + req.milli_cpu - alloc.milli_cpu if req.milli_cpu else 0,
                used[1] + req.memory - alloc.memory if req.memory else 0,
                used[2] + req.ephemeral_storage - alloc.ephemeral_storage if req.ephemeral_storage else 0)
    if deficits[0] > 0 or deficits[1] > 0 or deficits[2] > 0:
        for deficit, running in zip(deficits, summary.largest_first(level), strict=True):
            if deficit > 0:
                count = max(count, bisect.bisect_left(running, deficit) + 1)
    return count


def _bound_slow(ctx: PredictionContext, name: str, statuses: dict[str, Status],
                bounds: list[tuple[ScoreTuple, str, int, list[Pod]]]) -> None:
    """The lower bound of one node that has nominated pods or simulated changes."""
    view = ctx.view
    summary = view.summary(name)
    below = summary.lower_priority_count(ctx.priority)
    if below == 0:
        statuses[name] = NO_VICTIMS
        return
    nominated = nominated_pods_for(ctx.pod, ctx.priority, view.nominated_on(name)) if view.index.has_nominated else []
    used = _used_with(summary, nominated)
    if not _fits_after_freeing(ctx, summary, used, summary.cumulative[below - 1]):
        statuses[name] = _resource_dry_run(ctx, summary, nominated, below).status
        return
    level = next(i for i in range(below) if _fits_after_freeing(ctx, summary, used, summary.cumulative[i]))
    top = summary.levels[level]
    count = _minimum_victims(ctx, summary, used, level)
    total = top + PRIORITY_SUM_OFFSET + (count - 1) * (summary.levels[0] + PRIORITY_SUM_OFFSET)
    bounds.append(((0, top, total, count, -summary.level_latest_start[level]), name, below, nominated))


def _bounded_dry_run(ctx: PredictionContext, potential: Sequence[str]) -> DryRun:
    """Branch and bound over the candidates with a lower bound of the §9 score tuple per node.

    With fit monotone in the pods removed, a node's highest victim priority is at least the lowest
    level whose removal (with every level below) makes room; its victims number at least the fewest
    pods at or below that level covering each deficit; and its top victims started no later than the
    latest pod of that level. Nodes are dry-run in bound order until a bound exceeds the best score.
    """
    view = ctx.view
    statuses: dict[str, Status] = {}
    bounds: list[tuple[ScoreTuple, str, int, list[Pod]]] = []
    wanted = set(potential)
    slow = view.touched | view.index.nominated_nodes
    req = ctx.pod.requests
    rc, rm, re = req.milli_cpu, req.memory, req.ephemeral_storage
    zero = not (rc or rm or re)
    status_memo: dict[tuple[bool, ...], Status] = {}
    for name in potential:
        if name in slow:
            _bound_slow(ctx, name, statuses, bounds)
    for name, below, frees, free, summary in view.index.thresholds(ctx.priority):
        if name not in wanted or name in slow:
            continue
        wanted.discard(name)
        fc, fm, fe, fp = frees[-1]
        if not (fp >= 1 and (not rc or rc <= fc) and (not rm or rm <= fm) and (not re or re <= fe)):
            alloc = summary.node.allocatable
            key = (fp < 1, 0 < rc and fc < rc, 0 < rm and fm < rm, 0 < re and fe < re,  # noqa: SIM300
                   rc > alloc.milli_cpu, rm > alloc.memory, re > alloc.ephemeral_storage) if not zero else (fp < 1,)
            status = status_memo.get(key)
            if status is None:
                status = status_memo[key] = _resource_status_from_key(key)
            statuses[name] = status
            continue
        level = 0
        for fc, fm, fe, fp in frees:
            if fp >= 1 and (not rc or rc <= fc) and (not rm or rm <= fm) and (not re or re <= fe):
                break
            level += 1
        # Inlined _minimum_victims (this loop runs once per candidate node).
        count = 1 - free[3] if free[3] < 0 else 1
        d_cpu, d_mem, d_eph = rc - free[0], rm - free[1], re - free[2]
        if (rc and d_cpu > 0) or (rm and d_mem > 0) or (re and d_eph > 0):
            cpu_sums, mem_sums, eph_sums = summary.largest_first(level)
            if rc and d_cpu > 0:
                count = max(count, bisect.bisect_left(cpu_sums, d_cpu) + 1)
            if rm and d_mem > 0:
                count = max(count, bisect.bisect_left(mem_sums, d_mem) + 1)
            if re and d_eph > 0:
                count = max(count, bisect.bisect_left(eph_sums, d_eph) + 1)
        top = summary.levels[level]
        total = top + PRIORITY_SUM_OFFSET + (count - 1) * (summary.levels[0] + PRIORITY_SUM_OFFSET)
        bounds.append(((0, top, total, count, -summary.level_latest_start[level]), name, below, []))
    for name in wanted - slow:
        statuses[name] = NO_VICTIMS  # no pod below the preemptor's priority
    candidate_count = len(bounds)
    candidates: list[Candidate] = []
    best_score: ScoreTuple | None = None
    if bounds:
        # Dry-run the most promising node first, then only the nodes whose bound can match it, in order.
        first = min(bounds, key=lambda b: (b[0], b[1]))
        outcome = _resource_dry_run(ctx, view.summary(first[1]), first[3], first[2]).candidate
        assert outcome is not None
        limit = candidate_score(outcome)
        bounds = sorted((b for b in bounds if b[0] <= limit), key=lambda b: (b[0], b[1]))
    for bound, name, below, nominated in bounds:
        if best_score is not None and bound > best_score:
            break
        candidate = _resource_dry_run(ctx, view.summary(name), nominated, below).candidate
        assert candidate is not None  # fit is monotone: the node failed with every pod, fits without them
        score = candidate_score(candidate)
        if best_score is None or score < best_score:
            best_score, candidates = score, [candidate]
        elif score == best_score:
            candidates.append(candidate)
    picked = pick_preemption_node(candidates)
    best, tied = picked if picked is not None else (None, ())
    return DryRun(candidates, statuses, candidate_count, best, tied)


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


def nodes_available_message(total: int, statuses: Iterable[Status]) -> str:
    """FitError text: ``0/N nodes are available: <count reason, ...>.`` (reasons sorted as strings)."""
    counts = Counter(reason for status in statuses for reason in status.reasons)
    histogram = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))
    return f"0/{total} nodes are available: {histogram}." if histogram else f"0/{total} nodes are available."


def preempt(ctx: PredictionContext, statuses: Mapping[str, Status]) -> PostFilterResult:
    """DefaultPreemption's PostFilter given the Filter statuses of every node (absent = UU)."""
    eligible, reason = pod_eligible_to_preempt_others(ctx, statuses)
    if not eligible:
        return PostFilterResult(None, (), 0, 0, False, f"preemption: {reason}")
    names = ctx.view.node_names
    potential = nodes_where_preemption_might_help(statuses, names)
    if not potential:
        message = nodes_available_message(len(names), (NOT_HELPFUL for _ in names))
        return PostFilterResult(None, (), 0, 0, True, f"preemption: {message}")
    dry = dry_run_preemption(ctx, potential)
    if dry.best is None:
        node_statuses = [dry.statuses.get(n, NOT_HELPFUL) for n in names]
        return PostFilterResult(None, (), 0, len(potential), True,
                                f"preemption: {nodes_available_message(len(names), node_statuses)}")
    return PostFilterResult(dry.best, dry.tied, dry.candidate_count, len(potential), True, "")


# ---- one replica, many replicas ---------------------------------------------------------------------------

def _victim_info(pod: Pod, candidate: Candidate) -> VictimInfo:
    grace = pod.termination_grace_period_seconds
    return VictimInfo(pod.namespace, pod.name, candidate.node, pod.effective_priority, pod.key in candidate.violating,
                      DEFAULT_GRACE_PERIOD_SECONDS if grace is None else grace)


def _gap_note(pod: Pod) -> str:
    return f" Not modelled (the prediction ignores it): {'; '.join(pod.unmodeled)}." if pod.unmodeled else ""


def predict_pod(view: ClusterView, pod: Pod, args: PreemptionArgs) -> tuple[PreemptionResult, Candidate | None]:
    """One replica whose ``spec.priority`` is already resolved; does not change ``view``."""
    policy = pod.preemption_policy or PREEMPT_LOWER_PRIORITY
    base = PreemptionResult(pod=pod.key, priority=pod.effective_priority, priority_class_name=pod.priority_class_name,
                            preemption_policy=policy, outcome=UNSCHEDULABLE_OUTCOME)
    gaps = _gap_note(pod)
    if not view.node_names:
        return dataclasses.replace(base, message=NO_NODES_AVAILABLE + "." + gaps), None
    ctx = new_context(view, pod, args)
    filtered = filter_nodes(ctx)
    if filtered.fit_node is not None:
        message = f"fits on node {filtered.fit_node} without preemption." + gaps
        return dataclasses.replace(base, outcome=FITS, node=filtered.fit_node, message=message), None
    fit_error = nodes_available_message(len(view.node_names), filtered.statuses.values())
    post = preempt(ctx, filtered.statuses)
    if post.candidate is None:
        return dataclasses.replace(base, message=f"{fit_error} {post.message}{gaps}",
                                   preemption_status=post.message), None
    candidate = post.candidate
    victims = tuple(_victim_info(v, candidate) for v in candidate.victims)
    num_candidates = args.num_candidates(post.potential_count)
    sampled = post.candidate_count > num_candidates
    notes = [f"{fit_error} Preemption would nominate node {candidate.node} and evict {len(victims)} pod(s)"
             f" ({candidate.num_pdb_violations} PDB violation(s))."]
    if len(post.tied) > 1:
        notes.append(f"{len(post.tied)} nodes tie on every upstream criterion; upstream picks one at random,"
                     " PreemptGuard shows the first by name.")
    if sampled:
        notes.append(f"{post.candidate_count} candidate nodes exceed the {num_candidates} that upstream samples"
                     f" from {post.potential_count} potential nodes; upstream may choose a different node.")
    return dataclasses.replace(
        base, outcome=PREEMPTS, node=candidate.node, victims=victims, pdb_violations=candidate.num_pdb_violations,
        candidate_nodes=post.candidate_count, tied_nodes=post.tied,
        expected_delay_seconds=max(v.grace_period_seconds for v in victims),
        message=" ".join(notes) + gaps, sampled=sampled,
    ), candidate


def simulate_pods(state: ClusterState, pods: Sequence[Pod],
                  args: PreemptionArgs | None = None) -> list[PreemptionResult]:
    """Predict each pod in order, applying each placement and eviction before the next (never mutating ``state``)."""
    args = args or PreemptionArgs()
    view = ClusterView(state)
    results = []
    for pod in pods:
        result, candidate = predict_pod(view, pod, args)
        if candidate is not None:
            for victim in candidate.victims:
                view.evict(victim)
        if result.node is not None:
            view.bind(pod, result.node)
        results.append(result)
    return results


def replica_pods(pod: Pod, replicas: int) -> list[Pod]:
    """N copies with distinct names (``<name>-<i>``); a single replica keeps the pod's own name."""
    if replicas == 1:
        return [pod]
    return [dataclasses.replace(pod, name=f"{pod.name}-{i}", uid=f"{pod.uid}-{i}" if pod.uid else "")
            for i in range(replicas)]


def resolve_priority(state: ClusterState, pod: Pod) -> Pod:
    """The pod as the Priority admission plugin would store it; raises ``PriorityRejection``."""
    resolved = resolve_pod_priority(pod.priority_class_name, pod.priority, pod.preemption_policy,
                                    effective_priority_classes(state.priority_classes))
    return dataclasses.replace(pod, priority=resolved.priority, preemption_policy=resolved.preemption_policy,
                               priority_class_name=resolved.priority_class_name)


def predict_preemption(state: ClusterState, pod: Pod, *, replicas: int = 1,
                       args: PreemptionArgs | None = None) -> list[PreemptionResult]:
    """The public entry point: resolve the priority, then simulate ``replicas`` copies of ``pod`` in order."""
    return predict_pods(state, replica_pods(pod, replicas), args=args)


def predict_pods(state: ClusterState, pods: Sequence[Pod], *,
                 args: PreemptionArgs | None = None) -> list[PreemptionResult]:
    """Like ``predict_preemption`` for pods that may differ (e.g. StatefulSet replicas)."""
    resolved: list[Pod] = []
    for pod in pods:
        try:
            resolved.append(resolve_priority(state, pod))
        except PriorityRejection as exc:
            rejected = PreemptionResult(pod=pod.key, priority=None, priority_class_name=pod.priority_class_name,
                                        preemption_policy=pod.preemption_policy or PREEMPT_LOWER_PRIORITY,
                                        outcome=REJECTED, message=str(exc))
            return [dataclasses.replace(rejected, pod=p.key) for p in pods]
    return simulate_pods(state, resolved, args)


__all__ = [
    "ERROR", "DryRun", "FilterOutcome", "PostFilterResult", "PredictionContext", "dry_run_node",
    "dry_run_preemption", "filter_nodes", "new_context", "nodes_available_message",
    "nodes_where_preemption_might_help", "pod_eligible_to_preempt_others", "predict_pod", "predict_pods",
    "predict_preemption", "preempt", "replica_pods", "resolve_priority", "simulate_pods",
]
