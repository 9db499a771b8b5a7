"""Fixtures for the informer tests: a fake API server, a started KubernetesSource, object builders."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_apiserver import FakeApiServer, seed_cluster

from webhook.sources.informer import InformerSettings
from webhook.sources.kube_source import KubernetesSource

TOKEN = "s3cr3t-token-for-the-fake-apiserver"

FAST = InformerSettings(page_size=2, watch_timeout_seconds=30, backoff_base_seconds=0.01,
                        backoff_cap_seconds=0.1, connect_timeout_seconds=1.0, request_timeout_seconds=5.0,
                        watch_read_slack_seconds=5.0)


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def kubeconfig(fake_api: FakeApiServer, tmp_path: Path) -> Path:
    return fake_api.write_kubeconfig(tmp_path)


@pytest.fixture
async def make_source(kubeconfig: Path) -> AsyncIterator[Callable[..., KubernetesSource]]:
    """Builds KubernetesSources on the fake's kubeconfig and stops every one at teardown."""
    made: list[KubernetesSource] = []

    def build(**kwargs: Any) -> KubernetesSource:
        kwargs.setdefault("settings", FAST)
        source = KubernetesSource(kubeconfig=str(kubeconfig), context="fake", **kwargs)
        made.append(source)
        return source

    yield build
    for source in made:
        await source.stop()


@pytest.fixture
async def synced_source(fake_api: FakeApiServer, make_source: Callable[..., KubernetesSource]) -> KubernetesSource:
    """A started source over a small seeded cluster, after its initial sync."""
    seed_cluster(fake_api)
    source = make_source()
    await source.start()
    assert await source.wait_until_ready(timeout=5)
    return source
