"""Issue #24, connections: a hostile client holding connections, trickling bodies or flooding the metrics or the
preview port must not lock the API server (or the kubelet's probes, or Prometheus) out, and the guarded
cross-tenant pod stays denied under enforce meanwhile.

The server runs in this process on loopback, on the example cluster under enforce (denyCrossTenantPreemption);
the attacker's sockets are plain asyncio connections held open only as long as each check needs (the README's
test command stays quick)."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.hostile import ENFORCE, EXAMPLES, guarded_pod
from bench.hostile import admission_review as pod_create_review
from webhook.certs.issuance import generate_ca, issue_client_certificate
from webhook.config import parse_config
from webhook.routes import HEALTHZ_PATH, METRICS_PATH, MUTATE_PODS_PATH, PREVIEW_PATH, READYZ_PATH
from webhook.server.limits import LIMITS_KEY
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.sources.source import SnapshotSource

HELD = 1000
ENFORCING = parse_config({**ENFORCE, "prediction": {"budgetMilliseconds": 5000}}, "test")


@pytest.fixture(scope="module")
def example_cluster() -> SnapshotSource:
    return SnapshotSource(EXAMPLES / "cluster.yaml")


async def assert_guarded_pod_denied(hook: LoopbackWebhook) -> None:
    """The API server's review of the cross-tenant example pod: answered, and denied (enforce holds)."""
    status, body = await hook.post_json(MUTATE_PODS_PATH, pod_create_review(guarded_pod()))
    assert status == 200 and body["response"]["allowed"] is False, body
    assert "denyCrossTenantPreemption" in body["response"]["status"]["message"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def settings(**overrides: Any) -> ServerSettings:
    return ServerSettings(**{"host": "127.0.0.1", "port": 0, "metrics_port": 0, "tls_self_signed": True,
                             **overrides})


def review_body(name: str = "web-0") -> bytes:
    return json.dumps(admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": name, "namespace": "team-a", "operation": "CREATE",
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"},
                   "spec": {"containers": [{"name": "c"}]}},
    })).encode()


def post_head(length: int, path: str = MUTATE_PODS_PATH) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


async def answer_status(reader: asyncio.StreamReader, timeout: float) -> int:
    line = await asyncio.wait_for(reader.readline(), timeout)
    return int(line.split()[1]) if line else 0


async def hold(count: int, port: int, context: ssl.SSLContext | None = None,
               source: str = "127.0.0.1") -> list[asyncio.StreamWriter]:
    """``count`` connections to ``port`` from ``source`` (TLS without a certificate when ``context``), left open
    and silent; those the server refuses or closes are simply not held."""
    async def one() -> asyncio.StreamWriter | None:
        try:
            hostname = "localhost" if context else None
            _, writer = await asyncio.wait_for(asyncio.open_connection(
                "127.0.0.1", port, ssl=context, server_hostname=hostname, local_addr=(source, 0)), 5)
            return writer
        except (OSError, ssl.SSLError, TimeoutError):
            return None

    held: list[asyncio.StreamWriter] = []
    for start in range(0, count, 100):  # in batches: the listen backlog is finite
        held += [w for w in await asyncio.gather(*(one() for _ in range(start, min(count, start + 100)))) if w]
    return held


def close_all(writers: list[asyncio.StreamWriter]) -> None:
    for writer in writers:
        writer.transport.abort()


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    ca = generate_ca("client-ca", 1)
    apiserver = issue_client_certificate(ca.cert_pem, ca.key_pem, "kube-apiserver", 1)
    files = {"ca": tmp_path / "ca.crt", "crt": tmp_path / "api.crt", "key": tmp_path / "api.key"}
    for name, data in (("ca", ca.cert_pem), ("crt", apiserver.cert_pem), ("key", apiserver.key_pem)):
        files[name].write_bytes(data)
    return files


@pytest.fixture
async def client_ca_webhook(pki: dict[str, Path], example_cluster: SnapshotSource) -> AsyncIterator[LoopbackWebhook]:
    async with LoopbackWebhook(example_cluster, settings(client_ca=pki["ca"], metrics_port=free_port()),
                               config=ENFORCING, client_certificate=(pki["crt"], pki["key"])) as hook:
        yield hook


async def test_the_api_server_is_served_within_3s_while_1000_certificate_less_connections_are_held(
        client_ca_webhook: LoopbackWebhook) -> None:
    """Issue #24: under --client-ca, 1,000 TLS connections without a certificate used to hold every connection
    slot (the handshake was CERT_OPTIONAL so probes could work); now none completes its handshake."""
    hook = client_ca_webhook
    assert hook.server is not None and hook.client_context is not None
    stranger = ssl.create_default_context()
    stranger.check_hostname, stranger.verify_mode = False, ssl.CERT_NONE  # trusts the server, has no certificate
    silent = await hold(HELD // 2, hook.server.https_port)  # TCP only: never a ClientHello
    certless = await hold(HELD // 2, hook.server.https_port, stranger)
    try:
        started = time.monotonic()
        status, body = await hook.post_json(MUTATE_PODS_PATH, json.loads(review_body()))
        elapsed = time.monotonic() - started
        assert status == 200 and "response" in body
        assert elapsed < 3.0, elapsed
        await assert_guarded_pod_denied(hook)
        # the probes answer on the metrics listener, where no certificate is asked for
        async with aiohttp.ClientSession() as plain:
            for path in (HEALTHZ_PATH, READYZ_PATH):
                async with plain.get(f"http://127.0.0.1:{hook.server.metrics_port}{path}") as response:
                    assert response.status == 200
    finally:
        close_all(silent + certless)


async def test_a_connection_without_a_certificate_never_holds_a_connection_slot(
        client_ca_webhook: LoopbackWebhook) -> None:
    hook = client_ca_webhook
    assert hook.server is not None
    stranger = ssl.create_default_context()
    stranger.check_hostname, stranger.verify_mode = False, ssl.CERT_NONE
    certless = await hold(50, hook.server.https_port, stranger)
    await asyncio.sleep(0.2)
    try:
        assert hook.server.app[LIMITS_KEY].guard.open == {}
    finally:
        close_all(certless)


async def test_slow_bodies_take_no_admission_slot(example_cluster: SnapshotSource) -> None:
    """Issue #24: without --client-ca, 64 connections each trickling a review's body held every admission slot, and
    the API server's reviews got 429s (which its failurePolicy Ignore admits). A slot is now taken only once the
    whole body has arrived."""
    async with LoopbackWebhook(example_cluster, settings(admission_max_in_flight=4, client_body_timeout=10.0),
                               config=ENFORCING) as hook:
        assert hook.server is not None and hook.client_context is not None
        trickling = []
        body = review_body()
        for _ in range(16):
            _reader, writer = await asyncio.open_connection("127.0.0.1", hook.server.https_port,
                                                           ssl=hook.client_context, server_hostname="localhost")
            writer.write(post_head(len(body)) + body[:10])  # the head, and a body that never arrives whole
            trickling.append(writer)
        await asyncio.sleep(0.3)
        try:
            answers = [await hook.post_json(MUTATE_PODS_PATH, json.loads(review_body(f"web-{i}")))
                       for i in range(8)]
            assert [status for status, _ in answers] == [200] * 8
            for _ in range(4):
                await assert_guarded_pod_denied(hook)
        finally:
            close_all(trickling)


async def test_idle_connections_from_many_clients_give_way_to_the_api_server(
        example_cluster: SnapshotSource) -> None:
    """Without --client-ca anything may connect: 1,000 idle connections (the whole cap) do not refuse a newcomer
    that sends a whole request; the oldest idle one gives way."""
    async with LoopbackWebhook(example_cluster, settings(max_connections_per_client=HELD), config=ENFORCING) as hook:
        assert hook.server is not None and hook.client_context is not None
        idle = await hold(HELD, hook.server.https_port, hook.client_context)
        await asyncio.sleep(0.2)
        try:
            started = time.monotonic()
            status, _ = await hook.post_json(MUTATE_PODS_PATH, json.loads(review_body()))
            assert status == 200 and time.monotonic() - started < 3.0
            await assert_guarded_pod_denied(hook)
        finally:
            close_all(idle)


async def test_scrapes_and_probes_work_while_one_client_floods_the_metrics_port(
        example_cluster: SnapshotSource) -> None:
    """Issue #24: 200 idle connections to the metrics port blinded every scrape; one client (here 127.0.0.2, as a
    pod has an address of its own) may now hold only a few, and idle ones give way to newcomers."""
    metrics_port = free_port()
    async with LoopbackWebhook(example_cluster, settings(metrics_port=metrics_port), config=ENFORCING) as hook:
        idle = await hold(HELD, metrics_port, source="127.0.0.2")
        assert hook.server is not None
        assert hook.server.app[LIMITS_KEY].metrics_guard.clients() == {"127.0.0.2": 8}
        await asyncio.sleep(0.2)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as plain:
                for path in (METRICS_PATH, HEALTHZ_PATH, READYZ_PATH, METRICS_PATH):
                    async with plain.get(f"http://127.0.0.1:{metrics_port}{path}") as response:
                        assert response.status == 200, path
            await assert_guarded_pod_denied(hook)
        finally:
            close_all(idle)


async def test_a_flood_of_the_preview_port_takes_nothing_the_api_server_or_other_callers_need(
        pki: dict[str, Path], example_cluster: SnapshotSource) -> None:
    """The /preview listener (--preview-port, where no client certificate is asked under --client-ca) is open to
    every tenant: one client holding 1,000 TLS connections there keeps at most its per-client share, holds none of
    the admission port's, and another caller's preview and the API server's review are still answered at once."""
    async with LoopbackWebhook(example_cluster, settings(client_ca=pki["ca"], preview_port=0), config=ENFORCING,
                               client_certificate=(pki["crt"], pki["key"])) as hook:
        assert hook.server is not None and hook.server.preview_port is not None
        stranger = ssl.create_default_context()
        stranger.check_hostname, stranger.verify_mode = False, ssl.CERT_NONE  # no certificate: none needed there
        flood = await hold(HELD, hook.server.preview_port, stranger, source="127.0.0.2")
        await asyncio.sleep(0.2)
        try:
            limits = hook.server.app[LIMITS_KEY]
            assert limits.preview_guard.clients() == {"127.0.0.2": limits.settings.preview_max_connections_per_client}
            assert limits.guard.open == {}
            started = time.monotonic()
            await assert_guarded_pod_denied(hook)
            status, preview = await hook.post_preview_listener(PREVIEW_PATH, {"pod": guarded_pod()})
            assert status == 200 and preview["results"][0]["outcome"] == "Preempts"
            assert time.monotonic() - started < 3.0
        finally:
            close_all(flood)
