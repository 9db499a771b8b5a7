"""Dropped watch connections, an API server outage, backoff, shutdown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from fake_apiserver import FakeApiServer, namespace, node, pod, seed_cluster, wait_for, wait_until_consistent

from webhook.sources.informer import RESOURCE_KINDS, InformerSettings
from webhook.sources.kube_source import KubernetesSource


async def test_dropped_connection_mid_stream_resumes_without_relist(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    state = synced_source.state
    await wait_for(lambda: len(fake_api.watches) == len(RESOURCE_KINDS), what="every kind watched")
    fake_api.create(pod("a", "team-a", node_name="node-1"))
    await wait_until_consistent(fake_api, state)
    fake_api.drop_watches()
    # Events the informer has not seen yet; it must resume from its resourceVersion and get them all.
    fake_api.create(pod("b", "team-a", node_name="node-1"))
    fake_api.delete("Pod", "a", "team-a")
    fake_api.update(node("node-2", cpu="32"))
    await wait_until_consistent(fake_api, state)
    assert all(i.relists == 1 for i in synced_source.informers)  # resumed the watch, no relist needed
    assert state.nodes["node-2"].allocatable.milli_cpu == 32000


async def test_api_server_down_keeps_ready_and_reports_staleness(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    state = synced_source.state
    await wait_for(lambda: synced_source.staleness_seconds() < 0.5, what="fresh state")
    await fake_api.go_down()
    fake_api.create(namespace("while-down"))
    fake_api.create(pod("while-down", "team-a", node_name="node-2"))
    fake_api.delete("Pod", "web-1", "team-a")
    down_at = time.monotonic()
    await asyncio.sleep(0.6)
    assert synced_source.is_ready()
    assert synced_source.readiness_reason() == ""
    assert synced_source.staleness_seconds() >= time.monotonic() - down_at - 0.05
    assert "team-a/web-1" in state.pods  # the last known state keeps being served
    await fake_api.come_up()
    await wait_until_consistent(fake_api, state)
    await wait_for(lambda: synced_source.staleness_seconds() < 0.3, what="staleness reset")
    assert synced_source.is_ready()


async def test_watch_renewed_when_the_server_timeout_ends_it(
        fake_api: FakeApiServer, make_source: Callable[..., KubernetesSource]) -> None:
    seed_cluster(fake_api)
    source = make_source(settings=InformerSettings(watch_timeout_seconds=1, backoff_base_seconds=0.01))
    await source.start()
    assert await source.wait_until_ready(timeout=5)
    node_watches = lambda: [q for p, q in fake_api.requests if p == "/api/v1/nodes" and "watch" in q]  # noqa: E731
    await wait_for(lambda: len(node_watches()) >= 2, timeout=5, what="a renewed watch")
    assert node_watches()[0]["timeoutSeconds"] == "1"
    fake_api.create(node("node-late"))
    await wait_until_consistent(fake_api, source.state)
    assert all(i.relists == 1 for i in source.informers)


async def test_unauthorized_backs_off_and_never_syncs(
        fake_api: FakeApiServer, make_source: Callable[..., KubernetesSource]) -> None:
    fake_api.token = "another-token"
    source = make_source()
    await source.start()
    assert not await source.wait_until_ready(timeout=0.3)
    assert not source.is_ready()
    attempts = len(fake_api.requests)
    assert 6 <= attempts < 6 * 40  # retried, but with backoff rather than a busy loop


@pytest.mark.parametrize("failures", [1, 2, 5, 50])
def test_backoff_is_exponential_jittered_and_capped(failures: int) -> None:
    settings = InformerSettings(backoff_base_seconds=0.2, backoff_cap_seconds=30.0)
    ceiling = min(30.0, 0.2 * 2 ** (failures - 1))
    delays = [settings.backoff_delay(failures) for _ in range(200)]
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(set(delays)) > 1


async def test_stop_cancels_informers_and_closes_connections(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    await wait_for(lambda: len(fake_api.watches) == len(RESOURCE_KINDS), what="every kind watched")
    await synced_source.stop()
    assert not synced_source.api.is_open
    assert all(i._task is None for i in synced_source.informers)
    await wait_for(lambda: not fake_api.watches, what="server-side watches to end")
