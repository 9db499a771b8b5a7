"""SIGTERM under load: readiness drops first, the listener keeps serving through the grace period, a request still
in flight when the listener closes finishes with 200, then the process exits 0. And a certificate rotated under
load fails nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from fake_apiserver import FakeApiServer, seed_cluster
from faults_support import Traffic

from webhook.certs.issuance import generate_ca, issue_serving_certificate
from webhook.routes import READYZ_PATH
from webhook.server.app import make_app, start_server
from webhook.server.settings import ServerSettings
from webhook.server.tls import ReloadingTLS
from webhook.sources.source import SnapshotSource

REPO = Path(__file__).resolve().parents[2]

GRACE = 1.0
# How long the preview stays in flight after the listener closed (the TokenReview's own timeout is 5 s).
HELD_AFTER_CLOSE = 0.5
PREVIEWER_TOKEN = "previewer-token-0123456789"


async def _preview(base: str, client: ssl.SSLContext) -> tuple[int, dict[str, Any]]:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "team-a"},
           "spec": {"priorityClassName": "high", "containers": [{"name": "c", "resources": {
               "requests": {"cpu": "3", "memory": "1Gi"}}}]}}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client)) as session, \
            session.post(base + "/preview", json={"pod": pod, "replicas": 3},
                         headers={"Authorization": f"Bearer {PREVIEWER_TOKEN}"}) as response:
        return response.status, await response.json()


SNAPSHOT = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
     "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}},
]}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _certificates(directory: Path) -> ssl.SSLContext:
    ca_pem, ca_key = generate_ca("faults-ca", 1)
    cert, key = issue_serving_certificate(ca_pem, ca_key, ["localhost", "127.0.0.1"], 1)
    (directory / "tls.crt").write_bytes(cert)
    (directory / "tls.key").write_bytes(key)
    return ssl.create_default_context(cadata=ca_pem.decode())


async def _wait_ready(base: str, client: ssl.SSLContext, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client)) as session:
        while True:
            try:
                async with session.get(base + READYZ_PATH) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "server did not become ready"
            await asyncio.sleep(0.05)


async def _poll_readiness(base: str, client: ssl.SSLContext, seen: list[tuple[float, int | str]],
                          stop: asyncio.Event) -> None:
    """/readyz on a fresh connection every 20 ms: (time, status or connection error)."""
    connector = aiohttp.TCPConnector(ssl=client, force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=2)) as session:
        while not stop.is_set():
            try:
                async with session.get(base + READYZ_PATH) as response:
                    seen.append((time.monotonic(), response.status))
            except (aiohttp.ClientError, TimeoutError) as exc:
                seen.append((time.monotonic(), type(exc).__name__))
            await asyncio.sleep(0.02)


async def test_sigterm_drains_under_load(tmp_path: Path) -> None:
    """SIGTERM while admissions flow and a /preview is in flight: readiness drops first, the listener keeps serving
    through the grace period, and the request still in flight when the listener closed is answered in full before
    the process exits 0. The preview is held in flight by the API server it authenticates with (its TokenReview is
    answered only once a new connection has been refused), so what is shown does not depend on how fast the
    machine predicts."""
    client = _certificates(tmp_path)
    async with FakeApiServer(token="serve-token") as api:
        seed_cluster(api)
        api.add_user(PREVIEWER_TOKEN, "previewer")
        api.grant("previewer", "create", "pods", "team-a")
        api.grant("previewer", "list", "pods")
        kubeconfig = api.write_kubeconfig(tmp_path)
        port = _free_port()
        base = f"https://127.0.0.1:{port}"
        log = tmp_path / "serve.log"
        with log.open("wb") as out:  # a file, never a pipe nobody reads: a full pipe would block the drain's logs
            process = subprocess.Popen(
                [sys.executable, "-m", "webhook.cli", "serve", "--kubeconfig", str(kubeconfig), "--context", "fake",
                 "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"),
                 "--host", "127.0.0.1", "--port", str(port), "--metrics-port", "0", "--shutdown-grace", str(GRACE)],
                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=out, stderr=subprocess.STDOUT)
        await _sigterm_during_a_held_preview(api, process, base, client, log)


async def _sigterm_during_a_held_preview(api: FakeApiServer, process: subprocess.Popen[bytes], base: str,
                                         client: ssl.SSLContext, log: Path) -> None:
    try:
        await _wait_ready(base, client, process)
        traffic = Traffic(base, client, workers=3).start()
        readiness: list[tuple[float, int | str]] = []
        stop_polling = asyncio.Event()
        poller = asyncio.create_task(_poll_readiness(base, client, readiness, stop_polling))
        await asyncio.sleep(0.5)
        answered_before = traffic.answered
        api.release_token_reviews = asyncio.Event()
        in_flight = asyncio.create_task(_preview(base, client))
        await asyncio.wait_for(api.token_review_waiting.wait(), 20)  # its handler runs, waiting for the API server
        sigterm_at = time.monotonic()
        process.send_signal(signal.SIGTERM)
        # The listener is closed once a new connection is refused (the poller opens one every 20 ms).
        async with asyncio.timeout(20):
            while not any(at > sigterm_at and not isinstance(status, int) for at, status in readiness):
                await asyncio.sleep(0.01)
        await asyncio.sleep(HELD_AFTER_CLOSE)  # the drain must wait for it, not only catch it finishing
        assert not in_flight.done()
        api.release_token_reviews.set()
        preview_status, preview = await asyncio.wait_for(in_flight, 30)
        exit_code = await asyncio.to_thread(process.wait, 15)
        stop_polling.set()
        await poller
        await traffic.stop()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert exit_code == 0, log.read_text(errors="replace")[-2000:]
    # In flight when the listener closed, and answered in full all the same.
    assert preview_status == 200, preview
    assert [r["pod"] for r in preview["results"]] == ["team-a/big-0", "team-a/big-1", "team-a/big-2"]
    assert answered_before > 10
    after = [(at, status) for at, status in readiness if at > sigterm_at]
    refused_at = min(at for at, status in after if not isinstance(status, int))
    # Readiness dropped first: ready answers only before SIGTERM, then 503s, and only then refused connections,
    # none within the grace period (counted from SIGTERM; what the poller observes may only come later).
    assert all(status == 200 for at, status in readiness if at < sigterm_at)
    assert any(status == 503 for at, status in after if at < refused_at), after[:5]
    assert refused_at >= sigterm_at + GRACE
    # Every admission answered got 200 and allowed; the only failures are refused connections after the grace.
    assert not [f for f in traffic.failures if f.startswith(("HTTP", "denied", "worker"))], traffic.failures[:5]
    assert all(at >= sigterm_at + GRACE for at in traffic.failure_times)


async def test_certificate_rotation_under_load(tmp_path: Path) -> None:
    ca_pem, ca_key = generate_ca("rotation-ca", 1)
    client = ssl.create_default_context(cadata=ca_pem.decode())

    def issue() -> None:
        cert, key = issue_serving_certificate(ca_pem, ca_key, ["localhost", "127.0.0.1"], 1)
        for name, data in (("tls.key", key), ("tls.crt", cert)):
            (tmp_path / f".{name}").write_bytes(data)
            (tmp_path / f".{name}").replace(tmp_path / name)

    issue()
    (tmp_path / "cluster.json").write_text(json.dumps(SNAPSHOT))
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_cert=tmp_path / "tls.crt",
                              tls_key=tmp_path / "tls.key", tls_reload_interval=0.05)
    tls = ReloadingTLS(tmp_path / "tls.crt", tmp_path / "tls.key", interval=0.05)
    server = await start_server(make_app(SnapshotSource(tmp_path / "cluster.json"), settings), settings, tls=tls)
    base = f"https://127.0.0.1:{server.https_port}"
    try:
        pooled = Traffic(base, client, workers=3).start()
        fresh = Traffic(base, client, workers=3, new_connections=True).start()
        serials: set[str] = set()

        async def served_serial() -> str:
            _, writer = await asyncio.open_connection("127.0.0.1", server.https_port, ssl=client,
                                                      server_hostname="localhost")
            serial = str(writer.get_extra_info("ssl_object").getpeercert()["serialNumber"])
            writer.close()
            return serial

        for _ in range(4):
            await asyncio.sleep(0.4)
            before = await served_serial()
            issue()
            # The reload happens on the watcher's next tick: give a loaded machine up to 5 s to take it.
            for _ in range(100):
                serial = await served_serial()
                if serial != before:
                    break
                await asyncio.sleep(0.05)
            serials.add(serial)
        await asyncio.sleep(0.3)
        await pooled.stop()
        await fresh.stop()
    finally:
        await server.stop()
    assert pooled.failures == [] and fresh.failures == []
    assert pooled.answered > 20 and fresh.answered > 20
    assert len(serials) >= 3  # new connections picked up the rotated certificates
