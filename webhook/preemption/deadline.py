"""One prediction's deadline, which its caller can also cancel: the predictor checks it inside its loops.

A prediction runs in a worker thread that nobody can interrupt from outside, so it stops itself: every loop
over nodes, pods, replicas or priority levels calls ``check()`` every so often, which raises
``PredictionTimeout`` once ``time.monotonic()`` passes ``at`` and ``PredictionCancelled`` once ``cancel()`` was
called (the request went away, the server is shutting down). No thread outlives the request that started it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar

from webhook.errors import PredictionCancelled, PredictionTimeout

# How often a lock wait wakes up to look at the deadline (a cancelled prediction does not wait for the lock).
LOCK_POLL_SECONDS = 0.05
# How many nodes (or pods) a Python loop handles between two deadline checks.
DEADLINE_STRIDE = 256

_T = TypeVar("_T")


class Deadline:
    """``at``: a ``time.monotonic()`` value, or None for no time limit (still cancellable)."""

    __slots__ = ("at", "cancelled")

    def __init__(self, at: float | None = None) -> None:
        self.at = at
        self.cancelled: str | None = None

    @classmethod
    def of(cls, value: float | Deadline | None) -> Deadline:
        """``value`` itself when it is a Deadline, else a new one at ``value``."""
        return value if isinstance(value, Deadline) else cls(value)

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def cancel(self, reason: str) -> None:
        """Make the next ``check()`` raise ``PredictionCancelled`` (thread-safe: one attribute write)."""
        self.cancelled = reason

    def seconds_left(self) -> float | None:
        """Seconds until ``at`` (0 when past or cancelled), None without a time limit."""
        if self.cancelled is not None:
            return 0.0
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def check(self) -> None:
        if self.cancelled is not None:
            raise PredictionCancelled(f"the prediction was cancelled: {self.cancelled}")
        if self.at is not None and time.monotonic() > self.at:
            raise PredictionTimeout("the preemption prediction exceeded its deadline")


class Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...


def acquire_before(lock: Lock, deadline: Deadline, waiting_for: str) -> None:
    """Acquire ``lock`` unless the deadline passes or is cancelled first (then ``check()``'s error)."""
    while True:
        left = deadline.seconds_left()
        if lock.acquire(timeout=LOCK_POLL_SECONDS if left is None else min(LOCK_POLL_SECONDS, left)):
            return
        deadline.check()
        if left is not None and left <= 0:
            raise PredictionTimeout(f"the preemption prediction exceeded its deadline waiting for {waiting_for}")


def checked(items: Iterable[_T], deadline: Deadline) -> Iterator[_T]:
    """``items``, with the deadline checked every ``DEADLINE_STRIDE`` of them (PreFilter walks every pod)."""
    for i, item in enumerate(items):
        if not i % DEADLINE_STRIDE:
            deadline.check()
        yield item
