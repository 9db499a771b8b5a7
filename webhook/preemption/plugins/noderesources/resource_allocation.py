"""The resource scorers of NodeResourcesFit's strategies and of NodeResourcesBalancedAllocation
(pkg/scheduler/framework/plugins/noderesources: resource_allocation.go, least_allocated.go, most_allocated.go,
requested_to_capacity_ratio.go, and helper/shape_score.go's ``BuildBrokenLinearFunction``).

``ResourceAllocationScorer.score`` answers for every scored node at once: what each node has allocated per resource
comes from the index's sums (``NodeSummary``: the requests, and the non-zero requests the scheduler's NodeInfo keeps
for cpu and memory), so a node costs one pass of arithmetic. Go's integer division truncates toward zero; every
operand here is non-negative, where Python's ``//`` is the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from webhook.cluster.model import Pod
from webhook.preemption.framework.summary import CPU, EPHEMERAL, MEMORY, NodeSummary
from webhook.preemption.framework.types import MAX_NODE_SCORE, ScoringNodes
from webhook.preemption.plugins.helper import go_div, go_round
from webhook.preemption.results import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    ResourceSpec,
    ScoringStrategy,
)

# requested, allocated, allocatable (one entry per resource of the scorer; allocatable 0 = not scored) to a score.
Scorer = Callable[[Sequence[int], Sequence[int], Sequence[int]], int]
# The pod's cpu and memory requests and the scored nodes' sums to every node's score: the usual two resources in
# one loop, without a tuple or a call per node. Measured (cProfile of a pod that fits at 15,000 nodes, 750 nodes
# scored): the per-node ``Scorer`` was over half of the prediction; the same float and integer operations inline
# cost a third of it.
PairScores = Callable[[int, int, Sequence[NodeSummary]], list[int]]

# RequestedToCapacityRatio's shape scores are 0..10 (config.MaxCustomPriorityScore), scaled to 0..100.
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100
STANDARD = ("cpu", "memory", "ephemeral-storage")


def least_requested_score(requested: int, capacity: int) -> int:
    """``leastRequestedScore``: the share left free, 0..100."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    """``mostRequestedScore``: the share in use, 0..100 (pods without requests count their defaults, so
    ``requested`` may exceed ``capacity``)."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def _weighted_mean(per_resource: Callable[[int, int], int], weights: Sequence[int]) -> Scorer:
    def scorer(requested: Sequence[int], _allocated: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for i, capacity in enumerate(allocatable):
            if capacity == 0:
                continue
            node_score += per_resource(requested[i], capacity) * weights[i]
            weight_sum += weights[i]
        return node_score // weight_sum if weight_sum else 0
    return scorer


def broken_linear_function(shape: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """``helper.BuildBrokenLinearFunction``: the piecewise-linear function through the (utilization, score)
    points, flat before the first and after the last."""
    def function(p: int) -> int:
        for i, (utilization, score) in enumerate(shape):
            if p <= utilization:
                if i == 0:
                    return shape[0][1]
                before_u, before_s = shape[i - 1]
                return before_s + go_div((score - before_s) * (p - before_u), utilization - before_u)
        return shape[-1][1]
    return function


def requested_to_capacity_ratio_scorer(resources: Sequence[ResourceSpec], shape: Sequence[tuple[int, int]]) -> Scorer:
    """``requestedToCapacityRatioScorer``: the shape's score (scaled to 0..100) of each resource's utilization,
    weighted; a resource scoring 0 counts in neither sum."""
    raw = broken_linear_function([(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape])
    weights = [r.weight for r in resources]

    def resource_score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(requested * MAX_UTILIZATION // capacity)

    def scorer(requested: Sequence[int], _allocated: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for i, capacity in enumerate(allocatable):
            if capacity == 0:
                continue
            score = resource_score(requested[i], capacity)
            if score > 0:
                node_score += score * weights[i]
                weight_sum += weights[i]
        return go_round(node_score / weight_sum) if weight_sum else 0
    return scorer


def least_allocated_pair(weight_cpu: int, weight_mem: int) -> PairScores:
    """LeastAllocated on cpu and memory (``least_requested_score`` weighted, as ``_weighted_mean``) on the non-zero
    requests, for every node in one loop."""
    def scores(want_cpu: int, want_mem: int, summaries: Sequence[NodeSummary]) -> list[int]:
        found = []
        for summary in summaries:
            alloc = summary.node.allocatable
            have_cpu, have_mem = alloc.milli_cpu, alloc.memory
            had_cpu, had_mem = summary.non_zero_used
            node_score = weight_sum = 0
            if have_cpu:
                requested = had_cpu + want_cpu
                if requested <= have_cpu:
                    node_score += (have_cpu - requested) * MAX_NODE_SCORE // have_cpu * weight_cpu
                weight_sum += weight_cpu
            if have_mem:
                requested = had_mem + want_mem
                if requested <= have_mem:
                    node_score += (have_mem - requested) * MAX_NODE_SCORE // have_mem * weight_mem
                weight_sum += weight_mem
            found.append(node_score // weight_sum if weight_sum else 0)
        return found
    return scores


def strategy_pair_scores(strategy: ScoringStrategy) -> PairScores | None:
    """The one-loop scores of a LeastAllocated strategy on cpu and memory (the default); None for the others."""
    if strategy.type != LEAST_ALLOCATED or [r.name for r in strategy.resources] != ["cpu", "memory"]:
        return None
    cpu, memory = strategy.resources
    return least_allocated_pair(cpu.weight, memory.weight)


def strategy_scorer(strategy: ScoringStrategy) -> Scorer:
    weights = [r.weight for r in strategy.resources]
    if strategy.type == LEAST_ALLOCATED:
        return _weighted_mean(least_requested_score, weights)
    if strategy.type == MOST_ALLOCATED:
        return _weighted_mean(most_requested_score, weights)
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        return requested_to_capacity_ratio_scorer(strategy.resources, strategy.shape)
    raise ValueError(f"scoring strategy {strategy.type} is not supported")


@dataclass(frozen=True, slots=True)
class ResourceAllocationScorer:
    """``resourceAllocationScorer``: its resources, and whether it reads the requests as they are
    (``use_requested``, BalancedAllocation) or the non-zero requests for cpu and memory (Fit's strategies)."""

    resources: tuple[ResourceSpec, ...]
    use_requested: bool
    scorer: Scorer
    pair_scores: PairScores | None = None  # ``scorer`` for exactly cpu and memory, every node in one loop

    def pod_requests(self, pod: Pod) -> list[int]:
        """``calculatePodResourceRequestList``: the pod's request of each resource."""
        requests = pod.requests
        cpu, memory = (requests.milli_cpu, requests.memory) if self.use_requested else pod.non_zero
        found = []
        for resource in self.resources:
            name = resource.name
            if name == "cpu":
                found.append(cpu)
            elif name == "memory":
                found.append(memory)
            elif name == "ephemeral-storage":
                found.append(requests.ephemeral_storage)
            else:
                found.append(requests.scalar.get(name, 0))
        return found

    def node_allocated(self, summary: NodeSummary, pod_requests: Sequence[int]) -> tuple[list[int], list[int]]:
        """``calculateNodeAllocatableRequest`` without the pod: (allocated, allocatable) per resource; a resource the
        node does not offer, or an extended resource the pod does not request, has allocatable 0 (not scored)."""
        node = summary.node
        alloc = node.allocatable
        used = summary.used
        non_zero = summary.non_zero_used
        allocated: list[int] = []
        allocatable: list[int] = []
        scalar_used: dict[str, int] | None = None
        for i, resource in enumerate(self.resources):
            name = resource.name
            if name == "cpu":
                have, had = alloc.milli_cpu, used[CPU] if self.use_requested else non_zero[0]
            elif name == "memory":
                have, had = alloc.memory, used[MEMORY] if self.use_requested else non_zero[1]
            elif name == "ephemeral-storage":
                have, had = alloc.ephemeral_storage, used[EPHEMERAL]
            elif pod_requests[i] == 0 or name not in alloc.scalar:
                have, had = 0, 0
            else:
                if scalar_used is None:
                    scalar_used = _scalar_used(summary)
                have, had = alloc.scalar[name], scalar_used.get(name, 0)
            allocatable.append(have)
            allocated.append(had if have else 0)
        return allocated, allocatable

    def score(self, pod_requests: Sequence[int], nodes: ScoringNodes) -> list[int]:
        """The score of each scored node, with the pod's requests added."""
        if [r.name for r in self.resources] == ["cpu", "memory"]:
            if self.pair_scores is not None:
                want_cpu, want_mem = pod_requests
                return self.pair_scores(want_cpu, want_mem, nodes.summaries())
            return self._score_cpu_and_memory(pod_requests, nodes)
        scores = []
        scorer = self.scorer
        for summary in nodes.summaries():
            allocated, allocatable = self.node_allocated(summary, pod_requests)
            requested = [a + r if c else 0 for a, r, c in zip(allocated, pod_requests, allocatable, strict=True)]
            scores.append(scorer(requested, allocated, allocatable))
        return scores

    def _score_cpu_and_memory(self, pod_requests: Sequence[int], nodes: ScoringNodes) -> list[int]:
        """The same for the usual resources, cpu and memory, in one pass over the nodes' sums."""
        want_cpu, want_mem = pod_requests
        scorer = self.scorer
        scores = []
        use_requested = self.use_requested
        for summary in nodes.summaries():
            alloc = summary.node.allocatable
            have_cpu, have_mem = alloc.milli_cpu, alloc.memory
            if use_requested:
                had_cpu, had_mem = summary.used[CPU], summary.used[MEMORY]
            else:
                had_cpu, had_mem = summary.non_zero_used
            if not have_cpu:
                had_cpu = 0
            if not have_mem:
                had_mem = 0
            scores.append(scorer((had_cpu + want_cpu if have_cpu else 0, had_mem + want_mem if have_mem else 0),
                                 (had_cpu, had_mem), (have_cpu, have_mem)))
        return scores


def _scalar_used(summary: NodeSummary) -> dict[str, int]:
    used: dict[str, int] = {}
    if summary.has_scalar:
        for pod in summary.pods:
            for name, value in pod.requests.scalar.items():
                used[name] = used.get(name, 0) + value
    return used
