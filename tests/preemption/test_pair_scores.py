"""The one-loop scores of the usual two resources (``PairScores``: LeastAllocated and BalancedAllocation on cpu and
memory) against the per-node scorers they stand in for, which the upstream vectors of test_score_plugins.py pin.

The draws favour what moves a score at its edges: nodes offering no cpu or no memory, nodes already requested past
their allocatable (a fraction capped at 1), requests that land exactly on capacity, best-effort pods (non-zero
defaults), and memory in bytes near 2^40, where a float's rounding could differ from an exact ratio.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from webhook.cluster.reader import node_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.framework.index import state_index
from webhook.preemption.framework.types import ScoringNodes
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.plugins.noderesources.balanced_allocation import BalancedAllocation
from webhook.preemption.plugins.noderesources.fit import Fit
from webhook.preemption.plugins.noderesources.resource_allocation import ResourceAllocationScorer
from webhook.preemption.results import MOST_ALLOCATED, ResourceSpec, ScoringStrategy

GIB = 1 << 30


def allocatable(rng: random.Random) -> dict[str, str]:
    found = {"pods": "110"}
    cpu = rng.choice([0, 1, 999, 4000, 16000, rng.randrange(1, 200_000)])
    memory = rng.choice([0, 1, GIB, 64 * GIB, 1023 * GIB + 7, rng.randrange(1, 1 << 41)])
    if cpu or rng.random() < 0.5:
        found["cpu"] = f"{cpu}m"
    if memory or rng.random() < 0.5:
        found["memory"] = str(memory)
    return found


def requests(rng: random.Random, cpu_cap: int, mem_cap: int) -> dict[str, str]:
    """A container's requests: none, one of the two, exactly what is left, or past the node."""
    kind = rng.random()
    if kind < 0.15:
        return {}
    cpu = rng.choice([1, 100, cpu_cap // 3 + 1, cpu_cap, cpu_cap * 2 + 1, rng.randrange(1, 50_000)])
    memory = rng.choice([1, 200 * (1 << 20), mem_cap // 3 + 1, mem_cap, mem_cap * 2 + 1, rng.randrange(1, 1 << 40)])
    if kind < 0.3:
        return {"cpu": f"{cpu}m"}
    if kind < 0.45:
        return {"memory": str(memory)}
    return {"cpu": f"{cpu}m", "memory": str(memory)}


def pod(name: str, rng: random.Random, node: str | None, cpu_cap: int, mem_cap: int) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": "pause", "resources": {"requests": requests(rng, cpu_cap, mem_cap)}}
                  for i in range(rng.choice([1, 1, 2]))]
    spec: dict[str, Any] = {"containers": containers}
    if node is not None:
        spec["nodeName"] = node
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


def scoring_nodes(rng: random.Random, count: int) -> tuple[ScoringNodes, list[tuple[int, int]]]:
    state = ClusterState()
    capacities = []
    for i in range(count):
        alloc = allocatable(rng)
        name = f"node-{i}"
        state.upsert(node_from_dict({"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}}))
        cpu_cap = int(alloc.get("cpu", "0m")[:-1] or 0) or 4000
        mem_cap = int(alloc.get("memory", "0")) or GIB
        capacities.append((cpu_cap, mem_cap))
        for j in range(rng.choice([0, 1, 3])):
            state.upsert(pod_from_dict(pod(f"p-{i}-{j}", rng, name, cpu_cap, mem_cap)))
    names = sorted(state.nodes)
    return ScoringNodes(names, ClusterView(state, state_index(state))), capacities


def per_node(scorer: ResourceAllocationScorer) -> ResourceAllocationScorer:
    """The same scorer without its one-loop path: each node through ``scorer.scorer``."""
    return ResourceAllocationScorer(scorer.resources, scorer.use_requested, scorer.scorer)


@pytest.mark.parametrize("plugin", ["fit", "fit-weighted", "balanced"])
def test_pair_scores_equal_the_per_node_scorer(plugin: str) -> None:
    rng = random.Random(plugin)
    weighted = ScoringStrategy(resources=(ResourceSpec("cpu", 3), ResourceSpec("memory", 2)))
    scorer = {"fit": Fit().scorer, "fit-weighted": Fit(weighted).scorer,
              "balanced": BalancedAllocation().scorer}[plugin]
    assert scorer.pair_scores is not None
    differing_nodes = 0
    for _ in range(60):
        nodes, capacities = scoring_nodes(rng, 25)
        # Several pods scored on the same nodes: what a summary keeps from one scoring (balanced_without_pod) must
        # hold for the next pod.
        for _ in range(3):
            cpu_cap, mem_cap = rng.choice(capacities)
            incoming = pod_from_dict(pod("incoming", rng, None, cpu_cap, mem_cap))
            wanted = scorer.pod_requests(incoming)
            fast = scorer.score(wanted, nodes)
            assert fast == per_node(scorer).score(wanted, nodes), wanted
            differing_nodes += len(set(fast)) > 1
    # The draws reach scores that tell nodes apart, not only the all-equal corners.
    assert differing_nodes > 120


def test_only_the_usual_strategy_takes_the_one_loop_path() -> None:
    assert Fit(ScoringStrategy(type=MOST_ALLOCATED)).scorer.pair_scores is None
    assert Fit(ScoringStrategy(resources=(ResourceSpec("cpu", 1),))).scorer.pair_scores is None
    swapped = ScoringStrategy(resources=(ResourceSpec("memory", 1), ResourceSpec("cpu", 1)))
    assert Fit(swapped).scorer.pair_scores is None
