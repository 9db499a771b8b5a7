"""Fault-injection fixtures: the fake API server, a KubernetesSource on it served by the real app over TLS,
background admission traffic, and cluster churn. Shared helpers live in ``faults_support``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "sources"))

from fake_apiserver import FakeApiServer, seed_cluster
from faults_support import FAST_INFORMERS

from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook
from webhook.sources.kube_source import KubernetesSource


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(token="fault-token") as server:
        seed_cluster(server)
        yield server


@pytest.fixture
async def hook(fake_api: FakeApiServer, tmp_path: Path) -> AsyncIterator[LoopbackWebhook]:
    """The real app over TLS on a KubernetesSource watching ``fake_api``, after the initial sync."""
    source = KubernetesSource(kubeconfig=str(fake_api.write_kubeconfig(tmp_path)), context="fake",
                              settings=FAST_INFORMERS)
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True)
    async with LoopbackWebhook(source, settings) as running:
        assert await source.wait_until_ready(timeout=10)
        yield running
