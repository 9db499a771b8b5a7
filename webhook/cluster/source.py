"""Where cluster state comes from: a snapshot file or a live cluster (informers).

The server depends only on the ``ClusterSource`` protocol: a ``ClusterState`` to read, readiness,
staleness, and a direct lookup of one PriorityClass for cache misses.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol

from webhook.cluster.loader import load_snapshot
from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState


class ClusterSource(Protocol):
    state: ClusterState

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def is_ready(self) -> bool: ...

    def readiness_reason(self) -> str:
        """Why the source is not ready ("" when it is)."""
        ...

    def staleness_seconds(self) -> float:
        """Seconds since the state was last known to match the cluster (0 for a file)."""
        ...

    async def get_priority_class(self, name: str) -> PriorityClass | None:
        """Direct lookup of one class that the cache does not hold (None when it does not exist)."""
        ...


class SnapshotSource:
    """A cluster snapshot file, loaded once at start: always ready, never stale."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.state = load_snapshot(self.path)
        self.loaded_at = time.monotonic()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def is_ready(self) -> bool:
        return True

    def readiness_reason(self) -> str:
        return ""

    def staleness_seconds(self) -> float:
        return 0.0

    async def get_priority_class(self, name: str) -> PriorityClass | None:
        return None
