"""webhook/kubeapi.py, the one door to the Kubernetes API: what every caller gets back for each kind of answer."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from webhook.errors import ApiError, ClusterUnavailable, ConfigError
from webhook.kubeapi import KubeClient, parse_warning_headers

TOKEN = "door-test-token"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def write_kubeconfig(path: Path, server: str, *, namespace: str = "team-a") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "door",
        "clusters": [{"name": "door", "cluster": {"server": server}}],
        "users": [{"name": "door", "user": {"token": TOKEN}}],
        "contexts": [{"name": "door", "context": {"cluster": "door", "user": "door", "namespace": namespace}}],
    }), encoding="utf-8")
    return path


@pytest.fixture
async def serve(aiohttp_server: Any, tmp_path: Path) -> AsyncIterator[Callable[[Handler], Awaitable[KubeClient]]]:
    """Serves one handler for every path and opens a client on it; closes the clients at the end."""
    clients: list[KubeClient] = []

    async def start(handler: Handler, **options: Any) -> KubeClient:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        server = await aiohttp_server(app)
        kubeconfig = write_kubeconfig(tmp_path / f"kubeconfig-{len(clients)}", f"http://127.0.0.1:{server.port}")
        client = await KubeClient.connect(kubeconfig=str(kubeconfig), **options)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}


async def test_a_2xx_answer_is_its_object_with_the_warnings(serve: Any) -> None:
    seen: list[tuple[str, str, str, Any]] = []

    async def handler(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        seen.append((request.method, request.path_qs, request.headers["Authorization"], body))
        return web.json_response({"kind": "Pod", "metadata": {"name": "p"}}, status=201,
                                 headers={"Warning": '299 - "would preempt 2 pods"'})

    client = await serve(handler)
    assert client.namespace == "team-a" and client.server.startswith("http://127.0.0.1:")
    answer = await client.request("POST", "/api/v1/namespaces/team-a/pods", query=[("dryRun", "All")],
                                  body={"kind": "Pod"})
    assert (answer.status, answer.json(), answer.warnings) == (
        201, {"kind": "Pod", "metadata": {"name": "p"}}, ("would preempt 2 pods",))
    assert await client.get("/api/v1/namespaces/team-a/pods/p") == {"kind": "Pod", "metadata": {"name": "p"}}
    assert seen[0] == ("POST", "/api/v1/namespaces/team-a/pods?dryRun=All", f"Bearer {TOKEN}", {"kind": "Pod"})
    assert seen[1][:2] == ("GET", "/api/v1/namespaces/team-a/pods/p")


async def test_any_other_status_is_an_api_error_with_the_status_never_the_body(serve: Any) -> None:
    answers = iter([
        web.json_response({**status(409, "AlreadyExists", 'secrets "tls" already exists'), "data": "c2VjcmV0"},
                          status=409, headers={"Warning": '299 - "deprecated"'}),
        web.Response(status=502, text="<html>bad gateway from a proxy</html>"),
        web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401),
    ])

    async def handler(request: web.Request) -> web.Response:
        return next(answers)

    client = await serve(handler)
    with pytest.raises(ApiError) as conflict:
        await client.put("/api/v1/namespaces/x/secrets/tls", {"data": {"tls.key": "c2VjcmV0"}})
    error = conflict.value
    assert (error.code, error.reason, error.message, error.warnings) == (
        409, "AlreadyExists", 'secrets "tls" already exists', ("deprecated",))
    assert str(error) == 'PUT /api/v1/namespaces/x/secrets/tls: HTTP 409: secrets "tls" already exists'
    assert "c2VjcmV0" not in str(error) and error.exit_code == 3
    with pytest.raises(ApiError, match=r"GET /healthz: HTTP 502: <html>bad gateway from a proxy</html>"):
        await client.get("/healthz")
    with pytest.raises(ApiError) as unauthorized:
        await client.get("/api/v1/nodes")
    assert str(unauthorized.value) == "You must be logged in to the server (Unauthorized)"


async def test_no_answer_is_cluster_unavailable_naming_the_server(serve: Any, tmp_path: Path) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({})

    client = await serve(slow, timeout=0.2, timeout_text="200ms (--request-timeout)")
    with pytest.raises(ClusterUnavailable) as timed_out:
        await client.get("/api/v1/nodes")
    assert str(timed_out.value) == f"cannot reach the API server {client.server}: no answer within 200ms " \
                                   "(--request-timeout)"
    with pytest.raises(ClusterUnavailable, match=r"no answer within 0\.1s"):
        await client.get("/api/v1/nodes", timeout=0.1)

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = await KubeClient.connect(kubeconfig=str(write_kubeconfig(tmp_path / "gone", f"http://127.0.0.1:{port}")))
    try:
        with pytest.raises(ClusterUnavailable, match=rf"^cannot reach the API server http://127.0.0.1:{port}: "):
            await gone.post("/api/v1/namespaces/x/events", {"kind": "Event"})
    finally:
        await gone.close()


async def test_an_answer_that_is_not_a_json_object_is_cluster_unavailable(serve: Any) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="[1, 2]", content_type="application/json")

    client = await serve(handler)
    with pytest.raises(ClusterUnavailable, match="answered with no JSON object"):
        await client.get("/api/v1/nodes")


async def test_watch_yields_events_across_chunks_and_raises_the_status(serve: Any) -> None:
    events = [{"type": "ADDED", "object": {"metadata": {"name": f"n{i}", "resourceVersion": str(i)}}} for i in range(3)]
    text = "".join(json.dumps(e) + "\n" for e in events).encode()

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("resourceVersion") == "old":
            return web.json_response(status(410, "Expired", "too old resource version: 1 (5)"), status=410)
        if request.query.get("resourceVersion") == "garbled":
            return web.Response(text='{"type": "ADDED"\n')
        response = web.StreamResponse()
        await response.prepare(request)
        for start in range(0, len(text), 7):  # events split across chunks, and several in one
            await response.write(text[start:start + 7])
            await asyncio.sleep(0)
        return response

    client = await serve(handler)
    async with client.watch("/api/v1/nodes", query=[("watch", "true")]) as stream:
        assert [event async for event in stream] == events
    with pytest.raises(ApiError) as expired:
        async with client.watch("/api/v1/nodes", query=[("resourceVersion", "old")]):
            pass
    assert expired.value.expired and expired.value.message == "too old resource version: 1 (5)"
    with pytest.raises(ClusterUnavailable, match="not JSON"):
        async with client.watch("/api/v1/nodes", query=[("resourceVersion", "garbled")]) as stream:
            [event async for event in stream]


async def test_a_client_that_is_not_open_answers_nothing() -> None:
    with pytest.raises(ClusterUnavailable, match="not started"):
        await KubeClient().get("/api/v1/nodes")


async def test_configuration_errors_name_what_could_not_be_loaded(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"cannot load kubeconfig {tmp_path / 'missing'}: file not found")):
        await KubeClient.connect(kubeconfig=str(tmp_path / "missing"))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="cannot load kubeconfig"):
        await KubeClient.connect(kubeconfig=str(kubeconfig), context="no-such-context")
    # Inside a pod (KUBERNETES_SERVICE_HOST) with nothing named, the service account is used.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    with pytest.raises(ConfigError, match="cannot load in-cluster config"):
        await KubeClient.connect()
    client = await KubeClient.connect(kubeconfig=str(kubeconfig))  # a named kubeconfig wins
    await client.close()


def test_warning_headers() -> None:
    assert parse_warning_headers(['299 - "one", 299 - "two, with a comma"', '199 agent "misc"']) == ["one",
                                                                                                    "two, with a comma"]
