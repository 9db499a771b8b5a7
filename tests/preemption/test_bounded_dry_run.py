"""bounded_dry_run.py: the branch and bound finds what dry-running every node finds."""

from __future__ import annotations

import dataclasses

from webhook.cluster.model import Pod, PodDisruptionBudget, Resources
from webhook.preemption.framework.preemption import LOWEST_NEGATED_START, CandidateScore
from webhook.preemption.plugins.defaultpreemption.bounded_dry_run import (
    Bound,
    bound_order,
    priority_sum_bound,
    score_floor,
)
from webhook.preemption.results import Outcome
from webhook.preemption.simulate import simulate_pods

from .reference import reference_predict
from .support import as_dict, ladder_cluster
from .test_index import assert_index_matches_fresh


def test_preempting_pod_on_a_bigger_cluster_equals_reference_and_survives_events() -> None:
    state = ladder_cluster(80)
    pod = Pod("new", "default", priority=10, requests=Resources(milli_cpu=500, memory=100))
    for step in range(3):
        fast = [as_dict(r) for r in simulate_pods(state, [pod, dataclasses.replace(pod, name="new2")])]
        assert fast == reference_predict(state, [pod, dataclasses.replace(pod, name="new2")])
        assert fast[0]["outcome"] == (Outcome.PREEMPTS if step == 0 else Outcome.FITS)
        # The pod on the chosen node shrinks: the next prediction must see it (the node's entry is refreshed).
        victim = state.pods[f"default/low{20 + step}"]
        state.upsert(dataclasses.replace(victim, requests=Resources(milli_cpu=100 + step, memory=100)))
        state.upsert(PodDisruptionBudget(f"pdb{step}", "default", None))
        assert_index_matches_fresh(state)


def test_a_score_floor_is_below_every_score_with_its_prefix() -> None:
    floor = score_floor(100, 2, 10)
    assert floor == CandidateScore(0, 100, priority_sum_bound(100, 2, 10), 2, LOWEST_NEGATED_START)
    assert floor.priority_sum == 100 + 10 + 2 * 2**31
    for latest_start in (0, 1, 2**63):
        assert floor <= floor._replace(negated_earliest_start=-latest_start)
    assert floor > CandidateScore(0, 100, floor.priority_sum, 1, 0)  # fewer victims win whatever the start


def test_bounds_sort_by_score_then_node_name() -> None:
    low, high = CandidateScore(0, 10, 5, 1, 0), CandidateScore(0, 20, 5, 1, 0)
    bounds = [Bound(high, "a", None, []), Bound(low, "b", 1, []), Bound(low, "a", None, [])]
    ordered = sorted(bounds, key=bound_order)
    assert [(b.score.top_priority, b.node) for b in ordered] == [(10, "a"), (10, "b"), (20, "a")]
