"""``KubernetesSource``: the live cluster as a ``ClusterSource``, kept current by one informer per kind."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.errors import ClusterUnavailable, ConfigError, InvalidInput
from webhook.sources.informer import (
    PRIORITY_CLASSES,
    RESOURCE_KINDS,
    ApiStatusError,
    Informer,
    InformerSettings,
    ResourceKind,
    api_get,
    read_json,
    resource_version_newer,
)
from webhook.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class KubernetesSource:
    """PriorityClasses, Namespaces, Nodes, Pods, PDBs and ResourceQuotas watched from the API server.

    Ready once every informer has listed its kind; it then stays ready while the API server is
    unreachable (the state is the last known one) and ``staleness_seconds`` says how old it is.
    """

    def __init__(self, *, kubeconfig: str | None = None, context: str | None = None, in_cluster: bool = False,
                 api_client: Any = None, settings: InformerSettings | None = None,
                 kinds: Sequence[ResourceKind] = RESOURCE_KINDS, lookup_timeout_seconds: float = 5.0) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self.in_cluster = in_cluster
        self.api_client = api_client
        self.settings = settings or InformerSettings()
        self.kinds = tuple(kinds)
        self.lookup_timeout_seconds = lookup_timeout_seconds
        self.state = ClusterState()
        self.informers: list[Informer] = []
        self._owns_client = api_client is None
        self._started_at: float | None = None
        self._token_refresh: asyncio.Task[None] | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the client configuration and start the informers (returns before they have synced)."""
        if self.informers:
            return
        if self.api_client is None:
            self.api_client = await self._new_api_client()
            self._owns_client = True
        self._started_at = time.monotonic()
        self.informers = [Informer(self.api_client, kind, self.state, self.settings) for kind in self.kinds]
        for informer in self.informers:
            informer.start()

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
        """Cancel the informers and close the HTTP client this source created (a passed-in one stays open)."""
        await asyncio.gather(*(informer.stop() for informer in self.informers))
        refresh, self._token_refresh = self._token_refresh, None
        await cancel_and_wait(refresh)
        if self._owns_client and self.api_client is not None:
            await self.api_client.close()
            self.api_client = None

    async def _new_api_client(self) -> Any:
        configuration = k8s_client.Configuration()
        try:
            if self.in_cluster:
                k8s_config.load_incluster_config(client_configuration=configuration)
            else:
                loader = await k8s_config.load_kube_config(
                    config_file=self.kubeconfig, context=self.context,
                    client_configuration=configuration, persist_config=False)
                # Exec and GCP credentials expire; the library refreshes them in the background.
                self._token_refresh = asyncio.create_task(
                    k8s_config.kube_config.refresh_token(loader, configuration), name="kube-token-refresh")
        except (k8s_config.ConfigException, OSError, ValueError) as exc:
            where = "in-cluster config" if self.in_cluster else f"kubeconfig {self.kubeconfig or '(default)'}"
            raise ConfigError(f"cannot load {where}: {exc}") from exc
        return k8s_client.ApiClient(configuration=configuration)

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
        """Per kind: synced, resourceVersion, seconds since last contact, relists (for logs and metrics)."""
        now = time.monotonic()
        return {
            informer.kind: {
                "synced": informer.has_synced,
                "resourceVersion": informer.resource_version,
                "secondsSinceContact": None if informer.last_contact is None else now - informer.last_contact,
                "relists": informer.relists,
            }
            for informer in self.informers
        }

    async def get_priority_class(self, name: str) -> PriorityClass | None:
        """One GET of ``scheduling.k8s.io/v1`` priorityclasses/NAME; None on 404.

        The class is added to the state unless the informer has already seen a newer resourceVersion
        (then the watch's view, possibly a deletion, wins). Raises ``ClusterUnavailable`` when the
        API server cannot answer.
        """
        if self.api_client is None:
            raise ClusterUnavailable("cluster source not started")
        timeout = aiohttp.ClientTimeout(total=self.lookup_timeout_seconds)
        path = f"{PRIORITY_CLASSES.list_path}/{name}"
        try:
            response = await api_get(self.api_client, path, (), timeout)
            try:
                raw = await read_json(response)
            finally:
                response.release()
        except ApiStatusError as exc:
            if exc.code == 404:
                return None
            raise ClusterUnavailable(f"GET priorityclass {name}: {exc}") from exc
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise ClusterUnavailable(f"GET priorityclass {name}: {type(exc).__name__}: {exc}") from exc
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
