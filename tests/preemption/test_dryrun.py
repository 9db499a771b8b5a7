"""Every case of tests/vectors/preemption.yaml, table-driven, through the steps of the PostFilter (the Evaluator
running DefaultPreemption) and whole predictions (simulate.py)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.preemption.framework.context import PredictionContext
from webhook.preemption.framework.preemption import ABSENT_STATUS, DryRun, Evaluator, nodes_where_preemption_might_help
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.plugins.registry import default_preemption
from webhook.preemption.results import Outcome, PreemptionResult
from webhook.preemption.schedule_one import find_nodes_that_fit_pod, new_context
from webhook.preemption.simulate import predict_pod

from .vector_adapter import build_pod, build_state, case_args, load_vectors, status_overrides

VECTORS = load_vectors("preemption.yaml")
CASES = VECTORS["cases"]
DEFAULTS = VECTORS["defaults"]
# Cases whose expectation follows newest master (#141785): run them with that option switched on.
NEWEST_PDB_SEMANTICS = {"derived_pdb_empty_selector_semantics"}


def _args(case: dict[str, Any]) -> Any:
    return case_args(case, DEFAULTS, pdb_empty_selector_matches_all=case["name"] in NEWEST_PDB_SEMANTICS)


def _evaluator(ctx: PredictionContext) -> Evaluator:
    return default_preemption(ctx.args).evaluator


def _check_candidates(dry: DryRun, expected: dict[str, Any]) -> None:
    got = {c.node: c for c in dry.candidates}
    assert set(got) == set(expected)
    for node, want in expected.items():
        candidate = got[node]
        assert {v.name for v in candidate.victims} == set(want["victims"])
        assert candidate.num_pdb_violations == want["num_pdb_violations"]
        if "victims_order" in want:
            assert [v.name for v in candidate.victims] == want["victims_order"]


def _check_choice(node: str | None, tied: tuple[str, ...], victims: list[str], violations: int,
                  expected: dict[str, Any]) -> None:
    if "nominated_node_any_of" in expected:
        assert set(tied) == set(expected["nominated_node_any_of"])
        assert node == min(expected["nominated_node_any_of"])
        return
    assert node == expected["nominated_node"]
    if expected.get("victims") is not None:
        assert set(victims) == set(expected["victims"])
    if "victims_order" in expected:
        assert victims == expected["victims_order"]
    if "num_pdb_violations" in expected:
        assert violations == expected["num_pdb_violations"]


def _run_full(case: dict[str, Any]) -> None:
    state = build_state(case)
    expected = case["expected"]
    args = _args(case)
    result: PreemptionResult
    result, _ = predict_pod(ClusterView(state), build_pod(case["preemptor"]), args)
    if expected.get("fits_without_preemption"):
        assert result.outcome == Outcome.FITS
        return
    if expected["preempts"]:
        assert result.outcome == Outcome.PREEMPTS, result.message
        _check_choice(result.node, result.tied_nodes, [v.name for v in result.victims], result.pdb_violations,
                      expected)
    else:
        assert result.outcome not in (Outcome.PREEMPTS, Outcome.FITS)
        assert result.node is None and not result.victims
        if "message" in expected:
            assert result.preemption_status == expected["message"]
        if "reason" in expected:
            assert result.preemption_status == f"preemption: {expected['reason']}"
    if "candidates" in expected:
        ctx = new_context(ClusterView(state), build_pod(case["preemptor"]), args)
        statuses = find_nodes_that_fit_pod(ctx).statuses
        potential = nodes_where_preemption_might_help(statuses, ctx.view.node_names)
        _check_candidates(_evaluator(ctx).dry_run_preemption(ctx, potential, exhaustive=True), expected["candidates"])


def _run_status_override(case: dict[str, Any]) -> None:
    state = build_state(case)
    expected = case["expected"]
    ctx = new_context(ClusterView(state), build_pod(case["preemptor"]), _args(case))
    post = _evaluator(ctx).preempt(ctx, status_overrides(case))
    if expected["preempts"]:
        assert post.candidate is not None
        _check_choice(post.candidate.node, post.tied, [v.name for v in post.candidate.victims],
                      post.candidate.num_pdb_violations, expected)
    else:
        assert post.candidate is None
        assert post.message == expected["message"]


def _run_dry_run(case: dict[str, Any]) -> None:
    state = build_state(case)
    expected = case["expected"]
    args = _args(case)
    ctx = new_context(ClusterView(state), build_pod(case["preemptor"]), args)
    names = ctx.view.node_names
    exhaustive = _evaluator(ctx).dry_run_preemption(ctx, names, exhaustive=True)
    _check_candidates(exhaustive, expected["candidates"])
    bounded = _evaluator(ctx).dry_run_preemption(ctx, names)
    assert bounded.candidate_count == len(expected["candidates"])
    for dry in (exhaustive, bounded):
        if not expected["preempts"]:
            assert dry.best is None
            continue
        assert dry.best is not None
        _check_choice(dry.best.node, dry.tied, [v.name for v in dry.best.victims], dry.best.num_pdb_violations,
                      expected)
    if "upstream_num_candidates" in expected:
        assert args.num_candidates(len(names)) == expected["upstream_num_candidates"]
    if case.get("random_offset_sensitive"):
        assert exhaustive.candidate_count > args.num_candidates(len(names))


def _run_eligibility(case: dict[str, Any]) -> None:
    state = build_state(case)
    ctx = new_context(ClusterView(state), build_pod(case["preemptor"]), _args(case))
    statuses = status_overrides(case)
    eligible, reason = default_preemption(ctx.args).pod_eligible_to_preempt_others(
        ctx, statuses.get(ctx.pod.nominated_node_name, ABSENT_STATUS))
    assert eligible == case["expected"]["eligible"]
    if "reason" in case["expected"]:
        assert reason == case["expected"]["reason"]


def _run_potential_nodes(case: dict[str, Any]) -> None:
    names = [n["name"] for n in case["nodes"]]
    assert nodes_where_preemption_might_help(status_overrides(case), names) == case["expected"][
        "potential_nodes_current"]


RUNNERS = {
    "full": _run_full,
    "full_with_status_override": _run_status_override,
    "dry_run": _run_dry_run,
    "eligibility": _run_eligibility,
    "potential_nodes": _run_potential_nodes,
}


def test_vector_file_has_every_case() -> None:
    assert len(CASES) == 37
    assert {c["mode"] for c in CASES} <= set(RUNNERS)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_preemption_vector(case: dict[str, Any]) -> None:
    RUNNERS[case["mode"]](case)


def test_pdb_empty_selector_released_semantics_picks_node1() -> None:
    """Released behaviour (default): the empty selector matches nothing, so criterion 5 picks node1."""
    case = next(c for c in CASES if c["name"] == "derived_pdb_empty_selector_semantics")
    result, _ = predict_pod(ClusterView(build_state(case)), build_pod(case["preemptor"]),
                            case_args(case, DEFAULTS))
    assert result.outcome == Outcome.PREEMPTS
    assert result.node == "node1"
    assert [v.name for v in result.victims] == ["v1"]
    assert result.pdb_violations == 0
