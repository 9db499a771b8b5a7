"""The cyclic garbage collector beside a cluster cache that keeps changing (a live cluster's informers).

``serve`` freezes the cache once it has synced (``gc.freeze``: full collections no longer walk it). But every watch
event replaces a pod with a new object, which is not frozen: after an hour at 500 events/s every pod of the cache has
been replaced, and a full collection walks the whole cache again, holding the event loop (and the GIL) for as long as
the freeze's own collection took at start (~200 ms at 2,000 nodes, over a second at 15,000). Measured at 2,000 nodes,
20 s of churn already made one full collection of 55 ms.

``SurvivorFreezer`` freezes the survivors of every collection of generation ``youngest`` or older, so the next one
walks only what was allocated since. ``serve`` freezes after every collection (``youngest`` 0): a young collection
under churn holds the watch's new pods and the index's new node summaries, and left unfrozen they made every tenth
(generation 1) collection walk ten young generations' survivors and each full one all since the last (bench probe at
2,000 nodes under 460 pod writes/s, 20 s: 12 generation-1 collections of 7 ms on average, a full one of 34 ms; frozen
after each young collection, none of either).

The price: an object frozen alive that later dies in a reference cycle is not reclaimed while frozen (objects without
cycles, like the cache's pods, are freed by reference counting, frozen or not). So when the frozen set has grown
past ``regrowth`` times what it was after the last complete walk (leaked cycles, or a cluster that grew), the
freezer unfreezes everything instead: the next full collection walks it all once, frees those cycles, and its
survivors are frozen again. Frozen after every young collection, the counts that start older collections
never grow (CPython 3.11's ``gc.freeze`` zeroes them), so ``serve`` runs that full collection itself
(``finish_complete_walk``). Memory held by such cycles stays under ``regrowth - 1`` of the cache's objects.
Counting the frozen set walks it (17 ms for 2,000,000 objects), and collections come often, so it is counted at most
once every ``check_seconds``.

When young collections come matters as much as what they walk. The collector starts one when allocations minus
deallocations of tracked objects pass a threshold (700), but under churn every new pod or node summary replaces an
old one that is deallocated: the count hardly moves while the young objects pile up, and the collection that finally
starts walks ~10,000 of them (~3 ms at 2,000 and at 15,000 nodes, in-process under churn), inside whatever allocated
last: an admission. ``serve`` instead runs a young collection between turns of the event loop every
``YOUNG_COLLECTION_SECONDS`` (``collect_between_turns``; ~30 us each), with the collector's own threshold raised to
``BACKSTOP_THRESHOLD`` so it starts one only when the loop has not for long. In-process at 15,000 nodes under 500
pod writes/s (two runs each): preempt p99 2.6 / 2.9 ms against 7.8 / 6.1 ms with the collector's own schedule.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_REGROWTH = 1.25
DEFAULT_CHECK_SECONDS = 60.0
YOUNG_COLLECTION_SECONDS = 0.01
BACKSTOP_THRESHOLD = 20_000


class SurvivorFreezer:
    """A ``gc.callbacks`` entry: after each collection of generation ``youngest`` or older, ``freeze`` its
    survivors, or ``unfreeze`` every object once the frozen set outgrew ``regrowth`` times its size after the last
    complete walk (then nothing is frozen until the next full collection has walked everything)."""

    def __init__(self, regrowth: float = DEFAULT_REGROWTH, *, youngest: int = 2,
                 check_seconds: float = DEFAULT_CHECK_SECONDS,
                 clock: Callable[[], float] = time.monotonic, freeze: Callable[[], None] = gc.freeze,
                 unfreeze: Callable[[], None] = gc.unfreeze,
                 frozen_count: Callable[[], int] = gc.get_freeze_count) -> None:
        if regrowth <= 1:
            raise ValueError("regrowth must be above 1")
        if youngest not in (0, 1, 2):
            raise ValueError("youngest must be a generation: 0, 1 or 2")
        self.youngest = youngest
        self.regrowth = regrowth
        self.check_seconds = check_seconds
        self.clock = clock
        self._checked = clock()
        self.freeze = freeze
        self.unfreeze = unfreeze
        self.frozen_count = frozen_count
        self.baseline = 0
        self.refreezes = 0  # collections whose survivors were frozen
        self.complete_walks = 0  # times every object was unfrozen for the next full collection
        self._walking = False
        self._settling = False  # set by ``install``: the first check after it takes the baseline

    def install(self) -> None:
        """Start after the first ``gc.freeze`` (its count is the baseline until the first check, see ``__call__``)."""
        self.baseline = self.frozen_count()
        self._settling = True
        self._checked = self.clock()
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        generation = info.get("generation")
        if phase != "stop" or not isinstance(generation, int) or generation < self.youngest:
            return
        if self._walking:
            if generation == 2:  # this collection walked every object: its survivors are the new baseline
                self.freeze()
                self.baseline = self.frozen_count()
                self._walking = False
            return
        if self._settling and self._check_due():
            # What a warming server builds after the cache's freeze (the predictor's index, the exposure scan's
            # matches: +72 % at 15,000 nodes) is alive, not leaked: a complete walk then freed 0.07 % of the
            # frozen set and held the event loop 1.27 s (an instrumented serve on bench/scale.py's cluster). The
            # first check's count is the baseline instead.
            self._settling = False
            self.baseline = max(self.baseline, self.frozen_count())
        elif self._check_due() and self.frozen_count() > self.baseline * self.regrowth:
            self.unfreeze()
            self._walking = True
            self.complete_walks += 1
            return
        self.freeze()
        self.refreezes += 1

    @property
    def walking(self) -> bool:
        """Everything is unfrozen and waits for a full collection (``finish_complete_walk``) to walk it."""
        return self._walking

    def _check_due(self) -> bool:
        now = self.clock()
        if now - self._checked < self.check_seconds:
            return False
        self._checked = now
        return True


def finish_complete_walk(freezer: SurvivorFreezer, collect: Callable[[], object] = gc.collect) -> bool:
    """When ``freezer`` unfroze everything for a complete walk, run the full collection that walks it (the callback
    then freezes its survivors as the new baseline); whether one ran."""
    if not freezer.walking:
        return False
    collect()
    return True


def collect_between_turns(freezer: SurvivorFreezer, collect: Callable[..., object] = gc.collect,
                          enabled: Callable[[], bool] = gc.isenabled) -> None:
    """One turn of ``serve``'s collections: the full collection of a complete walk the freezer started, or else a
    young one (whose survivors the freezer freezes); none while the collector is off (``gc.disable``: an informer
    reading a LIST holds it off, informer.py)."""
    if enabled() and not finish_complete_walk(freezer, collect):
        collect(0)


@contextmanager
def collector_threshold(young: int) -> Iterator[None]:
    """The collector's generation-0 threshold set to ``young`` meanwhile (the older ones kept), restored after."""
    previous = gc.get_threshold()
    gc.set_threshold(young, *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
