"""``KubernetesSource``: the live cluster as a ``ClusterSource``, kept current by one informer per kind, all
through one ``KubeClient`` (``webhook.kubeapi``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.errors import ApiError, ClusterUnavailable, InvalidInput
from webhook.kubeapi import KubeClient
from webhook.sources.informer import (
    PRIORITY_CLASSES,
    RESOURCE_KINDS,
    Informer,
    InformerSettings,
    ResourceKind,
    resource_version_newer,
)

log = logging.getLogger(__name__)


class KubernetesSource:
    """PriorityClasses, Namespaces, Nodes, Pods, PDBs and ResourceQuotas watched from the API server.

    Ready once every informer has listed its kind; it then stays ready while the API server is
    unreachable (the state is the last known one) and ``staleness_seconds`` says how old it is.
    """

    def __init__(self, *, kubeconfig: str | None = None, context: str | None = None, in_cluster: bool | None = None,
                 api: KubeClient | None = None, settings: InformerSettings | None = None,
                 kinds: Sequence[ResourceKind] = RESOURCE_KINDS, lookup_timeout_seconds: float = 5.0) -> None:
        # The API it follows: built from kubeconfig, context and in_cluster unless given (a given one stays open).
        self.api = api if api is not None else KubeClient(kubeconfig=kubeconfig, context=context, in_cluster=in_cluster)
        self._owns_api = api is None
        self.settings = settings or InformerSettings()
        self.kinds = tuple(kinds)
        self.lookup_timeout_seconds = lookup_timeout_seconds
        self.state = ClusterState()
        self.informers: list[Informer] = []
        # Called after every watch event the informers apply, in its turn of the event loop (``serve`` catches the
        # predictor's index up there, so an admission does not find the event's node still to refresh).
        self.after_watch_event: list[Callable[[], object]] = []
        # Awaited by the informers between two batches of watch events (``serve``: until the admissions in flight
        # are answered, for at most a millisecond: they go first).
        self.between_watch_batches: Callable[[], Awaitable[object]] | None = None
        self._started_at: float | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Open the API client and start the informers (returns before they have synced)."""
        if self.informers:
            return
        await self.api.open()
        self._started_at = time.monotonic()
        self.informers = [Informer(self.api, kind, self.state, self.settings, after_event=self._watch_event_applied,
                                   between_batches=self._between_watch_batches)
                          for kind in self.kinds]
        for informer in self.informers:
            informer.start()

    def _watch_event_applied(self) -> None:
        for hook in self.after_watch_event:
            try:
                hook()
            except Exception:  # the informer that applied the event must go on whatever a hook does
                log.exception("a hook after a watch event failed")

    async def _between_watch_batches(self) -> None:
        wait = self.between_watch_batches
        if wait is not None:
            await wait()

    async def wait_until_ready(self, timeout: float | None = None) -> bool:
        """Wait until every informer has synced once; False when ``timeout`` passes first."""
        waits = [asyncio.ensure_future(informer.synced.wait()) for informer in self.informers]
        if not waits:
            return False
        _, pending = await asyncio.wait(waits, timeout=timeout)
        for waiter in pending:
            waiter.cancel()
        return not pending

    async def stop(self) -> None:
        """Cancel the informers and close the API client this source opened (a passed-in one stays open)."""
        await asyncio.gather(*(informer.stop() for informer in self.informers))
        if self._owns_api:
            await self.api.close()

    # ---- ClusterSource --------------------------------------------------------------------------
    def is_ready(self) -> bool:
        return bool(self.informers) and all(informer.has_synced for informer in self.informers)

    def readiness_reason(self) -> str:
        if not self.informers:
            return "cluster informers not started"
        waiting = [informer.kind for informer in self.informers if not informer.has_synced]
        return f"waiting for the initial list of: {', '.join(waiting)}" if waiting else ""

    def staleness_seconds(self) -> float:
        """Seconds since the least recently heard-from informer last had a successful exchange."""
        if not self.informers:
            return 0.0
        now = time.monotonic()
        oldest = min(
            informer.last_contact if informer.last_contact is not None else (self._started_at or now)
            for informer in self.informers
        )
        return max(0.0, now - oldest)

    def informer_status(self) -> dict[str, dict[str, object]]:
        """Per kind: synced, resourceVersion, seconds since last contact, relists, watch events applied and LIST
        bytes read (for logs and metrics)."""
        now = time.monotonic()
        return {
            informer.kind: {
                "synced": informer.has_synced,
                "resourceVersion": informer.resource_version,
                "secondsSinceContact": None if informer.last_contact is None else now - informer.last_contact,
                "relists": informer.relists,
                "eventsApplied": informer.events_applied,
                "listedBytes": informer.listed_bytes,
            }
            for informer in self.informers
        }

    async def get_priority_class(self, name: str) -> PriorityClass | None:
        """One GET of ``scheduling.k8s.io/v1`` priorityclasses/NAME; None on 404.

        The class is added to the state unless the informer has already seen a newer resourceVersion
        (then the watch's view, possibly a deletion, wins). Raises ``ClusterUnavailable`` when the
        API server cannot answer.
        """
        path = f"{PRIORITY_CLASSES.list_path}/{name}"
        try:
            raw = await self.api.get(path, timeout=self.lookup_timeout_seconds)
        except (ApiError, ClusterUnavailable) as exc:
            if isinstance(exc, ApiError) and exc.code == 404:
                return None
            raise ClusterUnavailable(f"GET priorityclass {name}: {exc}") from exc
        try:
            priority_class = PRIORITY_CLASSES.convert(raw)
        except InvalidInput as exc:
            raise ClusterUnavailable(f"GET priorityclass {name}: unreadable object: {exc}") from exc
        if not isinstance(priority_class, PriorityClass):
            raise ClusterUnavailable(f"GET priorityclass {name}: unexpected object")
        informer = next((i for i in self.informers if i.resource is PRIORITY_CLASSES), None)
        seen_version = informer.resource_version if informer is not None else None
        object_version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        if informer is None or resource_version_newer(object_version, seen_version):
            self.state.upsert(priority_class)
        return priority_class
