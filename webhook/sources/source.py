"""Where cluster state comes from: a snapshot file or a live cluster (informers).

The server depends only on the ``ClusterSource`` protocol: a ``ClusterState`` to read, readiness,
staleness, a direct lookup of one PriorityClass for cache misses, and ``api``: the live cluster's API client, or
None for a file (what the server may ask of the cluster, and whether to follow what the scheduler does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.kubeapi import KubeClient
from webhook.sources.loader import load_snapshot


class ClusterSource(Protocol):
    state: ClusterState

    @property
    def api(self) -> KubeClient | None:
        """A live cluster's API (TokenReviews, SubjectAccessReviews, Events); None: the state is a file's."""
        ...

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


class MemorySource:
    """An in-memory ``ClusterState`` as a source (tests, the demo, embedding): ready unless told otherwise."""

    api: KubeClient | None = None

    def __init__(self, state: ClusterState | None = None, *, ready: bool = True,
                 not_ready_reason: str = "waiting for the initial list of: Pod", staleness: float = 0.0) -> None:
        self.state = state if state is not None else ClusterState()
        self.ready = ready
        self.not_ready_reason = not_ready_reason
        self.staleness = staleness

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def is_ready(self) -> bool:
        return self.ready

    def readiness_reason(self) -> str:
        return "" if self.ready else self.not_ready_reason

    def staleness_seconds(self) -> float:
        return self.staleness

    async def get_priority_class(self, name: str) -> PriorityClass | None:
        return None


class SnapshotSource(MemorySource):
    """A cluster snapshot file, loaded once at start: always ready, never stale."""

    def __init__(self, path: str | Path, *, require_cluster: bool = False) -> None:
        super().__init__(load_snapshot(path, require_cluster=require_cluster))
        self.path = Path(path)
