"""Fixtures of the certificate tests: a fake API server on 127.0.0.1 and a kubeconfig pointing at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from fake_kube_api import FakeApiServer

from webhook.kubeapi import KubeClient


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    yield server
    server._stop.set()
    await runner.cleanup()


@pytest.fixture
def kubeconfig(tmp_path: Path, fake_api: FakeApiServer) -> Path:
    """A kubeconfig whose current context is the fake API server (plain HTTP, a bearer token)."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": fake_api.url}}],
        "users": [{"name": "fake", "user": {"token": "test-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }))
    return path


@pytest.fixture
async def api_client(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(kubeconfig=str(kubeconfig))
    yield client
    await client.close()


