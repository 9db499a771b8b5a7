"""Admissions keep succeeding while the API server misbehaves, and the cache converges to the truth after:
watch streams cut every few hundred milliseconds, 410 storms, and the API server down for a while."""

from __future__ import annotations

import os

from fake_apiserver import FakeApiServer, wait_for, wait_until_consistent
from faults_support import Churn, Traffic, run_for

from webhook.routes import READYZ_PATH
from webhook.server.app import SOURCE_KEY
from webhook.server.testing import LoopbackWebhook
from webhook.sources.kube_source import KubernetesSource

# How long the API server stays down in test_api_server_outage (CI default; raise it for a longer soak).
OUTAGE_SECONDS = float(os.environ.get("PREEMPTGUARD_FAULT_OUTAGE_SECONDS", "10"))
FAULT_SECONDS = float(os.environ.get("PREEMPTGUARD_FAULT_SECONDS", "4"))


def live_source(hook: LoopbackWebhook) -> KubernetesSource:
    assert hook.server is not None
    source = hook.server.app[SOURCE_KEY]
    assert isinstance(source, KubernetesSource)
    return source


def start_traffic(hook: LoopbackWebhook) -> Traffic:
    assert hook.server is not None and hook.client_context is not None
    return Traffic(f"https://127.0.0.1:{hook.server.https_port}", hook.client_context).start()


async def test_watch_streams_cut_repeatedly(fake_api: FakeApiServer, hook: LoopbackWebhook) -> None:
    source = live_source(hook)
    churn = Churn(fake_api, seed=1)
    traffic = start_traffic(hook)

    def cut() -> None:
        churn.step()
        fake_api.drop_watches()

    cuts = await run_for(FAULT_SECONDS, 0.3, cut)
    await wait_until_consistent(fake_api, source.state, timeout=10)
    await traffic.stop()
    assert traffic.failures == []
    assert traffic.answered > 50 and cuts >= FAULT_SECONDS / 0.3 * 0.8
    assert source.is_ready()


async def test_410_storm(fake_api: FakeApiServer, hook: LoopbackWebhook) -> None:
    source = live_source(hook)
    relists_before = sum(informer.relists for informer in source.informers)
    churn = Churn(fake_api, seed=2)
    traffic = start_traffic(hook)

    def expire() -> None:
        churn.step()
        fake_api.compact()  # every resourceVersion the informers hold is now too old
        fake_api.expire_watches()

    await run_for(FAULT_SECONDS, 0.25, expire)
    await wait_until_consistent(fake_api, source.state, timeout=10)
    await traffic.stop()
    assert traffic.failures == []
    assert traffic.answered > 50
    assert sum(informer.relists for informer in source.informers) > relists_before + 6  # the storm was real
    assert source.is_ready()


async def test_api_server_outage(fake_api: FakeApiServer, hook: LoopbackWebhook) -> None:
    source = live_source(hook)
    churn = Churn(fake_api, seed=3)
    traffic = start_traffic(hook)
    await fake_api.go_down()
    await run_for(OUTAGE_SECONDS, 0.5, churn.step)  # the cluster keeps changing while unreachable
    assert await hook.get(READYZ_PATH) == (200, "ok")  # the last known state keeps being served
    assert source.staleness_seconds() >= OUTAGE_SECONDS * 0.8
    answered_while_down = traffic.answered
    await fake_api.come_up()
    await wait_until_consistent(fake_api, source.state, timeout=15)
    await wait_for(lambda: source.staleness_seconds() < 1.0, timeout=10, what="staleness to reset")
    await traffic.stop()
    assert traffic.failures == []
    assert answered_while_down > 50
