"""The cluster side of ``preempt-guard certs``: read and write the TLS Secret, patch caBundle.

Every request goes through one kubernetes-asyncio ``ApiClient`` (its kubeconfig or in-cluster auth
and TLS) as raw JSON; the calls are exactly ``webhook/rbac.py`` CERTS_*_PERMISSIONS.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from webhook.certs.material import ServingMaterial, describe, issue_serving_material
from webhook.certs.plan import (
    MUTATING_KIND,
    VALIDATING_KIND,
    RenewalDecision,
    ca_bundle_patch,
    decide_renewal,
    material_from_secret,
    tls_secret,
    webhooks_missing_ca_bundle,
)
from webhook.errors import ClusterUnavailable, ConfigError, PreemptGuardError

log = logging.getLogger(__name__)

_WEBHOOK_COLLECTIONS = {
    MUTATING_KIND: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    VALIDATING_KIND: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


@dataclass(frozen=True, slots=True)
class CertsSettings:
    namespace: str
    secret_name: str
    sans: tuple[str, ...]
    mutating_configuration: str
    validating_configuration: str
    days: int
    renew_before: datetime.timedelta
    force: bool = False


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    decision: RenewalDecision
    secret_written: bool
    patched: tuple[str, ...]  # "Kind/name" of each webhook configuration that was patched


class ApiError(PreemptGuardError):
    """A non-2xx answer of the API server (403: the RBAC of webhook/rbac.py is missing)."""

    exit_code = 3

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status


class KubeApi:
    """The five calls the certificate job makes, as raw JSON requests."""

    def __init__(self, api_client: Any, *, timeout_seconds: float = 30.0) -> None:
        self.api_client = api_client
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)

    async def _call(self, method: str, path: str, body: object = None, content_type: str = "application/json"
                    ) -> dict[str, Any]:
        from kubernetes_asyncio import client as k8s_client  # loaded by new_api_client already

        try:
            response: aiohttp.ClientResponse = await self.api_client.call_api(
                path, method, header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body, auth_settings=["BearerToken"], _preload_content=False, _request_timeout=self.timeout,
            )
            try:
                raw = await response.read()
            finally:
                response.release()
        except k8s_client.ApiException as exc:
            # ApiClient raises for non-2xx itself; keep its status, never its body (it could echo a Secret).
            raise ApiError(method, path, int(exc.status or 0), str(exc.reason or "")) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ClusterUnavailable(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if not 200 <= response.status < 300:
            raise ApiError(method, path, response.status, _status_message(raw))
        result = json.loads(raw) if raw else {}
        return result if isinstance(result, dict) else {}

    @staticmethod
    def _secret_path(namespace: str, name: str = "") -> str:
        path = f"/api/v1/namespaces/{namespace}/secrets"
        return f"{path}/{name}" if name else path

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._call("GET", self._secret_path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def create_secret(self, namespace: str, secret: Mapping[str, Any]) -> None:
        await self._call("POST", self._secret_path(namespace), secret)

    async def update_secret(self, namespace: str, name: str, secret: Mapping[str, Any]) -> None:
        await self._call("PUT", self._secret_path(namespace, name), secret)

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any]:
        try:
            return await self._call("GET", f"{_WEBHOOK_COLLECTIONS[kind]}/{name}")
        except ApiError as exc:
            if exc.status == 404:
                message = f"{kind} {name} not found: apply the manifests before `preempt-guard certs`"
                raise ConfigError(message) from exc
            raise

    async def patch_webhook_configuration(self, kind: str, name: str, patch: Mapping[str, Any]) -> None:
        await self._call("PATCH", f"{_WEBHOOK_COLLECTIONS[kind]}/{name}", patch, STRATEGIC_MERGE_PATCH)


def _status_message(raw: bytes) -> str:
    try:
        status = json.loads(raw)
    except ValueError:
        return raw[:200].decode("utf-8", "replace")
    if isinstance(status, dict):
        return str(status.get("message") or status.get("reason") or "")
    return ""


async def ensure_ca_bundle(api: KubeApi, settings: CertsSettings, ca_bundle_pem: bytes) -> tuple[str, ...]:
    """Patch ``ca_bundle_pem`` into every webhook of both configurations that lacks it; returns what changed."""
    patched: list[str] = []
    for kind, name in ((MUTATING_KIND, settings.mutating_configuration),
                       (VALIDATING_KIND, settings.validating_configuration)):
        configuration = await api.get_webhook_configuration(kind, name)
        missing = webhooks_missing_ca_bundle(configuration, ca_bundle_pem)
        if not missing:
            log.info("%s %s: caBundle already current", kind, name)
            continue
        await api.patch_webhook_configuration(kind, name, ca_bundle_patch(kind, name, missing, ca_bundle_pem))
        log.info("%s %s: caBundle set on %s", kind, name, ", ".join(missing))
        patched.append(f"{kind}/{name}")
    return tuple(patched)


async def reconcile(api: KubeApi, settings: CertsSettings, now: datetime.datetime | None = None
                    ) -> ReconcileResult:
    """Reuse a sound certificate (only making sure of caBundle) or rotate it; safe to run at any time."""
    now = now or datetime.datetime.now(datetime.UTC)
    secret = await api.get_secret(settings.namespace, settings.secret_name)
    stored = material_from_secret(secret) if secret is not None else None
    decision = decide_renewal(stored, settings.sans, now, settings.renew_before, force=settings.force)
    where = f"Secret {settings.namespace}/{settings.secret_name}"
    if not decision.renew:
        assert stored is not None
        log.info("%s: %s (%s); reusing it", where, decision.reason, describe(stored.cert_pem))
        return ReconcileResult(decision, False, await ensure_ca_bundle(api, settings, stored.ca_bundle_pem))

    log.info("%s: %s; issuing a new certificate", where, decision.reason)
    material = issue_serving_material(settings.sans, settings.days,
                                      previous_bundle_pem=stored.ca_bundle_pem if stored else b"", now=now)
    # caBundle first: it trusts the old and the new CA, so pods serving either certificate are accepted
    # while the kubelet swaps the mounted files; a crash in between leaves a working old certificate.
    patched = await ensure_ca_bundle(api, settings, material.ca_bundle_pem)
    await write_secret(api, settings, material, secret)
    log.info("%s: stored %s", where, describe(material.cert_pem))
    return ReconcileResult(decision, True, patched)


async def write_secret(api: KubeApi, settings: CertsSettings, material: ServingMaterial,
                       existing: Mapping[str, Any] | None) -> None:
    if existing is None:
        await api.create_secret(settings.namespace, tls_secret(settings.namespace, settings.secret_name, material))
        return
    resource_version = str((existing.get("metadata") or {}).get("resourceVersion") or "") or None
    await api.update_secret(settings.namespace, settings.secret_name,
                            tls_secret(settings.namespace, settings.secret_name, material,
                                       resource_version=resource_version))


async def new_api_client(*, kubeconfig: str | None, context: str | None, in_cluster: bool | None) -> Any:
    """An ApiClient from in-cluster config or a kubeconfig; ``None`` picks in-cluster inside a pod."""
    # Imported here, not at the top: `preempt-guard` imports this module for its arguments, and a server
    # on a snapshot file should not carry the Kubernetes client (~40 MiB) it never uses.
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config

    if in_cluster is None:
        in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not kubeconfig and not context
    configuration = k8s_client.Configuration()
    try:
        if in_cluster:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            await k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                              client_configuration=configuration, persist_config=False)
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        where = "in-cluster config" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        raise ConfigError(f"cannot load {where}: {exc}") from exc
    return k8s_client.ApiClient(configuration=configuration)
