"""Request bodies: received whole before a request takes an admission slot, held within a memory budget, and
decoded off the event loop when they are large.

* **Whole before a slot.** A request's body is read (within ``client_body_timeout``) before the request counts
  against its endpoint's concurrency limit, so clients that trickle their bodies hold no admission slot.
* **A budget for bodies in memory.** A body larger than ``inline_body_bytes`` reserves its ``Content-Length``
  (the whole limit when chunked) from ``body_budget_bytes`` until its response is written. When the budget is
  spent, bodies still arriving give way, oldest first (their connections are closed); when every reservation
  belongs to a body already received, the newcomer waits up to ``admission_queue_seconds``. One that still does
  not fit is ``BodyNotAffordable``: the handler then judges it by its head (``read_head``) instead.
* **Off the loop.** Decoding a large body (JSON, then the typed review and the pod read from it) runs in a
  single thread of its own (``BodyDecoder``): one large body at a time, and the event loop keeps serving small
  reviews (and firing the admission deadline) meanwhile. orjson holds the GIL while it decodes (~25 ms per MiB
  here), the typed reading does not hold it for longer than the interpreter's switch interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from webhook.errors import BodyTooLarge, InvalidInput, PreemptGuardError
from webhook.server.connections import ConnectionMetrics, GuardedProtocol, connection_of

log = logging.getLogger(__name__)

T = TypeVar("T")

# How much of a body ``read_head`` keeps: the review's fields before its object fit in far less.
HEAD_BYTES = 64 * 1024


class ClientTooSlow(PreemptGuardError):
    """The client did not send its request body within ``client_body_timeout`` (HTTP 408)."""

    http_status = 408


class ClientGone(PreemptGuardError):
    """The client closed its connection before its request was read: nobody is left to answer (logged at debug,
    counted as 499 in the metrics, as nginx counts a client that closed the request)."""

    http_status = 499


class BodyNotAffordable(PreemptGuardError):
    """The body would not fit the memory budget for request bodies, even after waiting (HTTP 503)."""

    http_status = 503


# A body this young is not judged by its rate yet (it has barely started); older ones give way slowest first.
GRACE_SECONDS = 0.05


@dataclass(eq=False, slots=True)
class Reservation:
    size: int
    connection: GuardedProtocol | None
    received: Callable[[], int] = lambda: 0  # bytes of the body received so far
    started: float = field(default_factory=time.monotonic)
    receiving: bool = True
    released: bool = False

    def rate(self, now: float) -> float:
        """Bytes per second so far; infinite while within its grace."""
        age = now - self.started
        return float("inf") if age < GRACE_SECONDS else self.received() / age


@dataclass(slots=True)
class BodyBudget:
    """Bytes of request bodies held at once: reserved before reading, released after the response."""

    capacity: int
    held: int = 0
    reservations: OrderedDict[Reservation, None] = field(default_factory=OrderedDict)
    _freed: asyncio.Event = field(default_factory=asyncio.Event)

    def try_reserve(self, size: int, connection: GuardedProtocol | None,
                    received: Callable[[], int] = lambda: 0) -> Reservation | None:
        """A reservation of ``size`` bytes, evicting bodies still arriving (the slowest first) if need be; None if
        that is not enough."""
        if self.held + size > self.capacity:
            now = time.monotonic()
            arriving = sorted((r for r in self.reservations if r.receiving and r.connection is not None
                               and r.rate(now) != float("inf")), key=lambda r: r.rate(now))
            if self.held - sum(r.size for r in arriving) + size > self.capacity:
                return None
            for victim in arriving:
                if self.held + size <= self.capacity:
                    break
                self.release(victim)
                assert victim.connection is not None
                victim.connection.evict("bodies")
        reservation = Reservation(size, connection, received)
        self.reservations[reservation] = None
        self.held += size
        return reservation

    async def reserve(self, size: int, connection: GuardedProtocol | None, wait_seconds: float,
                      received: Callable[[], int] = lambda: 0) -> Reservation | None:
        deadline = time.monotonic() + wait_seconds
        while (reservation := self.try_reserve(size, connection, received)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._freed.clear()
            try:
                await asyncio.wait_for(self._freed.wait(), left)
            except TimeoutError:
                return self.try_reserve(size, connection, received)
        return reservation

    def release(self, reservation: Reservation | None) -> None:
        if reservation is None or reservation.released:
            return
        reservation.released = True
        self.reservations.pop(reservation, None)
        self.held -= reservation.size
        self._freed.set()


class BodyDecoder:
    """One thread that decodes large bodies, so the event loop never does."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None

    async def run(self, work: Callable[[], T]) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="preemptguard-body-decoder")
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


@dataclass(slots=True)
class BodyIntake:
    """Reads request bodies for the gated endpoints (see the module doc); one per server, shared by its
    HTTPS listeners."""

    max_body_bytes: int
    inline_body_bytes: int
    body_timeout: float
    wait_seconds: float
    metrics: ConnectionMetrics
    budget: BodyBudget
    decoder: BodyDecoder = field(default_factory=BodyDecoder)

    def declared_size(self, request: web.Request) -> int:
        length = request.content_length
        return self.max_body_bytes if length is None else length

    async def receive(self, request: web.Request) -> tuple[bytes, Reservation | None]:
        """The whole body and its reservation (None for a small one); release it with ``budget.release``.

        ``BodyTooLarge`` over ``max_body_bytes`` (before reading when the length is declared), ``BodyNotAffordable``
        when it does not fit the budget, ``ClientTooSlow`` past the body timeout, ``ClientGone`` on a disconnect.
        """
        size = self.declared_size(request)
        if size > self.max_body_bytes:
            raise BodyTooLarge(f"request body of {size} bytes exceeds {self.max_body_bytes} bytes")
        connection = connection_of(request)
        reservation = None
        if size > self.inline_body_bytes:
            content = request.content
            reservation = await self.budget.reserve(size, connection, self.wait_seconds,
                                                    lambda: content.total_bytes)
            if reservation is None:
                raise BodyNotAffordable("request bodies in memory are at their limit; try again later")
        try:
            body = await self._read(request)
        except BaseException:
            self.budget.release(reservation)
            raise
        if reservation is not None:
            reservation.receiving = False
        if connection is not None:
            connection.body_received()
        return body, reservation

    async def _read(self, request: web.Request) -> bytes:
        try:
            if request.content.is_eof():  # already received in full (the usual small review): no timer to arm
                return await request.read()
            async with asyncio.timeout(self.body_timeout):
                return await request.read()
        except TimeoutError as exc:
            self.metrics.slow_clients.labels("body").inc()
            raise ClientTooSlow(f"request body not received within {self.body_timeout:g}s") from exc
        except web.HTTPRequestEntityTooLarge as exc:
            raise BodyTooLarge(f"request body exceeds {self.max_body_bytes} bytes") from exc
        except (HttpProcessingError, web.RequestPayloadError) as exc:  # e.g. Content-Encoding: gzip over plain bytes
            raise InvalidInput(f"request body could not be read: {exc.__class__.__name__}") from exc
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise ClientGone("the client closed the connection before its request body arrived") from exc

    async def read_head(self, request: web.Request) -> bytes:
        """At most ``HEAD_BYTES`` of a body that will not be read whole (within the body timeout; b"" if the client
        is too slow or gone). The connection is closed after the response, so the rest is never buffered."""
        head = bytearray()
        try:
            async with asyncio.timeout(self.body_timeout):
                while len(head) < HEAD_BYTES and (chunk := await request.content.read(HEAD_BYTES - len(head))):
                    head += chunk
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, HttpProcessingError,
                web.RequestPayloadError):
            return b""
        return bytes(head)

    async def decode(self, work: Callable[[], T], body_size: int) -> T:
        """``work()`` (decoding a body of ``body_size`` bytes): here when small, else in the decoder thread."""
        if body_size <= self.inline_body_bytes:
            return work()
        return await self.decoder.run(work)
