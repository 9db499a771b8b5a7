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
from webhook.preemption.framework.summary import CPU, MEMORY, NodeSummary
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


def balanced_pair_scores(want_cpu: int, want_mem: int, summaries: Sequence[NodeSummary]) -> list[int]:
    """``balanced_resource_scorer`` on cpu and memory (the requests as they are) for every node in one loop, with
    Go's float operations in the same order: a node offering both has two fractions and std = |f0 - f1| / 2; one
    offering fewer has std 0 with the pod and without, so 75."""
    half = MAX_NODE_SCORE // 2
    found = []
    for summary in summaries:
        alloc = summary.node.allocatable
        have_cpu, have_mem = alloc.milli_cpu, alloc.memory
        if not have_cpu or not have_mem:
            found.append(half + half // 2)
            continue
        used = summary.used
        had_cpu, had_mem = used[CPU], used[MEMORY]
        cpu, mem = (had_cpu + want_cpu) / have_cpu, (had_mem + want_mem) / have_mem
        with_pod = int((1 - abs(((cpu if cpu <= 1 else 1.0) - (mem if mem <= 1 else 1.0)) / 2)) * MAX_NODE_SCORE)
        without_pod = summary.balanced_without_pod
        if without_pod < 0:
            cpu, mem = had_cpu / have_cpu, had_mem / have_mem
            without_pod = int((1 - abs(((cpu if cpu <= 1 else 1.0) - (mem if mem <= 1 else 1.0)) / 2))
                              * MAX_NODE_SCORE)
            summary.balanced_without_pod = without_pod
        found.append(half + (half + with_pod - without_pod) // 2)
    return found


@dataclass(slots=True)
class BalancedAllocationState:
    """PreScore: the pod's request of each resource."""

    pod_requests: list[int]

    def copy(self) -> BalancedAllocationState:
        return self


class BalancedAllocation:
    name = NAME

    def __init__(self, resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES) -> None:
        self.scorer = ResourceAllocationScorer(resources, True, balanced_resource_scorer, balanced_pair_scores)

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
