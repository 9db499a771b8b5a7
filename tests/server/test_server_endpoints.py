"""Health, readiness, metrics and the pod pipeline hooks of the aiohttp app (against the real app object)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from webhook.admission.decision import AdmissionDecision, forbidden
from webhook.admission.pod import PodReview
from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.config import parse_config
from webhook.prediction.service import PredictionService
from webhook.server.app import METRICS_KEY, PIPELINE_KEY, make_app
from webhook.server.settings import ServerSettings
from webhook.server.testing import admission_review

SETTINGS = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True)


class MemorySource:
    api = None  # a file's state: no live cluster

    def __init__(self, remote: dict[str, PriorityClass] | None = None) -> None:
        self.state = ClusterState()
        self.ready = True
        self.remote = remote or {}
        self.lookups: list[str] = []
        self.started = self.stopped = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    def is_ready(self) -> bool:
        return self.ready

    def readiness_reason(self) -> str:
        return "" if self.ready else "priorityclasses not synced"

    def staleness_seconds(self) -> float:
        return 0.0

    async def get_priority_class(self, name: str) -> PriorityClass | None:
        self.lookups.append(name)
        return self.remote.get(name)


def pod_review(class_name: str = "", name: str = "web-0") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if class_name:
        spec["priorityClassName"] = class_name
    return admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": name, "namespace": "team-a", "operation": "CREATE",
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"},
                   "spec": spec},
    })


async def ready_within(client: TestClient, seconds: float = 30.0) -> tuple[int, str]:
    """/readyz until it answers 200 (the predictor's warm-up runs in the pool after start-up) or ``seconds`` pass."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        response = await client.get("/readyz")
        answer = (response.status, await response.text())
        if answer[0] == 200 or asyncio.get_running_loop().time() > deadline:
            return answer
        await asyncio.sleep(0.02)


async def test_healthz_and_readyz_follow_the_source(aiohttp_client: Any) -> None:
    source = MemorySource()
    client: TestClient = await aiohttp_client(make_app(source, SETTINGS))
    assert source.started
    assert (await client.get("/healthz")).status == 200
    assert await ready_within(client) == (200, "ok")
    source.ready = False
    response = await client.get("/readyz")
    assert (response.status, await response.text()) == (503, "priorityclasses not synced")
    assert (await client.get("/healthz")).status == 200


async def test_readyz_waits_for_the_predictors_index(aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is synced but the predictor's index is still being built: an admission now would build it within
    its own budget or go without a prediction, so the replica is not ready yet (it was, 0.2 s early at 5,000
    nodes in bench/scale.py); once the warm-up ends, it is."""
    building = asyncio.Event()
    release = asyncio.Event()

    async def slow_warm_up(self: PredictionService, state: ClusterState, scheduler: object,
                           budget_seconds: float = 120.0) -> None:
        building.set()
        await release.wait()

    monkeypatch.setattr(PredictionService, "warm_up", slow_warm_up)
    client: TestClient = await aiohttp_client(make_app(MemorySource(), SETTINGS))
    await asyncio.wait_for(building.wait(), 10)
    response = await client.get("/readyz")
    assert (response.status, await response.text()) == (503, "building the predictor's index")
    assert (await client.get("/healthz")).status == 200
    release.set()
    assert await ready_within(client) == (200, "ok")


async def test_readyz_turns_ready_when_the_warm_up_fails(aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed warm-up does not keep the replica unready for ever: the first real prediction builds the index."""

    async def failing_warm_up(self: PredictionService, state: ClusterState, scheduler: object,
                              budget_seconds: float = 120.0) -> None:
        raise RuntimeError("no index today")

    monkeypatch.setattr(PredictionService, "warm_up", failing_warm_up)
    client: TestClient = await aiohttp_client(make_app(MemorySource(), SETTINGS))
    assert await ready_within(client) == (200, "ok")


async def test_class_missing_from_cache_is_looked_up_once(aiohttp_client: Any) -> None:
    source = MemorySource({"late": PriorityClass("late", 500, preemption_policy="Never")})
    client: TestClient = await aiohttp_client(make_app(source, SETTINGS))
    body = await (await client.post("/mutate/pods", json=pod_review("late"))).json()
    assert body["response"]["allowed"] is True and source.lookups == ["late"]
    body = await (await client.post("/mutate/pods", json=pod_review("absent", name="p"))).json()
    assert source.lookups == ["late", "absent"]
    assert body["response"]["status"]["message"] == 'pods "p" is forbidden: no PriorityClass with name absent was found'
    await client.post("/mutate/pods", json=pod_review("system-node-critical"))
    assert source.lookups == ["late", "absent"]  # system classes always exist: no lookup


async def test_extra_pod_steps_run_after_the_priority_plugin(aiohttp_client: Any) -> None:
    seen: list[PodReview] = []

    def warn_step(review: PodReview) -> AdmissionDecision:
        seen.append(review)
        return AdmissionDecision.allow(warnings=["preemption predicted"], audit_annotations={"preemptguard.io/x": "1"})

    def deny_step(review: PodReview) -> AdmissionDecision:
        return forbidden("pods", review.name_for_messages, "quota says no")

    # Guardrails off: no prediction, so the step's warning is the only one.
    app = make_app(MemorySource(), SETTINGS, config=parse_config({"guardrails": {"mode": "off"}}, "test"),
                   pod_steps=[warn_step])
    client: TestClient = await aiohttp_client(app)
    response = (await (await client.post("/mutate/pods", json=pod_review())).json())["response"]
    assert response["allowed"] is True and response["warnings"] == ["preemption predicted"]
    assert response["auditAnnotations"] == {"preemptguard.io/x": "1", "guardrail-decision": "off",
                                            "guardrail-mode": "off"}
    assert "patch" in response
    assert seen[0].pod.priority == 0 and seen[0].is_create
    app[PIPELINE_KEY].steps.append(deny_step)
    response = (await (await client.post("/mutate/pods", json=pod_review())).json())["response"]
    assert response["allowed"] is False and "patch" not in response
    assert response["status"] == {"metadata": {}, "status": "Failure", "code": 403, "reason": "Forbidden",
                                  "message": 'pods "web-0" is forbidden: quota says no'}
    assert response["warnings"] == ["preemption predicted"]


async def test_metrics_count_requests_and_denials(aiohttp_client: Any) -> None:
    app = make_app(MemorySource(), SETTINGS)
    client: TestClient = await aiohttp_client(app)
    await client.post("/mutate/pods", json=pod_review("nope"))
    await client.post("/mutate/pods", data=b"{")
    text = app[METRICS_KEY].render().decode()
    assert 'preemptguard_admission_denials_total{endpoint="mutate_pods",reason="Forbidden"} 1.0' in text
    assert 'preemptguard_http_requests_total{code="400",endpoint="/mutate/pods"} 1.0' in text
    assert 'preemptguard_admission_duration_seconds_count{endpoint="mutate_pods",outcome="denied"} 1.0' in text
    assert make_app(MemorySource(), SETTINGS)[METRICS_KEY].registry is not app[METRICS_KEY].registry
