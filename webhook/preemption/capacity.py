"""Which nodes have room for a resource-only pod: set algebra over the index's capacity orderings.

Each ordering lists the node names by one value (what is free now, or once a priority level is gone), so
"every node with at least x free" is one slice; intersecting the slices of the requested resources answers
NodeResourcesFit for every node at once (docs/preemption.md §11), without a Python loop over the nodes.
"""

from __future__ import annotations

from webhook.cluster.model import Pod
from webhook.preemption.filters import (
    ERR_TOO_MANY_PODS,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    Status,
    insufficient,
)
from webhook.preemption.index import StateIndex, free_order, order_key
from webhook.preemption.summary import CPU, EPHEMERAL, MEMORY, PODS

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
    return intersect(index, universe, [index.order(free_order(dim, level)).at_least(want) for dim, want in wants])


def subset(index: StateIndex, nodes: set[str], members: list[str]) -> set[str]:
    """``nodes`` ∩ ``members`` as a new set (no hashing when ``members`` lists every node)."""
    return set(nodes) if len(members) >= len(index.summaries) else nodes.intersection(members)


def intersect(index: StateIndex, nodes: set[str], slices: list[list[str]]) -> set[str]:
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
        status = _MASK_STATUS[mask] = Status(UNRESOLVABLE if unresolvable else UNSCHEDULABLE, reasons)
    return status


def resource_partition(index: StateIndex, universe: set[str], wants: list[Want],
                       level: int | None) -> dict[int, set[str]]:
    """``universe`` split by which resource checks fail (a ``mask_status`` mask per part)."""
    parts: dict[int, set[str]] = {0: universe} if universe else {}
    for dim, want in wants:
        parts = _refine(parts, index.order(free_order(dim, level)).below(want), SHORT_BIT[dim])
        if dim != PODS:
            parts = _refine(parts, index.order(order_key("alloc", 0, dim)).below(want), OVER_ALLOCATABLE_BIT[dim])
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
