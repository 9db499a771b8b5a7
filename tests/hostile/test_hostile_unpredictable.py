"""Attack: make the webhook unable to judge, and rely on a skipped check being an allowed pod. Before #24 a
prediction over its budget, a predictor error or a review undecided at the admission deadline let the pod in
under enforce. Now enforce fails closed for what it cannot judge, and a prediction nobody waits for any more
stops in its thread (no thread outlives its request)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from bench.clustergen import generate_cluster
from bench.hostile import guarded_pod
from webhook.cluster.copying import replace_fields
from webhook.cluster.model import Pod
from webhook.cluster.reader import object_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.config import SchedulerConfig, parse_config
from webhook.errors import PredictionCancelled, PredictionTimeout
from webhook.prediction.service import PredictionService
from webhook.preemption.deadline import Deadline
from webhook.preemption.simulate import simulate_pods
from webhook.routes import MUTATE_PODS_PATH
from webhook.server.app import PIPELINE_KEY
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.sources.source import MemorySource


@pytest.fixture(scope="module")
def state() -> ClusterState:
    """200 generated nodes of 30 pods: a 3-CPU critical pod is a full preemption cycle on it."""
    state = ClusterState()
    for raw in generate_cluster(200, 30, seed=11):
        obj = object_from_dict(raw)
        if obj is not None:
            state.upsert(obj)
    return state


def flood(count: int) -> list[Pod]:
    """``count`` critical pods of 3 CPUs: each one is a full preemption cycle."""
    pod = pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wave", "namespace": "team-00"},
                         "spec": {"priority": 1_000_000, "priorityClassName": "critical", "containers": [
                             {"name": "c", "resources": {"requests": {"cpu": "3", "memory": "2Gi"}}}]}})
    return [replace_fields(pod, name=f"wave-{i}") for i in range(count)]


def test_a_cancelled_simulation_stops_inside_its_loops(state: ClusterState) -> None:
    deadline = Deadline()  # no time limit: only the cancellation stops it
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            simulate_pods(state, flood(10_000), deadline=deadline)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.5)
    assert worker.is_alive()  # well under way
    cancelled_at = time.monotonic()
    deadline.cancel("the test")
    worker.join(5.0)
    assert not worker.is_alive() and isinstance(outcome[0], PredictionCancelled)
    assert time.monotonic() - cancelled_at < 2.0  # a bound, not a timing: checks come every few milliseconds


async def test_shutdown_stops_a_running_preview_and_its_thread(state: ClusterState) -> None:
    service = PredictionService()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wave", "namespace": "team-00"},
           "spec": {"priorityClassName": "critical", "containers": [
               {"name": "c", "resources": {"requests": {"cpu": "3", "memory": "2Gi"}}}]}}
    preview = asyncio.create_task(service.preview(state, pod, namespace=None, replicas=10_000,
                                                  scheduler=SchedulerConfig(), budget_seconds=300))
    await asyncio.sleep(0.5)
    assert not preview.done()
    service.shutdown()
    with pytest.raises(PredictionCancelled):
        await asyncio.wait_for(preview, 5)
    # The pool's thread ended with it: joining the pool returns at once.
    started = time.monotonic()
    await asyncio.to_thread(service.preview_executor.shutdown, wait=True)
    assert time.monotonic() - started < 1.0


async def test_a_preview_over_its_budget_leaves_no_work_behind(state: ClusterState) -> None:
    service = PredictionService()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wave", "namespace": "team-00"},
           "spec": {"priorityClassName": "critical", "containers": [
               {"name": "c", "resources": {"requests": {"cpu": "3", "memory": "2Gi"}}}]}}
    try:
        with pytest.raises(PredictionTimeout):
            await service.preview(state, pod, namespace=None, replicas=10_000, scheduler=SchedulerConfig(),
                                  budget_seconds=0.3)
        # The next preview gets the (only) preview thread at once: the first one stopped at its deadline.
        started = time.monotonic()
        await service.preview(state, {**pod, "spec": {**pod["spec"], "priorityClassName": "batch-low"}},
                              namespace=None, replicas=1, scheduler=SchedulerConfig(), budget_seconds=5)
        assert time.monotonic() - started < 2.0
    finally:
        service.shutdown()


# ---- the admission deadline under enforce ---------------------------------------------------------------
class NeverAnswers:
    """A prediction that does not come back (as if the machine were swamped)."""

    async def predict(self, state: Any, pod: Any, *, scheduler: Any, budget_seconds: float) -> Any:
        await asyncio.sleep(60)


def example_state() -> ClusterState:
    from bench.hostile import EXAMPLES
    from webhook.sources.loader import load_snapshot

    return load_snapshot(EXAMPLES / "cluster.yaml")


@pytest.mark.parametrize("mode", ["enforce", "warn"])
async def test_a_review_undecided_at_the_admission_deadline_is_denied_under_enforce(mode: str) -> None:
    pod = guarded_pod()
    review = admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1",
                                                                             "resource": "pods"},
        "name": pod["metadata"]["name"], "namespace": "team-a", "operation": "CREATE", "object": pod,
        "userInfo": {"username": "system:serviceaccount:team-a:deployer"}})
    config = parse_config({"guardrails": {"mode": mode, "tenantLabel": "tenant", "denyCrossTenantPreemption": True}},
                          "test")
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True,
                              admission_deadline_seconds=0.3)
    async with LoopbackWebhook(MemorySource(example_state()), settings, config=config) as hook:
        assert hook.server is not None
        hook.server.app[PIPELINE_KEY].predictor = NeverAnswers()
        status, body = await hook.post_json(MUTATE_PODS_PATH, review)
    assert status == 200
    response = body["response"]
    if mode == "warn":
        assert response["allowed"] is True and "did not finish its checks within 0.3s" in response["warnings"][0]
        return
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert "the webhook did not decide within its admission deadline" in response["status"]["message"]
    assert response["auditAnnotations"]["guardrail-violations"] == "onUnpredictable"
