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
from dataclasses import dataclass

from webhook.cluster.model import Pod
from webhook.preemption.deadline import DEADLINE_STRIDE, Deadline
from webhook.preemption.framework.context import PredictionContext
from webhook.preemption.framework.runtime import Framework
from webhook.preemption.framework.status import ERROR, UNSCHEDULABLE, Status
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.plugins import nodeaffinity, nodename, noderesources, nodeunschedulable, tainttoleration
from webhook.preemption.plugins.nodeaffinity import NODE_AFFINITY_FAILED, matching_nodes, selects_nodes
from webhook.preemption.plugins.noderesources import (
    fit_on_summary,
    mask_status,
    nodes_with_room,
    resource_partition,
    wanted_resources,
)
from webhook.preemption.plugins.registry import default_framework
from webhook.preemption.results import PreemptionArgs

# A pod that fits usually fits on one of the first nodes: try them one by one before the bulk path.
QUICK_SCAN_NODES = 32

# The Filter plugins the resource-only paths answer: the node-only ones by the index's groups and labels, and
# NodeResourcesFit by arithmetic. A pod for which any other Filter plugin runs takes the plugin-by-plugin path.
RESOURCE_ONLY_FILTERS = frozenset({nodename.NAME, nodeunschedulable.NAME, tainttoleration.NAME, nodeaffinity.NAME,
                                   noderesources.NAME})
# The node-only plugins whose answer depends only on what groups the index's nodes (unschedulable, taints).
GROUPED_NODE_FILTERS = frozenset({nodeunschedulable.NAME, tainttoleration.NAME})


def new_context(view: ClusterView, pod: Pod, args: PreemptionArgs, *, deadline: Deadline | float | None = None,
                framework: Framework | None = None) -> PredictionContext:
    """PreFilter: every plugin's state for the pod (``CycleState``), and the PDB list (read once)."""
    deadline = Deadline.of(deadline)
    framework = framework or default_framework()
    cycle = framework.run_pre_filter_plugins(pod, view, deadline)
    active = framework.active(cycle)
    resource_only = active.filter_names <= RESOURCE_ONLY_FILTERS and not pod.requests.scalar
    grouped = active.node_filter_names <= GROUPED_NODE_FILTERS
    return PredictionContext(framework, view, pod, pod.effective_priority, args, view.index.pdb_index(args), cycle,
                             resource_only, {} if grouped else None, deadline=deadline)


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
    if ctx.resource_only and name not in view.touched:
        return fit_on_summary(ctx.pod, view.index.summary(name), nominated)
    return ctx.framework.run_filter_plugins_with_nominated_pods(ctx.cycle, ctx.pod, view.node_info(name), nominated)


@dataclass(slots=True)  # built for every review: no frozen-init cost
class FilterResult:
    """The first node that fits, else every node's status (upstream's Diagnosis.NodeToStatus).

    The bulk path for resource-only pods also hands over how many nodes have each status and the
    nodes whose status is Unschedulable, so nothing downstream walks every node again.
    """

    fit_node: str | None
    statuses: dict[str, Status]
    counts: Counter[Status] | None = None
    potential: set[str] | None = None
    # A PreFilter plugin failed (every node has its status): its message, which the FitError names instead of the
    # per-node reasons (upstream Diagnosis.PreFilterMsg).
    pre_filter_message: str = ""
    # A plugin answered Error: the scheduling attempt fails with it, and no PostFilter runs.
    error: str = ""


class SchedulingError(Exception):
    """A Filter plugin answered Error on a node: upstream's findNodesThatPassFilters stops the attempt with it."""


def find_nodes_that_fit_pod(ctx: PredictionContext) -> FilterResult:
    """The scheduling attempt: the pod's nominated node first, then every node in name order."""
    pre = ctx.cycle.pre_filter_status
    if pre is not None:
        return _pre_filter_failed(ctx, pre)
    try:
        return _find_nodes_that_fit_pod(ctx)
    except SchedulingError as exc:
        return FilterResult(None, {}, error=str(exc))


def _pre_filter_failed(ctx: PredictionContext, status: Status) -> FilterResult:
    """Upstream's findNodesThatFitPod when RunPreFilterPlugins rejects the pod: every node gets the status (so an
    UnschedulableAndUnresolvable one leaves preemption nothing to try); an Error stops the attempt."""
    message = ", ".join(status.reasons)
    if status.code == ERROR:
        return FilterResult(None, {}, error=message)
    names = ctx.view.node_names
    statuses = dict.fromkeys(names, status)
    potential = set(names) if status.code == UNSCHEDULABLE else set()
    return FilterResult(None, statuses, Counter({status: len(names)}), potential, pre_filter_message=message)


def _find_nodes_that_fit_pod(ctx: PredictionContext) -> FilterResult:
    statuses: dict[str, Status] = {}
    nominated = ctx.pod.nominated_node_name
    if nominated and nominated in ctx.view.state.nodes:
        status = node_fit_status(ctx, nominated)
        if status.ok:
            return FilterResult(nominated, {})
        statuses[nominated] = status
    names = ctx.view.node_names
    if ctx.resource_only:
        found = _scan(ctx, names[:QUICK_SCAN_NODES], statuses)
        if found is None and len(names) > QUICK_SCAN_NODES:
            return _filter_all_nodes(ctx, statuses)
        return FilterResult(found, statuses)
    for start in range(0, len(names), DEADLINE_STRIDE):
        if start:  # predict_pod checked the deadline just before the first stride
            ctx.check_deadline()
        found = _scan(ctx, names[start:start + DEADLINE_STRIDE], statuses)
        if found is not None:
            return FilterResult(found, statuses)
    return FilterResult(None, statuses)


def _scan(ctx: PredictionContext, names: list[str], statuses: dict[str, Status]) -> str | None:
    """The first of ``names`` (not the nominated node, tried already) that fits; the others' statuses recorded."""
    skip = ctx.pod.nominated_node_name
    for name in names:
        if name == skip:
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            return name
        if status.code == ERROR:
            raise SchedulingError(", ".join(status.reasons))
        statuses[name] = status
    return None


def _passing_node_filters(ctx: PredictionContext, excluded: set[str], statuses: dict[str, Status],
                          counts: Counter[Status]) -> set[str]:
    """Nodes (not ``excluded``) that pass every node-only Filter plugin.

    Nodes with the same (unschedulable, taints) get the same status from NodeUnschedulable and TaintToleration
    (the index's static groups); NodeAffinity is answered for all of them at once by the index's labels. A pod that
    names a node (NodeName) is asked node by node.
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
    for group in index.static_groups.values():
        members = group - excluded
        if not members:
            continue
        status = framework.run_node_filter_plugins(ctx.cycle, pod, index.summaries[next(iter(members))].node, grouped)
        if status.ok and selects:
            matching = matching_nodes(index.node_labels, pod, members)
            failing = members - matching
            if failing:
                statuses.update(dict.fromkeys(failing, NODE_AFFINITY_FAILED))
                counts[NODE_AFFINITY_FAILED] += len(failing)
            universe |= matching
        elif status.ok:
            universe |= members
        else:
            statuses.update(dict.fromkeys(members, status))
            counts[status] += len(members)
    return universe


def _filter_all_nodes(ctx: PredictionContext, statuses: dict[str, Status]) -> FilterResult:
    """Every node at once. Nodes with nominated pods or simulated changes (few) go one by one in name order."""
    view = ctx.view
    index = view.index
    skip = ctx.pod.nominated_node_name
    slow = sorted(n for n in view.touched | index.nominated_nodes if n in index.summaries)
    excluded = set(slow)
    if skip:
        excluded.add(skip)
    counts: Counter[Status] = Counter()
    universe = _passing_node_filters(ctx, excluded, statuses, counts)
    wants = wanted_resources(ctx.pod)
    fit = nodes_with_room(index, universe, wants, None)
    first_fit = min(fit) if fit else None
    for name in slow:
        if first_fit is not None and name > first_fit:
            break
        if name == skip:
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            return FilterResult(name, statuses)
        statuses[name] = status
    if first_fit is not None:
        return FilterResult(first_fit, statuses)
    potential: set[str] = set()
    for mask, part in resource_partition(index, universe, wants, None).items():
        status = mask_status(mask)
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
    return FilterResult(None, statuses, counts, potential)
