"""A fake Kubernetes API server on loopback that speaks the real list/watch wire format.

Serves PriorityClasses, Namespaces, Nodes, Pods, PodDisruptionBudgets and ResourceQuotas at their real
paths: paginated ``List`` responses (``limit``/``continue``, ``metadata.resourceVersion``, items without
``kind``/``apiVersion`` like the real server), chunked newline-delimited watch streams from an event
history (``ADDED``/``MODIFIED``/``DELETED``/``BOOKMARK``/``ERROR``), ``410 Expired`` for a compacted
resourceVersion, and single-object GETs. Test controls mutate objects (bumping the resourceVersion),
compact the history, drop open watches mid-stream, and take the whole server down and back up.

It also answers TokenReviews (authentication.k8s.io/v1) and SubjectAccessReviews (authorization.k8s.io/v1)
from test-controlled tables: ``add_user(token, username, groups)`` and ``grant(subject, verb, resource,
namespace)`` (subject: a username or ``group:<name>``; namespace ``*``: every namespace), and records the
``core/v1`` Events created in a namespace (``events``; ``event_status`` other than 201 refuses them).

(The ``kmock`` package was considered: it has no resourceVersions, pagination, bookmarks, 410 or
server-side timeouts, so this small server is used instead.)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import itertools
import json
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from webhook.cluster.reader import object_from_dict
from webhook.cluster.snapshot import KIND_OF, ClusterState, object_key

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    api_version: str  # "v1" or "group/version"
    namespaced: bool

    @property
    def prefix(self) -> str:
        return f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"


RESOURCES: tuple[Resource, ...] = (
    Resource("priorityclasses", "PriorityClass", "scheduling.k8s.io/v1", False),
    Resource("namespaces", "Namespace", "v1", False),
    Resource("nodes", "Node", "v1", False),
    Resource("pods", "Pod", "v1", True),
    Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", True),
    Resource("resourcequotas", "ResourceQuota", "v1", True),
    Resource("limitranges", "LimitRange", "v1", True),
    Resource("runtimeclasses", "RuntimeClass", "node.k8s.io/v1", False),
    Resource("persistentvolumes", "PersistentVolume", "v1", False),
    Resource("persistentvolumeclaims", "PersistentVolumeClaim", "v1", True),
    Resource("storageclasses", "StorageClass", "storage.k8s.io/v1", False),
    Resource("csinodes", "CSINode", "storage.k8s.io/v1", False),
    Resource("volumeattachments", "VolumeAttachment", "storage.k8s.io/v1", False),
    Resource("deviceclasses", "DeviceClass", "resource.k8s.io/v1", False),
    Resource("resourceslices", "ResourceSlice", "resource.k8s.io/v1", False),
    Resource("resourceclaims", "ResourceClaim", "resource.k8s.io/v1", True),
    Resource("resourceclaimtemplates", "ResourceClaimTemplate", "resource.k8s.io/v1", True),
)
BY_KIND = {r.kind: r for r in RESOURCES}
BY_PATH = {(r.api_version, r.plural): r for r in RESOURCES}


def status_object(code: int, reason: str, message: str) -> JsonDict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def _status_response(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status_object(code, reason, message), status=code)


@dataclass
class _StoredObject:
    raw: JsonDict  # without kind/apiVersion, as list items are served
    item_json: bytes

    def event_line(self, resource: Resource, event_type: str) -> bytes:
        head = f'{{"kind":"{resource.kind}","apiVersion":"{resource.api_version}"'.encode()
        body = self.item_json[1:]
        obj = head + (b"," + body if body != b"}" else body)
        return b'{"type":"' + event_type.encode() + b'","object":' + obj + b"}\n"


@dataclass(eq=False)
class _Watch:
    resource: Resource
    namespace: str | None
    bookmarks: bool
    request: web.Request
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)


@dataclass
class _Continuation:
    resource_version: int
    lines: list[bytes]


class FakeApiServer:
    """The fake server; ``async with FakeApiServer() as api:`` starts it on 127.0.0.1 (random port)."""

    def __init__(self, *, token: str | None = None, watch_expired_as_http_status: bool = False,
                 not_served: frozenset[str] = frozenset(), forbidden: frozenset[str] = frozenset(),
                 history_limit: int | None = None) -> None:
        self.token = token
        # Events kept for watches from an older resourceVersion (None: all until ``compact``), as the real
        # server's watch cache keeps a bounded window; and a delay before each LIST page is answered.
        self.history_limit = history_limit
        self.list_delay_seconds = 0.0
        # Called with the number of LIST pages answered so far (this one included), before the page is read from
        # the store and after it is: writes there land before or after that page's snapshot.
        self.list_pages = 0
        self.before_list_page: Callable[[int], None] | None = None
        self.after_list_page: Callable[[int], None] | None = None
        # API versions answered 404 (a release that does not serve them, e.g. resource.k8s.io/v1 before v1.34),
        # and resources (plural) answered 403 (a ClusterRole from before they were granted).
        self.not_served = not_served
        self.forbidden = forbidden
        # The real server answers a too-old watch with HTTP 200 and one ERROR event; some versions
        # (and proxies) answer with an HTTP 410 instead: both are supported.
        self.watch_expired_as_http_status = watch_expired_as_http_status
        self.resource_version = 1
        self.compacted_before = 0  # watching from a resourceVersion below this is 410 Expired
        self.objects: dict[str, dict[str, _StoredObject]] = {r.plural: {} for r in RESOURCES}
        self.history: list[tuple[int, Resource, str | None, bytes]] = []
        self.watches: set[_Watch] = set()
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.calls: list[tuple[str, str, dict[str, str]]] = []  # (method, path, query) of every request
        self.authorization_headers: list[str] = []
        self.down = False
        self.port = 0
        self._continuations: dict[str, _Continuation] = {}
        self._continuation_ids = itertools.count(1)
        self._uids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        # TokenReview / SubjectAccessReview tables and the reviews received (spec as sent).
        self.token_users: dict[str, JsonDict] = {}
        self.grants: set[tuple[str, str, str, str]] = set()
        self.token_reviews: list[JsonDict] = []
        self.access_reviews: list[JsonDict] = []
        # When set, a TokenReview is answered only once this event is set (``token_review_waiting`` is set while
        # one waits): holds a /preview of the webhook in flight for as long as a test needs.
        self.release_token_reviews: asyncio.Event | None = None
        self.token_review_waiting = asyncio.Event()
        self.events: list[JsonDict] = []
        self.event_status = 201
        # coordination.k8s.io/v1 Leases by (namespace, name); wgpolicyk8s.io/v1alpha2 PolicyReports by
        # (namespace, name), served only while ``policy_report_crd`` (a real server without the CRD: 404).
        self.leases: dict[tuple[str, str], JsonDict] = {}
        self.policy_reports: dict[tuple[str, str], JsonDict] = {}
        self.policy_report_crd = False
        self.policy_report_writes = 0

    # ---- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self, port: int = 0) -> int:
        app = web.Application(middlewares=[self._middleware])
        app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", self._token_review)
        app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", self._subject_access_review)
        app.router.add_post("/api/v1/namespaces/{namespace}/events", self._create_event)
        leases = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        app.router.add_post(leases, self._create_lease)
        app.router.add_get(leases + "/{name}", self._get_lease)
        app.router.add_put(leases + "/{name}", self._update_lease)
        app.router.add_get("/apis/wgpolicyk8s.io/v1alpha2/policyreports", self._list_policy_reports)
        report = "/apis/wgpolicyk8s.io/v1alpha2/namespaces/{namespace}/policyreports/{name}"
        app.router.add_patch(report, self._apply_policy_report)
        app.router.add_get(report, self._get_policy_report)
        app.router.add_get("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1, handler_cancellation=True)
        await self._runner.setup()
        self.port = port or _free_port()
        await self._listen()
        return self.port

    async def _listen(self) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await self._site.start()

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_kubeconfig(self, directory: Path, *, context: str = "fake") -> Path:
        """A kubeconfig for this server with a bearer token (``self.token``) in ``directory``."""
        user: JsonDict = {"token": self.token} if self.token else {}
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": user}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester"}}],
        }
        path = directory / "kubeconfig"
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    # ---- test controls ----------------------------------------------------------------------------
    def create(self, obj: Mapping[str, Any]) -> JsonDict:
        """Add an object (``kind`` picks the resource); emits ADDED. Returns the stored object."""
        return self._write(obj, "ADDED")

    def update(self, obj: Mapping[str, Any]) -> JsonDict:
        """Replace an existing object; emits MODIFIED."""
        return self._write(obj, "MODIFIED")

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Remove an object; emits DELETED with its last state at the deletion's resourceVersion."""
        resource = BY_KIND[kind]
        stored = self.objects[resource.plural].pop(self._key(resource, name, namespace))
        raw = {**stored.raw, "metadata": dict(stored.raw["metadata"])}
        raw["metadata"]["resourceVersion"] = str(self._next_version())
        self._emit(resource, raw.get("metadata", {}).get("namespace"), "DELETED", _stored(raw))

    def get(self, kind: str, name: str, namespace: str | None = None) -> JsonDict:
        resource = BY_KIND[kind]
        raw = copy.deepcopy(self.objects[resource.plural][self._key(resource, name, namespace)].raw)
        return {"kind": kind, "apiVersion": resource.api_version, **raw}

    def all_objects(self) -> list[JsonDict]:
        """Every stored object with ``kind``/``apiVersion``, as ``kubectl get -o json`` would give it."""
        return [{"kind": r.kind, "apiVersion": r.api_version, **copy.deepcopy(s.raw)}
                for r in RESOURCES for s in self.objects[r.plural].values()]

    def load(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Bulk-create objects before anyone watches (no history kept: one resourceVersion step each)."""
        for obj in objects:
            resource = BY_KIND[str(obj["kind"])]
            raw = self._prepare(resource, obj, self._next_version())
            self.objects[resource.plural][self._raw_key(resource, raw)] = _stored(raw)
        self.compacted_before = self.resource_version

    def compact(self) -> None:
        """Forget the event history: a watch or continue token from an older resourceVersion gets 410."""
        self.history.clear()
        self.compacted_before = self.resource_version + 1
        self._continuations.clear()

    def send_bookmarks(self) -> None:
        """A BOOKMARK with the current resourceVersion to every watch that allowed bookmarks."""
        for watch in list(self.watches):
            if watch.bookmarks:
                resource = watch.resource
                line = json.dumps({"type": "BOOKMARK", "object": {
                    "kind": resource.kind, "apiVersion": resource.api_version,
                    "metadata": {"resourceVersion": str(self.resource_version)}}}).encode() + b"\n"
                watch.queue.put_nowait(line)

    def expire_watches(self) -> None:
        """Send ``ERROR 410 Expired`` on every open watch, then end it (what a lagging watch cache does)."""
        for watch in list(self.watches):
            watch.queue.put_nowait(_error_line(self.resource_version))
            watch.queue.put_nowait(None)

    def drop_watches(self) -> None:
        """Cut every open watch connection mid-stream (no final chunk)."""
        for watch in list(self.watches):
            if watch.request.transport is not None:
                watch.request.transport.abort()
            watch.queue.put_nowait(None)
        self.watches.clear()

    async def go_down(self) -> None:
        """Stop listening (connections refused) and close every open connection."""
        self.down = True
        self.drop_watches()
        if self._site is not None:
            await self._site.stop()
            self._site = None
        if self._runner is not None and self._runner.server is not None:
            for handler in self._runner.server.connections:
                handler.force_close()

    async def come_up(self) -> None:
        self.down = False
        await self._listen()

    def add_user(self, token: str, username: str, groups: Iterable[str] = ("system:authenticated",),
                 uid: str = "") -> None:
        """A bearer token that TokenReviews accept, for ``username`` in ``groups``."""
        self.token_users[token] = {"username": username, "uid": uid or f"uid-{username}", "groups": list(groups)}

    def grant(self, subject: str, verb: str, resource: str, namespace: str = "*") -> None:
        """Let ``subject`` (a username or ``group:<name>``) ``verb`` core ``resource`` in ``namespace``."""
        self.grants.add((subject, verb, resource, namespace))

    def allowed(self, spec: Mapping[str, Any]) -> bool:
        attributes = spec.get("resourceAttributes") or {}
        subjects = [str(spec.get("user") or "")] + [f"group:{g}" for g in spec.get("groups") or ()]
        verb, resource = attributes.get("verb"), attributes.get("resource")
        if attributes.get("group", "") != "":
            return False
        return any((subject, verb, resource, ns) in self.grants
                   for subject in subjects for ns in (attributes.get("namespace", ""), "*"))

    async def _token_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("kind") != "TokenReview" or body.get("apiVersion") != "authentication.k8s.io/v1":
            return _status_response(400, "BadRequest", "expected an authentication.k8s.io/v1 TokenReview")
        spec = body.get("spec") or {}
        self.token_reviews.append(spec)
        if self.release_token_reviews is not None:
            self.token_review_waiting.set()
            await self.release_token_reviews.wait()
        user = self.token_users.get(str(spec.get("token") or ""))
        status: JsonDict = {"authenticated": True, "user": user} if user else {
            "authenticated": False, "error": "invalid bearer token"}
        return web.json_response({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                                  "metadata": {"creationTimestamp": None}, "spec": spec, "status": status},
                                 status=201)

    async def _subject_access_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("kind") != "SubjectAccessReview" or body.get("apiVersion") != "authorization.k8s.io/v1":
            return _status_response(400, "BadRequest", "expected an authorization.k8s.io/v1 SubjectAccessReview")
        spec = body.get("spec") or {}
        self.access_reviews.append(spec)
        allowed = self.allowed(spec)
        status: JsonDict = {"allowed": allowed} if allowed else {"allowed": False, "reason": "no RBAC rule"}
        return web.json_response({"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                                  "metadata": {"creationTimestamp": None}, "spec": spec, "status": status},
                                 status=201)

    async def _create_event(self, request: web.Request) -> web.Response:
        body = await request.json()
        namespace = request.match_info["namespace"]
        if self.event_status != 201:
            return _status_response(self.event_status, "Forbidden", f'events is forbidden in namespace "{namespace}"')
        if body.get("kind") != "Event" or (body.get("metadata") or {}).get("namespace", namespace) != namespace:
            return _status_response(400, "BadRequest", "expected a v1 Event of this namespace")
        name = (body.get("metadata") or {}).get("name")
        if name and any(e["metadata"].get("name") == name and e["metadata"].get("namespace", namespace) == namespace
                        for e in self.events):
            return _status_response(409, "AlreadyExists", f'events "{name}" already exists')
        self.events.append(body)
        stored_name = name or f"event-{len(self.events)}"
        return web.json_response({**body, "metadata": {**body["metadata"], "name": stored_name}}, status=201)

    # ---- Leases and PolicyReports -----------------------------------------------------------------
    async def _create_lease(self, request: web.Request) -> web.Response:
        body = await request.json()
        key = (request.match_info["namespace"], body["metadata"]["name"])
        if key in self.leases:
            return _status_response(409, "AlreadyExists", f'leases.coordination.k8s.io "{key[1]}" already exists')
        stored = {**body, "metadata": {**body["metadata"], "namespace": key[0],
                                       "resourceVersion": str(self._next_version())}}
        self.leases[key] = stored
        return web.json_response(stored, status=201)

    def edit_lease(self, namespace: str, name: str, spec: JsonDict) -> None:
        """Someone else's write of a Lease's spec: a new resourceVersion, as the API server gives every write, so an
        update prepared from the version before it conflicts."""
        current = self.leases[(namespace, name)]
        self.leases[(namespace, name)] = {**current, "spec": spec, "metadata": {
            **current["metadata"], "resourceVersion": str(self._next_version())}}

    async def _get_lease(self, request: web.Request) -> web.Response:
        key = (request.match_info["namespace"], request.match_info["name"])
        if key not in self.leases:
            return _status_response(404, "NotFound", f'leases.coordination.k8s.io "{key[1]}" not found')
        return web.json_response(self.leases[key])

    async def _update_lease(self, request: web.Request) -> web.Response:
        body = await request.json()
        key = (request.match_info["namespace"], request.match_info["name"])
        current = self.leases.get(key)
        if current is None:
            return _status_response(404, "NotFound", f'leases.coordination.k8s.io "{key[1]}" not found')
        if (body.get("metadata") or {}).get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return _status_response(409, "Conflict", "the object has been modified; please apply your changes to the "
                                                     "latest version and try again")
        stored = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self._next_version())}}
        self.leases[key] = stored
        return web.json_response(stored)

    async def _list_policy_reports(self, request: web.Request) -> web.Response:
        if not self.policy_report_crd:
            return _status_response(404, "NotFound", "the server could not find the requested resource")
        return web.json_response({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReportList",
                                  "metadata": {"resourceVersion": str(self.resource_version)},
                                  "items": list(self.policy_reports.values())})

    async def _get_policy_report(self, request: web.Request) -> web.Response:
        key = (request.match_info["namespace"], request.match_info["name"])
        if not self.policy_report_crd or key not in self.policy_reports:
            return _status_response(404, "NotFound", f'policyreports.wgpolicyk8s.io "{key[1]}" not found')
        return web.json_response(self.policy_reports[key])

    async def _apply_policy_report(self, request: web.Request) -> web.Response:
        if not self.policy_report_crd:
            return _status_response(404, "NotFound", "the server could not find the requested resource")
        if request.content_type != "application/apply-patch+yaml" or not request.query.get("fieldManager"):
            return _status_response(415, "UnsupportedMediaType", "expected a server-side apply with a fieldManager")
        body = await request.json()
        key = (request.match_info["namespace"], request.match_info["name"])
        self.policy_reports[key] = {**body, "metadata": {**body["metadata"],
                                                         "resourceVersion": str(self._next_version())}}
        self.policy_report_writes += 1
        return web.json_response(self.policy_reports[key])

    # ---- internals ------------------------------------------------------------------------------
    def _next_version(self) -> int:
        self.resource_version += 1
        return self.resource_version

    def _key(self, resource: Resource, name: str, namespace: str | None) -> str:
        return f"{namespace or 'default'}/{name}" if resource.namespaced else name

    def _raw_key(self, resource: Resource, raw: Mapping[str, Any]) -> str:
        meta = raw["metadata"]
        return self._key(resource, meta["name"], meta.get("namespace"))

    def _prepare(self, resource: Resource, obj: Mapping[str, Any], version: int) -> JsonDict:
        # Shallow: nested values are shared with the caller, only metadata is copied (it is written).
        raw = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        meta = raw["metadata"] = dict(raw.get("metadata") or {})
        if resource.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta["resourceVersion"] = str(version)
        return raw

    def _write(self, obj: Mapping[str, Any], event_type: str) -> JsonDict:
        resource = BY_KIND[str(obj["kind"])]
        raw = self._prepare(resource, obj, self._next_version())
        key = self._raw_key(resource, raw)
        store = self.objects[resource.plural]
        if event_type == "ADDED" and key in store:
            raise KeyError(f"{resource.kind} {key} already exists")
        if event_type == "MODIFIED" and key not in store:
            raise KeyError(f"{resource.kind} {key} does not exist")
        stored = _stored(raw)
        store[key] = stored
        self._emit(resource, raw["metadata"].get("namespace"), event_type, stored)
        return {"kind": resource.kind, "apiVersion": resource.api_version, **raw}

    def _emit(self, resource: Resource, namespace: str | None, event_type: str, stored: _StoredObject) -> None:
        line = stored.event_line(resource, event_type)
        self.history.append((self.resource_version, resource, namespace, line))
        if self.history_limit is not None and len(self.history) > self.history_limit:
            del self.history[:len(self.history) - self.history_limit]
            self.compacted_before = self.history[0][0] if self.history else self.resource_version + 1
        for watch in self.watches:
            if watch.resource is resource and (watch.namespace is None or watch.namespace == namespace):
                watch.queue.put_nowait(line)

    @web.middleware
    async def _middleware(self, request: web.Request,
                          handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if self.down:
            # A connection that was kept alive across go_down: close it without an answer.
            if request.transport is not None:
                request.transport.abort()
            raise ConnectionResetError("fake API server is down")
        self.requests.append((request.path, dict(request.query)))
        self.calls.append((request.method, request.path, dict(request.query)))
        authorization = request.headers.get("Authorization", "")
        self.authorization_headers.append(authorization)
        if self.token is not None and authorization != f"Bearer {self.token}":
            return _status_response(401, "Unauthorized", "Unauthorized")
        return await handler(request)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            api_version, rest = parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return _status_response(404, "NotFound", "the server could not find the requested resource")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        resource = BY_PATH.get((api_version, rest[0])) if rest and api_version not in self.not_served else None
        if resource is not None and resource.plural in self.forbidden:
            return _status_response(403, "Forbidden", f'{resource.plural} is forbidden: User "system:serviceaccount:'
                                    f'preemptguard:preemptguard" cannot list resource "{resource.plural}"')
        if resource is None or len(rest) > 2 or (namespace is not None and not resource.namespaced):
            return _status_response(404, "NotFound", "the server could not find the requested resource")
        if len(rest) == 2:
            return self._get_one(resource, rest[1], namespace)
        if request.query.get("watch") in ("1", "true"):
            return await self._watch(request, resource, namespace)
        if self.list_delay_seconds:
            await asyncio.sleep(self.list_delay_seconds)
        self.list_pages += 1
        if self.before_list_page is not None:
            self.before_list_page(self.list_pages)
        response = self._list(request, resource, namespace)
        if self.after_list_page is not None:
            self.after_list_page(self.list_pages)
        return response

    def _get_one(self, resource: Resource, name: str, namespace: str | None) -> web.Response:
        stored = self.objects[resource.plural].get(self._key(resource, name, namespace))
        if stored is None:
            group = resource.api_version.split("/")[0] if "/" in resource.api_version else ""
            what = f"{resource.plural}.{group}" if group else resource.plural
            return _status_response(404, "NotFound", f'{what} "{name}" not found')
        body = b'{"kind":"' + resource.kind.encode() + b'","apiVersion":"' + resource.api_version.encode() \
            + b'",' + stored.item_json[1:]
        return web.Response(body=body, content_type="application/json")

    def _list(self, request: web.Request, resource: Resource, namespace: str | None) -> web.Response:
        limit = int(request.query.get("limit") or 0)
        token = request.query.get("continue", "")
        if token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                continuation = self._continuations[state["id"]]
                start = int(state["start"])
            except (ValueError, KeyError):
                return _status_response(
                    410, "Expired", "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.")
            version, lines = continuation.resource_version, continuation.lines
        else:
            version, start = self.resource_version, 0
            lines = [s.item_json for s in self.objects[resource.plural].values()
                     if namespace is None or s.raw["metadata"].get("namespace") == namespace]
        end = start + limit if limit else len(lines)
        meta: JsonDict = {"resourceVersion": str(version)}
        if end < len(lines):
            continuation_id = str(next(self._continuation_ids))
            self._continuations[continuation_id] = _Continuation(version, lines)
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"id": continuation_id, "start": end}).encode()).decode()
            meta["remainingItemCount"] = len(lines) - end
        head = json.dumps({"kind": f"{resource.kind}List", "apiVersion": resource.api_version,
                           "metadata": meta}).encode()
        body = head[:-1] + b',"items":[' + b",".join(lines[start:end]) + b"]}"
        return web.Response(body=body, content_type="application/json")

    async def _watch(self, request: web.Request, resource: Resource, namespace: str | None) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or 0)
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        # History holds every event from ``compacted_before`` on; "0"/absent means "from now".
        expired = 0 < since < self.compacted_before - 1
        if expired and self.watch_expired_as_http_status:
            return _status_response(410, "Expired", f"too old resource version: {since} ({self.resource_version})")
        response = web.StreamResponse(headers={"Content-Type": "application/json",
                                               "Transfer-Encoding": "chunked"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if expired:
            await response.write(_error_line(since, self.resource_version))
            await response.write_eof()
            return response
        watch = _Watch(resource, namespace, request.query.get("allowWatchBookmarks") == "true", request)
        # Replay and subscribe in one step (no await in between), so no event is lost or repeated.
        for version, res, ns, line in self.history:
            if version > since and res is resource and (namespace is None or ns == namespace):
                watch.queue.put_nowait(line)
        self.watches.add(watch)
        try:
            await asyncio.wait_for(self._stream(watch, response), timeout)
        except (TimeoutError, ConnectionResetError):
            pass
        finally:
            self.watches.discard(watch)
        if watch.request.transport is not None and not watch.request.transport.is_closing():
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
        return response

    async def _stream(self, watch: _Watch, response: web.StreamResponse) -> None:
        while True:
            line = await watch.queue.get()
            if line is None:
                return
            batch = [line]
            while not watch.queue.empty() and len(batch) < 2000:
                nxt = watch.queue.get_nowait()
                if nxt is None:
                    await response.write(b"".join(batch))
                    return
                batch.append(nxt)
            await response.write(b"".join(batch))


def _stored(raw: JsonDict) -> _StoredObject:
    return _StoredObject(raw, json.dumps(raw, separators=(",", ":")).encode())


def _error_line(since: int, current: int | None = None) -> bytes:
    message = f"too old resource version: {since} ({current if current is not None else since})"
    return json.dumps({"type": "ERROR", "object": status_object(410, "Expired", message)}).encode() + b"\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# ---- object builders --------------------------------------------------------------------------------
def priority_class(name: str, value: int, *, global_default: bool = False) -> dict[str, Any]:
    return {"kind": "PriorityClass", "apiVersion": "scheduling.k8s.io/v1", "metadata": {"name": name},
            "value": value, "globalDefault": global_default}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name, "labels": labels}}


def node(name: str, cpu: str = "4", memory: str = "16Gi") -> dict[str, Any]:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}}


def pod(name: str, ns: str = "default", *, node_name: str = "", cpu: str = "100m", memory: str = "128Mi",
        priority_class_name: str = "", priority: int | None = None, phase: str = "Running",
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    if priority is not None:
        spec["priority"] = priority
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": name}},
            "spec": spec, "status": {"phase": phase, "startTime": "2024-05-01T10:00:00Z"}}


def pdb(name: str, ns: str, match_labels: dict[str, str], allowed: int = 1) -> dict[str, Any]:
    return {"kind": "PodDisruptionBudget", "apiVersion": "policy/v1", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": match_labels}}, "status": {"disruptionsAllowed": allowed}}


def quota(name: str, ns: str, pods: str = "10") -> dict[str, Any]:
    return {"kind": "ResourceQuota", "apiVersion": "v1", "metadata": {"name": name, "namespace": ns},
            "spec": {"hard": {"pods": pods}}, "status": {"hard": {"pods": pods}, "used": {"pods": "0"}}}


def seed_cluster(server: FakeApiServer) -> None:
    """Three namespaces, two nodes, classes, five pods (bound, pending, terminal), a PDB and a quota each."""
    for obj in [
        priority_class("high", 1000), priority_class("low", 10, global_default=True),
        namespace("team-a", tenant="x"), namespace("team-b", tenant="y"), namespace("default"),
        node("node-1"), node("node-2", cpu="8"),
        pod("web-0", "team-a", node_name="node-1", priority_class_name="high", priority=1000),
        pod("web-1", "team-a", node_name="node-2", priority_class_name="high", priority=1000, labels={"app": "web"}),
        pod("batch-0", "team-b", node_name="node-1", priority_class_name="low", priority=10, cpu="2"),
        pod("pending", "team-b", priority_class_name="low", priority=10),
        pod("done", "team-b", node_name="node-2", phase="Succeeded"),
        pdb("web", "team-a", {"app": "web"}), quota("pods", "team-b"),
    ]:
        server.create(obj)


# ---- comparison -----------------------------------------------------------------------------------
def fresh_state(server: FakeApiServer) -> ClusterState:
    """A ClusterState built from a fresh full list of the fake server's objects."""
    state = ClusterState()
    for raw in server.all_objects():
        obj = object_from_dict(raw)
        assert obj is not None
        state.upsert(obj)
    return state


def state_differences(expected: ClusterState, actual: ClusterState) -> list[str]:
    """Kind by kind and index by index, what differs between two states (empty when equal)."""
    problems = []
    for kind in KIND_OF.values():
        want = {object_key(o): o for o in expected.objects(kind)}
        got = {object_key(o): o for o in actual.objects(kind)}
        if len(got) != sum(1 for _ in actual.objects(kind)):
            problems.append(f"{kind}: duplicated objects")
        if want != got:
            problems.append(f"{kind}: missing {sorted(want.keys() - got.keys())}, extra "
                            f"{sorted(got.keys() - want.keys())}, changed "
                            f"{sorted(k for k in want.keys() & got.keys() if want[k] != got[k])}")
    for index in ("pods_by_node", "pods_by_namespace", "pods_by_priority_class", "nominated_by_node", "node_usage",
                  "pdbs_by_namespace", "quotas_by_namespace"):
        if getattr(expected, index) != getattr(actual, index):
            problems.append(f"index {index} differs")
    return problems


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


async def wait_until_consistent(server: FakeApiServer, state: ClusterState, timeout: float = 5.0) -> None:
    """Wait until ``state`` equals a fresh list of the server; fails with the differences."""
    deadline = time.monotonic() + timeout
    while True:
        problems = state_differences(fresh_state(server), state)
        if not problems:
            return
        if time.monotonic() > deadline:
            raise AssertionError("informer state differs from the server: " + "; ".join(problems))
        await asyncio.sleep(0.01)
