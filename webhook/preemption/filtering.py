"""Step 0 of a prediction, the scheduling attempt: does the pod fit on some node (every Filter plugin)?

``filter_nodes`` tries the pod's nominated node first, then every node in name order, like
pkg/scheduler/schedule_one.go (findNodesThatFitPod). For resource-only pods a short scan is followed by
the bulk path: set algebra over the capacity orderings (capacity.py) finds the first fitting node, or
every node's status at once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from webhook.cluster.model import Node
from webhook.preemption.capacity import mask_status, nodes_with_room, resource_partition, wanted_resources
from webhook.preemption.context import DEADLINE_STRIDE, PredictionContext
from webhook.preemption.filters import (
    ERR_NODE_AFFINITY,
    ERR_NODE_NAME,
    ERR_NODE_UNSCHEDULABLE,
    ERR_TAINTS,
    OK,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    NodeInfo,
    Status,
    resource_fit_status,
)
from webhook.preemption.prefilter import status_with_nominated
from webhook.preemption.selectors import first_untolerated_taint, required_node_affinity_matches

# A pod that fits usually fits on one of the first nodes: try them one by one before the bulk path.
QUICK_SCAN_NODES = 32


# One instance for every node that fails NodeAffinity (statuses are compared and counted by value).
NODE_AFFINITY_FAILED = Status(UNRESOLVABLE, (ERR_NODE_AFFINITY,))


def node_static_status(ctx: PredictionContext, node: Node, *, node_affinity: bool = True) -> Status:
    """NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (all UU), memoised per taint set;
    ``node_affinity`` False leaves out the last one (the caller checks it for many nodes at once)."""
    pod = ctx.pod
    if node.unschedulable and not ctx.tolerates_unschedulable:
        return Status(UNRESOLVABLE, (ERR_NODE_UNSCHEDULABLE,))
    if pod.node_name and pod.node_name != node.name:
        return Status(UNRESOLVABLE, (ERR_NODE_NAME,))
    if node.taints:
        tolerated = ctx.taint_memo.get(node.taints)
        if tolerated is None:
            tolerated = first_untolerated_taint(node.taints, pod.tolerations) is None
            ctx.taint_memo[node.taints] = tolerated
        if not tolerated:
            return Status(UNRESOLVABLE, (ERR_TAINTS,))
    if (node_affinity and (pod.node_selector or pod.required_node_affinity is not None)
            and not required_node_affinity_matches(pod, node)):
        return NODE_AFFINITY_FAILED
    return OK


def node_info(ctx: PredictionContext, name: str) -> NodeInfo:
    return NodeInfo.build(ctx.view.node(name), ctx.view.pods_on(name))


def node_fit_status(ctx: PredictionContext, name: str) -> Status:
    """Every Filter plugin on one node, with the two-pass nominated-pod rule (docs/preemption.md §6)."""
    view = ctx.view
    node = view.node(name)
    status = node_static_status(ctx, node)
    if not status.ok:
        return status
    # The index's flag is read here, not in nominated_pods: this runs for every node a scan looks at.
    nominated = ctx.nominated_pods(name) if view.index.has_nominated else []
    if ctx.resource_only and name not in view.touched:
        # Pass 1 (with nominated pods) is the stricter one for pure resource arithmetic.
        summary = view.index.summary(name)
        cpu, mem, eph, count = summary.used_with(nominated) if nominated else summary.used
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
    names = ctx.view.node_names
    if ctx.resource_only:
        found = _scan(ctx, names[:QUICK_SCAN_NODES], statuses)
        if found is None and len(names) > QUICK_SCAN_NODES:
            return _filter_bulk(ctx, statuses)
        return FilterOutcome(found, statuses)
    for start in range(0, len(names), DEADLINE_STRIDE):
        if start:  # predict_pod checked the deadline just before the first stride
            ctx.check_deadline()
        found = _scan(ctx, names[start:start + DEADLINE_STRIDE], statuses)
        if found is not None:
            return FilterOutcome(found, statuses)
    return FilterOutcome(None, statuses)


def _scan(ctx: PredictionContext, names: list[str], statuses: dict[str, Status]) -> str | None:
    """The first of ``names`` (not the nominated node, tried already) that fits; the others' statuses recorded."""
    skip = ctx.pod.nominated_node_name
    for name in names:
        if name == skip:
            continue
        status = node_fit_status(ctx, name)
        if status.ok:
            return name
        statuses[name] = status
    return None


def _static_universe(ctx: PredictionContext, excluded: set[str], statuses: dict[str, Status],
                     counts: Counter[Status]) -> set[str]:
    """Nodes (not ``excluded``) that pass NodeUnschedulable, NodeName, TaintToleration and NodeAffinity.

    Nodes with the same (unschedulable, taints) get the same status from the first three; NodeAffinity is
    answered for all of them at once by the index's labels (nodeaffinity.py).
    """
    pod = ctx.pod
    index = ctx.view.index
    universe: set[str] = set()
    if pod.node_name:
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
    selects = bool(pod.node_selector) or pod.required_node_affinity is not None
    for group in index.static_groups.values():
        members = group - excluded
        if not members:
            continue
        status = node_static_status(ctx, index.summaries[next(iter(members))].node, node_affinity=False)
        if status.ok and selects:
            matching = index.node_labels.matching(pod, members)
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
            return FilterOutcome(name, statuses)
        statuses[name] = status
    if first_fit is not None:
        return FilterOutcome(first_fit, statuses)
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
    return FilterOutcome(None, statuses, counts, potential)
