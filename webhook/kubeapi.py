"""The one door to the Kubernetes API: one client factory, one way to send a request and read a watch, and every
failure mapped once into the error tree (as lightkube's generic client does).

``KubeClient.open`` builds the connection from the pod's service account (in-cluster) or a kubeconfig with
kubernetes-asyncio's loaders: TLS, bearer tokens, token files (re-read by the in-cluster loader), client
certificates and exec credential plugins, whose tokens are refreshed in the background until ``close``. Requests
skip kubernetes-asyncio's generated models: objects travel as raw JSON read by orjson (the informers turn them
straight into the slim model, ``webhook.cluster.reader``).

What a caller gets back from every request:

- a 2xx answer: its JSON object (``get``, ``post``, ``put``, ``patch``), or an ``ApiAnswer`` that also carries
  the ``Warning`` headers (``request``); ``watch`` yields the events of a stream;
- any other status: ``ApiError`` with the API's ``Status`` (code, reason, message) and warnings, never the body.
  kubernetes-asyncio's ``call_api`` with ``_preload_content=False`` does not raise on a status: this module is
  the one place that looks;
- no answer (connection, TLS, timeout) or one that is not JSON: ``ClusterUnavailable`` naming the server.

kubernetes-asyncio and aiohttp are imported only when a client opens: offline runs never load them.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from webhook.errors import ApiError, ClusterUnavailable, ConfigError
from webhook.tasks import cancel_and_wait

if TYPE_CHECKING:
    import asyncio

    import aiohttp
    from kubernetes_asyncio.client import ApiClient

JsonObject = dict[str, Any]
Query = Sequence[tuple[str, str]]

JSON = "application/json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML: server-side apply takes it as it is
DEFAULT_KUBECONFIG = "~/.kube/config"

_WARNING_RE = re.compile(r'\s*(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"(?:\s+"[^"]*")?\s*(?:,|$)')


def parse_warning_headers(values: Iterable[str]) -> list[str]:
    """The texts of RFC 7234 ``Warning`` headers with code 299, as the API server sends admission warnings
    (``299 - "text"``; k8s.io/apimachinery/pkg/util/net.ParseWarningHeaders). Several may share a header."""
    texts: list[str] = []
    for value in values:
        position = 0
        while position < len(value):
            match = _WARNING_RE.match(value, position)
            if match is None:
                break
            if match.group(1) == "299":
                texts.append(re.sub(r"\\(.)", r"\1", match.group(3)))
            position = match.end()
    return texts


def one_line(text: str) -> str:
    return " ".join(text.split())


def describe(exc: BaseException) -> str:
    """One line for a failure: its message, or its type when it has none."""
    return one_line(str(exc)) or type(exc).__name__


def api_error(method: str, path: str, code: int, status: object, warnings: tuple[str, ...] = ()) -> ApiError:
    """The ``ApiError`` of a ``Status`` object (an error answer's body, or a watch's ERROR event)."""
    if not isinstance(status, Mapping):
        return ApiError(method, path, code, "", one_line(str(status))[:200] if status else "", warnings)
    status_code = status.get("code")
    return ApiError(method, path, status_code if isinstance(status_code, int) and status_code else code,
                    str(status.get("reason") or ""), one_line(str(status.get("message") or "")), warnings)


def _status_of(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")


def load_client_library() -> None:
    """Import kubernetes-asyncio now (about a second), e.g. before a clock starts; ``ImportError`` without it."""
    import kubernetes_asyncio.client
    import kubernetes_asyncio.config.kube_config  # noqa: F401


@dataclass(frozen=True, slots=True)
class Timeout:
    """How long a request may take: ``total`` for all of it, ``connect`` to connect, ``read`` between two reads
    (a watch that may stay open for minutes bounds its silence, not its length). None: no bound."""

    total: float | None = None
    connect: float | None = None
    read: float | None = None


# A request's bound: seconds for the whole request, a ``Timeout``, or None for the client's own.
Wait = float | Timeout | None


@dataclass(frozen=True, slots=True)
class ApiAnswer:
    """A 2xx answer: its status, its body (JSON) and the texts of its ``Warning`` headers."""

    status: int
    body: bytes
    warnings: tuple[str, ...] = ()

    def json(self) -> Any:
        """The decoded body, or None when it is not JSON."""
        try:
            return orjson.loads(self.body)
        except ValueError:
            return None


class KubeClient:
    """The API server of a kubeconfig context, or of the pod's service account: ``kubeconfig`` (one file or
    several), ``context`` and ``in_cluster`` as ``open_connection`` takes them, opened by ``open``.

    ``timeout`` (seconds, None for none) bounds each whole request unless the request names its own;
    ``timeout_text`` says it in errors (``2s (--request-timeout)``); ``query`` goes on every request (kubectl's
    ``timeout=``).
    """

    def __init__(self, *, kubeconfig: str | Sequence[str] | None = None, context: str | None = None,
                 in_cluster: bool | None = None, timeout: float | None = None, timeout_text: str = "",
                 query: Query = ()) -> None:
        self.kubeconfig = [kubeconfig] if isinstance(kubeconfig, str) else list(kubeconfig or ())
        self.context = context
        self.in_cluster = in_cluster
        self.timeout = timeout
        self.timeout_text = timeout_text or (f"{timeout:g}s" if timeout else "")
        self.query = tuple(query)
        self.server = ""  # the API server's URL, once open
        self.namespace = "default"  # the kubeconfig context's namespace, once open
        self._connection: Connection | None = None

    @classmethod
    async def connect(cls, **options: Any) -> KubeClient:
        """A client opened with ``options`` (those of ``KubeClient``)."""
        client = cls(**options)
        await client.open()
        return client

    @property
    def is_open(self) -> bool:
        return self._connection is not None

    async def open(self) -> None:
        """Load the configuration and make the connection pool; ``ConfigError`` names what could not be loaded."""
        if self._connection is None:
            self._connection = await open_connection(self.kubeconfig, self.context, self.in_cluster)
            self.server, self.namespace = self._connection.server, self._connection.namespace

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await cancel_and_wait(connection.token_refresh)
            await connection.client.close()

    # ---- requests --------------------------------------------------------------------------------------------
    async def request(self, method: str, path: str, *, query: Query = (), body: object = None,
                      content_type: str = JSON, timeout: Wait = None) -> ApiAnswer:
        """One request; a 2xx ``ApiAnswer``, else ``ApiError`` or ``ClusterUnavailable`` (module doc)."""
        response = await self._send(method, path, query, body, content_type, timeout)
        try:
            raw = await self._read(response, timeout)
        finally:
            response.release()
        warnings = tuple(parse_warning_headers(response.headers.getall("Warning", [])))
        if not 200 <= response.status < 300:
            raise api_error(method, path, response.status, _status_of(raw), warnings)
        return ApiAnswer(response.status, raw, warnings)

    async def get(self, path: str, *, query: Query = (), timeout: Wait = None) -> JsonObject:
        return self._object("GET", path, await self.request("GET", path, query=query, timeout=timeout))

    async def post(self, path: str, body: object, *, query: Query = (), timeout: Wait = None) -> JsonObject:
        return self._object("POST", path, await self.request("POST", path, query=query, body=body, timeout=timeout))

    async def put(self, path: str, body: object, *, timeout: Wait = None) -> JsonObject:
        return self._object("PUT", path, await self.request("PUT", path, body=body, timeout=timeout))

    async def patch(self, path: str, body: object, *, content_type: str = STRATEGIC_MERGE_PATCH, query: Query = (),
                    timeout: Wait = None) -> JsonObject:
        answer = await self.request("PATCH", path, query=query, body=body, content_type=content_type, timeout=timeout)
        return self._object("PATCH", path, answer)

    async def apply(self, path: str, body: object, *, field_manager: str, timeout: Wait = None) -> JsonObject:
        """Server-side apply of ``body`` at ``path`` (the object's own path): creates it or updates the fields
        ``field_manager`` owns, taking over conflicting ones (``force``), without reading it first."""
        return await self.patch(path, body, content_type=APPLY_PATCH, timeout=timeout,
                                query=(("fieldManager", field_manager), ("force", "true")))

    @contextlib.asynccontextmanager
    async def watch(self, path: str, *, query: Query = (), timeout: Wait = None
                    ) -> AsyncIterator[AsyncIterator[JsonObject]]:
        """A watch (or any newline-delimited JSON stream) of ``path``: entered once the server has answered 2xx,
        it yields the events as they arrive until the server ends the stream."""
        response = await self._send("GET", path, query, None, JSON, timeout)
        events = self._events(path, response, timeout)
        try:
            if not 200 <= response.status < 300:
                raw = await self._read(response, timeout)
                raise api_error("GET", path, response.status, _status_of(raw))
            yield events
        finally:
            await events.aclose()
            response.release()

    # ---- the one call of the API client, and the one reading of its answers ---------------------------------
    async def _send(self, method: str, path: str, query: Query, body: object, content_type: str,
                    timeout: Wait) -> aiohttp.ClientResponse:
        if self._connection is None:
            raise ClusterUnavailable("the cluster client is not started")
        import aiohttp

        try:
            response: aiohttp.ClientResponse = await self._connection.client.call_api(
                path, method, query_params=[*self.query, *query], body=body,
                header_params={"Accept": JSON, "Content-Type": content_type}, auth_settings=["BearerToken"],
                _preload_content=False, _request_timeout=self._client_timeout(timeout))
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ClusterUnavailable(f"cannot verify the API server certificate of {self.server}: "
                                     f"{exc.certificate_error}") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise self._unreachable(exc, timeout) from exc
        return response

    async def _read(self, response: aiohttp.ClientResponse, timeout: Wait) -> bytes:
        import aiohttp

        try:
            return await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise self._unreachable(exc, timeout) from exc

    async def _events(self, path: str, response: aiohttp.ClientResponse,
                      timeout: Wait) -> AsyncGenerator[JsonObject, None]:
        import aiohttp

        pending = b""
        try:
            async for chunk in response.content.iter_any():
                if b"\n" not in chunk:
                    pending += chunk
                    continue
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if line.strip():
                        yield _event(path, line)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise self._unreachable(exc, timeout) from exc
        if pending.strip():
            yield _event(path, pending)

    def _object(self, method: str, path: str, answer: ApiAnswer) -> JsonObject:
        document = answer.json() if answer.body else {}
        if not isinstance(document, dict):
            raise ClusterUnavailable(f"{method} {path}: the API server {self.server} answered with no JSON object")
        return document

    def _client_timeout(self, timeout: Wait) -> aiohttp.ClientTimeout:
        import aiohttp

        if timeout is None:
            return aiohttp.ClientTimeout(total=self.timeout)
        if isinstance(timeout, Timeout):
            return aiohttp.ClientTimeout(total=timeout.total, sock_connect=timeout.connect, sock_read=timeout.read)
        return aiohttp.ClientTimeout(total=timeout)

    def _unreachable(self, exc: BaseException, timeout: Wait) -> ClusterUnavailable:
        if isinstance(exc, TimeoutError):
            limit = self.timeout_text if timeout is None else _seconds(timeout)
            why = f"no answer within {limit}" if limit else "no answer in time"
        else:
            why = describe(exc)
        return ClusterUnavailable(f"cannot reach the API server {self.server}: {why}")


def _seconds(timeout: float | Timeout) -> str:
    total = timeout if isinstance(timeout, int | float) else timeout.total or timeout.read
    return f"{total:g}s" if total else ""


def _event(path: str, line: bytes) -> JsonObject:
    try:
        event = orjson.loads(line)
    except ValueError as exc:
        raise ClusterUnavailable(f"watch {path}: the API server sent an event that is not JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise ClusterUnavailable(f"watch {path}: the API server sent an event that is not a JSON object")
    return event


# ---- the one client factory --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Connection:
    """What ``open_connection`` makes: the API client, where it points, and the refresh of expiring tokens."""

    client: ApiClient
    server: str
    namespace: str
    token_refresh: asyncio.Task[None] | None = None


async def open_connection(kubeconfig: Sequence[str], context: str | None, in_cluster: bool | None) -> Connection:
    """A connection from the pod's service account or from kubeconfig files (merged as kubectl merges them;
    none named: ``KUBECONFIG``, else ~/.kube/config) and a context (none: the current one). ``in_cluster=None``
    picks in-cluster inside a pod unless a kubeconfig or a context is named. ``ConfigError`` names what could not
    be loaded."""
    import asyncio

    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config
    from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger, refresh_token

    if in_cluster is None:
        in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not kubeconfig and not context
    configuration = k8s_client.Configuration()
    if in_cluster:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except (k8s_config.ConfigException, OSError, ValueError) as exc:
            raise ConfigError(f"cannot load in-cluster config: {describe(exc)}") from exc
        return Connection(k8s_client.ApiClient(configuration=configuration), str(configuration.host), "default")
    paths = list(kubeconfig) or [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p] or \
        [DEFAULT_KUBECONFIG]
    where = f"kubeconfig {', '.join(paths)}"
    try:
        merged = KubeConfigMerger(os.pathsep.join(str(Path(p).expanduser()) for p in paths)).config
        if merged is None:
            raise ConfigError(f"cannot load {where}: file not found")
        loader = KubeConfigLoader(config_dict=merged, config_base_path=None, active_context=context)
        await loader.load_and_set(configuration)
    except ConfigError:
        raise
    except (k8s_config.ConfigException, OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise ConfigError(f"cannot load {where}: {describe(exc)}") from exc
    current = loader.current_context or {}
    namespace = (current.get("context") or {}).get("namespace") or "default"
    # Exec and GCP credentials expire; the library's loop renews them (it returns at once for the others).
    refresh = asyncio.create_task(refresh_token(loader, configuration), name="kube-token-refresh")
    return Connection(k8s_client.ApiClient(configuration=configuration), str(configuration.host), namespace, refresh)
