"""The prediction service: scheduler profile mirroring, the time budget, retries on concurrent state changes,
and where admission predictions run (inline or in the pool)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from webhook.cluster.reader import object_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.config import SchedulerConfig, parse_config
from webhook.errors import PredictionTimeout
from webhook.prediction import service as prediction
from webhook.prediction.service import PredictionService, predict_object, run_consistently
from webhook.preemption.preview import build_preview


def compute_preview(state: ClusterState, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return build_preview(predict_object(state, obj, **kwargs))


def cluster() -> ClusterState:
    """node-1 (2 CPUs) full of one low pod: a 2-CPU high pod must evict it."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 1},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
         "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "old", "namespace": "b"},
         "spec": {"nodeName": "node-1", "priorityClassName": "low", "priority": 1,
                  "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
         "status": {"phase": "Running"}},
    ]
    state = ClusterState()
    for raw in objects:
        obj = object_from_dict(raw)
        assert obj is not None
        state.upsert(obj)
    return state


def pod(class_name: str = "high", policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"priorityClassName": class_name,
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
    if policy:
        spec["preemptionPolicy"] = policy
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new", "namespace": "a"}, "spec": spec}


def test_preemption_disabled_reports_pending_pods_with_their_real_policy() -> None:
    enabled = compute_preview(cluster(), pod(), namespace=None, replicas=2, scheduler=SchedulerConfig())
    assert [r["outcome"] for r in enabled["results"]] == ["Preempts", "Unschedulable"]
    disabled = compute_preview(cluster(), pod(), namespace=None, replicas=2,
                               scheduler=SchedulerConfig(preemption="disabled"))
    assert [r["outcome"] for r in disabled["results"]] == ["Unschedulable", "Unschedulable"]
    for result in disabled["results"]:
        assert result["preemptionPolicy"] == "PreemptLowerPriority" and result["victims"] == []
        assert result["message"].endswith("preemption: disabled in the scheduler profile "
                                          "(scheduler.preemption: disabled), so the pod would stay Pending.")
    rejected = compute_preview(cluster(), pod("gold"), namespace=None, replicas=1,
                               scheduler=SchedulerConfig(preemption="disabled"))
    assert rejected["results"][0]["outcome"] == "Rejected"


def test_priority_class_override_and_candidate_settings_reach_the_predictor() -> None:
    preview = compute_preview(cluster(), pod("low"), namespace="x", replicas=None, priority_class="high",
                              scheduler=SchedulerConfig(min_candidate_nodes_percentage=50,
                                                        min_candidate_nodes_absolute=1))
    (result,) = preview["results"]
    assert (result["pod"], result["priorityClassName"], result["outcome"]) == ("x/new", "high", "Preempts")


def test_run_consistently_retries_only_when_the_state_changed() -> None:
    state = ClusterState()
    calls: list[int] = []

    def flaky() -> str:
        calls.append(state.version)
        if len(calls) == 1:
            state.version += 1  # an informer event landed mid-prediction
            raise RuntimeError("dictionary changed size during iteration")
        return "ok"

    assert run_consistently(state, flaky, time.monotonic() + 5) == "ok" and len(calls) == 2

    def broken() -> str:
        raise KeyError("node-9")

    with pytest.raises(KeyError):
        run_consistently(state, broken, time.monotonic() + 5)


async def test_a_slow_prediction_times_out_and_a_queued_one_is_dropped() -> None:
    service = PredictionService(workers=1)
    release, running = threading.Event(), threading.Event()
    ran: list[str] = []

    def slow(deadline: float) -> str:
        running.set()
        release.wait(5)
        ran.append("slow")
        return "slow"

    def queued(deadline: float) -> str:
        ran.append("queued")
        return "queued"

    try:
        first = asyncio.ensure_future(service.run(slow, budget_seconds=0.05))
        while not running.is_set():  # the only worker is busy
            await asyncio.sleep(0.001)
        started = time.monotonic()
        with pytest.raises(PredictionTimeout, match=r"did not finish within 0\.05 s"):
            await service.run(queued, budget_seconds=0.05)
        assert time.monotonic() - started < 1.0
        with pytest.raises(PredictionTimeout):
            await first
    finally:
        release.set()
        service.executor.shutdown(wait=True)
    assert ran == ["slow"]  # the queued call was cancelled before it started


def _pod(name: str, node: str) -> Any:
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "b"},
           "spec": {"nodeName": node, "containers": [{"name": "c"}]}, "status": {"phase": "Running"}}
    return object_from_dict(raw)


def _grown_cluster(nodes: int) -> ClusterState:
    state = cluster()
    for i in range(nodes):
        node = object_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n-{i}"},
                                 "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}})
        assert node is not None
        state.upsert(node)
    return state


async def test_admission_prediction_needing_an_index_rebuild_runs_in_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cold (or massively changed) index is rebuilt without deadline checks: never on the event loop."""
    threads: list[str] = []
    real = prediction.run_consistently

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(prediction, "run_consistently", recording)
    state = _grown_cluster(100)
    service = PredictionService(inline_seconds=1.0)
    pod = pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "b"},
                         "spec": {"containers": [{"name": "c"}]}})
    try:
        await service.predict(state, pod, scheduler=SchedulerConfig(), budget_seconds=5)
        assert threads[-1].startswith("preemptguard-predict")  # cold index: in the pool
        await service.predict(state, pod, scheduler=SchedulerConfig(), budget_seconds=5)
        assert threads[-1] == threading.current_thread().name  # warm index: inline
        for i in range(100):  # a relist-sized change: every node touched
            state.upsert(_pod(f"q-{i}", f"n-{i}"))
        await service.predict(state, pod, scheduler=SchedulerConfig(), budget_seconds=5)
        assert threads[-1].startswith("preemptguard-predict")
    finally:
        service.executor.shutdown(wait=True)


def roomy_cluster(used_on_node_1: str = "0") -> ClusterState:
    """Three 4-CPU nodes; node-1 runs a pod of ``used_on_node_1`` CPUs."""
    state = ClusterState()
    for name in ("node-1", "node-2", "node-3"):
        state.upsert(object_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
    state.upsert(object_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "old", "namespace": "b"},
                                   "spec": {"nodeName": "node-1", "priority": 0, "containers": [
                                       {"name": "c", "resources": {"requests": {"cpu": used_on_node_1,
                                                                                "memory": "1Gi"}}}]},
                                   "status": {"phase": "Running"}}))
    return state


def small_pod() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new", "namespace": "a"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}


def test_replicas_spread_over_the_scored_nodes_and_ties_are_named() -> None:
    """Three empty identical nodes: LeastAllocated and BalancedAllocation tie the first replica on all three
    (selectHost picks any), the second on the two still empty, the third lands on the last one."""
    state = ClusterState()
    for name in ("node-1", "node-2", "node-3"):
        state.upsert(object_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
    preview = compute_preview(state, small_pod(), namespace=None, replicas=3, scheduler=SchedulerConfig())
    assert [(r["outcome"], r["node"], r["tiedNodes"]) for r in preview["results"]] == [
        ("Fits", "node-1", ["node-1", "node-2", "node-3"]), ("Fits", "node-2", ["node-2", "node-3"]),
        ("Fits", "node-3", ["node-3"])]
    first = preview["results"][0]
    assert (first["placement"], first["scoredNodes"]) == ("scored", 3)
    best = first["topNodes"][0]["score"]
    assert [(t["node"], t["score"]) for t in first["topNodes"]] == [(n, best) for n in ("node-1", "node-2", "node-3")]
    assert all(sum(t["scores"].values()) == t["score"] for t in first["topNodes"])
    assert set(first["topNodes"][0]["scores"]) >= {"NodeResourcesFit", "NodeResourcesBalancedAllocation",
                                                   "TaintToleration"}


def test_the_scoring_strategy_of_the_profile_picks_the_node() -> None:
    """node-1 half used (2 of 4 CPUs): LeastAllocated (the default) prefers the empty nodes, MostAllocated node-1."""
    least = compute_preview(roomy_cluster("2"), small_pod(), namespace=None, replicas=None,
                            scheduler=SchedulerConfig())
    assert (least["results"][0]["node"], least["results"][0]["tiedNodes"]) == ("node-2", ["node-2", "node-3"])
    most = compute_preview(roomy_cluster("2"), small_pod(), namespace=None, replicas=None,
                           scheduler=parse_config({"scheduler": {"scoringStrategy": {"type": "MostAllocated"}}},
                                                  "t").scheduler)
    assert (most["results"][0]["node"], most["results"][0]["tiedNodes"]) == ("node-1", ["node-1"])
    no_fit_score = compute_preview(roomy_cluster("2"), small_pod(), namespace=None, replicas=None,
                                   scheduler=parse_config({"scheduler": {"scoreWeights": {
                                       "NodeResourcesFit": 0, "NodeResourcesBalancedAllocation": 0}}},
                                       "t").scheduler)
    assert no_fit_score["results"][0]["tiedNodes"] == ["node-1", "node-2", "node-3"]


def many_nodes(count: int) -> ClusterState:
    state = ClusterState()
    for i in range(count):
        state.upsert(object_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:03}"},
                                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}))
    return state


def test_over_100_feasible_nodes_the_sampled_choice_claims_no_node() -> None:
    """150 nodes fit and the adaptive percentageOfNodesToScore scores 100 of them (numFeasibleNodesToFind:
    max(150 x 49 %, 100)), from where the scheduler's previous search stopped: no node is claimed (no tiedNodes),
    the message says why and how to make it exact, and the next replica says it depends on that guess."""
    preview = compute_preview(many_nodes(150), small_pod(), namespace=None, replicas=2, scheduler=SchedulerConfig())
    first, second = preview["results"]
    assert (first["outcome"], first["placement"], first["tiedNodes"], first["scoredNodes"]) == (
        "Fits", "sampled", [], 100)
    assert "percentageOfNodesToScore" in first["message"] and "scheduler.percentageOfNodesToScore: 100" in (
        first["message"])
    assert second["dependsOn"] == ["a/new-0"] and "a/new-0" in second["message"]
    exact = compute_preview(many_nodes(150), small_pod(), namespace=None, replicas=None,
                            scheduler=SchedulerConfig(percentage_of_nodes_to_score=100))["results"][0]
    assert (exact["placement"], exact["scoredNodes"], len(exact["tiedNodes"])) == ("scored", 150, 150)


def test_the_profile_of_the_config_becomes_the_predictors_scoring() -> None:
    scheduler = parse_config({"scheduler": {
        "percentageOfNodesToScore": 50, "scoreWeights": {"ImageLocality": 0, "InterPodAffinity": 4},
        "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 3}]},
        "interPodAffinity": {"hardPodAffinityWeight": 10, "ignorePreferredTermsOfExistingPods": True}}},
        "t").scheduler
    scoring = prediction.preemption_args(scheduler).scoring
    assert scoring.percentage_of_nodes_to_score == 50
    assert scoring.weight_of("ImageLocality") == 0 and scoring.weight_of("InterPodAffinity") == 4
    assert scoring.weight_of("TaintToleration") == 3  # the default profile's weight, untouched
    assert (scoring.fit_strategy.type, [(r.name, r.weight) for r in scoring.fit_strategy.resources]) == (
        "MostAllocated", [("cpu", 3)])
    assert (scoring.hard_pod_affinity_weight, scoring.ignore_preferred_terms_of_existing_pods) == (10, True)
