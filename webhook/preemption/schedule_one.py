"""One scheduling attempt up to the PostFilter: PreFilter (``new_context``) and the Filter pass
(``find_nodes_that_fit_pod``), as pkg/scheduler/schedule_one.go (schedulePod, findNodesThatFitPod).

The pod's nominated node is tried first, then every node in name order. Per node, the node-only Filter plugins run
once, then the others with and without nominated pods (``Framework.run_filter_plugins_with_nominated_pods``).

Beside each step, its resource-only form (``PredictionContext.resource_only``): on a node the index has not seen
change, NodeResourcesFit on the node's sums; past a short scan, every node at once (``_filter_all_nodes``), with the
node-only plugins asked once per group of nodes that look alike to them, NodeAffinity from the label index and
NodeResourcesFit from the capacity orderings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from webhook.cluster.model import Pod
from webhook.preemption.deadline import DEADLINE_STRIDE, Deadline
from webhook.preemption.framework.context import NodeRestriction, PredictionContext
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.runtime import Framework
from webhook.preemption.framework.status import ERROR, UNSCHEDULABLE, NodeStatuses, Status
from webhook.preemption.framework.types import NodeScores, ScoringNodes
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.plugins import (
    nodeaffinity,
    nodename,
    noderesources,
    nodeunschedulable,
    nodevolumelimits,
    tainttoleration,
    volumebinding,
    volumezone,
)
from webhook.preemption.plugins.nodeaffinity import NODE_AFFINITY_FAILED, matching_nodes, selects_nodes
from webhook.preemption.plugins.noderesources import (
    fit_on_summary,
    mask_status,
    nodes_with_room,
    resource_partition,
    wanted_resources,
)
from webhook.preemption.plugins.registry import default_framework
from webhook.preemption.results import NodeScore, PreemptionArgs

# A pod that fits usually fits on one of the first nodes: try them one by one before the bulk path.
QUICK_SCAN_NODES = 32

# The Filter plugins the resource-only paths answer: the node-only ones by the index's groups and labels, and
# NodeResourcesFit by arithmetic. A pod for which any other Filter plugin runs takes the plugin-by-plugin path, but for
# the volume plugins of ``VOLUME_FILTERS`` when ``volume_restriction`` answers them.
RESOURCE_ONLY_FILTERS = frozenset({nodename.NAME, nodeunschedulable.NAME, tainttoleration.NAME, nodeaffinity.NAME,
                                   noderesources.NAME})
# The volume Filter plugins a ``NodeRestriction`` answers for the resource-only paths (#27).
VOLUME_FILTERS = frozenset({volumebinding.NAME, volumezone.NAME, nodevolumelimits.NAME})
# The node-only plugins whose answer depends only on what groups the index's nodes (unschedulable, taints).
GROUPED_NODE_FILTERS = frozenset({nodeunschedulable.NAME, tainttoleration.NAME})


def new_context(view: ClusterView, pod: Pod, args: PreemptionArgs, *, deadline: Deadline | float | None = None,
                framework: Framework | None = None) -> PredictionContext:
    """PreFilter: every plugin's state for the pod (``CycleState``), and the PDB list (read once)."""
    deadline = Deadline.of(deadline)
    framework = framework or default_framework(args.scoring)
    cycle = framework.run_pre_filter_plugins(pod, view, deadline)
    active = framework.active(cycle)
    resource_only = active.filter_names <= RESOURCE_ONLY_FILTERS and not pod.requests.scalar
    restriction = None
    if (not resource_only and cycle.pre_filter_status is None and not pod.requests.scalar
            and active.filter_names <= RESOURCE_ONLY_FILTERS | VOLUME_FILTERS):
        restriction = volume_restriction(view, pod, cycle, active.filter_names)
        resource_only = restriction is not None
    grouped = active.node_filter_names <= GROUPED_NODE_FILTERS
    return PredictionContext(framework, view, pod, pod.effective_priority, args, view.index.pdb_index(args), cycle,
                             resource_only, {} if grouped else None, volumes=restriction, deadline=deadline)


def volume_restriction(view: ClusterView, pod: Pod, cycle: CycleState, filters: frozenset[str],
                       ) -> NodeRestriction | None:
    """What the pod's volume Filters leave to the resource-only paths (#27), when they can be answered for every node
    at once: VolumeBinding (bound claims, and unbound WaitForFirstConsumer claims to provision) and VolumeZone read the
    node alone (the nodes they allow come from the label index); NodeVolumeLimits fails only where a driver's headroom
    is short, and those nodes go plugin by plugin. None: the pod takes the plugin-by-plugin path on every node (static
    volumes to match, a class or claim that cannot be read, VolumeRestrictions running for a disk or an exclusive
    claim in use)."""
    index = view.index
    nodes = set(index.summaries)
    allowed: set[str] = nodes
    blocked: list[tuple[set[str], Status]] = []
    if volumebinding.NAME in filters:
        binding = cycle.read(volumebinding.BindingState)
        if binding is not None:
            found = volumebinding.node_restriction(binding, index.node_labels, allowed)
            if found is None:
                return None
            allowed, failed = found
            blocked += failed
    if volumezone.NAME in filters:
        zones = cycle.read(volumezone.ZoneState)
        if zones is not None:
            passing = volumezone.zone_allowed_nodes(zones, index.node_labels, allowed)
            if len(passing) < len(allowed):
                blocked.append((allowed - passing, volumezone.CONFLICT))
            allowed = passing
    general: set[str] = set()
    if nodevolumelimits.NAME in filters:
        tight = nodevolumelimits.nodes_where_limits_may_fail(view, pod)
        if tight is None:
            return None
        general = tight
    return NodeRestriction(allowed, tuple(blocked), general)


def node_fit_status(ctx: PredictionContext, name: str) -> Status:
    """Every Filter plugin on one node, with the two-pass nominated-pod rule (docs/preemption.md §6)."""
    view = ctx.view
    node = view.node(name)
    memo = ctx.node_filter_memo
    # The node-only plugins, asked once per group of nodes that look alike to them when that is all they read.
    status = None if memo is None else memo.get((node.unschedulable, node.taints))
    if status is None:
        status = ctx.framework.run_node_filter_plugins(ctx.cycle, ctx.pod, node)
        if memo is not None:
            memo[node.unschedulable, node.taints] = status
    if not status.ok:
        return status
    # The index's flag is read here, not in nominated_pods: this runs for every node a scan looks at.
    nominated = ctx.nominated_pods(name) if view.index.has_nominated else []
    if ctx.resource_only and name not in view.touched and not ctx.takes_general_path(name):
        status = fit_on_summary(ctx.pod, view.index.summary(name), nominated)
        volumes = ctx.volumes
        if status.ok and volumes is not None:
            # The pod-reading volume Filters pass here (not a general node); the node-only ones may not.
            return volumes.status_of(name) or status
        return status
    return ctx.framework.run_filter_plugins_with_nominated_pods(ctx.cycle, ctx.pod, view.node_info(name), nominated)


@dataclass(slots=True)  # built for every review: no frozen-init cost
class FilterResult:
    """The nodes that fit (at most what the scheduler looks for), else every node's status (upstream's
    Diagnosis.NodeToStatus).

    ``feasible``: in name order (the nominated node alone when it fits: upstream takes it without scoring);
    ``more_feasible``: more nodes fit than the scheduler collects (``num_feasible_nodes_to_find``), so it scores
    a sample whose members depend on where its rotating start left off. The bulk path for resource-only pods also
    hands over how many nodes have each status and the nodes whose status is Unschedulable, so nothing downstream
    walks every node again; its ``statuses`` hold sets of nodes per status (``NodeStatuses``), not one entry per
    node.
    """

    feasible: list[str]
    statuses: Mapping[str, Status]
    counts: Counter[Status] | None = None
    potential: set[str] | None = None
    more_feasible: bool = False
    nominated: bool = False
    # A PreFilter plugin failed (every node has its status): its message, which the FitError names instead of the
    # per-node reasons (upstream Diagnosis.PreFilterMsg).
    pre_filter_message: str = ""
    # A plugin answered Error: the scheduling attempt fails with it, and no PostFilter runs.
    error: str = ""

    @property
    def fit_node(self) -> str | None:
        return self.feasible[0] if self.feasible else None


class SchedulingError(Exception):
    """A Filter plugin answered Error on a node: upstream's findNodesThatPassFilters stops the attempt with it."""


# pkg/scheduler/schedule_one.go: below this many nodes every node is searched; the adaptive percentage's floor.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage_of_nodes_to_score: int, num_all_nodes: int) -> int:
    """``numFeasibleNodesToFind``: how many feasible nodes the scheduler collects before it scores them (0% is
    adaptive: 50% minus 1% per 125 nodes, at least 5%; never fewer than 100 nodes)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    percentage = percentage_of_nodes_to_score
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def find_nodes_that_fit_pod(ctx: PredictionContext, num_to_find: int = 1) -> FilterResult:
    """The scheduling attempt's Filter: the pod's nominated node first, then the nodes in name order until
    ``num_to_find`` fit (and one more, to know whether more do), or every node's status when none does; a failed
    PreFilter gives every node its status, a plugin's Error stops the attempt."""
    pre = ctx.cycle.pre_filter_status
    if pre is not None:
        return _pre_filter_failed(ctx, pre)
    try:
        return _find_nodes_that_fit_pod(ctx, num_to_find)
    except SchedulingError as exc:
        return FilterResult([], {}, error=str(exc))


def _pre_filter_failed(ctx: PredictionContext, status: Status) -> FilterResult:
    """Upstream's findNodesThatFitPod when RunPreFilterPlugins rejects the pod: every node gets the status (so an
    UnschedulableAndUnresolvable one leaves preemption nothing to try); an Error stops the attempt."""
    message = ", ".join(status.reasons)
    if status.code == ERROR:
        return FilterResult([], {}, error=message)
    names = ctx.view.node_names
    statuses = dict.fromkeys(names, status)
    potential = set(names) if status.code == UNSCHEDULABLE else set()
    return FilterResult([], statuses, Counter({status: len(names)}), potential, pre_filter_message=message)


def _find_nodes_that_fit_pod(ctx: PredictionContext, num_to_find: int) -> FilterResult:
    statuses: dict[str, Status] = {}
    nominated = ctx.pod.nominated_node_name
    if nominated and nominated in ctx.view.state.nodes:
        status = node_fit_status(ctx, nominated)
        if status.ok:
            return FilterResult([nominated], {}, nominated=True)
        statuses[nominated] = status
    names = ctx.view.node_names
    want = num_to_find + 1 if num_to_find < len(names) else num_to_find
    if ctx.resource_only:
        quick = QUICK_SCAN_NODES if want == 1 else min(len(names), max(QUICK_SCAN_NODES, 4 * want))
        # The scan goes on past the first nodes only when some fit there: ``want`` grows with the cluster (5% of
        # 15,000 nodes), and a pod that fits on none of the first nodes (one that must preempt, or cannot be
        # placed) would otherwise pay 4·want node-by-node checks before the bulk pass answers every node anyway.
        scanned = min(quick, QUICK_SCAN_NODES)
        ruled_out: list[str] = []
        found = _scan(ctx, names[:scanned], statuses, want, ruled_out)
        if found and len(found) < want and quick > scanned:
            found += _scan(ctx, names[scanned:quick], statuses, want - len(found), ruled_out)
            scanned = quick
        if len(found) < want and (len(names) > scanned or (ruled_out and not found)):
            if want == 1 or not found:
                result = _filter_all_nodes(ctx, statuses)
                if result.fit_node is None or want == 1:
                    return result
            found = _all_fitting(ctx, statuses)
        return _collected(found, statuses, num_to_find)
    found = []
    for start in range(0, len(names), DEADLINE_STRIDE):
        if start:  # predict_pod checked the deadline just before the first stride
            ctx.check_deadline()
        found += _scan(ctx, names[start:start + DEADLINE_STRIDE], statuses, want - len(found))
        if len(found) >= want:
            break
    return _collected(found, statuses, num_to_find)


def _collected(found: list[str], statuses: dict[str, Status], num_to_find: int) -> FilterResult:
    return FilterResult(found[:num_to_find], statuses, more_feasible=len(found) > num_to_find)


def _scan(ctx: PredictionContext, names: list[str], statuses: dict[str, Status], want: int = 1,
          ruled_out: list[str] | None = None) -> list[str]:
    """The first ``want`` of ``names`` (not the nominated node, tried already) that fit; the statuses of those
    that do not, up to the last one looked at, recorded. With ``ruled_out``, a volume pod's nodes that its node-only
    volume Filters rule out are put there instead, unchecked: they never fit, and their statuses are only read when
    no node fits (a zonal volume rules out most of the nodes a scan walks)."""
    if _scans_on_sums(ctx):
        return _scan_on_sums(ctx, names, statuses, want)
    skip = ctx.pod.nominated_node_name
    found: list[str] = []
    allowed = ctx.volumes.allowed if ctx.volumes is not None else None
    for name in names:
        if name == skip:
            continue
        if ruled_out is not None and allowed is not None and name not in allowed and not ctx.takes_general_path(name):
            ruled_out.append(name)
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            found.append(name)
            if len(found) >= want:
                break
        else:
            if status.code == ERROR:
                raise SchedulingError(", ".join(status.reasons))
            statuses[name] = status
    return found


def _scans_on_sums(ctx: PredictionContext) -> bool:
    """Whether every node ``node_fit_status`` would look at takes its resource-only branch with nothing to add: a
    resource-only pod (no extended resources) without volumes, the node-only plugins memoised by group, and no node
    with simulated changes or nominated pods."""
    view = ctx.view
    return (ctx.resource_only and ctx.volumes is None and ctx.node_filter_memo is not None and not view.touched
            and not view.index.has_nominated)


def _scan_on_sums(ctx: PredictionContext, names: list[str], statuses: dict[str, Status], want: int) -> list[str]:
    """``_scan`` when ``_scans_on_sums``: ``node_fit_status`` inlined (a pod that fits walks 5% of the nodes of a
    large cluster, 750 at 15,000 nodes, before scoring them: its calls per node were ~40 % of the prediction). A node
    is taken when NodeResourcesFit's every check passes on its sums; any other answer comes from ``fit_on_summary``
    itself, so the statuses are the plugin's own."""
    pod = ctx.pod
    skip = pod.nominated_node_name
    memo = ctx.node_filter_memo
    assert memo is not None
    summaries = ctx.view.index.summaries
    framework, cycle = ctx.framework, ctx.cycle
    req = pod.requests
    cpu, mem, eph = req.milli_cpu, req.memory, req.ephemeral_storage
    found: list[str] = []
    for name in names:
        if name == skip:
            continue
        summary = summaries[name]
        node = summary.node
        group = (node.unschedulable, node.taints)
        status = memo.get(group)
        if status is None:
            status = memo[group] = framework.run_node_filter_plugins(cycle, pod, node)
        if status.ok:
            used_cpu, used_mem, used_eph, used_pods = summary.used
            alloc = node.allocatable
            # resource_fit_status's checks; when one fails, its own answer (the reasons, UU or not)
            if not (used_pods < alloc.pods and (not cpu or cpu <= alloc.milli_cpu - used_cpu)
                    and (not mem or mem <= alloc.memory - used_mem)
                    and (not eph or eph <= alloc.ephemeral_storage - used_eph)):
                status = fit_on_summary(pod, summary, ())
        if status.ok:
            found.append(name)
            if len(found) >= want:
                break
        elif status.code == ERROR:
            raise SchedulingError(", ".join(status.reasons))
        else:
            statuses[name] = status
    return found


def _slow_nodes(ctx: PredictionContext) -> set[str] | frozenset[str]:
    """The nodes the bulk paths leave to the node-by-node check: simulated changes, nominated pods, and for a volume
    pod the nodes where a pod-reading volume Filter may fail."""
    view = ctx.view
    slow = view.touched | view.index.nominated_nodes
    return slow if ctx.volumes is None else slow | ctx.volumes.general


def _volume_allowed(ctx: PredictionContext, fit: set[str], statuses: dict[str, Status],
                    counts: Counter[Status]) -> set[str]:
    """The ``fit`` nodes (room for the pod, no pod-reading Filter failing) that the pod's node-only volume Filters
    allow; the others get the status of the first of them that fails (they run after NodeResourcesFit)."""
    volumes = ctx.volumes
    if volumes is None:
        return fit
    for part, status in volumes.partition(fit):
        statuses.update(dict.fromkeys(part, status))
        counts[status] += len(part)
        fit = fit - part
    return fit


def _all_fitting(ctx: PredictionContext, statuses: dict[str, Status]) -> list[str]:
    """Every node a resource-only pod fits on, by name: the bulk Filter pass's set, and the nodes it leaves to
    the node-by-node check (simulated changes, nominated pods)."""
    view = ctx.view
    index = view.index
    skip = ctx.pod.nominated_node_name
    slow = {n for n in _slow_nodes(ctx) if n in index.summaries}
    excluded = slow | ({skip} if skip else set())
    counts: Counter[Status] = Counter()
    universe = _passing_node_filters(ctx, excluded, statuses, counts, [])
    # A copy: ``nodes_with_room`` may hand back the index's own set, and nodes are added to it below.
    fit = _volume_allowed(ctx, set(nodes_with_room(index, universe, wanted_resources(ctx.pod), None)), statuses,
                          counts)
    for name in slow - {skip}:
        status = node_fit_status(ctx, name)
        if status.ok:
            fit.add(name)
        else:
            if status.code == ERROR:
                raise SchedulingError(", ".join(status.reasons))
            statuses[name] = status
    return sorted(fit)


def _passing_node_filters(ctx: PredictionContext, excluded: set[str], statuses: dict[str, Status],
                          counts: Counter[Status], groups: list[tuple[AbstractSet[str], Status]]) -> set[str]:
    """Nodes (not ``excluded``) that pass every node-only Filter plugin: a new set, or one of the index's own
    (read it, never change it) when a single group of alike nodes passes whole.

    Nodes with the same (unschedulable, taints) get the same status from NodeUnschedulable and TaintToleration
    (the index's static groups); NodeAffinity is answered for all of them at once by the index's labels. The
    statuses of failing groups go to ``groups``, whole sets. A pod that names a node (NodeName) is asked node by
    node.
    """
    pod = ctx.pod
    index = ctx.view.index
    framework = ctx.framework
    universe: set[str] = set()
    if pod.node_name:
        summaries = index.summaries
        for i, name in enumerate(index.node_names):
            if not i % DEADLINE_STRIDE:
                ctx.check_deadline()
            if name in excluded:
                continue
            status = framework.run_node_filter_plugins(ctx.cycle, pod, summaries[name].node)
            if status.ok:
                universe.add(name)
            else:
                statuses[name] = status
                counts[status] += 1
        return universe
    grouped = [p for p in framework.node_filter_plugins if p.name in GROUPED_NODE_FILTERS]
    selects = selects_nodes(pod)
    passing: list[set[str]] = []
    for group in index.static_groups.values():
        # Copied only when some node is left out: at 15,000 nodes a copy of the one big group costs as much as the
        # rest of the pass.
        members = group - excluded if excluded and not excluded.isdisjoint(group) else group
        if not members:
            continue
        status = framework.run_node_filter_plugins(ctx.cycle, pod, index.summaries[next(iter(members))].node, grouped)
        if status.ok and selects:
            matching = matching_nodes(index.node_labels, pod, members)
            failing = members - matching
            if failing:
                groups.append((failing, NODE_AFFINITY_FAILED))
                counts[NODE_AFFINITY_FAILED] += len(failing)
            passing.append(matching)
        elif status.ok:
            passing.append(members)
        else:
            groups.append((members, status))
            counts[status] += len(members)
    return passing[0] if len(passing) == 1 else universe.union(*passing)


def _filter_all_nodes(ctx: PredictionContext, statuses: dict[str, Status]) -> FilterResult:
    """Every node at once. Nodes with nominated pods or simulated changes (few) go one by one in name order."""
    view = ctx.view
    index = view.index
    skip = ctx.pod.nominated_node_name
    slow = sorted(n for n in _slow_nodes(ctx) if n in index.summaries)
    excluded = set(slow)
    if skip:
        excluded.add(skip)
    counts: Counter[Status] = Counter()
    groups: list[tuple[AbstractSet[str], Status]] = []
    universe = _passing_node_filters(ctx, excluded, statuses, counts, groups)
    wants = wanted_resources(ctx.pod)
    fit = _volume_allowed(ctx, nodes_with_room(index, universe, wants, None), statuses, counts)
    first_fit = min(fit) if fit else None
    for name in slow:
        if first_fit is not None and name > first_fit:
            break
        if name == skip:
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            return FilterResult([name], statuses)
        statuses[name] = status
    if first_fit is not None:
        return FilterResult([first_fit], statuses)
    helped: list[set[str]] = []
    for mask, part in resource_partition(index, universe, wants, None).items():
        if not mask:
            continue  # room, but a volume pod's node-only volume Filter rules them out (their status is written)
        status = mask_status(mask)
        groups.append((part, status))
        counts[status] += len(part)
        if status.code == UNSCHEDULABLE:
            helped.append(part)
    for name in excluded:
        found = statuses.get(name)
        if found is not None:
            counts[found] += 1
            if found.code == UNSCHEDULABLE:
                helped.append({name})
    # The one part where preemption might help, not copied (the dry run only reads it), when it is all there is.
    potential = helped[0] if len(helped) == 1 else set().union(*helped)
    return FilterResult([], NodeStatuses(statuses, groups), counts, potential)


# ---- Score (pkg/scheduler/schedule_one.go: schedulePod, prioritizeNodes) --------------------------------------

# How many of the best nodes a placement explains (``-o wide``, ``topNodes``).
TOP_NODES = 5

NOMINATED = "nominated"
ONLY_NODE = "only"
SCORED = "scored"
SAMPLED = "sampled"
UNSCORED = "unscored"


@dataclass(frozen=True, slots=True)
class Placement:
    """The node the scheduler binds a pod that fits, and why.

    ``how``: ``nominated`` (its nominated node fits: taken without scoring), ``only`` (one node fits), ``scored``
    (the highest total of every feasible node; ``tied`` all nodes of that total, of which upstream takes any),
    ``sampled`` (more nodes fit than the scheduler scores: its sample starts where its last search stopped, so
    ``node`` is only the best of the first ``scored`` by name), ``unscored`` (the profile has no Score plugin:
    the first feasible node from the scheduler's rotating start).
    """

    node: str
    tied: tuple[str, ...]
    how: str
    feasible: int
    scored: int
    top: tuple[NodeScore, ...] = ()

    @property
    def exact(self) -> bool:
        return self.how in (NOMINATED, ONLY_NODE, SCORED)


def num_nodes_to_find(ctx: PredictionContext) -> int:
    """How many feasible nodes this pod's search collects (``numFeasibleNodesToFind`` over the nodes its PreFilter
    leaves; 1 when the profile scores nothing)."""
    if not ctx.framework.has_score_plugins:
        return 1
    narrowed = nodeaffinity.pre_filter_node_names(ctx.pod)
    names = ctx.view.state.nodes
    count = len(ctx.view.node_names) if narrowed is None else sum(1 for n in narrowed if n in names)
    return num_feasible_nodes_to_find(ctx.args.scoring.percentage_of_nodes_to_score, count)


def prioritize_nodes(ctx: PredictionContext, names: list[str]) -> NodeScores:
    """``prioritizeNodes``: PreScore, Score, NormalizeScore and the weights over the feasible ``names``."""
    nodes = ScoringNodes(names, ctx.view)
    ctx.framework.run_pre_score_plugins(ctx.cycle, ctx.pod, nodes)
    return ctx.framework.run_score_plugins(ctx.cycle, ctx.pod, nodes)


def select_node(ctx: PredictionContext, filtered: FilterResult) -> Placement:
    """Where a pod that passed the Filter lands (``schedulePod`` after ``findNodesThatFitPod``)."""
    feasible = filtered.feasible
    count = len(feasible)
    if filtered.nominated:
        return Placement(feasible[0], (feasible[0],), NOMINATED, 1, 0)
    if count == 1 and not filtered.more_feasible:
        return Placement(feasible[0], (feasible[0],), ONLY_NODE, 1, 0)
    if not ctx.framework.has_score_plugins:
        return Placement(feasible[0], tuple(feasible), UNSCORED, count, 0)
    scores = prioritize_nodes(ctx, feasible)
    tied = scores.best()
    top = tuple(NodeScore(scores.names[i], scores.totals[i],
                          tuple(zip(scores.plugins, (per[i] for per in scores.weighted), strict=True)))
                for i in scores.ranked(TOP_NODES))
    how = SAMPLED if filtered.more_feasible else SCORED
    return Placement(tied[0], tuple(tied), how, count, count, top)
