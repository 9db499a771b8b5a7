"""NodeResourcesFit (pkg/scheduler/framework/plugins/noderesources/fit.go, docs/preemption.md §11): the node must
have room for the pod's requests and one more pod; its Score is the profile's scoring strategy (LeastAllocated by
default, MostAllocated or RequestedToCapacityRatio: ``resource_allocation``) on the non-zero requests.

``Fit.filter`` answers on a ``NodeInfo``, as upstream. For a pod whose only check that reads the node's pods is
this one (a "resource-only" pod), the same answer comes from sums: ``fit_on_summary`` on a node's summary,
``fits_after_freeing`` once lower-priority pods are gone (the dry run), and for every node at once
``nodes_with_room`` and ``resource_partition``: set algebra over the index's capacity orderings (each lists the
node names by what is free, so "at least x free" is one slice), without a Python loop over the nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from webhook.cluster.copying import replace_fields
from webhook.cluster.model import FrozenMap, Pod, Resources
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.index import StateIndex, free_order, intersect_at_least, order_key
from webhook.preemption.framework.status import OK, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.summary import CPU, EPHEMERAL, MEMORY, PODS, NodeSummary, Usage
from webhook.preemption.framework.types import NodeInfo, ScoringNodes
from webhook.preemption.plugins.noderesources.resource_allocation import (
    ResourceAllocationScorer,
    strategy_pair_scores,
    strategy_scorer,
)
from webhook.preemption.results import ScoringStrategy

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "NodeResourcesFit"
ERR_TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def resource_fit_status(req: Resources, alloc: Resources, used_cpu: int, used_mem: int, used_eph: int,
                        used_pods: int, used_scalar: Mapping[str, int]) -> Status:
    """``fitsRequest``: every failure collected; UU when a failing request exceeds allocatable."""
    reasons: list[str] = []
    if used_pods + 1 > alloc.pods:
        reasons.append(ERR_TOO_MANY_PODS)
    if req.milli_cpu == 0 and req.memory == 0 and req.ephemeral_storage == 0 and not req.scalar:
        return Status(UNSCHEDULABLE, tuple(reasons)) if reasons else OK
    unresolvable = False
    if req.milli_cpu > 0 and req.milli_cpu > alloc.milli_cpu - used_cpu:
        reasons.append(insufficient("cpu"))
        unresolvable |= req.milli_cpu > alloc.milli_cpu
    if req.memory > 0 and req.memory > alloc.memory - used_mem:
        reasons.append(insufficient("memory"))
        unresolvable |= req.memory > alloc.memory
    if req.ephemeral_storage > 0 and req.ephemeral_storage > alloc.ephemeral_storage - used_eph:
        reasons.append(insufficient("ephemeral-storage"))
        unresolvable |= req.ephemeral_storage > alloc.ephemeral_storage
    for name in sorted(req.scalar):
        want = req.scalar[name]
        have = alloc.scalar.get(name, 0)
        if want > 0 and want > have - used_scalar.get(name, 0):
            reasons.append(insufficient(name))
            unresolvable |= want > have
    if not reasons:
        return OK
    return Status(UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else UNSCHEDULABLE, tuple(reasons))


def fits(pod: Pod, info: NodeInfo) -> Status:
    """``Fits``: the pod on the node's pods (the kubelet's admission asks it too)."""
    used = info.requested
    return resource_fit_status(pod.requests, info.node.allocatable, used.milli_cpu, used.memory,
                               used.ephemeral_storage, used.pod_count, used.scalar)


@dataclass(slots=True)
class FitScoreState:
    """PreScore: the pod's request of each resource of the scoring strategy."""

    pod_requests: list[int]

    def copy(self) -> FitScoreState:
        return self


@dataclass(frozen=True, slots=True)
class DelegatedResources:
    """The pod's extended resources a DeviceClass backs (DRAExtendedResource, on in v1.37): on a node that does not
    advertise one, NodeResourcesFit leaves it to DynamicResources (fit.go, ``shouldDelegateResourceToDRA``)."""

    names: frozenset[str]

    def copy(self) -> DelegatedResources:
        return self


class Fit:
    name = NAME

    def __init__(self, strategy: ScoringStrategy | None = None) -> None:
        strategy = strategy or ScoringStrategy()
        self.strategy = strategy
        self.scorer = ResourceAllocationScorer(strategy.resources, False, strategy_scorer(strategy),
                                             strategy_pair_scores(strategy))

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        scalar = pod.requests.scalar
        if scalar and view.state.devices.device_classes:
            names = frozenset(r for r in scalar if view.extended_resource_class(r) is not None)
            if names:
                cycle.write(DelegatedResources(names))
        return OK  # upstream's PreFilter only computes the requests

    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        delegated = cycle.read(DelegatedResources)
        if delegated is None:
            return fits(pod, info)
        alloc = info.node.allocatable
        req = pod.requests
        kept = {r: n for r, n in req.scalar.items() if r not in delegated.names or alloc.scalar.get(r, 0) > 0}
        used = info.requested
        return resource_fit_status(replace_fields(req, scalar=FrozenMap(kept)), alloc, used.milli_cpu, used.memory,
                                   used.ephemeral_storage, used.pod_count, used.scalar)

    def pre_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> Status:
        cycle.write(FitScoreState(self.scorer.pod_requests(pod)))
        return OK

    def score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> list[int]:
        state = cycle.read(FitScoreState)
        return self.scorer.score(self.scorer.pod_requests(pod) if state is None else state.pod_requests, nodes)


# ---- a resource-only pod: the same answer from sums ------------------------------------------------------

def fit_on_summary(pod: Pod, summary: NodeSummary, nominated: Sequence[Pod]) -> Status:
    """``Fit.filter`` on the node's pods and ``nominated`` (pass 1, the stricter one for pure arithmetic)."""
    cpu, mem, eph, count = summary.used_with(nominated) if nominated else summary.used
    return resource_fit_status(pod.requests, summary.node.allocatable, cpu, mem, eph, count, {})


def fits_after_freeing(requests: Resources, alloc: Resources, used: Usage, freed: Usage) -> bool:
    """Whether a resource-only pod fits on a node using ``used`` once ``freed`` is gone."""
    used_cpu, used_mem, used_eph, used_pods = used
    freed_cpu, freed_mem, freed_eph, freed_pods = freed
    return (used_pods - freed_pods + 1 <= alloc.pods
            and (requests.milli_cpu == 0 or requests.milli_cpu <= alloc.milli_cpu - used_cpu + freed_cpu)
            and (requests.memory == 0 or requests.memory <= alloc.memory - used_mem + freed_mem)
            and (requests.ephemeral_storage == 0
                 or requests.ephemeral_storage <= alloc.ephemeral_storage - used_eph + freed_eph))


# ---- a resource-only pod on every node at once -------------------------------------------------------------

# (dimension, amount): what the pod needs free in one resource of ``Usage``.
Want = tuple[int, int]

# The reasons of NodeResourcesFit, in its order, for the bits of a resource-status mask.
RESOURCE_REASONS = (ERR_TOO_MANY_PODS, insufficient("cpu"), insufficient("memory"), insufficient("ephemeral-storage"))


def wanted_resources(pod: Pod) -> list[Want]:
    """The requested resources and one pod slot."""
    req = pod.requests
    wants = [(dim, want) for dim, want in ((CPU, req.milli_cpu), (MEMORY, req.memory),
                                             (EPHEMERAL, req.ephemeral_storage)) if want > 0]
    wants.append((PODS, 1))
    return wants


def nodes_with_room(index: StateIndex, universe: set[str], wants: list[Want], level: int | None) -> set[str]:
    """The nodes of ``universe`` with room for the pod, now (``level`` None) or once every pod with
    priority <= ``level`` is gone."""
    return intersect_at_least(index, universe, [(free_order(dim, level), want) for dim, want in wants])


# A resource-status mask: which checks of NodeResourcesFit fail on a node. Its bits, by dimension:
# less free than requested (for PODS: too many pods), and the request exceeds allocatable (not for PODS).
SHORT_BIT = {CPU: 1 << 1, MEMORY: 1 << 2, EPHEMERAL: 1 << 3, PODS: 1}
OVER_ALLOCATABLE_BIT = {CPU: 1 << 4, MEMORY: 1 << 5, EPHEMERAL: 1 << 6}


_MASK_STATUS: dict[int, Status] = {}


def mask_status(mask: int) -> Status:
    """The NodeResourcesFit status of a mask: its reasons; UU when a short resource exceeds allocatable."""
    status = _MASK_STATUS.get(mask)
    if status is None:
        short = [bool(mask & SHORT_BIT[dim]) for dim in (PODS, CPU, MEMORY, EPHEMERAL)]
        over = [bool(mask & OVER_ALLOCATABLE_BIT[dim]) for dim in (CPU, MEMORY, EPHEMERAL)]
        reasons = tuple(reason for is_short, reason in zip(short, RESOURCE_REASONS, strict=True) if is_short)
        unresolvable = any(is_short and is_over for is_short, is_over in zip(short[1:], over, strict=True))
        status = Status(UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else UNSCHEDULABLE, reasons)
        _MASK_STATUS[mask] = status
    return status


def resource_partition(index: StateIndex, universe: set[str], wants: list[Want],
                       level: int | None) -> dict[int, set[str]]:
    """``universe`` split by which resource checks fail (a ``mask_status`` mask per part)."""
    parts: dict[int, set[str]] = {0: universe} if universe else {}
    total = len(index.summaries)
    for dim, want in wants:
        parts = _refine(parts, index.order(free_order(dim, level)).below(want), SHORT_BIT[dim], total)
        if dim != PODS:
            parts = _refine(parts, index.order(order_key("alloc", 0, dim)).below(want), OVER_ALLOCATABLE_BIT[dim],
                            total)
    return parts


def _refine(parts: dict[int, set[str]], members: list[str], bit: int, total: int) -> dict[int, set[str]]:
    """``parts`` (sets of the index's nodes) split by membership of ``members`` (a slice of an ordering of the
    index's ``total`` nodes)."""
    if not members:
        return parts
    if len(members) >= total:
        # Every node (a pod short of a resource on all of them, the usual case for one that must preempt):
        # every part gets the bit, and none is intersected with a list of every node.
        return {mask | bit: part for mask, part in parts.items()}
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
