"""A tiny Kubernetes API server on 127.0.0.1 that stores objects and records every request.

It resolves each request the way kube-apiserver's RequestInfo does (verb, API group, resource, namespace,
name), so tests can hold the recorded calls against the RBAC declared in webhook/rbac.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web


@dataclass(frozen=True)
class RecordedRequest:
    verb: str
    api_group: str
    resource: str
    namespace: str
    name: str
    content_type: str
    body: Any


def request_info(method: str, path: str, watch: bool) -> tuple[str, str, str, str, str]:
    """(verb, group, resource, namespace, name) of a resource request, like apiserver's RequestInfoFactory."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = parts[1], parts[3:]
    else:
        raise ValueError(f"not a resource path: {path}")
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    verb = {
        "GET": "get" if name else ("watch" if watch else "list"),
        "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete",
    }[method]
    return verb, group, resource, namespace, name


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                              "reason": reason, "message": message}, status=code)


def strategic_merge_webhooks(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """Strategic merge of a webhook configuration patch: ``webhooks`` merge by ``name``, maps recursively."""

    def merge_maps(dst: dict[str, Any], src: dict[str, Any]) -> None:
        for key, value in src.items():
            if isinstance(value, dict) and isinstance(dst.get(key), dict):
                merge_maps(dst[key], value)
            else:
                dst[key] = copy.deepcopy(value)

    for key, value in patch.items():
        if key == "webhooks":
            by_name = {w["name"]: w for w in target.setdefault("webhooks", [])}
            for entry in value:
                if entry["name"] in by_name:
                    merge_maps(by_name[entry["name"]], entry)
                else:
                    target["webhooks"].append(copy.deepcopy(entry))
        elif key in ("apiVersion", "kind"):
            continue
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_maps(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class FakeApiServer:
    objects: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    url: str = ""
    fail_next: dict[str, int] = field(default_factory=dict)  # verb -> HTTP status to answer once
    _version: int = 100
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def put(self, api_group: str, resource: str, obj: dict[str, Any]) -> None:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("resourceVersion", self.next_version())
        self.objects[(api_group, resource, meta.get("namespace", ""), meta["name"])] = copy.deepcopy(obj)

    def get(self, api_group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((api_group, resource, namespace, name))

    def calls(self) -> list[tuple[str, str, str]]:
        return [(r.verb, r.api_group, r.resource) for r in self.requests]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("true", "1")
        try:
            verb, group, resource, namespace, name = request_info(request.method, request.path, watch)
        except (ValueError, KeyError, IndexError):
            return _status(404, "NotFound", f"no route {request.path}")
        body = await request.json() if request.can_read_body else None
        self.requests.append(RecordedRequest(verb, group, resource, namespace, name,
                                             request.headers.get("Content-Type", ""), copy.deepcopy(body)))
        if verb in self.fail_next:
            return _status(self.fail_next.pop(verb), "Injected", "injected failure")
        key = (group, resource, namespace, name)
        if verb == "get":
            obj = self.objects.get(key)
            return web.json_response(obj) if obj else _status(404, "NotFound", f'{resource} "{name}" not found')
        if verb == "list":
            items = [o for (g, r, ns, _), o in self.objects.items()
                     if g == group and r == resource and (not namespace or ns == namespace)]
            return web.json_response({"kind": "List", "metadata": {"resourceVersion": str(self._version)},
                                      "items": items})
        if verb == "watch":
            return await self._watch(request)
        if verb == "create":
            name = body["metadata"]["name"]
            key = (group, resource, namespace, name)
            if key in self.objects:
                return _status(409, "AlreadyExists", f'{resource} "{name}" already exists')
            self.put(group, resource, body)
            return web.json_response(self.objects[key], status=201)
        if verb == "update":
            current = self.objects.get(key)
            if current is None:
                return _status(404, "NotFound", f'{resource} "{name}" not found')
            sent = body["metadata"].get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                return _status(409, "Conflict", "the object has been modified")
            body["metadata"]["resourceVersion"] = self.next_version()
            self.objects[key] = body
            return web.json_response(body)
        if verb == "patch":
            current = self.objects.get(key)
            if current is None:
                return _status(404, "NotFound", f'{resource} "{name}" not found')
            if request.headers.get("Content-Type") != "application/strategic-merge-patch+json":
                return _status(415, "UnsupportedMediaType", "fake supports strategic merge patch only")
            strategic_merge_webhooks(current, body)
            current["metadata"]["resourceVersion"] = self.next_version()
            return web.json_response(current)
        return _status(405, "MethodNotAllowed", verb)

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self._version)}}}
        await response.write(json.dumps(bookmark).encode() + b"\n")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=float(request.query.get("timeoutSeconds", "5")))
        return response




def manifest_webhook_configurations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(api group, resource, object) of both webhook configurations in manifests/base/webhooks.yaml."""
    path = Path(__file__).resolve().parents[2] / "manifests" / "base" / "webhooks.yaml"
    for obj in yaml.safe_load_all(path.read_text()):
        resource = obj["kind"].lower() + "s"
        yield "admissionregistration.k8s.io", resource, obj
