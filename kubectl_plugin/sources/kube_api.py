"""The API server of a kubeconfig context: kubeconfig loading as kubectl does it (``--kubeconfig``, several
``KUBECONFIG`` files, ``--context``), raw JSON requests, and the admission warnings of its ``Warning`` headers."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubectl_plugin.inputs import JsonObject, WorkloadRef
from kubectl_plugin.sources.http import DEFAULT_TIMEOUT, RequestTimeout, describe, error_text
from webhook.errors import ClusterUnavailable, ConfigError, Forbidden, InvalidInput, Unauthorized

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


@dataclass(slots=True)
class ApiAnswer:
    status: int
    body: bytes
    warnings: list[str]

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def message(self) -> str:
        return error_text(self.body)


def kubeconfig_paths(explicit: str | None, environ: Mapping[str, str]) -> list[str]:
    """``--kubeconfig`` alone, else every existing file of ``KUBECONFIG``, else ``~/.kube/config``
    (client-go clientcmd's loading rules)."""
    if explicit:
        if not Path(explicit).expanduser().is_file():
            raise ConfigError(f"--kubeconfig {explicit}: file not found")
        return [str(Path(explicit).expanduser())]
    listed = environ.get("KUBECONFIG", "")
    if listed:
        paths = [str(Path(p).expanduser()) for p in listed.split(os.pathsep) if p]
        found = [p for p in paths if Path(p).is_file()]
        if not found:
            raise ConfigError(f"no kubeconfig found: none of the KUBECONFIG files exist ({listed}); "
                              "use --snapshot FILE to predict offline")
        return found
    default = Path("~/.kube/config").expanduser()
    if not default.is_file():
        raise ConfigError(f"no kubeconfig found ({default} does not exist and KUBECONFIG is not set); "
                          "use --kubeconfig PATH, or --snapshot FILE to predict offline")
    return [str(default)]


class KubeCluster:
    """The API server of a kubeconfig context, through kubernetes-asyncio's ApiClient (TLS, tokens, token files,
    client certificates and exec credential plugins handled by its kubeconfig loader)."""

    def __init__(self, api_client: Any, namespace: str, server: str,
                 timeout: RequestTimeout = DEFAULT_TIMEOUT) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.server = server
        self.timeout = timeout

    @classmethod
    async def connect(cls, *, kubeconfig: str | None, context: str | None,
                      environ: Mapping[str, str] | None = None,
                      timeout: RequestTimeout = DEFAULT_TIMEOUT) -> KubeCluster:
        from kubernetes_asyncio import client as k8s_client
        from kubernetes_asyncio.config import ConfigException
        from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

        paths = kubeconfig_paths(kubeconfig, os.environ if environ is None else environ)
        try:
            merger = KubeConfigMerger(os.pathsep.join(paths))
            merged = merger.config
            if merged is None:
                raise ConfigError(f"cannot read kubeconfig {', '.join(paths)}")
            name = context or first_current_context(merger.config_files.values())
            if not name:
                raise ConfigError("the kubeconfig has no current-context; pass --context NAME")
            contexts = [getattr(c, "value", c) for c in merged.value.get("contexts") or []]
            if name not in {c.get("name") for c in contexts if isinstance(c, Mapping)}:
                raise ConfigError(f'context "{name}" does not exist in the kubeconfig ({", ".join(paths)})')
            loader = KubeConfigLoader(config_dict=merged, config_base_path=None, active_context=name)
            configuration = k8s_client.Configuration()
            await loader.load_and_set(configuration)
        except ConfigError:
            raise
        except (ConfigException, OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
            raise ConfigError(f"cannot load kubeconfig {', '.join(paths)}: {describe(exc)}") from exc
        current = loader.current_context or {}
        namespace = (current.get("context") or {}).get("namespace") or "default"
        return cls(k8s_client.ApiClient(configuration=configuration), namespace, str(configuration.host), timeout)

    async def close(self) -> None:
        await self.api_client.close()

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (),
                      body: object = None) -> ApiAnswer:
        """One raw JSON request; transport failures become ``ClusterUnavailable``, 401 ``Unauthorized``."""
        import aiohttp

        try:
            response: aiohttp.ClientResponse = await self.api_client.call_api(
                path, method, query_params=[*query, *self.timeout.query()], body=body,
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                auth_settings=["BearerToken"], _preload_content=False,
                _request_timeout=self.timeout.client_timeout())
            try:
                raw = await response.read()
            finally:
                response.release()
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ClusterUnavailable(f"cannot verify the API server certificate of {self.server}: "
                                     f"{exc.certificate_error}") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ClusterUnavailable(
                f"cannot reach the API server {self.server}: {describe(exc, self.timeout)}") from exc
        answer = ApiAnswer(response.status, raw, parse_warning_headers(response.headers.getall("Warning", [])))
        if answer.status == 401:
            raise Unauthorized("You must be logged in to the server (Unauthorized)")
        return answer

    async def get_object(self, ref: WorkloadRef, namespace: str) -> JsonObject:
        answer = await self.request("GET", ref.resource.path(namespace, ref.name))
        if answer.status == 404:
            raise InvalidInput(f'{ref.resource.qualified} "{ref.name}" not found in namespace "{namespace}"')
        if answer.status == 403:
            raise Forbidden(answer.message)
        document = answer.json()
        if answer.status != 200 or not isinstance(document, dict):
            raise ClusterUnavailable(f"GET {ref}: HTTP {answer.status}: {answer.message}")
        document.setdefault("kind", ref.resource.kind)
        document.setdefault("apiVersion", ref.resource.api_version)
        return document


def first_current_context(configs: Iterable[object]) -> str:
    """kubectl takes ``current-context`` from the first file that sets it (clientcmd: first file wins);
    kubernetes-asyncio's merger keeps the last one, so it is chosen here."""
    for config in configs:
        if isinstance(config, Mapping) and config.get("current-context"):
            return str(config["current-context"])
    return ""
