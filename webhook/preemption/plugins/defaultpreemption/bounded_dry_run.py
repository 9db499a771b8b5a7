"""DefaultPreemption's bounded dry run for a resource-only pod: the best candidate without dry-running every
potential node (``Interface.bounded_dry_run``).

Every node gets a lower bound of its ``CandidateScore`` (docs/preemption.md §9) from its summary and the
capacity orderings; nodes are dry-run exactly (``select_victims_by_resources``) in bound order until a
bound exceeds the best exact score, so the best node and every node tying with it are found. The answer
equals the Evaluator's dry run over every potential node followed by its pick
(pkg/scheduler/framework/preemption/preemption.go (DryRunPreemption, pickOneNodeForPreemption)) for this policy's
victims and the default order; the candidates are offered to the same running minimum (``BestCandidates``).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import NamedTuple

from webhook.cluster.model import Pod, Resources
from webhook.preemption.deadline import DEADLINE_STRIDE
from webhook.preemption.framework.context import PredictionContext
from webhook.preemption.framework.index import (
    MIN_PRIORITY_ORDER,
    PER_NODE_COST,
    Bounds,
    StateIndex,
    cutting_bounds,
    free_order,
    holding,
    holds,
    intersect_at_least,
    order_key,
    order_value,
    subset,
)
from webhook.preemption.framework.preemption import (
    LOWEST_NEGATED_START,
    PRIORITY_SUM_OFFSET,
    BestCandidates,
    Candidate,
    CandidateScore,
    DryRun,
    default_candidate_score,
    new_score,
)
from webhook.preemption.framework.status import Status
from webhook.preemption.framework.summary import PODS, NodeSummary, Usage
from webhook.preemption.plugins.defaultpreemption.victims import (
    NO_VICTIMS,
    select_victims_by_resources,
    select_victims_on_node,
)
from webhook.preemption.plugins.noderesources import (
    Want,
    fits_after_freeing,
    mask_status,
    nodes_with_room,
    resource_partition,
    wanted_resources,
)

# Victim-count bounds up to this many are found with the capacity orderings; larger ones node by node.
MAX_COUNT_ORDER = 4
# Exact dry runs between two deadline checks.
DRY_RUNS_PER_DEADLINE_CHECK = 64
# A group this many times smaller than the cluster is sorted by itself instead of found in an ordering's walk.
SMALL_GROUP_FACTOR = 8
# A lazy walk (``_walk_dense_group``) checks at least this many nodes before it gathers its group instead.
MIN_WALK_STEPS = 64


class Bound(NamedTuple):
    """No candidate on ``node`` can score lower than ``score``."""

    score: CandidateScore
    node: str
    # How many of the node's priority levels are below the pod's (None: the exact dry run counts them).
    levels_below: int | None
    nominated: list[Pod]  # the pods nominated to the node that count in pass 1


def bound_order(bound: Bound) -> tuple[CandidateScore, str]:
    return bound.score, bound.node


def priority_sum_bound(top: int, count: int, lowest: int) -> int:
    """The smallest Σ(priority + 2^31) of ``count`` victims, the highest at ``top``, none below ``lowest``."""
    return top + PRIORITY_SUM_OFFSET + (count - 1) * (lowest + PRIORITY_SUM_OFFSET)


def score_floor(top: int, count: int, lowest: int) -> CandidateScore:
    """The lowest score of any node without PDB violations whose victims number ``count`` or more, the highest
    at ``top``, none below ``lowest``."""
    return CandidateScore(0, top, priority_sum_bound(top, count, lowest), count, LOWEST_NEGATED_START)


def shortfall(requests: Resources, free: Usage) -> tuple[int, int, int]:
    """What a node lacks of the cpu, memory and ephemeral-storage the pod requests (<= 0: enough; a resource the pod
    does not request lacks nothing, as Fit checks only those requested)."""
    free_cpu, free_mem, free_eph, _ = free
    return (requests.milli_cpu - free_cpu if requests.milli_cpu else 0,
            requests.memory - free_mem if requests.memory else 0,
            requests.ephemeral_storage - free_eph if requests.ephemeral_storage else 0)


def minimum_victims(requests: Resources, free: Usage, summary: NodeSummary, level_index: int) -> int:
    """Fewest pods at or below ``summary.levels[level_index]`` whose removal can cover every shortfall."""
    free_pods = free[PODS]
    count = 1 - free_pods if free_pods < 0 else 1
    short_cpu, short_mem, short_eph = shortfall(requests, free)
    if short_cpu > 0 or short_mem > 0 or short_eph > 0:
        cpu_sums, mem_sums, eph_sums = summary.largest_first(level_index)
        if short_cpu > 0:
            count = max(count, bisect.bisect_left(cpu_sums, short_cpu) + 1)
        if short_mem > 0:
            count = max(count, bisect.bisect_left(mem_sums, short_mem) + 1)
        if short_eph > 0:
            count = max(count, bisect.bisect_left(eph_sums, short_eph) + 1)
    return count


def node_bound(summary: NodeSummary, requests: Resources, free: Usage, level_index: int,
               levels_below: int | None = None, nominated: list[Pod] | None = None) -> Bound:
    """The bound of a node whose lowest level making room is ``levels[level_index]``: that level is its top victim
    priority at least, its victims number at least ``minimum_victims``, and its top victims started no later
    than the latest pod of that level."""
    top = summary.levels[level_index]
    count = minimum_victims(requests, free, summary, level_index)
    score = new_score(CandidateScore, (0, top, priority_sum_bound(top, count, summary.levels[0]), count,
                                       -summary.level_latest_start[level_index]))
    return Bound(score, summary.node.name, levels_below, [] if nominated is None else nominated)


def _slow_node_bound(ctx: PredictionContext, name: str, statuses: dict[str, Status]) -> Bound | None:
    """The bound of one node that has nominated pods or simulated changes; None (and its status) when the node
    is no candidate."""
    summary = ctx.view.summary(name)
    below = summary.lower_priority_count(ctx.priority)
    if below == 0:
        statuses[name] = NO_VICTIMS
        return None
    nominated = ctx.nominated_pods(name)
    used = summary.used_with(nominated)
    requests = ctx.pod.requests
    alloc = summary.node.allocatable
    if not fits_after_freeing(requests, alloc, used, summary.cumulative[below - 1]):
        statuses[name] = select_victims_by_resources(ctx.pod, summary, nominated, ctx.pdbs,
                                                     levels_below=below).status
        return None
    level_index = next(i for i in range(below) if fits_after_freeing(requests, alloc, used, summary.cumulative[i]))
    used_cpu, used_mem, used_eph, used_pods = used
    free = (alloc.milli_cpu - used_cpu, alloc.memory - used_mem, alloc.ephemeral_storage - used_eph,
            alloc.pods - used_pods)
    return node_bound(summary, requests, free, level_index, below, nominated)


def one_victim_bound(requests: Resources, summary: NodeSummary, level: int, lowest: int) -> CandidateScore:
    """A tighter bound of a plain node that first makes room at ``level`` (so it holds pods there, and every victim
    is at or below it, one at least at it) than its victim-count and latest-start bound: with one victim, that
    pod frees the node's whole shortfall alone, so it started no later than the latest such pod of the level; with
    none such, two victims at least. Where the latest pod of the level is small (a pod just bound, whose start is
    "now"), the plain bound cannot cut the node, and at 15,000 nodes under 500 pod writes/s hundreds of nodes were
    dry-run per prediction (preempt p99 27 ms in-process)."""
    level_index = bisect.bisect_left(summary.levels, level)
    free = summary.free
    if free[PODS] >= 0 and level_index < len(summary.levels) and summary.levels[level_index] == level:
        latest = summary.latest_start_freeing(level_index, *shortfall(requests, free))
        if latest is not None:
            return new_score(CandidateScore, (0, level, priority_sum_bound(level, 1, lowest), 1, -latest))
    return score_floor(level, 2, lowest)


def _plain_bounds(ctx: PredictionContext, names: Iterable[str], level: int) -> list[Bound]:
    """The bounds of nodes without nominated pods or simulated changes whose lowest level making room is
    ``level``."""
    requests = ctx.pod.requests
    summaries = ctx.view.index.summaries
    bounds: list[Bound] = []
    for i, name in enumerate(names):
        if not i % DEADLINE_STRIDE:
            ctx.check_deadline()
        summary = summaries[name]
        level_index = max(bisect.bisect_right(summary.levels, level) - 1, 0)
        bounds.append(node_bound(summary, requests, summary.free, level_index))
    return bounds


def bounded_dry_run(ctx: PredictionContext, potential: Collection[str]) -> DryRun:
    """The dry run of a resource-only pod by branch and bound over the bounds of the nodes.

    With fit monotone in the pods removed, a node's bound follows from the lowest priority level whose removal
    (with every level below) makes room (``node_bound``). The cluster's priority levels are visited in
    ascending order; the nodes that first make room at a level come from the capacity orderings of the index, one
    victim count after another (the smallest slices first, few nodes checked one by one, a dense group walked
    lazily), so the work follows the nodes within reach of the best bound rather than the cluster.
    """
    view = ctx.view
    index = view.index
    wanted: set[str] | frozenset[str] = potential if isinstance(potential, (set, frozenset)) else set(potential)
    slow = view.touched | index.nominated_nodes
    volumes = ctx.volumes
    if volumes is not None:
        # A volume pod: the nodes with simulated changes or nominated pods, and those where a pod-reading volume
        # Filter may fail, are dry-run plugin by plugin (``general``).
        slow = slow | volumes.general
    # Sets of (nearly) every node are read, never copied: at 15,000 nodes each copy costs a third of a millisecond.
    plain: set[str] | frozenset[str] = wanted - slow if slow else wanted
    # One of the index's own groups of nodes (the Filter pass hands over the one it found whole) needs no check.
    if not any(plain is group for group in index.static_groups.values()) and not index.summaries.keys() >= plain:
        plain = plain & index.summaries.keys()
    statuses: dict[str, Status] = {}
    general: list[Candidate] = []
    slow_bounds: list[Bound] = []
    if volumes is None:
        slow_bounds = [b for b in (_slow_node_bound(ctx, name, statuses) for name in sorted(wanted & slow))
                       if b is not None]
    else:
        general = _general_dry_runs(ctx, sorted(wanted & slow), statuses)
    levels = index.levels_below(ctx.priority)
    wants = wanted_resources(ctx.pod)
    has_lower = _with_lower_priority_pods(index, plain, ctx.priority) if levels else set()
    # Where a candidate may be: for a volume pod, only the nodes its node-only volume Filters allow.
    searchable = has_lower if volumes is None else has_lower & volumes.allowed
    candidates_plain = nodes_with_room(index, searchable, wants, levels[-1]) if levels else set()
    candidate_count = len(candidates_plain) + len(slow_bounds) + len(general)
    if not candidate_count:
        counts = _plain_dry_run_statuses(ctx, plain, has_lower, wants, levels, statuses)
        return DryRun([], statuses, 0, counts=counts)
    pending = sorted(slow_bounds, key=bound_order)
    lowest = min(index.level_nodes, default=-PRIORITY_SUM_OFFSET)
    second = min((level for level in index.level_nodes if level > lowest), default=lowest)
    best = BestCandidates()
    for candidate in general:
        best.offer(candidate)
    # The nodes that made room at the level before (None at the first): done there, left out at the next.
    previous: Bounds | None = None
    for level in levels:
        if best.score is not None and best.score.pdb_violations == 0 and best.score.top_priority < level:
            break  # every bound from here on starts with (0, level), worse than the best
        room = room_bounds(wants, level)
        slow_batch = []
        while pending and pending[0].score.top_priority <= level:
            slow_batch.append(pending.pop(0))
        _dry_run_batch(ctx, slow_batch, best)
        # The nodes that first make room at ``level`` are never gathered whole (at 15,000 nodes each such set costs
        # a few tenths of a millisecond): each victim count's are found from the capacity orderings, few first.
        taken: set[str] | None = set()  # this level's nodes within the counts done so far (None: not gathered)
        count = 0
        while True:
            count += 1
            if taken is None:
                taken = _first_room(index, searchable, room + _within_count_bounds(wants, level, count - 1), previous)
            if count > MAX_COUNT_ORDER:
                rest = _first_room(index, searchable, room, previous)
                _dry_run_batch(ctx, _plain_bounds(ctx, rest - taken if taken else rest, level), best)
                break
            # The nodes whose victim-count bound is ``count`` at most: those of the counts before are done.
            bounds = room + _within_count_bounds(wants, level, count)
            visited: set[str] = set()
            if count == 1:
                walked = _walk_dense_group(ctx, searchable, bounds, previous, level, lowest, best)
                if walked is not None:
                    done, visited = walked
                    if done:
                        taken = None
                        if best.beats(score_floor(level, 2, lowest)):
                            break
                        continue
                    # The walk ran out of its budget: the group is gathered, less the nodes it dry-ran.
            within = _first_room(index, searchable, bounds, previous)
            # Every node left (``searchable`` itself: no bound leaves any out, none made room before) is within it.
            last = within is searchable
            batch = within - taken if taken else within
            taken = within
            # Their bound differs only in the lowest pod priority of the node (a term of the priority sum) and the
            # latest start at ``level``.
            group = batch if count == 1 else _with_lowest_level(index, batch, lowest)
            _dry_run_by_latest_start(ctx, group - visited if visited else group, level, count, lowest, best)
            rest = set() if len(group) == len(batch) else batch - group  # ``group`` is a subset of ``batch``
            if rest and not best.beats(score_floor(level, count, second)):
                _dry_run_batch(ctx, _plain_bounds(ctx, rest, level), best)
            # Every node left at this level has at least count + 1 victims, and at least its top one at ``level``.
            if last or best.beats(score_floor(level, count + 1, lowest)):
                break
        previous = room
    _dry_run_batch(ctx, pending, best)
    picked = best.pick()
    chosen, tied = picked if picked is not None else (None, ())
    return DryRun(best.candidates, statuses, candidate_count, chosen, tied)


def _with_lower_priority_pods(index: StateIndex, nodes: set[str] | frozenset[str], priority: int) -> set[str]:
    """``nodes`` that hold a pod of lower priority than ``priority``: ``nodes`` itself when every node does."""
    order = index.order(MIN_PRIORITY_ORDER)
    count = order.count_below(priority)
    if count >= len(index.summaries):
        return nodes if isinstance(nodes, set) else set(nodes)
    return subset(index, set(nodes) if not isinstance(nodes, set) else nodes, order.below(priority))


def _dry_run_by_latest_start(ctx: PredictionContext, group: set[str], level: int, count: int, lowest: int,
                             best: BestCandidates) -> None:
    """Exact dry runs of ``group``, nodes whose bounds differ only in the latest start at ``level``, latest start
    first (= bound order, read off the index), until a bound exceeds the best score."""
    if not group:
        return
    # At the cluster's lowest level, ``count`` victims or more all have the top priority (nothing is lower): the
    # earliest of them started no later than the count-th latest pod of the level.
    key = order_key("latest", level, 0, count if level == lowest and count > 1 else 0)
    index = ctx.view.index
    # The one-victim bound reads no extended resource: a pod requesting one keeps the plain bound.
    refine = count == 1 and not ctx.pod.requests.scalar
    if refine:
        early = intersect_at_least(index, group, unstarted_bounds(wanted_resources(ctx.pod), level))
        if early is not group:
            # Pods not started yet (start "now") are the latest of their level, so they hold the bound of every node
            # with one up (~1,100 of 15,000 under 500 pod writes/s, each checked): where none can be the one victim
            # alone, the latest start of a started pod bounds the node; the others are dry-run first.
            _offer_early(ctx, early, level, lowest, best, lambda summary: True, set())
            group = group - early if early else group
            key = order_key("started", level)
            if not group:
                return
    order = index.order(key)
    summaries = index.summaries
    total = priority_sum_bound(level, count, lowest)
    left = len(group)
    ordered: Iterable[tuple[int, str]]
    if left * SMALL_GROUP_FACTOR < len(order):
        # A few nodes of many: sorted by themselves (the ordering's own order), not found in a walk over every node.
        ordered = sorted(((order_value(key, summaries[name]), name) for name in group), reverse=True)
    else:
        ordered = order.descending()
    for value, name in ordered:
        if name not in group:
            continue
        if best.beats(new_score(CandidateScore, (0, level, total, count, -value))):
            break
        if refine and best.beats(one_victim_bound(ctx.pod.requests, summaries[name], level, lowest)):
            left -= 1
            if not left:
                break
            continue
        candidate = select_victims_by_resources(ctx.pod, summaries[name], [], ctx.pdbs).candidate
        assert candidate is not None  # fit is monotone: the node failed with every pod, fits without them
        best.offer(candidate)
        left -= 1
        if not left:
            break
        if not left % DRY_RUNS_PER_DEADLINE_CHECK:
            ctx.check_deadline()


def _walk_dense_group(ctx: PredictionContext, nodes: set[str], bounds: Bounds, previous: Bounds | None, level: int,
                      lowest: int, best: BestCandidates) -> tuple[bool, set[str]] | None:
    """Exact dry runs of the ``nodes`` within one victim of room at ``level`` (``bounds``; not made room at the level
    before, ``previous``), latest start at ``level`` first, until a bound exceeds the best score, found lazily: a
    walk down the latest-start ordering checks each node it meets, and stops at the first node the best beats.

    Only where they may be many (an eighth of the cluster or more, by the orderings' counts): gathering them would
    touch thousands of nodes where the walk checks a few. None: they may be few (the caller gathers them); else
    whether the walk is done, and the nodes it dry-ran (when it met too many outsiders, the caller gathers the rest).
    """
    index = ctx.view.index
    summaries = index.summaries
    sized = cutting_bounds(index, bounds)
    visited: set[str] = set()
    if sized is None:
        return True, visited
    total = len(summaries)
    most = sized[0][0] if sized else total
    if most * SMALL_GROUP_FACTOR < total:
        return None
    checks = [(key, value) for _, key, value in sized]
    # Checking a node costs about PER_NODE_COST times a set operation's step over it: past that many checks,
    # gathering the group is cheaper.
    budget = max(most // PER_NODE_COST, MIN_WALK_STEPS)
    key = order_key("latest", level)
    refine = not ctx.pod.requests.scalar
    early: set[str] = set()
    if refine:
        # As in ``_dry_run_by_latest_start``: the nodes where a pod not started yet may be the one victim first, then
        # the walk down the latest start of the started pods.
        found = intersect_at_least(index, nodes, unstarted_bounds(wanted_resources(ctx.pod), level))
        if len(found) <= budget:
            early = found

            def in_group(summary: NodeSummary) -> bool:
                return holds(summary, checks) and (previous is None or not holds(summary, previous))

            _offer_early(ctx, early, level, lowest, best, in_group, visited)
            key = order_key("started", level)
    order = index.order(key)
    total_sum = priority_sum_bound(level, 1, lowest)
    for step, (value, name) in enumerate(order.descending()):
        if step >= budget:
            return False, visited
        if name not in nodes or name in early:
            continue
        summary = summaries[name]
        if not holds(summary, checks) or (previous is not None and holds(summary, previous)):
            continue
        if best.beats(new_score(CandidateScore, (0, level, total_sum, 1, -value))):
            return True, visited
        if refine and best.beats(one_victim_bound(ctx.pod.requests, summary, level, lowest)):
            continue
        _offer_dry_run(ctx, summary, best, visited)
    return True, visited


def room_bounds(wants: list[Want], level: int) -> Bounds:
    """Where the pod has room once every pod at or below ``level`` is gone (``nodes_with_room``'s bounds)."""
    return [(free_order(dim, level), want) for dim, want in wants]


def unstarted_bounds(wants: list[Want], level: int) -> Bounds:
    """Where one pod of ``level`` not started yet may free the node's whole shortfall alone: for each resource,
    what is free once the largest such pod is gone covers the want (the largest in each resource may be different
    pods, so these nodes are a superset of those where one does)."""
    return [(order_key("unstarted", level, dim), want) for dim, want in wants]


def _offer_early(ctx: PredictionContext, early: Iterable[str], level: int, lowest: int, best: BestCandidates,
                 in_group: Callable[[NodeSummary], bool], visited: set[str]) -> None:
    """Exact dry runs of the ``early`` nodes of the group (``in_group``), those where a pod not started yet may be
    the one victim, unless their one-victim bound is beaten; the nodes dry-run are added to ``visited``."""
    summaries = ctx.view.index.summaries
    requests = ctx.pod.requests
    for name in sorted(early):
        summary = summaries[name]
        if not in_group(summary) or best.beats(one_victim_bound(requests, summary, level, lowest)):
            continue
        _offer_dry_run(ctx, summary, best, visited)


def _offer_dry_run(ctx: PredictionContext, summary: NodeSummary, best: BestCandidates, visited: set[str]) -> None:
    """The exact dry run of a plain node within one victim of room, its candidate offered and the node counted in
    ``visited`` (the deadline checked every so many)."""
    candidate = select_victims_by_resources(ctx.pod, summary, [], ctx.pdbs).candidate
    assert candidate is not None  # fit is monotone: the node failed with every pod, fits without them
    best.offer(candidate)
    visited.add(summary.node.name)
    if not len(visited) % DRY_RUNS_PER_DEADLINE_CHECK:
        ctx.check_deadline()


def _within_count_bounds(wants: list[Want], level: int, count: int) -> Bounds:
    """Where removing ``count`` pods at or below ``level`` may make room: per resource, the ``count`` largest
    requests cover the shortfall, and ``count`` pods free enough slots."""
    bounds = [(free_order(PODS), 1 - count)]
    bounds += [(order_key("top", level, dim, count), want) for dim, want in wants if dim != PODS]
    return bounds


def _first_room(index: StateIndex, nodes: set[str], bounds: Bounds, previous: Bounds | None) -> set[str]:
    """The ``nodes`` where every bound holds and, with ``previous`` (the room bounds of a lower level), some bound of
    ``previous`` fails: the nodes that first make room at a level (room is monotone in the level). ``nodes`` itself
    when every bound holds on every node and there is no lower level (read it, never change it)."""
    found = intersect_at_least(index, nodes, bounds)
    if previous is None or not found:
        return found
    if len(found) * PER_NODE_COST < len(index.summaries):
        done = holding(index, found, previous)
    else:
        done = intersect_at_least(index, found, previous)
    return found - done if done else found


def _with_lowest_level(index: StateIndex, nodes: set[str], lowest: int) -> set[str]:
    """The ``nodes`` holding a pod of priority ``lowest`` (the cluster's lowest): ``nodes`` itself when every node
    does."""
    order = index.order(MIN_PRIORITY_ORDER)
    count = order.count_below(lowest + 1)
    if count >= len(index.summaries):
        return nodes
    if len(nodes) * PER_NODE_COST < count:
        summaries = index.summaries
        return {name for name in nodes if order_value(MIN_PRIORITY_ORDER, summaries[name]) <= lowest}
    return nodes.intersection(order.below(lowest + 1))


def _dry_run_batch(ctx: PredictionContext, batch: list[Bound], best: BestCandidates) -> None:
    """Exact dry runs of the nodes of one batch whose bound does not exceed the best score, in bound order."""
    if not batch:
        return
    view = ctx.view
    if best.score is None:
        # Dry-run the most promising node first, then only the nodes whose bound can match it, in order.
        first = min(batch, key=bound_order)
        candidate = select_victims_by_resources(ctx.pod, view.summary(first.node), first.nominated, ctx.pdbs,
                                                levels_below=first.levels_below).candidate
        assert candidate is not None
        limit = default_candidate_score(candidate)
    else:
        limit = best.score
    ordered = sorted((b for b in batch if b.score <= limit), key=bound_order)
    for i, bound in enumerate(ordered):
        if not i % DRY_RUNS_PER_DEADLINE_CHECK:
            ctx.check_deadline()
        if best.beats(bound.score):
            break
        candidate = select_victims_by_resources(ctx.pod, view.summary(bound.node), bound.nominated, ctx.pdbs,
                                                levels_below=bound.levels_below).candidate
        assert candidate is not None  # fit is monotone: the node failed with every pod, fits without them
        best.offer(candidate)


def _plain_dry_run_statuses(ctx: PredictionContext, plain: set[str] | frozenset[str], has_lower: set[str],
                            wants: list[Want], levels: list[int], statuses: dict[str, Status]) -> Counter[Status]:
    """How many nodes have each status, those of ``statuses`` (the slow nodes) and the plain potential nodes,
    counted by why they are no candidate (no lower-priority pod, or still no room without them) from the index's
    sets: all the PostFilter's message reads, so no status is written per plain node."""
    counts = Counter(statuses.values())
    no_victims = len(plain) - len(has_lower) if has_lower is plain else len(plain - has_lower)
    counts[NO_VICTIMS] += no_victims
    if has_lower:
        for mask, part in resource_partition(ctx.view.index, has_lower, wants, levels[-1]).items():
            if not mask and ctx.volumes is not None:
                # Room once every lower-priority pod is gone, on a node a node-only volume Filter rules out: its
                # status is that Filter's (they run after NodeResourcesFit).
                for blocked, status in ctx.volumes.partition(part):
                    counts[status] += len(blocked)
                continue
            counts[mask_status(mask)] += len(part)
    return counts


def _general_dry_runs(ctx: PredictionContext, names: list[str], statuses: dict[str, Status]) -> list[Candidate]:
    """``select_victims_on_node`` plugin by plugin on ``names`` (a volume pod's nodes that the resource arithmetic
    does not answer): the candidates, and the others' statuses written to ``statuses``."""
    candidates = []
    for i, name in enumerate(names):
        if not i % DRY_RUNS_PER_DEADLINE_CHECK:
            ctx.check_deadline()
        selection = select_victims_on_node(ctx.framework, ctx.cycle, ctx.pod, ctx.view.node_info(name),
                                           ctx.nominated_pods(name), ctx.pdbs)
        if selection.candidate is not None:
            candidates.append(selection.candidate)
        else:
            statuses[name] = selection.status
    return candidates
