"""List+watch informers feeding ``ClusterState`` from the Kubernetes API (one per kind).

Each informer follows client-go's reflector: a paginated LIST records ``metadata.resourceVersion``, a WATCH from it
(``allowWatchBookmarks``, server-side ``timeoutSeconds``) applies events in order and is renewed when the server
ends it; ``410 Gone`` means the history is compacted, so the informer relists and reconciles the kind (as
``ClusterState.replace_kind`` does). Unlike the reflector, the WATCH opens as soon as the LIST's first page names
its resourceVersion, and its events are held until the LIST is in: a LIST slower than the history the API server's
watch cache keeps would otherwise be answered 410 every time. Events and a LIST's reconcile are applied a bounded
batch per turn of the event loop, which the admissions share. Errors back off exponentially with jitter. The wire
format is read as raw JSON through the one door to the API (``webhook.kubeapi``), skipping kubernetes-asyncio's slow
model deserialisation, and converted straight into the slim model.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.cluster.model import ClusterObject
from webhook.cluster.reader import (
    limit_range_from_dict,
    namespace_from_dict,
    node_from_dict,
    pdb_from_dict,
    priority_class_from_dict,
    resource_quota_from_dict,
    runtime_class_from_dict,
    state_pod_from_dict,
)
from webhook.cluster.reader_devices import (
    device_class_from_dict,
    resource_claim_from_dict,
    resource_claim_template_from_dict,
    resource_slice_from_dict,
)
from webhook.cluster.reader_volumes import (
    csinode_from_dict,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
    volume_attachment_from_dict,
)
from webhook.cluster.snapshot import ClusterState, object_key
from webhook.errors import ApiError, ClusterUnavailable, InvalidInput
from webhook.kubeapi import KubeClient, Timeout, api_error
from webhook.tasks import cancel_and_wait

log = logging.getLogger(__name__)

JsonObject = Mapping[str, Any]

# client-go treats a watch that ends within a second without any event as an error ("very short
# watch"), so a server that closes streams at once cannot make the informer spin.
_VERY_SHORT_WATCH_SECONDS = 1.0
# Listed objects converted between two yields to the event loop.
_CONVERT_BATCH = 100
# Listed objects reconciled into the state between two yields (an upsert with its listeners: ~6 us per pod).
_REPLACE_BATCH = 100
# Watch events applied between two yields at most, and the time after which the informer yields sooner: one read of
# the stream can hold dozens of events (more after any pause), each ~80 us to decode, convert and apply, and an
# admission must not wait behind the whole batch. The time includes the ``after_event`` hook (``serve`` refreshes the
# event's node in the predictor's index there, ~190 us at 15,000 nodes), so a batch is mostly one or two events, and
# an admission waits behind the one running when it came (``_TURNS_BETWEEN_BATCHES``). With
# 0.5 ms instead of 0.2, two A/B runs of an instrumented probe on bench/scale.py's cluster at 15,000 nodes under
# ~300 pod writes/s measured churn preempt / unschedulable p99 of 3.42 / 3.33 and 2.92 / 2.82 ms against 2.85 / 2.56
# and 2.39 / 2.42 ms. (Two events or 0.2 ms, without the hook, once gave a bench/scale.py run at 15,000 nodes churn
# p99s of 9.3 / 5.3 / 5.4 ms and a restarted replica that never caught up, not explained; that bench's restart row
# is the check.)
_WATCH_BATCH_EVENTS = 8
_WATCH_BATCH_SECONDS = 0.0002
# Turns of the loop the informer gives up between two batches. A request whose bytes come while a batch runs reaches
# its handler in two more turns: aiohttp wakes the connection's task, which creates the request's own task (Python
# 3.11, without eager tasks). Yielding once, the informer was queued again ahead of each of those hops, so the
# request waited behind two or three batches; yielding three times it waits behind the one that was running.
_TURNS_BETWEEN_BATCHES = 3


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """One watched kind: where it is listed and how a raw object becomes a model object."""

    kind: str
    list_path: str
    namespaced: bool
    convert: Callable[[JsonObject], ClusterObject]
    # A kind the cluster may not serve (resource.k8s.io/v1 before v1.34) or the server may not be granted (RBAC
    # from an older release of the manifests): a 404 or 403 on its LIST leaves it "not known" in the state, which
    # the predictions then say, instead of keeping the server unready; the informer keeps retrying.
    optional: bool = False

    def object_key(self, raw: JsonObject) -> str:
        meta = raw.get("metadata") or {}
        name = str(meta.get("name", ""))
        if not self.namespaced:
            return name
        return f"{meta.get('namespace') or 'default'}/{name}"


PRIORITY_CLASSES = ResourceKind("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", False,
                                priority_class_from_dict)
NAMESPACES = ResourceKind("Namespace", "/api/v1/namespaces", False, namespace_from_dict)
NODES = ResourceKind("Node", "/api/v1/nodes", False, node_from_dict)
PODS = ResourceKind("Pod", "/api/v1/pods", True, state_pod_from_dict)
POD_DISRUPTION_BUDGETS = ResourceKind("PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets", True,
                                      pdb_from_dict)
RESOURCE_QUOTAS = ResourceKind("ResourceQuota", "/api/v1/resourcequotas", True, resource_quota_from_dict)
# What the admission chain reads on the paths without the API server (/preview: webhook.priority.chain).
LIMIT_RANGES = ResourceKind("LimitRange", "/api/v1/limitranges", True, limit_range_from_dict)
RUNTIME_CLASSES = ResourceKind("RuntimeClass", "/apis/node.k8s.io/v1/runtimeclasses", False, runtime_class_from_dict)

# Storage and devices (#27): what VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits and
# DynamicResources read, from the API versions v1.34+ serve.
STORAGE_KINDS: tuple[ResourceKind, ...] = (
    ResourceKind("PersistentVolume", "/api/v1/persistentvolumes", False, pv_from_dict, optional=True),
    ResourceKind("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", True, pvc_from_dict, optional=True),
    ResourceKind("StorageClass", "/apis/storage.k8s.io/v1/storageclasses", False, storage_class_from_dict,
                 optional=True),
    ResourceKind("CSINode", "/apis/storage.k8s.io/v1/csinodes", False, csinode_from_dict, optional=True),
    ResourceKind("VolumeAttachment", "/apis/storage.k8s.io/v1/volumeattachments", False,
                 volume_attachment_from_dict, optional=True),
)
DEVICE_KINDS: tuple[ResourceKind, ...] = (
    ResourceKind("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses", False, device_class_from_dict,
                 optional=True),
    ResourceKind("ResourceSlice", "/apis/resource.k8s.io/v1/resourceslices", False, resource_slice_from_dict,
                 optional=True),
    ResourceKind("ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims", True, resource_claim_from_dict,
                 optional=True),
    ResourceKind("ResourceClaimTemplate", "/apis/resource.k8s.io/v1/resourceclaimtemplates", True,
                 resource_claim_template_from_dict, optional=True),
)

RESOURCE_KINDS: tuple[ResourceKind, ...] = (
    PRIORITY_CLASSES, NAMESPACES, NODES, PODS, POD_DISRUPTION_BUDGETS, RESOURCE_QUOTAS, LIMIT_RANGES, RUNTIME_CLASSES,
    *STORAGE_KINDS, *DEVICE_KINDS,
)
# The HTTP statuses of a LIST that make an optional kind "not known" rather than an outage.
_NOT_SERVED_OR_NOT_GRANTED = frozenset({403, 404})


@dataclass(frozen=True, slots=True)
class InformerSettings:
    """Tuning knobs; the defaults suit a real cluster, tests shrink the delays."""

    # Bigger pages than client-go's 500: the API server's watch cache answers each page of a paginated LIST by
    # collecting every key from the continue key to the end of the resource's prefix, then cutting `limit` of them
    # (OrderedListPrefix in staging/src/k8s.io/apiserver/pkg/storage/cacher/store/store_btree.go), so a full list
    # costs it O(objects^2 / limit): at 450,000 pods, 900 pages of 500 walked 200 million keys and made GBs of
    # garbage, and `serve` waited 138 s for its lists (bench/scale.py, 15,000 nodes). 5,000 cuts that tenfold for
    # ~40 MB more transient memory here (a parsed page of 5,000 pods, and the next one fetched meanwhile).
    page_size: int = 5000
    # Once synced, admissions wait on this loop while a relist decodes each page in one orjson call (~85 ms for
    # 5,000 pods): a relist reads pages of at most this many objects, client-go's size, ~9 ms each.
    relist_page_size: int = 500
    # Server-side watch timeout; each watch picks a value in [t, 2t) like client-go, to spread renewals.
    watch_timeout_seconds: int = 300
    backoff_base_seconds: float = 0.2
    backoff_cap_seconds: float = 30.0
    connect_timeout_seconds: float = 10.0
    request_timeout_seconds: float = 60.0
    # Extra read slack over the server-side timeout before a silent watch connection counts as dead.
    watch_read_slack_seconds: float = 30.0

    def backoff_delay(self, failures: int) -> float:
        """Exponential backoff with jitter: a random delay in [d/2, d], d = base * 2^(failures-1), capped."""
        ceiling = min(self.backoff_cap_seconds, self.backoff_base_seconds * 2 ** min(max(failures - 1, 0), 32))
        return random.uniform(ceiling / 2, ceiling)


class CollectionsPause:
    """The cyclic garbage collector paused while at least one informer is reading a LIST (one per event loop's
    thread; informers of one process share it). A LIST of 450,000 pods creates millions of objects and no
    reference cycle: each collection would only walk the growing cache again (a third of a 90,000-pod initial
    sync, bench/scale.py). Refcounting still frees what a page leaves behind; cycles wait for the end of the list.
    The snapshot loader does the same (``webhook.sources.loader.collections_paused``)."""

    def __init__(self) -> None:
        self.listing = 0
        self.was_enabled = False

    def __enter__(self) -> None:
        if self.listing == 0:
            self.was_enabled = gc.isenabled()
            gc.disable()
        self.listing += 1

    def __exit__(self, *exc: object) -> None:
        self.listing -= 1
        if self.listing == 0 and self.was_enabled:
            gc.enable()


LISTING = CollectionsPause()


class WatchEndedTooSoon(Exception):
    """The server ended a watch at once without any event (see ``_VERY_SHORT_WATCH_SECONDS``)."""


# Whatever the API server or the network does, the informer backs off and tries again.
_RETRYABLE = (ClusterUnavailable, ApiError, ValueError, WatchEndedTooSoon)


class Informer:
    """Keeps one kind of ``state`` equal to the API server's view, for as long as ``run`` runs."""

    def __init__(self, api: KubeClient, resource: ResourceKind, state: ClusterState,
                 settings: InformerSettings | None = None, after_event: Callable[[], object] | None = None,
                 between_batches: Callable[[], Awaitable[object]] | None = None) -> None:
        self.api = api
        self.resource = resource
        self.state = state
        self.settings = settings or InformerSettings()
        # Called after each watch event applied, in the same turn of the event loop and within its batch's time.
        self.after_event = after_event
        # Awaited between two batches of watch events, after the turns given up (``serve``: until no admission is
        # in flight, for at most a millisecond).
        self.between_batches = between_batches
        self.resource_version: str | None = None
        self.synced = asyncio.Event()
        self.last_contact: float | None = None  # time.monotonic() of the last successful exchange
        self.relists = 0
        self.events_applied = 0
        self.listed_bytes = 0  # bodies of every LIST page read (initial lists and relists)
        self._failures = 0
        self._task: asyncio.Task[None] | None = None
        # While a LIST is read, the WATCH opened from its resourceVersion holds its events here (the newest object
        # per key, None once deleted) with the newest resourceVersion seen; None: events are applied as they come.
        self._held: dict[str, ClusterObject | None] | None = None
        self._held_version: str | None = None

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def has_synced(self) -> bool:
        return self.synced.is_set()

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.kind}")
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def run(self) -> None:
        """List, then watch forever; relist on 410, back off on errors. Ends only by cancellation."""
        while True:
            try:
                if self.resource_version is None:
                    await self.list_and_watch()
                else:
                    await self.watch_once()
            except ApiError as exc:
                if exc.expired and self.resource_version is not None:
                    log.info("%s watch expired (%s); relisting", self.kind, exc.message or exc.reason)
                    self.resource_version = None
                    continue
                if self.resource.optional and self.resource_version is None \
                        and exc.code in _NOT_SERVED_OR_NOT_GRANTED:
                    await self._not_known(exc)
                    continue
                await self._back_off(exc)
            except _RETRYABLE as exc:
                await self._back_off(exc)
            except Exception as exc:
                # An informer must outlive surprises (a malformed answer); its staleness shows the trouble.
                log.exception("%s informer: unexpected error", self.kind)
                await self._back_off(exc)

    async def _not_known(self, exc: ApiError) -> None:
        """An optional kind the API server does not serve or does not let us list: synced, but not known (its
        objects, if any were listed before, are dropped: stale devices are worse than none), retried at the
        back-off's cap."""
        self._touch()  # the API server answered: the state is as current as it can be, not stale
        if not self.synced.is_set():
            log.warning("%s informer: %s; predictions say the kind is not known", self.kind, exc)
            self.state.forget_kind(self.kind)
            self.synced.set()
        await asyncio.sleep(self.settings.backoff_cap_seconds)

    async def _back_off(self, exc: BaseException) -> None:
        self._failures += 1
        delay = self.settings.backoff_delay(self._failures)
        log.warning("%s informer: %s: %s; retrying in %.2fs", self.kind, type(exc).__name__, exc, delay)
        await asyncio.sleep(delay)

    def _touch(self) -> None:
        self.last_contact = time.monotonic()
        self._failures = 0

    # ---- list -----------------------------------------------------------------------------------
    async def list_and_watch(self) -> None:
        """A full LIST reconciled into the state, then the WATCH from the LIST's resourceVersion until the server
        ends it. The WATCH opens as soon as the first page names that version and holds its events until the
        reconcile is done: the API server's watch cache keeps 75 s of events (DefaultEventFreshDuration in
        k8s.io/apiserver's cacher, within 102,400 events), and a LIST of 450,000 pods under 500 writes/s took ~105 s
        on this machine, so a WATCH opened after it was refused (410) and the informer listed again, forever while
        the writes lasted (bench/scale.py's replica restarted under churn)."""
        watch: asyncio.Task[None] | None = None

        def open_watch(version: str) -> None:
            nonlocal watch
            if watch is not None:  # the LIST started over at another resourceVersion (its continue expired)
                watch.cancel()
                watch = None
            self._held = None
            # A WATCH without a resourceVersion would start with every object again: that one waits for the LIST.
            if version:
                self._held, self._held_version = {}, None
                watch = asyncio.create_task(self.watch_once(version), name=f"informer-{self.kind}-watch")

        try:
            await self.list_and_replace(on_version=open_watch)
            await self._apply_held()
            if watch is None:
                await self.watch_once()
            else:
                await watch  # its error, if it ended with one while the LIST was read, is raised here
        finally:
            self._held = None
            if watch is not None and not watch.done():
                await cancel_and_wait(watch)
            elif watch is not None and not watch.cancelled():
                watch.exception()  # retrieved: the LIST's own error, if any, is the one raised

    async def list_and_replace(self, on_version: Callable[[str], None] | None = None) -> None:
        """A full paginated LIST, reconciled into the state (objects gone from the server disappear).
        ``on_version`` is called with the LIST's resourceVersion as soon as its first page names it."""
        with LISTING:
            objects, resource_version = await self.list_all(on_version)
            await self._replace_kind(objects)
        self.state.mark_known(self.kind)
        self.resource_version = resource_version
        self.relists += 1
        self._touch()
        if not self.synced.is_set():
            log.info("%s informer synced: %d objects at resourceVersion %s", self.kind, len(objects),
                     resource_version)
            if self._held is None:
                self.synced.set()

    async def _apply_held(self) -> None:
        """Apply the events held while the LIST was read (newer than it, the newest per key), a batch per turn of
        the event loop; events still arriving meanwhile join the batches. Then events apply as they come."""
        held = self._held
        if held is None:
            return
        state, kind = self.state, self.kind
        while held:
            for _ in range(min(_REPLACE_BATCH, len(held))):
                key, obj = held.popitem()
                if obj is None:
                    state.delete(kind, key)
                else:
                    state.upsert(obj)
            await asyncio.sleep(0)
        # No await since `held` was seen empty: no event can fall between the held ones and the live ones.
        if self._held_version is not None:
            self.resource_version = self._held_version
        self._held = None
        if not self.synced.is_set():
            self.synced.set()

    async def _replace_kind(self, objects: list[ClusterObject]) -> None:
        """``ClusterState.replace_kind`` in slices of ``_REPLACE_BATCH`` objects with a yield to the event loop
        between them: a relist of 450,000 pods reconciled in one call held the loop for seconds (363 ms for 60,000).
        In between, the kind is part old, part new, as while a watch streams: the other kinds' informers and the
        admissions read it; this informer applies no event of its own until the reconcile ends."""
        state, kind = self.state, self.kind
        fresh: set[str] = set()
        for start in range(0, len(objects), _REPLACE_BATCH):
            fresh.update(object_key(obj) for obj in objects[start:start + _REPLACE_BATCH])
        stale = [key for key in state.keys(kind) if key not in fresh]
        await asyncio.sleep(0)
        for start in range(0, len(stale), _REPLACE_BATCH):
            for key in stale[start:start + _REPLACE_BATCH]:
                state.delete(kind, key)
            await asyncio.sleep(0)
        for start in range(0, len(objects), _REPLACE_BATCH):
            for obj in objects[start:start + _REPLACE_BATCH]:
                state.upsert(obj)
            await asyncio.sleep(0)

    async def list_all(self, on_version: Callable[[str], None] | None = None) -> tuple[list[ClusterObject], str]:
        settings = self.settings
        page_size = min(settings.page_size, settings.relist_page_size) if self.synced.is_set() \
            else settings.page_size
        try:
            return await self._list_pages(page_size, on_version)
        except ApiError as exc:
            if not exc.expired:
                raise
            # The continue token expired mid-list: fall back to one unpaginated list (client-go pager).
            log.info("%s list continuation expired; listing without pagination", self.kind)
            return await self._list_pages(0, on_version)

    async def _list_pages(self, page_size: int,
                          on_version: Callable[[str], None] | None) -> tuple[list[ClusterObject], str]:
        objects: list[ClusterObject] = []
        page = await self._fetch_page(page_size, "")
        # Every page of a paginated LIST is read at the first page's resourceVersion.
        if on_version is not None:
            on_version(str((page.get("metadata") or {}).get("resourceVersion") or ""))
        while True:
            meta = page.get("metadata") or {}
            token = str(meta.get("continue") or "")
            # Fetch the next page while this one is converted (the server works meanwhile).
            next_page = asyncio.ensure_future(self._fetch_page(page_size, token)) if token else None
            try:
                await self._convert_items(page.get("items") or [], objects)
            except BaseException:
                if next_page is not None:
                    next_page.cancel()
                raise
            if next_page is None:
                return objects, str(meta.get("resourceVersion") or "")
            page = await next_page

    async def _fetch_page(self, page_size: int, token: str) -> JsonObject:
        settings = self.settings
        timeout = Timeout(total=settings.request_timeout_seconds, connect=settings.connect_timeout_seconds)
        query = [("limit", str(page_size))] if page_size else []
        if token:
            query.append(("continue", token))
        answer = await self.api.request("GET", self.resource.list_path, query=query, timeout=timeout)
        self.listed_bytes += len(answer.body)
        page = answer.json()
        if not isinstance(page, dict):
            raise ClusterUnavailable(f"GET {self.resource.list_path}: the API server answered with no JSON object")
        return page

    async def _convert_items(self, items: list[JsonObject], into: list[ClusterObject]) -> None:
        """Convert list items, yielding now and then so a large list never blocks the event loop for long."""
        for start in range(0, len(items), _CONVERT_BATCH):
            for raw in items[start:start + _CONVERT_BATCH]:
                obj = self._convert(raw)
                if obj is not None:
                    into.append(obj)
            await asyncio.sleep(0)

    # ---- watch ----------------------------------------------------------------------------------
    async def watch_once(self, since: str | None = None) -> None:
        """One WATCH from ``since`` (``resource_version`` by default) until the server ends it; raises on errors
        and on 410."""
        settings = self.settings
        server_timeout = random.randint(settings.watch_timeout_seconds, 2 * settings.watch_timeout_seconds - 1) \
            if settings.watch_timeout_seconds > 1 else settings.watch_timeout_seconds
        query = [
            ("watch", "true"),
            ("resourceVersion", (self.resource_version if since is None else since) or ""),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(server_timeout)),
        ]
        timeout = Timeout(connect=settings.connect_timeout_seconds,
                          read=server_timeout + settings.watch_read_slack_seconds)
        started = time.monotonic()
        events = 0
        async with self.api.watch(self.resource.list_path, query=query, timeout=timeout) as stream:
            self._touch()
            since_yield, busy = 0, 0.0
            after_event, between_batches = self.after_event, self.between_batches
            async for event in stream:
                began = time.perf_counter()
                self.apply_event(event)
                if after_event is not None:
                    after_event()
                busy += time.perf_counter() - began
                events += 1
                since_yield += 1
                # The stream hands over every event already read without a turn of the loop in between.
                if since_yield >= _WATCH_BATCH_EVENTS or busy >= _WATCH_BATCH_SECONDS:
                    for _ in range(_TURNS_BETWEEN_BATCHES):
                        await asyncio.sleep(0)
                    if between_batches is not None:
                        await between_batches()
                    since_yield, busy = 0, 0.0
        if events == 0 and time.monotonic() - started < _VERY_SHORT_WATCH_SECONDS:
            raise WatchEndedTooSoon(f"very short watch: {self.resource.list_path}: unexpected watch close")
        self._touch()  # a watch the server closed at its timeout means we were current until now

    def apply_event(self, event: JsonObject) -> None:
        """Apply one watch event to the state and advance the resourceVersion (or hold it while a LIST is read)."""
        event_type = event.get("type")
        raw = event.get("object")
        if not isinstance(raw, Mapping):
            raise ValueError(f"{self.kind} watch event {event_type!r} without an object")
        if event_type == "ERROR":
            raise api_error("WATCH", self.resource.list_path, 500, raw)
        held = self._held
        if event_type in ("ADDED", "MODIFIED"):
            obj = self._convert(raw)
            if obj is None:
                pass
            elif held is None:
                self.state.upsert(obj)
            else:
                held[self.resource.object_key(raw)] = obj
        elif event_type == "DELETED":
            if held is None:
                self.state.delete(self.kind, self.resource.object_key(raw))
            else:
                held[self.resource.object_key(raw)] = None
        elif event_type != "BOOKMARK":
            raise ValueError(f"{self.kind} watch: unknown event type {event_type!r}")
        meta = raw.get("metadata")
        if meta:
            resource_version = meta.get("resourceVersion")
            if resource_version:
                if held is None:
                    self.resource_version = resource_version
                else:
                    self._held_version = resource_version
        self.events_applied += 1
        self._touch()

    def _convert(self, raw: JsonObject) -> ClusterObject | None:
        try:
            return self.resource.convert(raw)
        except InvalidInput as exc:
            # One malformed object must not stop the informer; the previous version (if any) stays.
            log.warning("%s %s: cannot read object: %s", self.kind, self.resource.object_key(raw), exc)
            return None


def resource_version_newer(candidate: str, current: str | None) -> bool:
    """Whether ``candidate`` is newer than ``current``; resourceVersions are opaque, so unknown = newer."""
    if not current:
        return True
    try:
        return int(candidate) > int(current)
    except ValueError:
        return True
