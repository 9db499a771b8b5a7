"""The reader's one cache idiom: a dict emptied when full.

A large cluster repeats the same label maps, requests, quantities and tolerations across thousands of pods.
``shared`` keeps one canonical instance per equal immutable value (so 150,000 pods hold pointers, not
copies: bench/cluster_state.py); the reader's fast paths remember what a raw API value read as in a
``BoundedCache`` of their own. Emptying a full cache is cheaper than any eviction order and never wrong:
a value read again is only read again.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Hashable
from typing import Any, TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_H = TypeVar("_H", bound=Hashable)

# The fast paths remember raw items (fresh strings, not interned): kept fewer than the shared values.
FAST_PATH_LIMIT = 4096
SHARED_LIMIT = 1 << 16


class BoundedCache(dict[_K, _V]):
    """A dict of at most ``limit`` entries, emptied when full."""

    __slots__ = ("__weakref__", "limit")

    def __init__(self, limit: int = FAST_PATH_LIMIT) -> None:
        super().__init__()
        self.limit = limit
        _EVERY_CACHE[id(self)] = self

    def remember(self, key: _K, value: _V) -> _V:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


# Every live BoundedCache (by id: a dict is not hashable), for ``forget_read_values``.
_EVERY_CACHE: weakref.WeakValueDictionary[int, BoundedCache[Any, Any]] = weakref.WeakValueDictionary()


def forget_read_values() -> None:
    """Empty every cache of the reader, as if each had just filled up: after a bulk read (a snapshot's load) they
    hold tens of thousands of raw items and keys that nothing reads again (at 450,000 pods ~12 MB, which the
    predictor's index, built next, then reuses: bench/snapshot.py)."""
    for cache in list(_EVERY_CACHE.values()):
        cache.clear()


SHARED_VALUES: BoundedCache[Hashable, Any] = BoundedCache(SHARED_LIMIT)


def shared(value: _H) -> _H:
    """One canonical instance per equal immutable value."""
    existing = SHARED_VALUES.get(value)
    if existing is not None:
        return existing
    return SHARED_VALUES.remember(value, value)


def interned(value: str) -> str:
    return sys.intern(value) if value else value
