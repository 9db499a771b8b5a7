"""Connections: who may hold one, for how long, and who gives way when they run out.

Every listener's connections go through a ``ConnectionGuard`` (one per listener):

* **Caps.** At most ``max_connections`` open at once, and at most ``max_per_client`` from one client (its IP
  address). A newcomer over either cap takes the place of the oldest connection of that scope that holds no
  complete request (idle before its first request, idle between keep-alive requests, or still sending its head or
  body); only when every one of them is busy with a request is the newcomer closed on arrival. So idle or
  trickling connections, from however many clients, never lock out a client that sends whole requests: the API
  server's connection carries its review within milliseconds, and is never the oldest idle one for long.
* **Timers.** A connection must start its first request within ``first_request_timeout`` of the TLS handshake,
  and each request's line and headers must arrive within ``header_timeout`` of its first byte. The body has its own
  timer (``webhook.server.bodies``); idle keep-alive is aiohttp's ``keepalive_timeout``.

A request holds its connection "busy" from the moment its body has fully arrived (``body_received``, or at once
for a request without a body) until its response is written. TLS handshakes are not counted here (asyncio makes
the protocol's connection only once the handshake is done); each gets ``tls_handshake_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, cast

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConnectionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.slow_clients = Counter(
            "preemptguard_slow_clients",
            "Connections closed because the client was too slow, by phase (idle before its first request, "
            "headers, body).", ["phase"], registry=registry)
        self.connections_refused = Counter(
            "preemptguard_connections_refused",
            "Connections closed on arrival: a connection cap was reached and every connection under it was busy.",
            registry=registry)
        self.connections_evicted = Counter(
            "preemptguard_connections_evicted",
            "Connections without a complete request closed to make room for a newcomer, by listener and cap "
            "(client, total).", ["listener", "cap"], registry=registry)


def client_of(transport: asyncio.BaseTransport) -> str:
    """The client a connection counts against: its peer's IP address."""
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple | list) and peer:
        return str(peer[0])
    return "unknown"


class GuardedProtocol(asyncio.Protocol):
    """Wraps aiohttp's per-connection protocol: its timers, its state (idle, receiving, busy) and its client.

    The inner protocol is given the transport itself, so writes and flow control bypass this wrapper;
    only received data and connection events pass through it.
    """

    def __init__(self, inner: asyncio.Protocol, guard: ConnectionGuard) -> None:
        self.inner = inner
        self.guard = guard
        self.transport: asyncio.Transport | None = None
        self.client = ""
        self.handling = False  # a handler runs (its head is in); the body may still be arriving
        self.busy = False  # a complete request is being answered: never evicted
        self._timer: asyncio.TimerHandle | None = None
        self._started = False  # the first byte of any request arrived
        self._arriving = False  # a request's first bytes are in, no handler runs yet: counted in flight
        self._open = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self.client = client_of(transport)
        if not self.guard.admit(self):
            self.transport.abort()
            return
        self._open = True
        self._arm(self.guard.first_request_timeout, "idle")
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self._open:
            return
        if not self._started:
            self._started = True
            self._disarm()
        # Bytes arriving while a handler runs are its body (timed by the body reader) or a pipelined request,
        # which is timed from its next byte after this one's response (or ends at the keep-alive timeout).
        if not self.handling and self._timer is None:
            self._arm(self.guard.header_timeout, "headers")
        if not self.handling and not self._arriving:
            # In flight from its first bytes, not from its handler: reaching the handler takes aiohttp a few turns
            # of the loop, and a batch of watch events ran in each (at 15,000 nodes under ~300 pod writes/s, a p99 of
            # 0.7-1.5 ms from the bytes to the handler against 0.2-0.4 ms idle, an instrumented serve).
            self._arriving = True
            self.guard.in_flight.began()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self._open else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._handed_over()
        if self._open:
            self._open = False
            self.guard.release(self)
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # ---- called by the guard's middleware and the body reader -------------------------------------------
    def request_started(self, *, has_body: bool) -> None:
        """A handler runs: the head is in. Without a body the request is complete, so the connection is busy."""
        self.handling = True
        self._disarm()
        self._handed_over()
        if not has_body:
            self.body_received()

    def _handed_over(self) -> None:
        """The arriving request now counts through its handler (the middleware counted it first), or never will."""
        if self._arriving:
            self._arriving = False
            self.guard.in_flight.ended()

    def body_received(self) -> None:
        if not self.busy:
            self.busy = True
            self.guard.mark_busy(self)

    def request_finished(self) -> None:
        self.handling = False
        if self.busy and self._open:
            self.busy = False
            self.guard.mark_idle(self)

    def evict(self, cap: str) -> None:
        self.guard.metrics.connections_evicted.labels(self.guard.name, cap).inc()
        log.debug("closing an idle connection of %s to make room (%s cap)", self.client, cap)
        if self.transport is not None:
            self.transport.abort()

    # ---- timers ---------------------------------------------------------------------------------------
    def _arm(self, seconds: float, phase: str) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(seconds, self._too_slow, phase, seconds)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self, phase: str, seconds: float) -> None:
        self._timer = None
        if self.transport is not None and not self.handling:
            self.guard.metrics.slow_clients.labels(phase).inc()
            log.info("closing a connection of %s: %s took over %gs", self.client,
                     "its first request" if phase == "idle" else "its request head", seconds)
            self.transport.abort()


class RequestsInFlight:
    """The requests a listener has (from their first bytes until their response is written), and a wait for none to
    be left that the informers take between two batches of watch events (``KubernetesSource.between_watch_batches``).

    The event loop runs one thing at a time: a batch of watch events started while an admission waits for the rest
    of its body (a client that writes the head and the body apart, as Python's http.client does) runs before the
    admission resumes, so the admission waited behind two batches, one for each part. Requests go first; the
    informers wait at most ``max_wait_seconds`` a batch, so a flood of admissions, or a client sending its head or
    body a byte at a time (or a body its handler left unread), slows the watch (to one batch of ~0.2 ms a
    millisecond) but never stops it; a head not whole within the header timeout ends its connection.
    """

    def __init__(self, max_wait_seconds: float = 0.001) -> None:
        self.count = 0
        self.max_wait_seconds = max_wait_seconds
        self._waiters: list[asyncio.Future[None]] = []

    def began(self) -> None:
        self.count += 1

    def ended(self) -> None:
        self.count -= 1
        if self.count == 0:
            for waiter in self._waiters:
                _resolve(waiter)
            self._waiters.clear()

    async def wait_for_none(self) -> None:
        """Until no request is in flight, or ``max_wait_seconds`` have passed."""
        if self.count == 0:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(self.max_wait_seconds, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _Connections:
    """The open connections of one scope (a client, or the whole listener), the evictable ones oldest first."""

    __slots__ = ("count", "idle")

    def __init__(self) -> None:
        self.count = 0
        self.idle: OrderedDict[GuardedProtocol, None] = OrderedDict()

    def oldest_idle(self) -> GuardedProtocol | None:
        return next(iter(self.idle), None)


class ConnectionGuard:
    """Creates ``GuardedProtocol``s around an aiohttp server, keeps the caps and finds a request's connection."""

    def __init__(self, name: str, metrics: ConnectionMetrics, *, max_connections: int, max_per_client: int,
                 first_request_timeout: float, header_timeout: float, tls_handshake_timeout: float) -> None:
        self.name = name
        self.in_flight = RequestsInFlight()
        self.metrics = metrics
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.first_request_timeout = first_request_timeout
        self.header_timeout = header_timeout
        self.tls_handshake_timeout = tls_handshake_timeout
        self.open: dict[object, GuardedProtocol] = {}  # inner protocol -> its guard
        self._all = _Connections()
        self._clients: dict[str, _Connections] = {}

    def protocol_factory(self, make_inner: Callable[[], asyncio.Protocol]) -> Callable[[], GuardedProtocol]:
        return lambda: GuardedProtocol(make_inner(), self)

    def admit(self, protocol: GuardedProtocol) -> bool:
        """Count a new connection in, making room by evicting an idle one if a cap is reached; False: refused."""
        client = self._clients.get(protocol.client)
        if client is not None and client.count >= self.max_per_client and not self._evict(client, "client"):
            self.metrics.connections_refused.inc()
            return False
        if self._all.count >= self.max_connections and not self._evict(self._all, "total"):
            self.metrics.connections_refused.inc()
            return False
        if client is None:
            client = self._clients[protocol.client] = _Connections()
        for scope in (client, self._all):
            scope.count += 1
            scope.idle[protocol] = None
        self.open[protocol.inner] = protocol
        return True

    def _evict(self, scope: _Connections, cap: str) -> bool:
        victim = scope.oldest_idle()
        if victim is None:
            return False
        self.release(victim)  # now, so the count is right for the newcomer; connection_lost finds it gone
        victim.evict(cap)
        return True

    def release(self, protocol: GuardedProtocol) -> None:
        if self.open.pop(protocol.inner, None) is None:
            return
        client = self._clients.get(protocol.client)
        for scope in (client, self._all):
            if scope is not None:
                scope.count -= 1
                scope.idle.pop(protocol, None)
        if client is not None and client.count == 0:
            del self._clients[protocol.client]

    def mark_busy(self, protocol: GuardedProtocol) -> None:
        for scope in (self._clients.get(protocol.client), self._all):
            if scope is not None:
                scope.idle.pop(protocol, None)

    def mark_idle(self, protocol: GuardedProtocol) -> None:
        if protocol.inner not in self.open:
            return
        for scope in (self._clients.get(protocol.client), self._all):
            if scope is not None:
                scope.idle[protocol] = None  # the newest idle: evicted last

    def clients(self) -> dict[str, int]:
        """Open connections per client (for tests and debugging)."""
        return {name: scope.count for name, scope in self._clients.items()}

    def middleware(self) -> Any:
        """Marks each request's handling on its connection (so its head timer stops, and it is busy once whole), and
        counts it in flight."""

        @web.middleware
        async def guard_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            guarded = self.open.get(request.protocol)
            if guarded is None:
                return await handler(request)
            request[CONNECTION] = guarded
            self.in_flight.began()  # before the count of its arrival ends, so it never falls to zero between
            guarded.request_started(has_body=request.body_exists)
            try:
                return await handler(request)
            finally:
                self.in_flight.ended()
                guarded.request_finished()

        return guard_middleware


# A request's guarded connection, whichever listener it came through (set by ``ConnectionGuard.middleware``).
CONNECTION = web.RequestKey("preemptguard_connection", GuardedProtocol)


def connection_of(request: web.Request) -> GuardedProtocol | None:
    """The guarded connection ``request`` arrived on (None on an application without a guard)."""
    return request.get(CONNECTION)


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
        handshake_timeout = self.guard.tls_handshake_timeout if self._ssl_context else None
        listening = await asyncio.get_running_loop().create_server(
            self.guard.protocol_factory(server), self._host, self._port, ssl=self._ssl_context,
            backlog=self._backlog, reuse_address=self._reuse_address, reuse_port=self._reuse_port,
            ssl_handshake_timeout=handshake_timeout)
        self._server = listening
        self._bound_port = listening.sockets[0].getsockname()[1] if listening.sockets else self._port
