"""Limits that keep one slow, hostile or overwhelming client from hurting the others.

* **Bounded concurrency.** Admission (``/mutate/pods``, ``/validate/priorityclasses``) and ``/preview`` each
  have a maximum number of requests in flight. A request that finds its class full waits at most a short
  queue time, then gets a fast ``429``. Admission 429s carry **no** ``Retry-After``: client-go's REST client
  sleeps and retries on 429/5xx answers that have one (``checkWait`` in k8s.io/client-go/rest), which would
  spend the API server's webhook timeout; without it the API server applies the webhook's
  ``failurePolicy`` at once (``Ignore``: the pod is admitted without PreemptGuard). ``/preview`` callers are
  people and tools, so their 429 says ``Retry-After: 1``. Health checks are never limited.
* **Admission deadline.** A pod review not answered within ``admission_deadline_seconds`` of its arrival
  (default 2.5 s, below the ``timeoutSeconds: 3`` of manifests/base/webhooks.yaml) gets the pipeline's answer
  for an undecided review (``PodAdmission.undecided``), counted here, and never the API server's timeout firing
  first. The clock starts here, at arrival; what the answer is, the pipeline says.
* **Slow clients.** TLS handshakes must finish within ``tls_handshake_timeout``; a request's line and headers
  must arrive within ``client_header_timeout`` of its first byte; its body within ``client_body_timeout``
  (``408``, connection closed). Idle keep-alive connections close after ``keepalive_timeout``; at most
  ``max_connections`` are open at once (more are closed on arrival). Each guard is per connection, so a slow
  client only ever waits on its own timer.
* **Isolated listeners.** The metrics listener has limits of its own: ``metrics_max_connections``,
  ``metrics_max_in_flight`` scrapes at once (429 beyond), ``metrics_client_header_timeout`` and
  ``metrics_keepalive_timeout``. Nothing sent to ``--metrics-port`` counts against the admission port's
  connections, slots or timers, and the reverse.
* **Draining.** ``begin_drain()`` makes ``/readyz`` answer 503 and closes each keep-alive connection after
  its next response, while requests keep being served (see ``webhook.server.command.serve``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, cast

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from webhook.errors import PreemptGuardError
from webhook.routes import MUTATE_PODS_PATH, PREVIEW_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.settings import ServerSettings

log = logging.getLogger(__name__)

EndpointClass = Literal["admission", "preview"]
ENDPOINT_CLASSES: dict[str, EndpointClass] = {
    MUTATE_PODS_PATH: "admission",
    VALIDATE_PRIORITYCLASSES_PATH: "admission",
    PREVIEW_PATH: "preview",
}
# The arrival time of a request (``time.monotonic()``, the event loop's clock), set by ``limits_middleware``.
ARRIVED_AT = web.RequestKey("preemptguard_arrived_at", float)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ClientTooSlow(PreemptGuardError):
    """The client did not send its request body within ``client_body_timeout`` (HTTP 408)."""

    http_status = 408


class ConcurrencyGate:
    """At most ``limit`` holders at once; a newcomer waits up to ``queue_seconds`` for a slot."""

    def __init__(self, limit: int, queue_seconds: float) -> None:
        if limit < 1:
            raise ValueError("a concurrency limit must be at least 1")
        self.limit = limit
        self.queue_seconds = queue_seconds
        self.in_flight = 0
        self._semaphore = asyncio.Semaphore(limit)

    async def enter(self) -> bool:
        """True once a slot is held (``leave()`` it); False when none freed up within the queue time."""
        if self._semaphore.locked():
            if self.queue_seconds <= 0:
                return False
            try:
                await asyncio.wait_for(self._semaphore.acquire(), self.queue_seconds)
            except TimeoutError:
                return False
        else:
            await self._semaphore.acquire()  # a free slot: returns without suspending
        self.in_flight += 1
        return True

    def leave(self) -> None:
        self.in_flight -= 1
        self._semaphore.release()


class LimitMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.rejected = Counter(
            "preemptguard_requests_rejected",
            "Requests answered 429 because their endpoint class was at its concurrency limit.",
            ["endpoint_class"], registry=registry)
        self.in_flight = Gauge(
            "preemptguard_requests_in_flight", "Requests being handled, by endpoint class.",
            ["endpoint_class"], registry=registry)
        self.deadline_exceeded = Counter(
            "preemptguard_admission_deadline_exceeded",
            "Pod reviews answered allowed-with-warning because the admission deadline passed.",
            registry=registry)
        self.slow_clients = Counter(
            "preemptguard_slow_clients",
            "Connections closed because the client was too slow, by phase (headers, body).",
            ["phase"], registry=registry)
        self.connections_refused = Counter(
            "preemptguard_connections_refused",
            "Connections closed on arrival because max_connections were already open.", registry=registry)


class RequestLimits:
    """The per-application limits; ``app[LIMITS_KEY]``."""

    def __init__(self, settings: ServerSettings, registry: CollectorRegistry) -> None:
        self.settings = settings
        self.metrics = LimitMetrics(registry)
        self.gates: dict[EndpointClass, ConcurrencyGate] = {
            "admission": ConcurrencyGate(settings.admission_max_in_flight, settings.admission_queue_seconds),
            "preview": ConcurrencyGate(settings.preview_max_in_flight, settings.preview_queue_seconds),
        }
        for name, gate in self.gates.items():
            self.metrics.in_flight.labels(name).set_function(_in_flight_of(gate))
        self.guard = ConnectionGuard(settings, self.metrics)
        # The metrics listener's own guard, cap, header timeout and scrape gate (see the module doc).
        self.metrics_guard = ConnectionGuard(settings, self.metrics, settings.metrics_max_connections,
                                             header_timeout=settings.metrics_client_header_timeout)
        self.metrics_gate = ConcurrencyGate(settings.metrics_max_in_flight, 0.0)
        self.draining = False

    def begin_drain(self) -> None:
        """Not ready from now on; keep-alive connections close after their next response."""
        self.draining = True

    def in_flight(self) -> int:
        return sum(gate.in_flight for gate in self.gates.values())

    def admission_time_left(self, request: web.Request) -> float:
        """Seconds until the admission deadline of ``request`` (counted from its arrival)."""
        now = time.monotonic()
        return request.get(ARRIVED_AT, now) + self.settings.admission_deadline_seconds - now

    async def read_body(self, request: web.Request) -> bytes:
        """The whole body, or ``ClientTooSlow`` when it takes longer than ``client_body_timeout``."""
        if request.content.is_eof():  # already received in full (the usual small review): no timer to arm
            return await request.read()
        try:
            async with asyncio.timeout(self.settings.client_body_timeout):
                return await request.read()
        except TimeoutError as exc:
            self.metrics.slow_clients.labels("body").inc()
            raise ClientTooSlow(
                f"request body not received within {self.settings.client_body_timeout:g}s") from exc



def metrics_gate_middleware(gate: ConcurrencyGate) -> Any:
    """At most ``gate.limit`` scrapes at once on the metrics listener; more get a fast 429."""

    @web.middleware
    async def gated(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not await gate.enter():
            return web.json_response({"error": "too many metrics requests in flight"}, status=429,
                                     headers={"Retry-After": "1"})
        try:
            return await handler(request)
        finally:
            gate.leave()

    return gated


def _in_flight_of(gate: ConcurrencyGate) -> Callable[[], float]:
    return lambda: float(gate.in_flight)


LIMITS_KEY = web.AppKey("limits", RequestLimits)


def endpoint_class(request: web.Request) -> EndpointClass | None:
    if request.match_info.http_exception is not None:
        return None  # 404/405: answered without running a handler
    return ENDPOINT_CLASSES.get(request.path)


def too_many_requests(kind: EndpointClass) -> web.Response:
    headers = {"Retry-After": "1"} if kind == "preview" else None
    return web.json_response({"error": f"too many {kind} requests in flight; try again later"}, status=429,
                             headers=headers)


@web.middleware
async def limits_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Concurrency gates, the arrival time for deadlines, the 408 for slow bodies, drain behaviour."""
    limits = request.app[LIMITS_KEY]
    request[ARRIVED_AT] = time.monotonic()
    kind = endpoint_class(request)
    gate = limits.gates[kind] if kind is not None else None
    if gate is not None and not await gate.enter():
        limits.metrics.rejected.labels(kind).inc()
        response: web.StreamResponse = too_many_requests(kind)  # type: ignore[arg-type]
    else:
        try:
            response = await handler(request)
        except ClientTooSlow as exc:
            response = web.json_response({"error": str(exc)}, status=exc.http_status)
            response.force_close()
        finally:
            if gate is not None:
                gate.leave()
    if limits.draining:
        response.force_close()  # move keep-alive clients to the replicas that stay
    return response


# ---- slow clients -----------------------------------------------------------------------------------
class GuardedProtocol(asyncio.Protocol):
    """Wraps aiohttp's per-connection protocol: times each request's head, counts open connections.

    The inner protocol is given the transport itself, so writes and flow control bypass this wrapper;
    only received data and connection events pass through it.
    """

    def __init__(self, inner: asyncio.Protocol, guard: ConnectionGuard) -> None:
        self.inner = inner
        self.guard = guard
        self.transport: asyncio.Transport | None = None
        self.handling = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._open = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        if not self.guard.admit(self):
            self.transport.abort()
            return
        self._open = True
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self._open:
            return
        # Bytes arriving while a handler runs are its body (timed by read_body) or a pipelined request, which
        # is timed from its next byte after this one's response (or ends at the keep-alive timeout).
        if not self.handling and self._head_timer is None:
            self._arm()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self._open else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._open:
            self._open = False
            self.guard.release(self)
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # Called by the guard's middleware: the head is in once a handler runs.
    def request_started(self) -> None:
        self.handling = True
        self._disarm()

    def request_finished(self) -> None:
        self.handling = False

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        self._head_timer = loop.call_later(self.guard.header_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.transport is not None and not self.handling:
            self.guard.metrics.slow_clients.labels("headers").inc()
            log.info("closing a connection whose request head took over %gs", self.guard.header_timeout)
            self.transport.abort()


class ConnectionGuard:
    """Creates ``GuardedProtocol``s around an aiohttp server and finds them again from a request."""

    def __init__(self, settings: ServerSettings, metrics: LimitMetrics, max_connections: int | None = None, *,
                 header_timeout: float | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.max_connections = settings.max_connections if max_connections is None else max_connections
        self.header_timeout = settings.client_header_timeout if header_timeout is None else header_timeout
        self.open: dict[object, GuardedProtocol] = {}  # inner protocol -> its guard

    def protocol_factory(self, make_inner: Callable[[], asyncio.Protocol]) -> Callable[[], GuardedProtocol]:
        return lambda: GuardedProtocol(make_inner(), self)

    def admit(self, protocol: GuardedProtocol) -> bool:
        if len(self.open) >= self.max_connections:
            self.metrics.connections_refused.inc()
            return False
        self.open[protocol.inner] = protocol
        return True

    def release(self, protocol: GuardedProtocol) -> None:
        self.open.pop(protocol.inner, None)

    def middleware(self) -> Any:
        """Marks each request's handling on its connection (so its head timer stops)."""

        @web.middleware
        async def guard_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            guarded = self.open.get(request.protocol)
            if guarded is None:
                return await handler(request)
            guarded.request_started()
            try:
                return await handler(request)
            finally:
                guarded.request_finished()

        return guard_middleware


class GuardedTCPSite(web.TCPSite):
    """``web.TCPSite`` whose connections go through a ``ConnectionGuard``, with a TLS handshake timeout."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, guard: ConnectionGuard,
                 ssl_context: Any = None) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self.guard = guard

    async def start(self) -> None:
        self._runner._reg_site(self)
        server = self._runner.server
        assert server is not None
        handshake_timeout = self.guard.settings.tls_handshake_timeout if self._ssl_context else None
        listening = await asyncio.get_running_loop().create_server(
            self.guard.protocol_factory(server), self._host, self._port, ssl=self._ssl_context,
            backlog=self._backlog, reuse_address=self._reuse_address, reuse_port=self._reuse_port,
            ssl_handshake_timeout=handshake_timeout)
        self._server = listening
        self._bound_port = listening.sockets[0].getsockname()[1] if listening.sockets else self._port


def runner_options(settings: ServerSettings, *, metrics: bool = False) -> dict[str, Any]:
    """``web.AppRunner`` keyword arguments for the keep-alive, lingering and shutdown timeouts (``metrics``: of
    the metrics listener, with its own keep-alive)."""
    return {
        "keepalive_timeout": settings.metrics_keepalive_timeout if metrics else settings.keepalive_timeout,
        # After a handler that did not read the whole body (404, 429), discard the rest for at most this long.
        "lingering_time": min(settings.client_body_timeout, 2.0),
        "shutdown_timeout": settings.shutdown_timeout,
    }
