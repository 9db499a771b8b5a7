"""The preemption predictor: what kube-scheduler's DefaultPreemption would do for a new pod.

Pipeline per replica (docs/preemption.md §2-§9), each step a function tests can call on its own:
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
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from webhook.cluster.model import PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER, Node, Pod, Taint
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.filters import (
    ERR_NODE_AFFINITY,
    ERR_NODE_PORTS,
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
    host_ports_conflict,
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
    PredictionTimeout,
    PreemptionArgs,
    PreemptionResult,
    ScoreTuple,
    VictimInfo,
    importance_key,
)
from webhook.preemption.selection import candidate_score, pick_preemption_node
from webhook.preemption.selectors import first_untolerated_taint, required_node_affinity_matches, tolerates
from webhook.preemption.victims import NO_VICTIMS, DryRunOutcome, candidate_outcome, select_victims_on_node
from webhook.preemption.view import (
    CPU,
    EPHEMERAL,
    MEMORY,
    MIN_PRIORITY_ORDER,
    PODS,
    ClusterView,
    NodeSummary,
    StateIndex,
    free_order,
    state_index,
)
from webhook.priority.resolution import (
    SYSTEM_CRITICAL_PRIORITY,
    PriorityRejection,
    effective_classes,
    resolve_pod_priority,
)

ABSENT_STATUS = Status(UNRESOLVABLE)
RESOURCE_REASONS = ("Too many pods", "Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage")
NOT_HELPFUL = Status(UNRESOLVABLE, (ERR_NOT_HELPFUL,))
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_NODES_AVAILABLE = "no nodes available to schedule pods"

_D = TypeVar("_D")
_INIT_FIELDS: dict[type, tuple[str, ...] | None] = {}
_set_field = object.__setattr__


def _init_fields(cls: type) -> tuple[str, ...] | None:
    """The field names of a dataclass that ``replace_fields`` may copy directly; None when it may not."""
    if cls not in _INIT_FIELDS:
        fields = dataclasses.fields(cls)
        plain = (not hasattr(cls, "__post_init__") and all(f.init for f in fields)
                 and all(f.name in getattr(cls, "__slots__", ()) for f in fields))
        _INIT_FIELDS[cls] = tuple(f.name for f in fields) if plain else None
    return _INIT_FIELDS[cls]


def replace_fields(obj: _D, **changes: Any) -> _D:
    """``dataclasses.replace`` for slotted dataclasses without ``__post_init__``, at about half the cost.

    The predictor copies a pod or a result a few times per prediction; the generic ``replace`` (keyword
    arguments through a frozen ``__init__``) was the largest single cost of predicting a pod that fits.
    """
    cls = type(obj)
    names = _init_fields(cls)
    if names is None:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    for name in changes:
        if name not in names:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
    new = object.__new__(cls)
    for name in names:
        _set_field(new, name, getattr(obj, name))
    for name, value in changes.items():
        _set_field(new, name, value)
    return new


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
    # time.monotonic() after which the prediction raises PredictionTimeout (checked in the node loops).
    deadline: float | None = None

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise PredictionTimeout("the preemption prediction exceeded its deadline")


def new_context(view: ClusterView, pod: Pod, args: PreemptionArgs, *,
                deadline: float | None = None) -> PredictionContext:
    """PreFilter: the inter-pod affinity and topology-spread states, and the PDB list (read once)."""
    pdbs = view.index.pdb_index(args)
    cycle = CycleState(affinity=_affinity_state(view, pod), spread=_spread_state(view, pod))
    resource_only = (cycle.affinity is None and cycle.spread is None and not pod.host_ports
                     and not pod.requests.scalar)
    return PredictionContext(view, pod, pod.effective_priority, args, pdbs, cycle, resource_only,
                             tolerates_unschedulable(pod), deadline=deadline)


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
        cpu, mem, eph, count = view.index.summary(name).used
        # Pass 1 (with nominated pods) is the stricter one for pure resource arithmetic.
        for other in nominated:
            cpu += other.requests.milli_cpu
            mem += other.requests.memory
            eph += other.requests.ephemeral_storage
            count += 1
        return resource_fit_status(ctx.pod.requests, node.allocatable, cpu, mem, eph, count, {})
    return status_with_nominated(ctx.pod, node_info(ctx, name), ctx.cycle, nominated)


@dataclass(slots=True)  # built for every review: no frozen-init cost
class FilterOutcome:
    """The first node that fits, else every node's status.

    The bulk path for resource-only pods also hands over how many nodes have each status and the
    nodes whose status is Unschedulable, so nothing downstream walks every node again.
    """

    fit_node: str | None
    statuses: dict[str, Status]
    counts: Counter[Status] | None = None
    potential: set[str] | None = None


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
    for i, name in enumerate(ctx.view.node_names):
        if not i % DEADLINE_STRIDE:
            ctx.check_deadline()
        if name == nominated:
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            return FilterOutcome(name, statuses)
        statuses[name] = status
    return FilterOutcome(None, statuses)


# A pod that fits usually fits on one of the first nodes: try them one by one before the bulk path.
QUICK_SCAN_NODES = 32
# How many nodes a Python loop handles between two deadline checks.
DEADLINE_STRIDE = 256


def _filter_resource_only(ctx: PredictionContext, statuses: dict[str, Status]) -> FilterOutcome:
    """``filter_nodes`` for resource-only pods: a short scan, then set algebra over the capacity orderings."""
    names = ctx.view.node_names
    skip = ctx.pod.nominated_node_name
    for name in names[:QUICK_SCAN_NODES]:
        if name == skip:
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            return FilterOutcome(name, statuses)
        statuses[name] = status
    if len(names) <= QUICK_SCAN_NODES:
        return FilterOutcome(None, statuses)
    return _filter_bulk(ctx, statuses)


def _static_universe(ctx: PredictionContext, excluded: set[str], statuses: dict[str, Status],
                     counts: Counter[Status]) -> set[str]:
    """Nodes (not ``excluded``) that pass NodeUnschedulable, NodeName, TaintToleration and NodeAffinity."""
    pod = ctx.pod
    index = ctx.view.index
    universe: set[str] = set()
    if pod.node_name or pod.node_selector or pod.required_node_affinity is not None:
        summaries = index.summaries
        for i, name in enumerate(index.node_names):
            if not i % DEADLINE_STRIDE:
                ctx.check_deadline()
            if name in excluded:
                continue
            status = node_static_status(ctx, summaries[name].node)
            if status.ok:
                universe.add(name)
            else:
                statuses[name] = status
                counts[status] += 1
        return universe
    for group in index.static_groups.values():
        members = group - excluded
        if not members:
            continue
        status = node_static_status(ctx, index.summaries[next(iter(members))].node)
        if status.ok:
            universe |= members
        else:
            statuses.update(dict.fromkeys(members, status))
            counts[status] += len(members)
    return universe


def _wants(ctx: PredictionContext) -> list[tuple[int, int]]:
    """(dimension, amount) the pod needs free: the requested resources and one pod slot."""
    req = ctx.pod.requests
    wants = [(dim, want) for dim, want in ((CPU, req.milli_cpu), (MEMORY, req.memory),
                                             (EPHEMERAL, req.ephemeral_storage)) if want > 0]
    wants.append((PODS, 1))
    return wants


def _fitting(index: StateIndex, universe: set[str], wants: list[tuple[int, int]],
             level: int | None) -> set[str]:
    """The nodes of ``universe`` with room for the pod, now (``level`` None) or once every pod with
    priority <= ``level`` is gone."""
    return _intersect(index, universe, [index.order(free_order(dim, level)).at_least(want) for dim, want in wants])


def _subset(index: StateIndex, nodes: set[str], members: list[str]) -> set[str]:
    """``nodes`` ∩ ``members`` as a new set (no hashing when ``members`` lists every node)."""
    return set(nodes) if len(members) >= len(index.summaries) else nodes.intersection(members)


def _intersect(index: StateIndex, nodes: set[str], slices: list[list[str]]) -> set[str]:
    """``nodes`` ∩ every slice, as a new set; the smallest slice first, slices of every node skipped."""
    slices = sorted((s for s in slices if len(s) < len(index.summaries)), key=len)
    if not slices:
        return set(nodes)
    found = nodes.intersection(slices[0])
    for more in slices[1:]:
        if not found:
            break
        found.intersection_update(more)
    return found


_MASK_STATUS: dict[int, Status] = {}


def _mask_status(mask: int) -> Status:
    """Bits 0-3: too many pods / short of cpu, memory, ephemeral-storage; bits 4-6: cpu, memory,
    ephemeral-storage request above the node's allocatable."""
    status = _MASK_STATUS.get(mask)
    if status is None:
        status = _MASK_STATUS[mask] = _resource_status_from_key(tuple(bool(mask & (1 << b)) for b in range(7)))
    return status


def _resource_partition(index: StateIndex, universe: set[str], wants: list[tuple[int, int]],
                        level: int | None) -> dict[int, set[str]]:
    """``universe`` split by which resource checks fail (a ``_mask_status`` mask per part)."""
    parts: dict[int, set[str]] = {0: universe} if universe else {}
    for dim, want in wants:
        short = index.order(free_order(dim, level)).below(want)
        parts = _refine(parts, short, 1 << (dim + 1) if dim != PODS else 1)
        if dim != PODS:
            parts = _refine(parts, index.order(("alloc", 0, dim, 0)).below(want), 1 << (dim + 4))
    return parts


def _refine(parts: dict[int, set[str]], members: list[str], bit: int) -> dict[int, set[str]]:
    if not members:
        return parts
    refined: dict[int, set[str]] = {}
    for mask, part in parts.items():
        inside = part.intersection(members)
        if inside:
            refined[mask | bit] = inside
            if len(inside) < len(part):
                refined[mask] = part - inside
        else:
            refined[mask] = part
    return refined


def _filter_bulk(ctx: PredictionContext, statuses: dict[str, Status]) -> FilterOutcome:
    """Every node at once. Nodes with nominated pods or simulated changes (few) go one by one in name order."""
    view = ctx.view
    index = view.index
    skip = ctx.pod.nominated_node_name
    slow = sorted(n for n in view.touched | index.nominated_nodes if n in index.summaries)
    excluded = set(slow)
    if skip:
        excluded.add(skip)
    counts: Counter[Status] = Counter()
    universe = _static_universe(ctx, excluded, statuses, counts)
    wants = _wants(ctx)
    fit = _fitting(index, universe, wants, None)
    first_fit = min(fit) if fit else None
    for name in slow:
        if first_fit is not None and name > first_fit:
            break
        if name == skip:
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            return FilterOutcome(name, statuses)
        statuses[name] = status
    if first_fit is not None:
        return FilterOutcome(first_fit, statuses)
    potential: set[str] = set()
    for mask, part in _resource_partition(index, universe, wants, None).items():
        status = _mask_status(mask)
        statuses.update(dict.fromkeys(part, status))
        counts[status] += len(part)
        if status.code == UNSCHEDULABLE:
            potential |= part
    for name in excluded:
        found = statuses.get(name)
        if found is not None:
            counts[found] += 1
            if found.code == UNSCHEDULABLE:
                potential.add(name)
    return FilterOutcome(None, statuses, counts, potential)


def _resource_status_from_key(key: tuple[bool, ...]) -> Status:
    reasons = [reason for short, reason in zip(key[:4], RESOURCE_REASONS, strict=False) if short]
    unresolvable = any(short and over for short, over in zip(key[1:4], key[4:], strict=False))
    return Status(UNRESOLVABLE if unresolvable else UNSCHEDULABLE, tuple(reasons))


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

@dataclass(slots=True)
class DryRun:
    """Candidates found (all of them when exhaustive) and the status of each node that is not one.

    The bounded path fills ``statuses`` only when no node is a candidate (the only time they are read).
    """

    candidates: list[Candidate]
    statuses: dict[str, Status]
    candidate_count: int
    best: Candidate | None = None
    tied: tuple[str, ...] = ()
    # How many nodes have each status in ``statuses``, when the dry run counted them already.
    counts: Counter[Status] | None = None


def dry_run_node(ctx: PredictionContext, name: str) -> DryRunOutcome:
    """``SelectVictimsOnNode`` on one node (fast arithmetic when the pod is resource-only)."""
    view = ctx.view
    nominated = nominated_pods_for(ctx.pod, ctx.priority, view.nominated_on(name)) if view.index.has_nominated else []
    if ctx.resource_only:
        return _resource_dry_run(ctx, view.summary(name), nominated, None)
    return select_victims_on_node(ctx.pod, node_info(ctx, name), ctx.cycle, nominated, ctx.pdbs)


def dry_run_preemption(ctx: PredictionContext, potential: Collection[str], *, exhaustive: bool = False) -> DryRun:
    """Dry-run every potential node (no sampling) and pick the best; ``exhaustive`` keeps every candidate.

    The fast path for resource-only pods bounds each node from below by its lowest possible
    highest-victim priority and skips exact victim selection where that cannot win or tie.
    """
    if ctx.resource_only and not exhaustive:
        return _bounded_dry_run(ctx, potential)
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
    return candidate_outcome(Candidate(summary.node.name, tuple(victims), violating, len(violating)), OK)


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


Bound = tuple[ScoreTuple, str, int | None, list[Pod]]


def _plain_bounds(ctx: PredictionContext, names: Iterable[str], level: int) -> list[Bound]:
    """Lower bounds of the nodes (no nominated pods, no simulated changes) whose lowest level making room
    is ``level``: that level is their top victim priority at least (see ``_bounded_dry_run``)."""
    req = ctx.pod.requests
    rc, rm, re = req.milli_cpu, req.memory, req.ephemeral_storage
    summaries = ctx.view.index.summaries
    bisect_right = bisect.bisect_right
    bisect_left = bisect.bisect_left
    bounds: list[Bound] = []
    for i, name in enumerate(names):
        if not i % DEADLINE_STRIDE:
            ctx.check_deadline()
        summary = summaries[name]
        levels = summary.levels
        at = bisect_right(levels, level) - 1
        if at < 0:
            at = 0
        free = summary.free
        count = 1 - free[3] if free[3] < 0 else 1
        d_cpu, d_mem, d_eph = rc - free[0], rm - free[1], re - free[2]
        if (rc and d_cpu > 0) or (rm and d_mem > 0) or (re and d_eph > 0):
            cpu_sums, mem_sums, eph_sums = summary.largest_first(at)
            if rc and d_cpu > 0:
                count = max(count, bisect_left(cpu_sums, d_cpu) + 1)
            if rm and d_mem > 0:
                count = max(count, bisect_left(mem_sums, d_mem) + 1)
            if re and d_eph > 0:
                count = max(count, bisect_left(eph_sums, d_eph) + 1)
        top = levels[at]
        total = top + PRIORITY_SUM_OFFSET + (count - 1) * (levels[0] + PRIORITY_SUM_OFFSET)
        bounds.append(((0, top, total, count, -summary.level_latest_start[at]), name, None, []))
    return bounds


def _bounded_dry_run(ctx: PredictionContext, potential: Collection[str]) -> DryRun:
    """Branch and bound over the candidates with a lower bound of the §9 score tuple per node.

    With fit monotone in the pods removed, a node's highest victim priority is at least the lowest
    level whose removal (with every level below) makes room; its victims number at least the fewest
    pods at or below that level covering each deficit; and its top victims started no later than the
    latest pod of that level. The cluster's priority levels are visited in ascending order; the nodes
    that first make room at a level come from the capacity orderings of the index (set algebra, no
    per-node loop), and only they get a bound. Nodes are dry-run in bound order until a bound exceeds
    the best exact score, so every node that ties with the best is found.
    """
    view = ctx.view
    index = view.index
    wanted: set[str] | frozenset[str] = potential if isinstance(potential, (set, frozenset)) else set(potential)
    slow = view.touched | index.nominated_nodes
    plain: set[str] = set(wanted) if not slow else set(wanted - slow)
    if not index.summaries.keys() >= plain:
        plain &= index.summaries.keys()
    statuses: dict[str, Status] = {}
    slow_bounds: list[tuple[ScoreTuple, str, int, list[Pod]]] = []
    for name in sorted(wanted & slow):
        _bound_slow(ctx, name, statuses, slow_bounds)
    levels = index.levels_below(ctx.priority)
    wants = _wants(ctx)
    has_lower = _subset(index, plain, index.order(MIN_PRIORITY_ORDER).below(ctx.priority)) if levels else set()
    candidates_plain = _fitting(index, has_lower, wants, levels[-1]) if levels else set()
    candidate_count = len(candidates_plain) + len(slow_bounds)
    if not candidate_count:
        counts = _plain_dry_run_statuses(ctx, plain, has_lower, wants, levels, statuses)
        return DryRun([], statuses, 0, counts=counts)
    pending: list[Bound] = sorted(slow_bounds, key=lambda b: (b[0], b[1]))
    lowest = min(index.level_nodes, default=-PRIORITY_SUM_OFFSET)
    second = min((level for level in index.level_nodes if level > lowest), default=lowest)
    best_score: ScoreTuple | None = None
    best: list[Candidate] = []
    seen: set[str] = set()
    for position, level in enumerate(levels):
        if best_score is not None and best_score[0] == 0 and best_score[1] < level:
            break  # every bound from here on starts with (0, level), worse than the best
        fitting = candidates_plain if position == len(levels) - 1 else _fitting(index, has_lower, wants, level)
        remaining = fitting - seen
        seen |= fitting
        slow_batch = []
        while pending and pending[0][0][1] <= level:
            slow_batch.append(pending.pop(0))
        best_score, best = _dry_run_batch(ctx, slow_batch, best_score, best)
        count = 0
        while remaining:
            count += 1
            if count > MAX_COUNT_ORDER:
                best_score, best = _dry_run_batch(ctx, _plain_bounds(ctx, remaining, level), best_score, best)
                break
            # The nodes whose victim-count bound is exactly ``count``; their bound differs only in the lowest
            # pod priority of the node (a term of the priority sum) and the latest start at ``level``.
            batch = _within_count(index, remaining, wants, level, count)
            remaining -= batch
            group = batch if count == 1 else batch.intersection(index.order(MIN_PRIORITY_ORDER).below(lowest + 1))
            total = level + PRIORITY_SUM_OFFSET + (count - 1) * (lowest + PRIORITY_SUM_OFFSET)
            best_score, best = _dry_run_by_latest_start(ctx, group, level, (0, level, total, count), best_score, best)
            rest = batch - group
            if rest and (best_score is None or best_score >= (
                    0, level, level + PRIORITY_SUM_OFFSET + (count - 1) * (second + PRIORITY_SUM_OFFSET), count)):
                best_score, best = _dry_run_batch(ctx, _plain_bounds(ctx, rest, level), best_score, best)
            # Every node left at this level has at least count + 1 victims, and at least its top one at ``level``.
            floor = (0, level, level + PRIORITY_SUM_OFFSET + count * (lowest + PRIORITY_SUM_OFFSET), count + 1)
            if best_score is not None and best_score < floor:
                break
    best_score, best = _dry_run_batch(ctx, pending, best_score, best)
    picked = pick_preemption_node(best)
    chosen, tied = picked if picked is not None else (None, ())
    return DryRun(best, statuses, candidate_count, chosen, tied)


def _dry_run_by_latest_start(ctx: PredictionContext, group: set[str], level: int, prefix: tuple[int, int, int, int],
                             best_score: ScoreTuple | None,
                             best: list[Candidate]) -> tuple[ScoreTuple | None, list[Candidate]]:
    """Exact dry runs of ``group``, nodes whose bounds all start with ``prefix``, latest start first
    (= bound order, read off the index), until a bound exceeds the best score."""
    if not group:
        return best_score, best
    order = ctx.view.index.order(("latest", level, 0, 0))
    names, values = order.names, order.values
    summaries = ctx.view.index.summaries
    left = len(group)
    for i in range(len(names) - 1, -1, -1):
        name = names[i]
        if name not in group:
            continue
        bound = (*prefix, -values[i])
        if best_score is not None and bound > best_score:
            break
        candidate = _resource_dry_run(ctx, summaries[name], [], None).candidate
        assert candidate is not None  # fit is monotone: the node failed with every pod, fits without them
        score = candidate_score(candidate)
        if best_score is None or score < best_score:
            best_score, best = score, [candidate]
        elif score == best_score:
            best.append(candidate)
        left -= 1
        if not left:
            break
        if not left % 64:
            ctx.check_deadline()
    return best_score, best


# Victim-count bounds up to this many are found with the capacity orderings; larger ones node by node.
MAX_COUNT_ORDER = 4


def _within_count(index: StateIndex, nodes: set[str], wants: list[tuple[int, int]], level: int,
                  count: int) -> set[str]:
    """The ``nodes`` where removing ``count`` pods at or below ``level`` may make room: per resource,
    the ``count`` largest requests cover the shortfall, and ``count`` pods free enough slots."""
    slices = [index.order(free_order(PODS)).at_least(1 - count)]
    slices += [index.order(("top", level, dim, count)).at_least(want) for dim, want in wants if dim != PODS]
    return _intersect(index, nodes, slices)


def _dry_run_batch(ctx: PredictionContext, batch: list[Bound], best_score: ScoreTuple | None,
                   best: list[Candidate]) -> tuple[ScoreTuple | None, list[Candidate]]:
    """Exact dry runs of the nodes of one batch whose bound does not exceed the best score, in bound order."""
    if not batch:
        return best_score, best
    view = ctx.view
    if best_score is None:
        # Dry-run the most promising node first, then only the nodes whose bound can match it, in order.
        first = min(batch, key=lambda b: (b[0], b[1]))
        candidate = _resource_dry_run(ctx, view.summary(first[1]), first[3], first[2]).candidate
        assert candidate is not None
        limit = candidate_score(candidate)
    else:
        limit = best_score
    ordered = sorted((b for b in batch if b[0] <= limit), key=lambda b: (b[0], b[1]))
    for i, (bound, name, below, nominated) in enumerate(ordered):
        if not i % 64:
            ctx.check_deadline()
        if best_score is not None and bound > best_score:
            break
        candidate = _resource_dry_run(ctx, view.summary(name), nominated, below).candidate
        assert candidate is not None  # fit is monotone: the node failed with every pod, fits without them
        score = candidate_score(candidate)
        if best_score is None or score < best_score:
            best_score, best = score, [candidate]
        elif score == best_score:
            best.append(candidate)
    return best_score, best


def _plain_dry_run_statuses(ctx: PredictionContext, plain: set[str], has_lower: set[str], wants: list[tuple[int, int]],
                            levels: list[int], statuses: dict[str, Status]) -> Counter[Status]:
    """Why each plain potential node is no candidate (no lower-priority pod, or still no room without
    them), written to ``statuses``; returns how many nodes have each status, the other nodes' included."""
    counts = Counter(statuses.values())
    no_victims = plain - has_lower
    statuses.update(dict.fromkeys(no_victims, NO_VICTIMS))
    counts[NO_VICTIMS] += len(no_victims)
    if has_lower:
        for mask, part in _resource_partition(ctx.view.index, has_lower, wants, levels[-1]).items():
            status = _mask_status(mask)
            statuses.update(dict.fromkeys(part, status))
            counts[status] += len(part)
    return counts


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
    return PostFilterResult(dry.best, dry.tied, dry.candidate_count, len(potential), True, "")


# ---- one replica, many replicas ---------------------------------------------------------------------------

def _victim_info(pod: Pod, candidate: Candidate) -> VictimInfo:
    grace = pod.termination_grace_period_seconds
    return VictimInfo(pod.namespace, pod.name, candidate.node, pod.effective_priority, pod.key in candidate.violating,
                      DEFAULT_GRACE_PERIOD_SECONDS if grace is None else grace)


def _gap_note(pod: Pod) -> str:
    return f" Not modelled (the prediction ignores it): {'; '.join(pod.unmodeled)}." if pod.unmodeled else ""


def kubelet_admission_failure(view: ClusterView, pod: Pod) -> str | None:
    """Why the kubelet of ``pod.node_name`` would refuse the pod (its ``generalFilter``), or None when it admits it.

    The kubelet checks the node name, node selector and required node affinity, host ports, resources and
    NoExecute taints; it ignores cordons, NoSchedule taints, inter-pod affinity and topology spread.
    """
    name = pod.node_name
    if name not in view.state.nodes:
        return f"node {name} does not exist"
    node = view.node(name)
    if not required_node_affinity_matches(pod, node):
        return ERR_NODE_AFFINITY.replace("node(s)", "the node")
    for taint in node.taints:
        if taint.effect == "NoExecute" and not tolerates(pod.tolerations, taint):
            return f"the pod does not tolerate the node's NoExecute taint {taint.key}"
    info = NodeInfo.build(node, view.pods_on(name))
    if pod.host_ports and host_ports_conflict(pod.host_ports, (hp for p in info.pods.values() for hp in p.host_ports)):
        return ERR_NODE_PORTS.replace("node(s)", "the node")
    used = info.requested
    status = resource_fit_status(pod.requests, node.allocatable, used.milli_cpu, used.memory,
                                 used.ephemeral_storage, used.pod_count, used.scalar)
    return None if status.ok else ", ".join(status.reasons)


def predict_bound_pod(view: ClusterView, pod: Pod, policy: str, gaps: str) -> PreemptionResult:
    """A pod that sets ``spec.nodeName``: the scheduler never handles it, so nothing is preempted for it."""
    base = PreemptionResult(pod=pod.key, priority=pod.effective_priority, priority_class_name=pod.priority_class_name,
                            preemption_policy=policy, outcome=UNSCHEDULABLE_OUTCOME)
    failure = kubelet_admission_failure(view, pod)
    if failure is None:
        return replace_fields(base, outcome=FITS, node=pod.node_name,
                              message=f"spec.nodeName binds the pod to node {pod.node_name}, where it fits;"
                                      f" the scheduler does not handle it and preempts nothing." + gaps)
    message = (f"spec.nodeName binds the pod to node {pod.node_name}, so the scheduler never handles it and never"
               f" preempts for it; the kubelet will reject it: {failure}.")
    if pod.effective_priority >= SYSTEM_CRITICAL_PRIORITY and pod.node_name in view.state.nodes:
        message += (" As a critical pod (system priority), the kubelet may instead evict pods on that node itself"
                    " to admit it.")
    return replace_fields(base, message=message + gaps)


def predict_pod(view: ClusterView, pod: Pod, args: PreemptionArgs, *,
                deadline: float | None = None) -> tuple[PreemptionResult, Candidate | None]:
    """One replica whose ``spec.priority`` is already resolved; does not change ``view``."""
    policy = pod.preemption_policy or PREEMPT_LOWER_PRIORITY
    gaps = _gap_note(pod)
    if not view.node_names:
        return PreemptionResult(pod=pod.key, priority=pod.effective_priority,
                                priority_class_name=pod.priority_class_name, preemption_policy=policy,
                                outcome=UNSCHEDULABLE_OUTCOME, message=NO_NODES_AVAILABLE + "." + gaps), None
    if pod.node_name:
        return predict_bound_pod(view, pod, policy, gaps), None
    ctx = new_context(view, pod, args, deadline=deadline)
    ctx.check_deadline()
    filtered = filter_nodes(ctx)
    if filtered.fit_node is not None:
        return PreemptionResult(pod=pod.key, priority=pod.effective_priority,
                                priority_class_name=pod.priority_class_name, preemption_policy=policy, outcome=FITS,
                                node=filtered.fit_node,
                                message=f"fits on node {filtered.fit_node} without preemption." + gaps), None
    base = PreemptionResult(pod=pod.key, priority=pod.effective_priority, priority_class_name=pod.priority_class_name,
                            preemption_policy=policy, outcome=UNSCHEDULABLE_OUTCOME)
    if filtered.counts is not None:
        fit_error = nodes_available_message_from_counts(len(view.node_names), filtered.counts)
    else:
        fit_error = nodes_available_message(len(view.node_names), filtered.statuses.values())
    post = preempt(ctx, filtered.statuses, filtered=filtered)
    if post.candidate is None:
        return replace_fields(base, message=f"{fit_error} {post.message}{gaps}",
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
    return replace_fields(
        base, outcome=PREEMPTS, node=candidate.node, victims=victims, pdb_violations=candidate.num_pdb_violations,
        candidate_nodes=post.candidate_count, tied_nodes=post.tied,
        expected_delay_seconds=max(v.grace_period_seconds for v in victims),
        message=" ".join(notes) + gaps, sampled=sampled,
    ), candidate


def simulate_pods(state: ClusterState, pods: Sequence[Pod], args: PreemptionArgs | None = None, *,
                  deadline: float | None = None) -> list[PreemptionResult]:
    """Predict each pod in order, applying each placement and eviction before the next (never mutating ``state``).

    ``deadline`` (a ``time.monotonic()`` value): past it, ``PredictionTimeout`` is raised from inside the node
    loops, so a caller enforcing a time budget leaves no runaway computation behind.
    """
    args = args or PreemptionArgs()
    index = state_index(state)
    timeout = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
    if not index.lock.acquire(timeout=timeout):
        raise PredictionTimeout("the preemption prediction exceeded its deadline waiting for another prediction")
    try:
        view = ClusterView(state)
        results = []
        last = len(pods) - 1
        for i, pod in enumerate(pods):
            result, candidate = predict_pod(view, pod, args, deadline=deadline)
            results.append(result)
            if i == last:
                break  # nothing reads the view after the last replica: skip applying its placement
            if candidate is not None:
                for victim in candidate.victims:
                    view.evict(victim)
            if result.node is not None:
                view.bind(pod, result.node)
        return results
    finally:
        index.lock.release()


def replica_pods(pod: Pod, replicas: int) -> list[Pod]:
    """N copies with distinct names (``<name>-<i>``); a single replica keeps the pod's own name."""
    if replicas == 1:
        return [pod]
    return [replace_fields(pod, name=f"{pod.name}-{i}", uid=f"{pod.uid}-{i}" if pod.uid else "")
            for i in range(replicas)]


def resolve_priority(state: ClusterState, pod: Pod) -> Pod:
    """The pod as the Priority admission plugin would store it; raises ``PriorityRejection``."""
    resolved = resolve_pod_priority(pod.priority_class_name, pod.priority, pod.preemption_policy,
                                    effective_classes(state))
    if (resolved.priority == pod.priority and resolved.preemption_policy == pod.preemption_policy
            and resolved.priority_class_name == pod.priority_class_name):
        return pod
    return replace_fields(pod, priority=resolved.priority, preemption_policy=resolved.preemption_policy,
                          priority_class_name=resolved.priority_class_name)


def predict_preemption(state: ClusterState, pod: Pod, *, replicas: int = 1, args: PreemptionArgs | None = None,
                       deadline: float | None = None) -> list[PreemptionResult]:
    """The public entry point: resolve the priority, then simulate ``replicas`` copies of ``pod`` in order.

    ``deadline``: see ``simulate_pods`` (raises ``PredictionTimeout`` once ``time.monotonic()`` passes it).
    """
    return predict_pods(state, replica_pods(pod, replicas), args=args, deadline=deadline)


Simulate = Callable[..., list[PreemptionResult]]


def resolve_each(state: ClusterState, pods: Sequence[Pod]) -> list[Pod | PreemptionResult]:
    """Each pod as the Priority plugin would store it, or its own ``Rejected`` result."""
    entries: list[Pod | PreemptionResult] = []
    for pod in pods:
        try:
            entries.append(resolve_priority(state, pod))
        except PriorityRejection as exc:
            entries.append(PreemptionResult(pod=pod.key, priority=None, priority_class_name=pod.priority_class_name,
                                            preemption_policy=pod.preemption_policy or PREEMPT_LOWER_PRIORITY,
                                            outcome=REJECTED, message=str(exc)))
    return entries


def predict_pods(state: ClusterState, pods: Sequence[Pod], *, args: PreemptionArgs | None = None,
                 deadline: float | None = None, simulate: Simulate = simulate_pods) -> list[PreemptionResult]:
    """Like ``predict_preemption`` for pods that may differ (e.g. StatefulSet replicas, several manifests).

    Each pod gets its own outcome: a pod the Priority plugin rejects is ``Rejected`` and takes no place in the
    simulation of the others. ``simulate(state, admitted, args, deadline=...)`` runs the admitted pods in order.
    """
    entries = resolve_each(state, pods)
    admitted = [e for e in entries if isinstance(e, Pod)]
    simulated = iter(simulate(state, admitted, args, deadline=deadline) if admitted else ())
    return [next(simulated) if isinstance(e, Pod) else e for e in entries]


__all__ = [
    "ERROR",
    "DryRun",
    "FilterOutcome",
    "PostFilterResult",
    "PredictionContext",
    "PredictionTimeout",
    "dry_run_node",
    "dry_run_preemption",
    "filter_nodes",
    "new_context",
    "nodes_available_message",
    "nodes_available_message_from_counts",
    "nodes_where_preemption_might_help",
    "pod_eligible_to_preempt_others",
    "predict_bound_pod",
    "predict_pod",
    "predict_pods",
    "predict_preemption",
    "preempt",
    "replica_pods",
    "resolve_each",
    "resolve_priority",
    "simulate_pods",
]
