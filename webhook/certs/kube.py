"""The cluster side of ``preempt-guard certs``: read and write the TLS Secret, patch caBundle.

Every request goes through the one door to the API (``webhook.kubeapi``); the calls are exactly
``webhook/rbac.py`` CERTS_*_PERMISSIONS.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
from webhook.errors import ApiError, ConfigError
from webhook.kubeapi import STRATEGIC_MERGE_PATCH, KubeClient

log = logging.getLogger(__name__)

_WEBHOOK_COLLECTIONS = {
    MUTATING_KIND: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    VALIDATING_KIND: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}


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


class CertsApi:
    """The five calls the certificate job makes."""

    def __init__(self, api: KubeClient, *, timeout_seconds: float = 30.0) -> None:
        self.api = api
        self.timeout_seconds = timeout_seconds

    @staticmethod
    def _secret_path(namespace: str, name: str = "") -> str:
        path = f"/api/v1/namespaces/{namespace}/secrets"
        return f"{path}/{name}" if name else path

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.api.get(self._secret_path(namespace, name), timeout=self.timeout_seconds)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    async def create_secret(self, namespace: str, secret: Mapping[str, Any]) -> None:
        await self.api.post(self._secret_path(namespace), secret, timeout=self.timeout_seconds)

    async def update_secret(self, namespace: str, name: str, secret: Mapping[str, Any]) -> None:
        await self.api.put(self._secret_path(namespace, name), secret, timeout=self.timeout_seconds)

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any]:
        try:
            return await self.api.get(f"{_WEBHOOK_COLLECTIONS[kind]}/{name}", timeout=self.timeout_seconds)
        except ApiError as exc:
            if exc.code == 404:
                message = f"{kind} {name} not found: apply the manifests before `preempt-guard certs`"
                raise ConfigError(message) from exc
            raise

    async def patch_webhook_configuration(self, kind: str, name: str, patch: Mapping[str, Any]) -> None:
        await self.api.patch(f"{_WEBHOOK_COLLECTIONS[kind]}/{name}", patch, content_type=STRATEGIC_MERGE_PATCH,
                             timeout=self.timeout_seconds)


async def ensure_ca_bundle(api: CertsApi, settings: CertsSettings, ca_bundle_pem: bytes) -> tuple[str, ...]:
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


async def reconcile(api: CertsApi, settings: CertsSettings, now: datetime.datetime | None = None
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


async def write_secret(api: CertsApi, settings: CertsSettings, material: ServingMaterial,
                       existing: Mapping[str, Any] | None) -> None:
    if existing is None:
        await api.create_secret(settings.namespace, tls_secret(settings.namespace, settings.secret_name, material))
        return
    resource_version = str((existing.get("metadata") or {}).get("resourceVersion") or "") or None
    await api.update_secret(settings.namespace, settings.secret_name,
                            tls_secret(settings.namespace, settings.secret_name, material,
                                       resource_version=resource_version))
