"""Per-caller rate limits of dry-run probing: ``POST /preview`` and dry-run pod admissions (docs/interfaces.md §6,
``prediction.previewsPerMinute``).

Each answer carries counts about other tenants (victims, PDB violations, the node chosen); a tenant who sends
many previews of pods it varies can learn more than any single answer says (issue #24: 114 dry runs pinned to
one node recovered other tenants' per-pod CPU requests). A token bucket per caller bounds how fast it can ask:
``previewsPerMinute`` tokens, refilled continuously at that rate. It slows probing; it cannot stop it
(SECURITY.md states the residual risk). Buckets are kept for at most ``max_callers`` callers, the least
recently seen dropped first, so callers with forged names cannot grow the table.

A probe must vary what it asks. The same pod asked again within ``repeat_seconds`` (the plugin's default source
dry-runs every replica of a workload, identical but for the name) tells nothing new and costs nothing.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

DEFAULT_MAX_CALLERS = 10_000
REPEAT_SECONDS = 10.0


class CallerRateLimit:
    """``take(caller)``: None when the caller may go on, else the seconds until it may."""

    def __init__(self, per_minute: Callable[[], int], *, max_callers: int = DEFAULT_MAX_CALLERS,
                 repeat_seconds: float = REPEAT_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.max_callers = max_callers
        self.repeat_seconds = repeat_seconds
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # caller -> (tokens, at)
        self._asked: OrderedDict[tuple[str, Hashable], float] = OrderedDict()  # (caller, what) -> last charged

    def take(self, caller: str, asked: Hashable | None = None) -> float | None:
        """``asked``: what the caller asks (e.g. the pod without its name); the same again within
        ``repeat_seconds`` of when it was charged is free."""
        rate = self.per_minute()
        if rate <= 0:
            return None  # 0 turns the limit off
        now = self.clock()
        if asked is not None:
            key = (caller, asked)
            charged = self._asked.pop(key, None)
            if charged is not None and now - charged < self.repeat_seconds:
                self._asked[key] = charged
                return None
            wait = self._take(caller, rate, now)
            if wait is None:
                self._asked[key] = now
                while len(self._asked) > self.max_callers:
                    self._asked.popitem(last=False)
            return wait
        return self._take(caller, rate, now)

    def _take(self, caller: str, rate: int, now: float) -> float | None:
        tokens, at = self._buckets.pop(caller, (float(rate), now))
        tokens = min(float(rate), tokens + (now - at) * rate / 60.0)
        if tokens >= 1.0:
            tokens -= 1.0
            wait = None
        else:
            wait = (1.0 - tokens) * 60.0 / rate
        self._buckets[caller] = (tokens, now)
        while len(self._buckets) > self.max_callers:
            self._buckets.popitem(last=False)
        return wait


def retry_after_header(seconds: float) -> str:
    """``Retry-After`` in whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))
