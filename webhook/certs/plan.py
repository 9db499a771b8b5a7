"""What ``preempt-guard certs`` should do, decided without a cluster: renew or reuse, and the objects to write."""

from __future__ import annotations

import base64
import binascii
import datetime
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from webhook.certs.material import ServingMaterial, dns_names, load_certificates

MUTATING_KIND = "MutatingWebhookConfiguration"
VALIDATING_KIND = "ValidatingWebhookConfiguration"
ADMISSIONREGISTRATION_API_VERSION = "admissionregistration.k8s.io/v1"

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "preempt-guard-certs"
NOT_AFTER_ANNOTATION = "preemptguard.io/certificate-not-after"


class RenewalReason(enum.StrEnum):
    """Why a certificate is (or is not) issued anew; the value is the log text."""

    VALID = "valid"
    FORCED = "rotation forced"
    MISSING = "no certificate stored yet"
    UNREADABLE = "stored certificate or key cannot be read"
    KEY_MISMATCH = "stored key does not belong to the certificate"
    NOT_YET_VALID = "stored certificate is not valid yet"
    EXPIRING = "stored certificate expires within the renewal window"
    NAMES_CHANGED = "stored certificate does not cover every service name"
    UNTRUSTED = "stored certificate is not signed by a CA of its ca.crt"


@dataclass(frozen=True, slots=True)
class RenewalDecision:
    renew: bool
    reason: RenewalReason
    not_after: datetime.datetime | None = None


def _renew(reason: RenewalReason, not_after: datetime.datetime | None = None) -> RenewalDecision:
    return RenewalDecision(True, reason, not_after)


def _signed_by_bundle(cert: x509.Certificate, bundle_pem: bytes) -> bool:
    try:
        bundle = load_certificates(bundle_pem)
    except ValueError:
        return False
    for ca in bundle:
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def _key_matches(cert: x509.Certificate, key_pem: bytes) -> bool | None:
    """True/False whether the key is the certificate's; None when the key does not load."""
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return None
    return bool(key.public_key() == cert.public_key())


def decide_renewal(
    stored: ServingMaterial | None,
    sans: Sequence[str],
    now: datetime.datetime,
    renew_before: datetime.timedelta,
    *,
    force: bool = False,
) -> RenewalDecision:
    """Reuse ``stored`` only while it is sound and has more than ``renew_before`` left; otherwise renew."""
    if force:
        return _renew(RenewalReason.FORCED)
    if stored is None:
        return _renew(RenewalReason.MISSING)
    try:
        cert = load_certificates(stored.cert_pem)[0]
    except ValueError:
        return _renew(RenewalReason.UNREADABLE)
    not_after = cert.not_valid_after_utc
    key_matches = _key_matches(cert, stored.key_pem)
    if key_matches is None:
        return _renew(RenewalReason.UNREADABLE, not_after)
    if not key_matches:
        return _renew(RenewalReason.KEY_MISMATCH, not_after)
    if cert.not_valid_before_utc > now:
        return _renew(RenewalReason.NOT_YET_VALID, not_after)
    if not_after - now <= renew_before:
        return _renew(RenewalReason.EXPIRING, not_after)
    if not set(sans) <= dns_names(cert):
        return _renew(RenewalReason.NAMES_CHANGED, not_after)
    if not _signed_by_bundle(cert, stored.ca_bundle_pem):
        return _renew(RenewalReason.UNTRUSTED, not_after)
    return RenewalDecision(False, RenewalReason.VALID, not_after)


# ---- the Secret ---------------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: object) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


def material_from_secret(secret: Mapping[str, Any]) -> ServingMaterial:
    """The stored material of a ``kubernetes.io/tls`` Secret; absent or broken fields read as empty."""
    data = secret.get("data") or {}
    return ServingMaterial(_unb64(data.get("tls.crt")), _unb64(data.get("tls.key")), _unb64(data.get("ca.crt")))


def tls_secret(namespace: str, name: str, material: ServingMaterial, *, resource_version: str | None = None
               ) -> dict[str, Any]:
    """The ``kubernetes.io/tls`` Secret holding ``material`` (``ca.crt`` is the trust bundle)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/name": "preemptguard", MANAGED_BY_LABEL: MANAGED_BY},
        "annotations": {NOT_AFTER_ANNOTATION: load_certificates(material.cert_pem)[0].not_valid_after_utc
                        .strftime("%Y-%m-%dT%H:%M:%SZ")},
    }
    if resource_version:
        # Optimistic concurrency: an update based on a Secret someone else changed meanwhile gets a 409.
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": _b64(material.cert_pem),
            "tls.key": _b64(material.key_pem),
            "ca.crt": _b64(material.ca_bundle_pem),
        },
    }


# ---- caBundle of the webhook configurations -----------------------------------------------------
def webhooks_missing_ca_bundle(configuration: Mapping[str, Any], ca_bundle_pem: bytes) -> list[str]:
    """Names of the configuration's webhooks whose ``clientConfig.caBundle`` is not ``ca_bundle_pem``."""
    wanted = _b64(ca_bundle_pem)
    return [
        str(webhook.get("name", ""))
        for webhook in configuration.get("webhooks") or ()
        if (webhook.get("clientConfig") or {}).get("caBundle") != wanted
    ]


def ca_bundle_patch(kind: str, name: str, webhooks: Sequence[str], ca_bundle_pem: bytes) -> dict[str, Any]:
    """A strategic merge patch setting ``caBundle`` on each named webhook (``webhooks`` merge by name)."""
    return {
        "apiVersion": ADMISSIONREGISTRATION_API_VERSION,
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [{"name": webhook, "clientConfig": {"caBundle": _b64(ca_bundle_pem)}} for webhook in webhooks],
    }
