"""The live observer's wiring: only with a live source, /debug/predictions always answers, Events are built as
client-go's recorder builds them. (The observer end to end is tests/observe/test_observe_live.py.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp.test_utils import TestClient

from webhook.kubeapi import KubeClient
from webhook.routes import DEBUG_PREDICTIONS_PATH
from webhook.server.app import OBSERVER_KEY, PIPELINE_KEY, make_app
from webhook.server.events import pod_event
from webhook.server.metrics import WebhookMetrics, make_metrics_app
from webhook.server.observing import not_observing
from webhook.server.settings import ServerSettings
from webhook.sources.source import MemorySource

SETTINGS = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True)


class LiveLooking(MemorySource):
    """A source that looks live (an API client), without informers."""

    api = KubeClient()


def test_only_a_live_source_with_a_window_is_observed() -> None:
    snapshot = make_app(MemorySource(), SETTINGS)
    assert OBSERVER_KEY not in snapshot and snapshot[PIPELINE_KEY].follower is None
    live_source = LiveLooking()
    live = make_app(live_source, SETTINGS)
    assert live[PIPELINE_KEY].follower is live[OBSERVER_KEY]
    assert live_source.state.pod_listener is not None
    off = make_app(LiveLooking(), ServerSettings(observe_window_seconds=0))
    assert OBSERVER_KEY not in off and off[PIPELINE_KEY].follower is None


async def test_debug_predictions_without_a_live_cluster(aiohttp_client: Any) -> None:
    client: TestClient = await aiohttp_client(make_metrics_app(WebhookMetrics(), not_observing))
    response = await client.get(DEBUG_PREDICTIONS_PATH)
    assert response.status == 200 and response.content_type == "application/json"
    summary = await response.json()
    assert summary == {"apiVersion": "preemptguard.io/v1alpha1", "kind": "PredictionSummary", "observing": False,
                       "following": 0, "windowSeconds": None, "agreement": None, "recentMismatches": [],
                       "verdicts": {"agree": 0, "node_differs": 0, "victims_differ": 0, "outcome_differs": 0,
                                    "unobserved": 0}}
    assert (await client.get("/metrics")).status == 200


def test_the_event_is_a_legacy_core_event_on_the_pod() -> None:
    event = pod_event("team-a", "web-x7k2p", "uid-1", "PreemptionPredictionMismatch", "predicted ...",
                      instance="preemptguard-7d9c-abcde", now=datetime(2025, 6, 2, 9, 30, 1, 500, tzinfo=UTC))
    assert event == {
        "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "web-x7k2p.", "namespace": "team-a"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "web-x7k2p",
                           "uid": "uid-1"},
        "reason": "PreemptionPredictionMismatch", "message": "predicted ...", "type": "Warning", "count": 1,
        "firstTimestamp": "2025-06-02T09:30:01Z", "lastTimestamp": "2025-06-02T09:30:01Z",
        "source": {"component": "preemptguard"}, "reportingComponent": "preemptguard.io/webhook",
        "reportingInstance": "preemptguard-7d9c-abcde"}


async def test_the_observer_decides_a_burst_a_slice_per_turn_of_the_event_loop() -> None:
    import asyncio

    from webhook.observe.compare import Predicted
    from webhook.observe.tracker import PredictionRecord
    from webhook.preemption.results import Outcome
    from webhook.server.observing import TICK_DECISIONS

    app = make_app(LiveLooking(), ServerSettings(observe_window_seconds=60, observe_tick_seconds=0.01))
    observer = app[OBSERVER_KEY]
    now = [1000.0]
    observer.tracker.clock = lambda: now[0]
    for i in range(5 * TICK_DECISIONS):
        observer.tracker.follow(PredictionRecord(f"p{i}", "team-a", f"web-{i}", 1000, Predicted(Outcome.FITS, "n1")))
    now[0] += 61
    left: list[int] = []

    async def watch() -> None:
        while True:
            left.append(len(observer.tracker))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    runner = asyncio.create_task(observer.run())
    for _ in range(1000):
        await asyncio.sleep(0.005)
        if not observer.tracker:
            break
    runner.cancel()
    watcher.cancel()
    assert len(observer.tracker) == 0
    # The loop ran between slices: the other task saw the count go down a slice at a time.
    assert {n for n in left if 0 < n < 5 * TICK_DECISIONS} >= {k * TICK_DECISIONS for k in range(1, 5)}
