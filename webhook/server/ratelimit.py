"""Per-caller rate limits of dry-run probing: ``POST /preview`` and dry-run pod admissions (docs/interfaces.md §6,
``prediction.previewsPerMinute``).

Each answer carries counts about other tenants (victims, PDB violations, the node chosen); a tenant who sends
many previews of pods it varies can learn more than any single answer says (issue #24: 114 dry runs pinned to
one node recovered other tenants' per-pod CPU requests). A token bucket per caller bounds how fast it can ask:
``previewsPerMinute`` tokens, refilled continuously at that rate. It slows probing; it cannot stop it
(SECURITY.md states the residual risk). Buckets are kept for at most ``max_callers`` callers, the least
recently seen dropped first, so callers with forged names cannot grow the table.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

DEFAULT_MAX_CALLERS = 10_000


class CallerRateLimit:
    """``take(caller)``: None when the caller may go on, else the seconds until it may."""

    def __init__(self, per_minute: Callable[[], int], *, max_callers: int = DEFAULT_MAX_CALLERS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.max_callers = max_callers
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # caller -> (tokens, at)

    def take(self, caller: str) -> float | None:
        rate = self.per_minute()
        if rate <= 0:
            return None  # 0 turns the limit off
        now = self.clock()
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
