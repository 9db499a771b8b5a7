"""The PolicyReport writer of the exposure scan (webhook.server.exposing.ReportWriter), against a stand-in for the
API door: what the API holds is read once per term, unchanged reports are never rewritten, a missing CRD is one
warning and no writes, an unreachable API server is retried calmly, never in a tight loop. And the scan itself
(ExposureScanner) shares the event loop: a recount of a namespace's pods is done in steps."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from webhook.cluster.model import LabelSelector, Namespace, Pod, PodDisruptionBudget, PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.config import Config
from webhook.errors import ApiError, ClusterUnavailable
from webhook.exposure import NamespaceExposure, PreemptingClass, PriorityBand
from webhook.exposure.compute import RECOUNT_STEP
from webhook.exposure.report import HASH_ANNOTATION, policy_report
from webhook.kubeapi import KubeClient
from webhook.server import exposing
from webhook.server.exposing import ExposureScanner, ReportWriter
from webhook.server.tenant_metrics import TenantMetrics
from webhook.sources.source import MemorySource


class Door:
    """The two calls the writer makes: one LIST, then server-side applies."""

    def __init__(self, listed: list[dict[str, Any]] | None = None, *, list_error: Exception | None = None,
                 apply_error: Exception | None = None) -> None:
        self.listed = listed or []
        self.list_error = list_error
        self.apply_error = apply_error
        self.lists = 0
        self.applied: list[str] = []

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        self.lists += 1
        if self.list_error is not None:
            raise self.list_error
        return {"items": self.listed}

    async def apply(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.applied.append(body["metadata"]["namespace"])
        if self.apply_error is not None:
            raise self.apply_error
        return body


def report(namespace: str, pods: int = 3) -> dict[str, Any]:
    band = PriorityBand(10, ("low",), pods, 0, (PreemptingClass("high", 1000, 2, True),))
    return policy_report(NamespaceExposure(namespace, (band,), ()), timestamp=1)


def writer(door: Door) -> ReportWriter:
    return ReportWriter(cast(KubeClient, door), TenantMetrics(CollectorRegistry()), writes_per_second=1000)


async def run_for(target: ReportWriter, seconds: float) -> None:
    task = asyncio.create_task(target.run())
    await asyncio.sleep(seconds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_what_the_api_holds_is_read_once_and_unchanged_reports_are_not_rewritten() -> None:
    door = Door([report("team-a")])
    target = writer(door)
    target.offer(report("team-a"))
    target.offer(report("team-b"))
    target.offer(report("team-b", pods=4))  # the latest offer of a namespace wins
    await run_for(target, 0.2)
    assert door.lists == 1 and door.applied == ["team-b"]
    assert target.written["team-b"] == report("team-b", pods=4)["metadata"]["annotations"][HASH_ANNOTATION]


async def test_without_the_crd_nothing_is_written_and_it_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    door = Door(list_error=ApiError("GET", "/apis/wgpolicyk8s.io/v1alpha2/policyreports", 404, "NotFound",
                                    "the server could not find the requested resource"))
    target = writer(door)
    caplog.set_level(logging.WARNING, logger="webhook.exposure")
    for namespace in ("a", "b", "c"):
        target.offer(report(namespace))
    await run_for(target, 1.5)
    assert door.applied == [] and door.lists == 1  # looked for again only after CRD_RETRY_SECONDS
    assert sum("no PolicyReport API" in r.message for r in caplog.records) == 1


async def test_an_unreachable_api_server_is_retried_calmly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exposing, "RETRY_SECONDS", 0.1)
    door = Door(apply_error=ClusterUnavailable("cannot reach the API server"))
    target = writer(door)
    target.offer(report("team-a"))
    await run_for(target, 0.55)
    assert 3 <= len(door.applied) <= 7  # about one try per RETRY_SECONDS, not thousands
    assert target.pending == 1  # still waiting its turn


async def test_a_scan_recounting_a_namespace_gives_the_event_loop_back_between_steps_of_pods() -> None:
    """A namespace's PDB selector changed (or the replica just started): its pods are counted again, a bounded step at
    a time with the loop given back between steps, not in one go (~50 ms of the loop for 20,000 pods)."""
    state = ClusterState()
    state.upsert(Namespace("team-b"))
    state.upsert(PriorityClass("low", 10))
    scanner = ExposureScanner(MemorySource(state), TenantMetrics(CollectorRegistry()), Config, lambda: True, None,
                              slice_seconds=0.0, max_duty=1.0)  # every step a turn of the loop
    state.add_pod_listener(scanner.pod_changed)
    for i in range(10 * RECOUNT_STEP):
        state.upsert(Pod(name=f"web-{i}", namespace="team-b", node_name="n1", priority=10, priority_class_name="low",
                         phase="Running", labels={"app": "web"}))
    state.upsert(PodDisruptionBudget("web", "team-b", LabelSelector({"app": "web"}), 1))
    turns = 0

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    before = turns
    await scanner.scan()
    other.cancel()
    assert turns - before >= 10  # one turn per step of RECOUNT_STEP pods at least
    (budget,) = scanner.exposures["team-b"].pdbs
    assert budget.pods == 10 * RECOUNT_STEP


async def test_the_scan_gives_the_loop_back_after_each_step_longer_than_a_watch_batch() -> None:
    """An admission arriving while the scan works waits for the slice to end: a step of a quarter millisecond (a
    namespace's exposure at scale is one step) is followed by a turn of the loop, as a batch of watch events is."""
    now = [0.0]
    pacer = exposing.Pacer(exposing.DEFAULT_SLICE_SECONDS, exposing.DEFAULT_MAX_DUTY, clock=lambda: now[0])
    pacer.start()
    turns = 0

    async def other_task() -> None:
        nonlocal turns
        turns += 1

    for step in range(3):
        now[0] += 0.00025
        task = asyncio.ensure_future(other_task())
        await pacer.pace()
        assert task.done(), step  # the loop ran another task before the next step
    assert turns == 3
    assert pacer.stop() == pytest.approx(0.00075)
