"""NodeResourcesBalancedAllocation (pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go): favours
the node whose use of its resources becomes more even with the pod, scored from the standard deviation of the
resources' utilisation before and after (50..100, 75 when the pod changes nothing). A pod that requests none of
the resources is not scored (PreScore skips it, upstream #129138). Its requests are read as they are, not with the
defaults for missing requests that Fit's strategies use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from webhook.cluster.model import Pod
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, SKIPPED, Status
from webhook.preemption.framework.types import MAX_NODE_SCORE, ScoringNodes
from webhook.preemption.plugins.noderesources.resource_allocation import ResourceAllocationScorer
from webhook.preemption.results import DEFAULT_RESOURCES, ResourceSpec

NAME = "NodeResourcesBalancedAllocation"


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """``balancedResourceScore``: (1 - the standard deviation of the utilisations) x 100, truncated."""
    fractions = []
    for want, have in zip(requested, allocatable, strict=True):
        if have == 0:
            continue
        fractions.append(min(want / have, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def balanced_resource_scorer(requested: Sequence[int], allocated: Sequence[int], allocatable: Sequence[int]) -> int:
    """``balancedResourceScorer``: 75 moved by half the change in balance the pod makes (50..100)."""
    with_pod = balanced_resource_score(requested, allocatable)
    without_pod = balanced_resource_score(allocated, allocatable)
    return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without_pod) // 2


@dataclass(slots=True)
class BalancedAllocationState:
    """PreScore: the pod's request of each resource."""

    pod_requests: list[int]

    def copy(self) -> BalancedAllocationState:
        return self


class BalancedAllocation:
    name = NAME

    def __init__(self, resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES) -> None:
        self.scorer = ResourceAllocationScorer(resources, True, balanced_resource_scorer)

    def pre_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> Status:
        requests = self.scorer.pod_requests(pod)
        if not any(requests):
            return SKIPPED  # a best-effort pod: scoring it would pile such pods onto one node (upstream #129138)
        cycle.write(BalancedAllocationState(requests))
        return OK

    def score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> list[int]:
        state = cycle.read(BalancedAllocationState)
        requests = self.scorer.pod_requests(pod) if state is None else state.pod_requests
        if state is None and not any(requests):
            return [0] * len(nodes.names)
        return self.scorer.score(requests, nodes)
