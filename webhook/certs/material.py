"""Certificate material of the webhook: what the TLS Secret holds, how it is issued and read.

The CA is ephemeral: each rotation makes a new CA, signs one serving certificate with it and forgets
its key. The trust bundle (``ca.crt``, copied into every webhook's ``caBundle``) keeps earlier CAs
until they expire, so pods that still serve the previous certificate stay trusted while the kubelet
updates their Secret volume; an old CA whose key is gone can sign nothing new, so trusting it longer
costs nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from webhook.certs.issuance import generate_ca, issue_serving_certificate

# How many CAs a trust bundle keeps at most (newest first); more only piles up after repeated
# forced rotations inside one renewal window.
MAX_TRUSTED_CAS = 3


@dataclass(frozen=True, slots=True)
class ServingMaterial:
    """A serving certificate, its private key, and the CA bundle that the API server should trust."""

    cert_pem: bytes
    key_pem: bytes
    ca_bundle_pem: bytes

    def __repr__(self) -> str:
        # Never let a key reach a log line or a traceback through repr().
        return f"ServingMaterial(cert={len(self.cert_pem)}B, key=<redacted>, ca_bundle={len(self.ca_bundle_pem)}B)"


def service_dns_names(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    """The names the API server may use for the Service: ``<svc>``, ``<svc>.<ns>``, ``.svc``, and the FQDN."""
    names = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
    if cluster_domain:
        names.append(f"{service}.{namespace}.svc.{cluster_domain}")
    return names


def load_certificates(pem: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle, in order; ``ValueError`` when there is none or one is broken."""
    return x509.load_pem_x509_certificates(pem)


def fingerprint(cert: x509.Certificate) -> bytes:
    return cert.fingerprint(hashes.SHA256())


def dns_names(cert: x509.Certificate) -> set[str]:
    """The DNS and IP subject alternative names of ``cert`` as strings."""
    try:
        extension = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    names: set[str] = set(extension.value.get_values_for_type(x509.DNSName))
    names.update(str(ip) for ip in extension.value.get_values_for_type(x509.IPAddress))
    return names


def merge_trust_bundle(new_ca_pem: bytes, previous_bundle_pem: bytes, now: datetime.datetime) -> bytes:
    """``new_ca_pem`` first, then the still-valid CAs of ``previous_bundle_pem`` (an unreadable one is dropped)."""
    kept = load_certificates(new_ca_pem)
    seen = {fingerprint(cert) for cert in kept}
    try:
        previous = load_certificates(previous_bundle_pem) if previous_bundle_pem.strip() else []
    except ValueError:
        previous = []
    for cert in previous:
        if cert.not_valid_after_utc <= now or fingerprint(cert) in seen:
            continue
        seen.add(fingerprint(cert))
        kept.append(cert)
    return b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in kept[:MAX_TRUSTED_CAS])


def issue_serving_material(
    sans: Sequence[str], days: int, *, previous_bundle_pem: bytes, now: datetime.datetime
) -> ServingMaterial:
    """A new ephemeral CA and a serving certificate for ``sans`` valid ``days``; the CA key is discarded."""
    ca = generate_ca(f"preemptguard-ca@{int(now.timestamp())}", days)
    serving = issue_serving_certificate(ca.cert_pem, ca.key_pem, list(sans), days)
    return ServingMaterial(serving.cert_pem, serving.key_pem, merge_trust_bundle(ca.cert_pem, previous_bundle_pem, now))


def describe(cert_pem: bytes) -> str:
    """A log-safe one-line summary of the first certificate in ``cert_pem`` (serial, subject, expiry)."""
    cert = load_certificates(cert_pem)[0]
    return (f"serial {cert.serial_number:x}, subject {cert.subject.rfc4514_string()}, "
            f"valid until {cert.not_valid_after_utc.isoformat()}")
