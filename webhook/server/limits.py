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
* **Slots only for whole requests.** A request's body is received (``webhook.server.bodies``: its timeout, the
  memory budget for bodies) before it takes a slot, so clients that trickle their bodies hold none.
* **Slow clients and connections** (``webhook.server.connections``): TLS handshakes must finish within
  ``tls_handshake_timeout``; the first request must start within ``first_request_timeout``; a request's line and
  headers must arrive within ``client_header_timeout`` of its first byte; its body within ``client_body_timeout``
  (``408``, connection closed). Idle keep-alive connections close after ``keepalive_timeout``. At most
  ``max_connections`` are open at once and ``max_connections_per_client`` from one client; over a cap, the
  oldest connection without a complete request gives way to the newcomer.
* **Isolated listeners.** The metrics listener has limits of its own: ``metrics_max_connections`` (and per
  client), ``metrics_max_in_flight`` scrapes at once (429 beyond), ``metrics_client_header_timeout`` and
  ``metrics_keepalive_timeout``. Nothing sent to ``--metrics-port`` counts against the admission port's
  connections, slots or timers, and the reverse. The ``/preview`` listener (``--preview-port``) has connection
  caps of its own (``preview_max_connections``, and per client) with the admission port's timers; its requests
  take ``/preview``'s slots and the shared body budget, as ``/preview`` on ``--port`` does.
* **Draining.** ``begin_drain()`` makes ``/readyz`` answer 503 and closes each keep-alive connection after
  its next response, while requests keep being served (see ``webhook.server.command.serve``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from webhook.errors import BodyTooLarge
from webhook.routes import HEALTHZ_PATH, MUTATE_PODS_PATH, PREVIEW_PATH, READYZ_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.bodies import (
    BodyBudget,
    BodyIntake,
    BodyNotAffordable,
    ClientTooSlow,
    Reservation,
)
from webhook.server.connections import ConnectionGuard, ConnectionMetrics
from webhook.server.settings import ServerSettings

log = logging.getLogger(__name__)

EndpointClass = Literal["admission", "preview"]
ENDPOINT_CLASSES: dict[str, EndpointClass] = {
    MUTATE_PODS_PATH: "admission",
    VALIDATE_PRIORITYCLASSES_PATH: "admission",
    PREVIEW_PATH: "preview",
}
PROBE_PATHS = frozenset({HEALTHZ_PATH, READYZ_PATH})
# The arrival time of a request (``time.monotonic()``, the event loop's clock), set by ``limits_middleware``.
ARRIVED_AT = web.RequestKey("preemptguard_arrived_at", float)
# The whole body of a gated request, received by ``limits_middleware`` before the request took its slot.
BODY = web.RequestKey("preemptguard_body", bytes)
# A gated request whose body was not read whole (too large, or no memory for it now): its first bytes, and why.
UNREAD = web.RequestKey("preemptguard_unread", tuple)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
        self.unread_bodies = Counter(
            "preemptguard_unread_bodies",
            "Request bodies not read whole, by reason (too-large: over the body limit; overloaded: the memory "
            "budget for bodies was spent); admission reviews among them are judged by their head.",
            ["reason"], registry=registry)


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
        self.connection_metrics = ConnectionMetrics(registry)
        self.guard = ConnectionGuard(
            "admission", self.connection_metrics, max_connections=settings.max_connections,
            max_per_client=settings.max_connections_per_client, first_request_timeout=settings.first_request_timeout,
            header_timeout=settings.client_header_timeout, tls_handshake_timeout=settings.tls_handshake_timeout)
        # The /preview listener's own guard and caps (--preview-port): its callers are tenants, so nothing they hold
        # there counts against the connections the API server needs on the admission port. The timers are the
        # admission port's; bodies, slots and the per-caller rate are shared with /preview on --port.
        self.preview_guard = ConnectionGuard(
            "preview", self.connection_metrics, max_connections=settings.preview_max_connections,
            max_per_client=settings.preview_max_connections_per_client,
            first_request_timeout=settings.first_request_timeout, header_timeout=settings.client_header_timeout,
            tls_handshake_timeout=settings.tls_handshake_timeout)
        # The metrics listener's own guard, caps, header timeout and scrape gate (see the module doc).
        self.metrics_guard = ConnectionGuard(
            "metrics", self.connection_metrics, max_connections=settings.metrics_max_connections,
            max_per_client=settings.metrics_max_connections_per_client,
            first_request_timeout=settings.first_request_timeout,
            header_timeout=settings.metrics_client_header_timeout, tls_handshake_timeout=settings.tls_handshake_timeout)
        self.metrics_gate = ConcurrencyGate(settings.metrics_max_in_flight, 0.0)
        self.intake = BodyIntake(settings.max_body_bytes, settings.inline_body_bytes, settings.client_body_timeout,
                                 settings.admission_queue_seconds, self.connection_metrics,
                                 BodyBudget(settings.body_budget_bytes))
        # Large reviews decoded and decided at once: their decoded objects are what costs memory.
        self.large_reviews = asyncio.Semaphore(settings.large_reviews_in_flight)
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

    def is_large(self, body: bytes) -> bool:
        return len(body) > self.settings.inline_body_bytes



def metrics_gate_middleware(gate: ConcurrencyGate) -> Any:
    """At most ``gate.limit`` scrapes at once on the metrics listener; more get a fast 429 (probes never do)."""

    @web.middleware
    async def gated(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in PROBE_PATHS:
            return await handler(request)
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
    """The arrival time for deadlines, the body received whole, then the concurrency gate; drain behaviour."""
    limits = request.app[LIMITS_KEY]
    request[ARRIVED_AT] = time.monotonic()
    kind = endpoint_class(request)
    response = await handler(request) if kind is None else await _gated(request, handler, limits, kind)
    if limits.draining:
        response.force_close()  # move keep-alive clients to the replicas that stay
    return response


async def _gated(request: web.Request, handler: Handler, limits: RequestLimits,
                 kind: EndpointClass) -> web.StreamResponse:
    reservation: Reservation | None = None
    try:
        try:
            request[BODY], reservation = await limits.intake.receive(request)
        except (BodyTooLarge, BodyNotAffordable) as exc:
            reason = "too-large" if isinstance(exc, BodyTooLarge) else "overloaded"
            limits.metrics.unread_bodies.labels(reason).inc()
            if request.path != MUTATE_PODS_PATH:
                raise
            # A pod review is judged by its head (handlers.mutate_pods): a 413 or 503 would be failurePolicy's.
            request[UNREAD] = (await limits.intake.read_head(request), exc)
            response = await handler(request)
            response.force_close()  # the rest of the body is never read
            return response
        except ClientTooSlow as exc:
            response = web.json_response({"error": str(exc)}, status=exc.http_status)
            response.force_close()
            return response
        gate = limits.gates[kind]
        if not await gate.enter():
            limits.metrics.rejected.labels(kind).inc()
            return too_many_requests(kind)
        try:
            return await handler(request)
        finally:
            gate.leave()
    finally:
        limits.intake.budget.release(reservation)


def runner_options(settings: ServerSettings, *, metrics: bool = False) -> dict[str, Any]:
    """``web.AppRunner`` keyword arguments for the keep-alive, lingering and shutdown timeouts (``metrics``: of
    the metrics listener, with its own keep-alive)."""
    return {
        "keepalive_timeout": settings.metrics_keepalive_timeout if metrics else settings.keepalive_timeout,
        # After a handler that did not read the whole body (404, 429), discard the rest for at most this long.
        "lingering_time": min(settings.client_body_timeout, 2.0),
        "shutdown_timeout": settings.shutdown_timeout,
    }
