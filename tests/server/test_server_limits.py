"""Limits and isolation over real TLS: fast 429s when saturated, the admission deadline (fail open with a
warning), slow clients cut off without hurting others, the connection cap, draining, TLS policy, and no
plaintext admission on either port."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Mapping
from typing import Any

import pytest

from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.identity import ANONYMOUS, UserInfo
from webhook.routes import HEALTHZ_PATH, MUTATE_PODS_PATH, PREVIEW_PATH, READYZ_PATH
from webhook.server.app import METRICS_KEY
from webhook.server.limits import LIMITS_KEY
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.server.tls import SelfSignedTLS
from webhook.sources.source import MemorySource


class BlockingSource:
    """An empty, ready cluster whose direct PriorityClass lookups wait until ``release`` is set."""

    api = None  # a file's state: no live cluster

    def __init__(self) -> None:
        self.state = ClusterState()
        self.release = asyncio.Event()
        self.lookups = 0

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        self.release.set()

    def is_ready(self) -> bool:
        return True

    def readiness_reason(self) -> str:
        return ""

    def staleness_seconds(self) -> float:
        return 0.0

    async def get_priority_class(self, name: str) -> PriorityClass | None:
        self.lookups += 1
        await self.release.wait()
        return None


class BlockingAuthenticator:
    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def authenticate(self, headers: Mapping[str, str]) -> UserInfo:
        await self.release.wait()
        return ANONYMOUS

    async def is_allowed(self, caller: UserInfo, verb: str, resource: str, namespace: str) -> bool:
        return True

    async def close(self) -> None:
        return None


def pod_review(class_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if class_name:
        spec["priorityClassName"] = class_name
    return admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "web-0", "namespace": "team-a", "operation": "CREATE",
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "team-a"},
                   "spec": spec},
    })


def settings(**overrides: Any) -> ServerSettings:
    return ServerSettings(**{"host": "127.0.0.1", "port": 0, "metrics_port": 0, "tls_self_signed": True, **overrides})


@pytest.fixture
async def source() -> BlockingSource:
    return BlockingSource()


async def raw_tls(hook: LoopbackWebhook) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    assert hook.server is not None and hook.client_context is not None
    return await asyncio.open_connection("127.0.0.1", hook.server.https_port, ssl=hook.client_context,
                                         server_hostname="localhost")


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """Everything the server sends until it closes the connection; fails if it is still open after ``seconds``."""
    try:
        return await asyncio.wait_for(reader.read(), seconds)
    except (ConnectionError, ssl.SSLError):
        return b""


# ---- concurrency ------------------------------------------------------------------------------------
async def test_saturated_admission_gets_a_fast_429_without_retry_after(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(admission_max_in_flight=2, admission_queue_seconds=0.05)) as hook:
        held = [asyncio.create_task(hook.post_json(MUTATE_PODS_PATH, pod_review("slow"))) for _ in range(2)]
        while source.lookups < 2:
            await asyncio.sleep(0.01)
        assert hook.session is not None
        started = time.monotonic()
        async with hook.session.post(hook.url(MUTATE_PODS_PATH), json=pod_review()) as response:
            assert response.status == 429
            assert "Retry-After" not in response.headers  # client-go would sleep and retry inside its timeout
            assert "too many admission requests" in (await response.json())["error"]
        assert time.monotonic() - started < 1.0
        assert await hook.get(HEALTHZ_PATH) == (200, "ok")  # probes are never limited
        source.release.set()
        for status, body in await asyncio.gather(*held):
            # The lookup found no such class: the upstream rejection, answered normally once released.
            assert status == 200 and "no PriorityClass with name slow" in body["response"]["status"]["message"]
        status, body = await hook.post_json(MUTATE_PODS_PATH, pod_review())
        assert status == 200
        assert hook.server is not None
        rendered = hook.server.app[METRICS_KEY].render().decode()
        assert 'preemptguard_requests_rejected_total{endpoint_class="admission"} 1.0' in rendered


async def test_saturated_preview_gets_429_with_retry_after(source: BlockingSource) -> None:
    authenticator = BlockingAuthenticator()
    async with LoopbackWebhook(source, settings(preview_max_in_flight=1), authenticator=authenticator) as hook:
        preview = {"pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                           "spec": {"containers": [{"name": "c"}]}}}
        held = asyncio.create_task(hook.post_json(PREVIEW_PATH, preview))
        assert hook.server is not None
        limits = hook.server.app[LIMITS_KEY]
        while limits.gates["preview"].in_flight < 1:
            await asyncio.sleep(0.01)
        assert hook.session is not None
        async with hook.session.post(hook.url(PREVIEW_PATH), json=preview) as response:
            assert response.status == 429
            assert response.headers["Retry-After"] == "1"
        # Admission has its own slots: a full preview class does not touch it.
        status, _ = await hook.post_json(MUTATE_PODS_PATH, pod_review())
        assert status == 200
        authenticator.release.set()
        status, body = await held
        assert status == 200 and body["kind"] == "PreemptionPreview"


# ---- deadline -------------------------------------------------------------------------------------
async def test_undecided_pod_review_is_allowed_with_a_warning_at_the_deadline(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(admission_deadline_seconds=0.3)) as hook:
        started = time.monotonic()
        status, body = await hook.post_json(MUTATE_PODS_PATH, pod_review("slow"))
        elapsed = time.monotonic() - started
        assert status == 200
        response = body["response"]
        assert response["allowed"] is True and "patch" not in response
        assert "did not finish its checks within 0.3s" in response["warnings"][0]
        assert response["auditAnnotations"] == {"deadline-exceeded": "0.3s"}
        assert 0.25 <= elapsed < 1.5
        assert hook.server is not None
        rendered = hook.server.app[METRICS_KEY].render().decode()
        assert "preemptguard_admission_deadline_exceeded_total 1.0" in rendered


# ---- slow clients -----------------------------------------------------------------------------------
async def test_slow_headers_are_cut_off_while_other_clients_are_served(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(client_header_timeout=0.5)) as hook:
        reader, writer = await raw_tls(hook)
        started = time.monotonic()
        writer.write(b"POST /mutate/pods HTTP/1.1\r\nHost: localhost\r\n")

        async def dribble() -> None:
            for _ in range(40):  # one header byte every 50 ms: never finishes within the timeout
                await asyncio.sleep(0.05)
                writer.write(b"X")
                await writer.drain()

        trickle = asyncio.create_task(dribble())
        for _ in range(5):  # meanwhile a well-behaved client gets prompt answers
            status, body = await hook.post_json(MUTATE_PODS_PATH, pod_review())
            assert status == 200 and body["response"]["allowed"] is True
        assert await closed_within(reader, 3.0) == b""
        assert 0.4 <= time.monotonic() - started < 2.5
        trickle.cancel()
        writer.close()
        assert hook.server is not None
        assert 'preemptguard_slow_clients_total{phase="headers"} 1.0' in hook.server.app[METRICS_KEY].render().decode()


async def test_slow_body_gets_408_and_the_connection_closes(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(client_body_timeout=0.5)) as hook:
        reader, writer = await raw_tls(hook)
        writer.write(b"POST /mutate/pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"apiVersion\":")
        await writer.drain()
        started = time.monotonic()
        answer = await closed_within(reader, 3.0)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert b"not received within 0.5s" in answer
        assert 0.4 <= time.monotonic() - started < 2.0
        writer.close()


async def test_a_connection_that_never_handshakes_is_closed(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(tls_handshake_timeout=0.5)) as hook:
        assert hook.server is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", hook.server.https_port)
        started = time.monotonic()
        assert await closed_within(reader, 3.0) == b""
        assert time.monotonic() - started < 2.0
        writer.close()


async def test_idle_connections_give_way_at_the_cap_and_busy_ones_do_not(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(max_connections=2)) as hook:
        first, second = [await raw_tls(hook) for _ in range(2)]
        await asyncio.sleep(0.05)
        # A newcomer over the cap takes the place of the oldest connection without a request.
        assert await hook.get(HEALTHZ_PATH) == (200, "ok")
        assert await closed_within(first[0], 2.0) == b""
        second[1].close()
        await asyncio.sleep(0.05)
        assert hook.session is not None
        await hook.session.close()  # its idle keep-alive connection too: nothing open
        await asyncio.sleep(0.05)
        # Two connections whose complete requests are being answered are never evicted: a third is refused.
        busy = [await raw_tls(hook) for _ in range(2)]
        body = json.dumps(pod_review(class_name="waits")).encode()
        for _, writer in busy:
            writer.write(b"POST /mutate/pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
        await asyncio.sleep(0.2)
        assert source.lookups == 2
        reader, writer = await raw_tls(hook)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert not (await closed_within(reader, 2.0)).startswith(b"HTTP/1.1 200")
        assert 'preemptguard_connections_refused_total 1.0' in hook.server.app[METRICS_KEY].render().decode()
        source.release.set()
        for busy_reader, busy_writer in busy:
            assert (await asyncio.wait_for(busy_reader.readuntil(b"\r\n"), 5)).startswith(b"HTTP/1.1 200")
            busy_writer.close()


async def test_one_client_is_capped_while_another_connects(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(max_connections=100, max_connections_per_client=3)) as hook:
        assert hook.server is not None
        idle = [await raw_tls(hook) for _ in range(10)]
        await asyncio.sleep(0.1)
        guard = hook.server.app[LIMITS_KEY].guard
        assert guard.clients() == {"127.0.0.1": 3}  # the oldest idle ones gave way to the client's newest
        for _, writer in idle:
            writer.close()


async def test_a_connection_must_start_its_first_request_soon(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(first_request_timeout=0.3)) as hook:
        reader, writer = await raw_tls(hook)
        started = time.monotonic()
        assert await closed_within(reader, 3.0) == b""
        assert 0.2 <= time.monotonic() - started < 2.0
        writer.close()
        assert hook.server is not None
        assert 'preemptguard_slow_clients_total{phase="idle"} 1.0' in hook.server.app[METRICS_KEY].render().decode()


# ---- draining -------------------------------------------------------------------------------------
async def test_draining_reports_not_ready_and_keeps_serving(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings()) as hook:
        assert await hook.get(READYZ_PATH) == (200, "ok")
        assert hook.server is not None
        hook.server.begin_drain()
        assert await hook.get(READYZ_PATH) == (503, "shutting down")
        assert hook.session is not None
        async with hook.session.post(hook.url(MUTATE_PODS_PATH), json=pod_review()) as response:
            assert response.status == 200
            assert response.headers["Connection"] == "close"  # keep-alive clients move to another replica


# ---- TLS policy and plaintext -------------------------------------------------------------------------
def _client(minimum: ssl.TLSVersion, maximum: ssl.TLSVersion, ciphers: str | None = None) -> ssl.SSLContext:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        context.minimum_version, context.maximum_version = minimum, maximum
        if ciphers is not None:
            context.set_ciphers(ciphers)
    return context


async def _handshake(port: int, context: ssl.SSLContext) -> tuple[str, str] | None:
    """(protocol, cipher) when the handshake succeeds, None when it fails."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    except (ssl.SSLError, ConnectionError):
        return None
    ssl_object = writer.get_extra_info("ssl_object")
    negotiated = (ssl_object.version(), ssl_object.cipher()[0])
    writer.close()
    return negotiated


def _permissive_server_context(cert_file: Any, key_file: Any) -> ssl.SSLContext:
    """The control: a server accepting everything this OpenSSL can do, with the webhook's certificate."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.set_ciphers("ALL:eNULL:@SECLEVEL=0")
    context.load_cert_chain(cert_file, key_file)
    return context


@pytest.mark.parametrize(("label", "minimum", "maximum", "ciphers"), [
    ("TLS 1.0", ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1, "ALL:@SECLEVEL=0"),
    ("TLS 1.1", ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_1, "ALL:@SECLEVEL=0"),
    ("CBC with SHA-1", ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0"),
    ("CBC with SHA-384", ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES256-SHA384"),
    ("no encryption", ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-NULL-SHA:@SECLEVEL=0"),
    ("short tag", ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-CCM8:@SECLEVEL=0"),
])
async def test_old_protocols_and_weak_ciphers_are_refused_by_the_server(
        source: BlockingSource, label: str, minimum: ssl.TLSVersion, maximum: ssl.TLSVersion, ciphers: str) -> None:
    client = _client(minimum, maximum, ciphers)
    tls = SelfSignedTLS([])
    control = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0,
                                         ssl=_permissive_server_context(tls.cert_file, tls.key_file))
    try:
        # The client really offers this protocol and suite: a permissive server accepts it...
        assert await _handshake(control.sockets[0].getsockname()[1], client) is not None, label
    finally:
        control.close()
        await tls.stop()
    async with LoopbackWebhook(source, settings()) as hook:
        assert hook.server is not None
        # ...and the webhook refuses it.
        assert await _handshake(hook.server.https_port, client) is None, label


async def test_modern_tls_is_accepted(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings()) as hook:
        assert hook.server is not None
        port = hook.server.https_port
        tls13 = await _handshake(port, _client(ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3))
        assert isinstance(tls13, tuple) and tls13[0] == "TLSv1.3"
        for suite in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"):
            tls12 = await _handshake(port, _client(ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2, suite))
            assert tls12 == ("TLSv1.2", suite)


async def test_no_plaintext_admission_on_either_port(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(metrics_port=_free_port())) as hook:
        assert hook.server is not None and hook.server.metrics_port is not None
        body = json.dumps(pod_review()).encode()
        # The HTTPS port speaks only TLS: a plain HTTP request gets no HTTP answer.
        reader, writer = await asyncio.open_connection("127.0.0.1", hook.server.https_port)
        writer.write(b"POST /mutate/pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        assert not (await closed_within(reader, 5.0)).startswith(b"HTTP/")
        writer.close()
        # The metrics port serves only /metrics.
        base = f"http://127.0.0.1:{hook.server.metrics_port}"
        for path in (MUTATE_PODS_PATH, PREVIEW_PATH):
            request = urllib.request.Request(base + path, data=body, headers={"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                await asyncio.to_thread(urllib.request.urlopen, request, timeout=5)
            assert refused.value.code in (404, 405)
        metrics = await asyncio.to_thread(urllib.request.urlopen, base + "/metrics", timeout=5)
        assert b"preemptguard_http_requests_total" in metrics.read()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_health_endpoints_answer_while_admission_is_saturated(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(admission_max_in_flight=1, admission_queue_seconds=0.0)) as hook:
        held = asyncio.create_task(hook.post_json(MUTATE_PODS_PATH, pod_review("slow")))
        while source.lookups < 1:
            await asyncio.sleep(0.01)
        assert await hook.get(READYZ_PATH) == (200, "ok")
        assert await hook.get(HEALTHZ_PATH) == (200, "ok")
        source.release.set()
        assert (await held)[0] == 200


async def test_idle_keep_alive_connections_survive_the_header_timeout(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(client_header_timeout=0.3)) as hook:
        reader, writer = await raw_tls(hook)
        body = json.dumps(pod_review()).encode()
        for _ in range(2):  # the body arrives in its own write, while the handler already runs
            writer.write(b"POST /mutate/pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode())
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(body)
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2)
            assert head.startswith(b"HTTP/1.1 200")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            await asyncio.sleep(0.6)  # idle for twice the header timeout: still open and usable
        writer.close()


async def test_idle_metrics_connections_never_take_the_admission_ports_connections(source: BlockingSource) -> None:
    """The metrics listener has a cap of its own: filling it leaves the admission port's connections free."""
    async with LoopbackWebhook(source, settings(metrics_port=_free_port(), max_connections=4,
                                                metrics_max_connections=2)) as hook:
        assert hook.server is not None and hook.server.metrics_port is not None
        idle = [await asyncio.open_connection("127.0.0.1", hook.server.metrics_port) for _ in range(6)]
        await asyncio.sleep(0.1)
        kept = [await raw_tls(hook) for _ in range(3)]  # the admission port still takes connections
        await asyncio.sleep(0.05)
        assert await hook.get(HEALTHZ_PATH) == (200, "ok")
        # while on the metrics port idle connections over its own cap gave way to newer ones, as a scrape does
        assert hook.server.app[LIMITS_KEY].metrics_guard.clients() == {"127.0.0.1": 2}
        assert await asyncio.to_thread(_http_status, f"http://127.0.0.1:{hook.server.metrics_port}/metrics") == 200
        for _, w in [*idle, *kept]:
            w.close()


async def _admission_latency(hook: LoopbackWebhook, rounds: int = 20) -> float:
    """The median seconds of ``rounds`` pod reviews over fresh connections (a new API-server connection each)."""
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        reader, writer = await raw_tls(hook)
        body = json.dumps(pod_review()).encode()
        writer.write(b"POST /mutate/pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     + f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
        writer.close()
        timings.append(time.perf_counter() - started)
    return sorted(timings)[len(timings) // 2]


async def test_a_thousand_idle_metrics_connections_leave_admission_at_normal_latency() -> None:
    """Issue 14: 1,000 idle connections to --metrics-port (the default limits) must not delay or refuse new
    admission connections."""
    source = MemorySource(ClusterState())
    async with LoopbackWebhook(source, settings(metrics_port=_free_port())) as hook:
        assert hook.server is not None and hook.server.metrics_port is not None
        normal = await _admission_latency(hook)
        idle = []
        for _ in range(1000):
            try:
                idle.append(await asyncio.open_connection("127.0.0.1", hook.server.metrics_port))
            except OSError:  # refused on arrival beyond the metrics cap: that is the point
                continue
        await asyncio.sleep(0.2)
        try:
            loaded = await _admission_latency(hook)
            assert await hook.get(HEALTHZ_PATH) == (200, "ok")
        finally:
            for _, writer in idle:
                writer.close()
    # Normal latency: within a few milliseconds of the unloaded median (a shared 2-core machine jitters).
    assert loaded < normal * 3 + 0.02, (normal, loaded)


async def test_metrics_listener_has_its_own_header_timeout_and_scrape_gate(source: BlockingSource) -> None:
    async with LoopbackWebhook(source, settings(metrics_port=_free_port(), metrics_client_header_timeout=0.2,
                                                client_header_timeout=30.0, metrics_max_in_flight=1)) as hook:
        assert hook.server is not None and hook.server.metrics_port is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", hook.server.metrics_port)
        writer.write(b"GET /metr")  # a head that never ends is cut at the metrics listener's own timeout
        await writer.drain()
        assert await closed_within(reader, 2.0) == b""
        limits = hook.server.app[LIMITS_KEY]
        assert await limits.metrics_gate.enter()  # one scrape in flight: the next one gets a fast 429
        try:
            status = await asyncio.to_thread(_http_status, f"http://127.0.0.1:{hook.server.metrics_port}/metrics")
        finally:
            limits.metrics_gate.leave()
        assert status == 429
        # while admission, with its own gates, is untouched
        assert (await hook.post_json(MUTATE_PODS_PATH, pod_review(class_name="")))[0] == 200


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
