"""Where the preview comes from: a snapshot file (offline), PreemptGuard's ``/preview`` (``--webhook-url``), or
the cluster of the kubeconfig through a server-side dry-run create (the default).

The dry-run path sends each pod through the API server with ``dryRun=All``: the API server authenticates the
user, runs admission (so the PreemptGuard webhook sees who asks and answers with the full ``PreemptionPreview``
in the ``preemptguard.io/prediction`` annotation of the returned object) and persists nothing. Because nothing
is persisted, a workload's replicas are each predicted against the cluster as it is, not after the earlier
replicas' placement and evictions; every result after the first says so in its message. ``--webhook-url``
simulates replicas in order.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kubectl_plugin.inputs import PREDICTION_ANNOTATION, JsonObject, WorkloadRef, flatten, pod_manifests
from kubectl_plugin.render import Progress
from webhook.cluster.loader import load_snapshot
from webhook.errors import ClusterUnavailable, ConfigError, Forbidden, InvalidInput, PreemptGuardError, Unauthorized
from webhook.preemption.preview import API_VERSION, KIND, preview_objects
from webhook.routes import PREVIEW_PATH

if TYPE_CHECKING:  # aiohttp is imported where it is used: offline runs start faster without it
    import aiohttp

REQUEST_TIMEOUT_SECONDS = 60.0
SEQUENTIAL_NOTE = ("dry run: predicted against the cluster as it is, without the earlier replicas' placement "
                   "(a dry-run create changes nothing); use --webhook-url for an in-order simulation")


class WebhookNotInstalled(PreemptGuardError):
    """The dry-run create came back without PreemptGuard's prediction."""


@dataclass(slots=True)
class PreviewAnswer:
    """A ``PreemptionPreview`` and the warnings that came with it (API server ``Warning`` headers)."""

    preview: JsonObject
    warnings: list[str] = field(default_factory=list)


class PreviewSource(Protocol):
    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer: ...


# ---- the PreemptionPreview document -----------------------------------------------------------------
def summarize(results: Sequence[Mapping[str, Any]]) -> JsonObject:
    """The ``summary`` of a PreemptionPreview (the same fields ``preview.build_preview`` fills)."""
    outcomes = [r.get("outcome") for r in results]
    victims = [v for r in results for v in r.get("victims") or []]
    # Victims of other tenants the webhook counted without naming them (docs/interfaces.md §7).
    others = sum(int((r.get("otherTenantVictims") or {}).get("count") or 0) for r in results)
    summary: JsonObject = {
        "pods": len(results),
        "fits": outcomes.count("Fits"),
        "preempting": outcomes.count("Preempts"),
        "unschedulable": outcomes.count("Unschedulable"),
        "rejected": outcomes.count("Rejected"),
        "victims": len(victims) + others,
        "pdbViolations": sum(int(r.get("pdbViolations") or 0) for r in results),
        "namespacesAffected": sorted({str(v.get("namespace")) for v in victims}),
    }
    if others:
        summary["otherTenantVictims"] = others
    return summary


def combine_previews(results: Sequence[Mapping[str, Any]]) -> JsonObject:
    return {"apiVersion": API_VERSION, "kind": KIND, "results": list(results), "summary": summarize(results)}


def check_preview(document: object, where: str) -> JsonObject:
    if not isinstance(document, dict) or document.get("kind") != KIND or not isinstance(document.get("results"), list):
        raise InvalidInput(f"{where} did not return a {KIND}")
    return document


def rejected_result(pod: Mapping[str, Any], message: str) -> JsonObject:
    """A ``Rejected`` result for a pod the API server refused (admission or validation)."""
    meta: Mapping[str, Any] = pod.get("metadata") or {}
    spec: Mapping[str, Any] = pod.get("spec") or {}
    return {
        "pod": f"{meta.get('namespace') or 'default'}/{meta.get('name') or meta.get('generateName') or ''}",
        "priority": None,
        "priorityClassName": spec.get("priorityClassName") or None,
        "preemptionPolicy": spec.get("preemptionPolicy") or "PreemptLowerPriority",
        "outcome": "Rejected",
        "node": None,
        "victims": [],
        "pdbViolations": 0,
        "candidateNodes": 0,
        "tiedNodes": [],
        "expectedDelaySeconds": 0,
        "message": message,
    }


# ---- offline: --snapshot FILE -----------------------------------------------------------------------
@dataclass(slots=True)
class SnapshotPreviewSource:
    path: str

    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer:
        if not Path(self.path).is_file():
            raise InvalidInput(f"--snapshot {self.path}: file not found")
        async with progress.running(f"predicting against {self.path}"):
            preview = await asyncio.to_thread(self._predict, objects, namespace, replicas)
        return PreviewAnswer(preview)

    def _predict(self, objects: Sequence[JsonObject], namespace: str | None, replicas: int | None) -> JsonObject:
        state = load_snapshot(self.path, require_cluster=True)
        return preview_objects(state, objects, namespace=namespace, replicas=replicas)


# ---- --webhook-url URL -------------------------------------------------------------------------------
def client_ssl_context(*, certificate_authority: str | None, insecure: bool) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if certificate_authority:
        try:
            context.load_verify_locations(cafile=certificate_authority)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--certificate-authority {certificate_authority}: cannot load: {exc}") from exc
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def error_text(body: bytes) -> str:
    """The ``error`` (PreemptGuard) or ``message`` (Kubernetes Status) of an error body, else its start."""
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, Mapping):
        for key in ("error", "message"):
            if isinstance(document.get(key), str):
                return " ".join(document[key].split())
    return " ".join(body[:200].decode("utf-8", "replace").split())


@dataclass(slots=True)
class WebhookPreviewSource:
    """``POST <url>/preview`` with a PreviewRequest (docs/interfaces.md §3) per object."""

    url: str
    token: str | None = None
    certificate_authority: str | None = None
    insecure_skip_tls_verify: bool = False

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith(PREVIEW_PATH) else base + PREVIEW_PATH

    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer:
        import aiohttp

        context = client_ssl_context(certificate_authority=self.certificate_authority,
                                     insecure=self.insecure_skip_tls_verify)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS)
        results: list[JsonObject] = []
        async with aiohttp.ClientSession(timeout=timeout, headers=headers,
                                         connector=aiohttp.TCPConnector(ssl=context)) as session:
            items = flatten(objects)
            progress.start(len(items), "asking PreemptGuard")
            for obj in items:
                request: JsonObject = {"pod": obj}
                if namespace:
                    request["namespace"] = namespace
                if replicas is not None:
                    request["replicas"] = replicas
                document = await self._post(session, request)
                results += check_preview(document, self.endpoint)["results"]
                progress.advance()
            progress.finish()
        return PreviewAnswer(combine_previews(results))

    async def _post(self, session: aiohttp.ClientSession, request: JsonObject) -> object:
        import aiohttp

        try:
            async with session.post(self.endpoint, json=request) as response:
                body = await response.read()
                status = response.status
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ClusterUnavailable(
                f"cannot verify the certificate of {self.endpoint}: {exc.certificate_error}; pass "
                "--certificate-authority FILE (or --insecure-skip-tls-verify)") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ClusterUnavailable(f"cannot reach PreemptGuard at {self.endpoint}: {_describe(exc)}") from exc
        if status == 401:
            raise Unauthorized(f"{self.endpoint}: HTTP 401 Unauthorized: {error_text(body)} (check --token)")
        if status == 403:
            raise Forbidden(f"{self.endpoint}: HTTP 403 Forbidden: {error_text(body)}")
        if status == 404:
            raise InvalidInput(f"{self.endpoint}: HTTP 404: no such endpoint (is --webhook-url a PreemptGuard server?)")
        if status >= 500:
            raise ClusterUnavailable(f"{self.endpoint}: HTTP {status}: {error_text(body)}")
        if status != 200:
            raise InvalidInput(f"{self.endpoint}: HTTP {status}: {error_text(body)}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise InvalidInput(f"{self.endpoint} did not return JSON") from exc


def _describe(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# ---- the cluster of the kubeconfig ---------------------------------------------------------------
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

    def __init__(self, api_client: Any, namespace: str, server: str) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.server = server

    @classmethod
    async def connect(cls, *, kubeconfig: str | None, context: str | None,
                      environ: Mapping[str, str] | None = None) -> KubeCluster:
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
            raise ConfigError(f"cannot load kubeconfig {', '.join(paths)}: {_describe(exc)}") from exc
        current = loader.current_context or {}
        namespace = (current.get("context") or {}).get("namespace") or "default"
        return cls(k8s_client.ApiClient(configuration=configuration), namespace, str(configuration.host))

    async def close(self) -> None:
        await self.api_client.close()

    async def request(self, method: str, path: str, *, query: Sequence[tuple[str, str]] = (),
                      body: object = None) -> ApiAnswer:
        """One raw JSON request; transport failures become ``ClusterUnavailable``, 401 ``Unauthorized``."""
        import aiohttp

        try:
            response: aiohttp.ClientResponse = await self.api_client.call_api(
                path, method, query_params=list(query), body=body,
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                auth_settings=["BearerToken"], _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS))
            try:
                raw = await response.read()
            finally:
                response.release()
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ClusterUnavailable(f"cannot verify the API server certificate of {self.server}: "
                                     f"{exc.certificate_error}") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ClusterUnavailable(f"cannot reach the API server {self.server}: {_describe(exc)}") from exc
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


_RBAC_FORBIDDEN = re.compile(r'\bUser ".*" cannot \S+ resource\b')


@dataclass(slots=True)
class ClusterPreviewSource:
    """Server-side dry-run creates of every pod, in order, read back from the prediction annotation."""

    cluster: KubeCluster
    results: list[JsonObject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer:
        ns = namespace or self.cluster.namespace
        pods = [pod for obj in flatten(objects)
                for pod in pod_manifests(obj, namespace=_object_namespace(obj, namespace, ns), replicas=replicas)]
        progress.start(len(pods), "dry-run create")
        for index, pod in enumerate(pods):
            result = await self.dry_run_pod(pod)
            if index > 0:
                result["message"] = f"{result.get('message') or ''} ({SEQUENTIAL_NOTE})".lstrip()
            self.results.append(result)
            progress.advance()
        progress.finish()
        return PreviewAnswer(combine_previews(self.results), _unique(self.warnings))

    async def dry_run_pod(self, pod: JsonObject) -> JsonObject:
        namespace = pod["metadata"]["namespace"]
        path = f"/api/v1/namespaces/{namespace}/pods"
        answer = await self.cluster.request("POST", path, query=[("dryRun", "All")], body=pod)
        if answer.status == 409 and pod["metadata"].get("name"):
            # A pod of that name exists: preview another one like it under a generated name.
            renamed = {**pod, "metadata": {**pod["metadata"], "generateName": pod["metadata"]["name"] + "-"}}
            del renamed["metadata"]["name"]
            answer = await self.cluster.request("POST", path, query=[("dryRun", "All")], body=renamed)
        self.warnings += answer.warnings
        if 200 <= answer.status < 300:
            return self._prediction(answer)
        return self._refusal(pod, answer)

    def _prediction(self, answer: ApiAnswer) -> JsonObject:
        created = answer.json()
        annotations = ((created or {}).get("metadata") or {}).get("annotations") or {}
        value = annotations.get(PREDICTION_ANNOTATION) if isinstance(annotations, Mapping) else None
        if not isinstance(value, str):
            said = f" (it warned: {answer.warnings[0]})" if answer.warnings else ""
            raise WebhookNotInstalled(f"PreemptGuard webhook is not installed or did not answer: the dry-run "
                                      f"create on {self.cluster.server} returned no {PREDICTION_ANNOTATION} "
                                      f"annotation{said}")
        try:
            document = json.loads(value)
        except ValueError as exc:
            raise WebhookNotInstalled(f"the {PREDICTION_ANNOTATION} annotation is not JSON") from exc
        if not isinstance(document, Mapping) or not isinstance(document.get("results"), list):
            raise WebhookNotInstalled(f"the PreemptGuard webhook answered with a short {PREDICTION_ANNOTATION} "
                                      "(no results): it is older than this plugin; upgrade it or use --webhook-url")
        results = document["results"]
        if len(results) != 1 or not isinstance(results[0], dict):
            raise InvalidInput(f"the {PREDICTION_ANNOTATION} annotation has {len(results)} results, expected 1")
        result: JsonObject = results[0]
        return result

    def _refusal(self, pod: JsonObject, answer: ApiAnswer) -> JsonObject:
        """A refused create is a ``Rejected`` pod, unless the refusal is about the user or the request."""
        message = answer.message
        if answer.status == 403 and _RBAC_FORBIDDEN.search(message):
            raise Forbidden(message)
        if answer.status == 404:
            raise InvalidInput(message)
        denied_by_webhook = message.startswith("admission webhook ") and " denied the request" in message
        # 403: admission plugin Forbidden; 422: validation; 500 + "insufficient quota": the ResourceQuota
        # plugin's plain error (docs/admission.md §3).
        if denied_by_webhook or answer.status in (403, 422) or (
                answer.status == 500 and message.startswith("insufficient quota")):
            return rejected_result(pod, message)
        raise ClusterUnavailable(f"the API server refused the dry-run create: HTTP {answer.status}: {message}")


def _object_namespace(obj: Mapping[str, Any], explicit: str | None, context_namespace: str) -> str:
    """``-n`` wins, then the object's namespace, then the kubeconfig context's namespace (as kubectl does)."""
    meta = obj.get("metadata") or {}
    return explicit or (meta.get("namespace") if isinstance(meta, Mapping) else None) or context_namespace


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
