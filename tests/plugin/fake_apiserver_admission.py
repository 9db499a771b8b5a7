"""A fake kube-apiserver on loopback HTTPS for the plugin's dry-run path.

``POST /api/v1/namespaces/<ns>/pods?dryRun=All`` authenticates the bearer token, sends an AdmissionReview
(``dryRun: true``, ``userInfo`` of the token's user) to a real PreemptGuard server's ``/mutate/pods`` over TLS
(verified against its certificate, as a webhook's ``caBundle``), applies the returned JSONPatch, and answers
``201`` with the object and the webhook's warnings as ``Warning: 299 - "<text>"`` headers, like the real API
server. A denial becomes the API server's Status (``admission webhook "..." denied the request: ...``).
An unknown token is the anonymous user, whom RBAC forbids everything (403); the ``expired`` token is 401.
Single-object GETs serve the workloads and pods a test stored, for ``TYPE/NAME``.

The informer fake in tests/sources/fake_apiserver.py serves list/watch only, so this small server stands alone.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import ssl
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from webhook.certs.issuance import self_signed_serving_certificate
from webhook.routes import MUTATE_PODS_PATH, PODS_WEBHOOK
from webhook.server.tls import server_context

JsonDict = dict[str, Any]
EXPIRED_TOKEN = "expired"

# plural -> (apiVersion, kind) of the objects a test may store and GET.
RESOURCES = {
    "pods": ("v1", "Pod"), "deployments": ("apps/v1", "Deployment"), "statefulsets": ("apps/v1", "StatefulSet"),
    "replicasets": ("apps/v1", "ReplicaSet"), "jobs": ("batch/v1", "Job"), "cronjobs": ("batch/v1", "CronJob"),
    "nodes": ("v1", "Node"),
}
PLURAL_OF = {kind: plural for plural, (_, kind) in RESOURCES.items()}


@dataclass(frozen=True)
class User:
    username: str
    groups: tuple[str, ...] = ("system:authenticated",)

    def user_info(self) -> JsonDict:
        return {"username": self.username, "uid": f"uid-{self.username}", "groups": list(self.groups)}


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))
USER_KEY = web.RequestKey("user", User)


def status(code: int, reason: str, message: str, warnings: Iterable[str] = ()) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    return web.json_response(body, status=code, headers=warning_headers(warnings))


def warning_headers(warnings: Iterable[str]) -> CIMultiDict[str]:
    """One ``Warning: 299 - "<text>"`` header per warning (quotes and backslashes escaped, RFC 7230)."""
    headers: CIMultiDict[str] = CIMultiDict()
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        headers.add("Warning", f'299 - "{escaped}"')
    return headers


# ---- JSONPatch (RFC 6902: the operations admission webhooks send) ------------------------------------
def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"bad JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def apply_json_patch(document: JsonDict, patch: Iterable[Mapping[str, Any]]) -> JsonDict:
    result = copy.deepcopy(document)
    for op in patch:
        *parents, last = _pointer(str(op["path"]))
        target: Any = result
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        kind = op["op"]
        if kind == "test":
            actual = target[int(last)] if isinstance(target, list) else target.get(last)
            if actual != op["value"]:
                raise ValueError(f"test failed at {op['path']}")
        elif kind in ("add", "replace"):
            if isinstance(target, list):
                index = len(target) if last == "-" else int(last)
                if kind == "add":
                    target.insert(index, copy.deepcopy(op["value"]))
                else:
                    target[index] = copy.deepcopy(op["value"])
            else:
                if kind == "replace" and last not in target:
                    raise ValueError(f"replace of a missing member {op['path']}")
                target[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise ValueError(f"unsupported JSONPatch op {kind!r}")
    return result


# ---- the server -------------------------------------------------------------------------------------
@dataclass
class AdmissionApiServer:
    """``async with AdmissionApiServer(tokens=..., webhook_url=..., webhook_ca=...) as api:``"""

    tokens: Mapping[str, User]
    webhook_url: str | None = None  # the PreemptGuard server; None: no webhook installed
    webhook_ca: bytes | None = None
    work_dir: Path | None = None
    # The client certificate presented to the webhook (its --client-ca), as the AdmissionConfiguration gives it.
    client_certificate: tuple[Path, Path] | None = None
    objects: dict[tuple[str, str, str], JsonDict] = field(default_factory=dict)  # (plural, ns, name)
    reviews: list[JsonDict] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    port: int = 0
    cert_pem: bytes = b""
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def __aenter__(self) -> AdmissionApiServer:
        assert self.work_dir is not None, "work_dir holds the serving certificate"
        self.cert_pem, key_pem = self_signed_serving_certificate(["127.0.0.1", "localhost"], 1)
        (self.work_dir / "apiserver.crt").write_bytes(self.cert_pem)
        (self.work_dir / "apiserver.key").write_bytes(key_pem)
        context = server_context(self.work_dir / "apiserver.crt", self.work_dir / "apiserver.key")
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_post("/api/v1/namespaces/{namespace}/pods", self._create_pod)
        app.router.add_get("/api/v1/namespaces/{namespace}/{plural}/{name}", self._get)
        app.router.add_get("/api/v1/nodes", self._list_nodes)
        app.router.add_get("/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}", self._get)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        client_context = ssl.create_default_context(cadata=self.webhook_ca.decode()) if self.webhook_ca else None
        if client_context is not None and self.client_certificate is not None:
            client_context.load_cert_chain(*(str(path) for path in self.client_certificate))
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context or True))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def store(self, obj: Mapping[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[(PLURAL_OF[obj["kind"]], meta.get("namespace") or "default", meta["name"])] = dict(obj)

    def kubeconfig(self, token: str, *, context: str = "fake", namespace: str | None = None) -> JsonDict:
        ctx: JsonDict = {"cluster": "fake", "user": "tester"}
        if namespace:
            ctx["namespace"] = namespace
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {
                "server": self.url, "certificate-authority-data": base64.b64encode(self.cert_pem).decode()}}],
            "users": [{"name": "tester", "user": {"token": token}}],
            "contexts": [{"name": context, "context": ctx}],
        }

    # ---- authentication and authorisation ---------------------------------------------------------
    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.path, dict(request.query)))
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer "):] if header.startswith("Bearer ") else ""
        if token == EXPIRED_TOKEN:
            return status(401, "Unauthorized", "Unauthorized")
        user = self.tokens.get(token, ANONYMOUS)
        request[USER_KEY] = user
        if user is ANONYMOUS:
            info = request.match_info
            plural = info.get("plural", "pods")
            group = info.get("group", "")
            verb = "create" if request.method == "POST" else "get"
            what = f"{plural}.{group}" if group else plural
            name = f' "{info["name"]}"' if "name" in info else ""
            return status(403, "Forbidden", f'{what}{name} is forbidden: User "{user.username}" cannot {verb} '
                          f'resource "{plural}" in API group "{group}" in the namespace "{info.get("namespace")}"')
        response: web.StreamResponse = await handler(request)
        return response

    # ---- GET ----------------------------------------------------------------------------------------
    async def _list_nodes(self, request: web.Request) -> web.Response:
        items = [obj for (plural, _, _), obj in self.objects.items() if plural == "nodes"]
        return web.json_response({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items})

    async def _get(self, request: web.Request) -> web.Response:
        info = request.match_info
        plural = info["plural"]
        obj = self.objects.get((plural, info["namespace"], info["name"]))
        group = info.get("group", "")
        if plural not in RESOURCES or obj is None:
            what = f"{plural}.{group}" if group else plural
            return status(404, "NotFound", f'{what} "{info["name"]}" not found')
        return web.json_response(obj)

    # ---- dry-run create -----------------------------------------------------------------------------
    async def _create_pod(self, request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        if request.query.get("dryRun") != "All":
            return status(400, "BadRequest", "this fake API server serves dry-run creates only")
        pod = await request.json()
        meta = pod.setdefault("metadata", {})
        if meta.get("namespace") not in (None, "", namespace):
            return status(400, "BadRequest", "the namespace of the provided object does not match the namespace "
                                             "sent on the request")
        meta["namespace"] = namespace
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._names):05d}"[:63]
        if not meta.get("name"):
            return status(422, "Invalid", 'Pod "" is invalid: metadata.name: Required value: name or generateName '
                                          "is required")
        if ("pods", namespace, meta["name"]) in self.objects:
            return status(409, "AlreadyExists", f'pods "{meta["name"]}" already exists')
        warnings: list[str] = []
        if self.webhook_url is not None:
            try:
                response = await self._review(request[USER_KEY], namespace, pod)
            except (aiohttp.ClientError, OSError) as exc:
                return status(500, "InternalError", f'Internal error occurred: failed calling webhook '
                                                    f'"{PODS_WEBHOOK}": {exc}')
            warnings = list(response.get("warnings") or [])
            if not response.get("allowed"):
                st = response.get("status") or {}
                code = int(st.get("code") or 403)
                return status(code if code >= 400 else 400, str(st.get("reason") or ""),
                              f'admission webhook "{PODS_WEBHOOK}" denied the request: {st.get("message", "")}',
                              warnings)
            if response.get("patch"):
                pod = apply_json_patch(pod, json.loads(base64.b64decode(response["patch"])))
        pod["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp="2026-01-01T00:00:00Z")
        pod.setdefault("status", {"phase": "Pending", "qosClass": "Burstable"})
        return web.json_response(pod, status=201, headers=warning_headers(warnings))

    async def _review(self, user: User, namespace: str, pod: JsonDict) -> JsonDict:
        assert self._session is not None and self.webhook_url is not None
        gvk = {"group": "", "version": "v1", "kind": "Pod"}
        gvr = {"group": "", "version": "v1", "resource": "pods"}
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": pod["metadata"]["name"], "namespace": namespace, "operation": "CREATE",
            "userInfo": user.user_info(), "object": pod, "oldObject": None, "dryRun": True,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}}}
        self.reviews.append(review)
        async with self._session.post(self.webhook_url.rstrip("/") + MUTATE_PODS_PATH, json=review) as answer:
            answer.raise_for_status()
            body = await answer.json()
        result: JsonDict = body["response"]
        return result
