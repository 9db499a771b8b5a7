"""Certificate issuance: a CA, serving and client certificates signed by it, and self-signed serving certificates.

Every key is ECDSA P-256 and every certificate is backdated a little for clock skew. Used by
``preempt-guard certs`` (an ephemeral CA per rotation) and by ``serve --tls-self-signed``.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Clock skew allowance for freshly generated certificates.
_BACKDATE = datetime.timedelta(minutes=5)


class IssuedCertificate(NamedTuple):
    """A certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes


class _Validity(NamedTuple):
    not_before: datetime.datetime
    not_after: datetime.datetime


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _issued(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> IssuedCertificate:
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return IssuedCertificate(cert.public_bytes(serialization.Encoding.PEM), key_pem)


def _validity(days: int) -> _Validity:
    if days <= 0:
        raise ValueError(f"certificate validity must be positive, got {days} days")
    now = datetime.datetime.now(datetime.UTC)
    return _Validity(now - _BACKDATE, now + datetime.timedelta(days=days))


def subject_alternative_names(sans: Sequence[str]) -> x509.SubjectAlternativeName:
    """IP addresses as IPAddress entries, everything else as DNSName; duplicates dropped, order kept."""
    entries: list[x509.GeneralName] = []
    seen: set[str] = set()
    for san in sans:
        san = san.strip()
        if not san or san in seen:
            continue
        seen.add(san)
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(san)))
        except ValueError:
            entries.append(x509.DNSName(san))
    if not entries:
        raise ValueError("a serving certificate needs at least one subject alternative name")
    return x509.SubjectAlternativeName(entries)


def _leaf_extensions(
    builder: x509.CertificateBuilder, sans: Sequence[str], key: ec.EllipticCurvePrivateKey,
    usage: x509.ObjectIdentifier = ExtendedKeyUsageOID.SERVER_AUTH,
) -> x509.CertificateBuilder:
    return (
        builder.add_extension(subject_alternative_names(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _certificate_builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, days: int,
                         *, not_after_cap: datetime.datetime | None = None) -> x509.CertificateBuilder:
    """Subject, issuer, public key, a random serial and the validity window: what every certificate here shares."""
    validity = _validity(days)
    not_after = validity.not_after if not_after_cap is None else min(validity.not_after, not_after_cap)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity.not_before)
        .not_valid_after(not_after)
    )


def _serving_subject(sans: Sequence[str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sans[0] if sans else "preempt-guard")])


def generate_ca(common_name: str, days: int) -> IssuedCertificate:
    """A new self-signed CA and its private key."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _certificate_builder(name, name, key, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _issued(cert, key)


def _signed_by_ca(ca_cert_pem: bytes, ca_key_pem: bytes, subject: x509.Name, sans: Sequence[str], days: int,
                  usage: x509.ObjectIdentifier) -> IssuedCertificate:
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError("the CA key must be an EC or RSA private key")
    key = _new_key()
    builder = (
        _certificate_builder(subject, ca_cert.subject, key, days, not_after_cap=ca_cert.not_valid_after_utc)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    return _issued(_leaf_extensions(builder, sans, key, usage).sign(ca_key, hashes.SHA256()), key)


def issue_serving_certificate(
    ca_cert_pem: bytes, ca_key_pem: bytes, sans: list[str], days: int
) -> IssuedCertificate:
    """A serving certificate for ``sans`` signed by the given CA, and its private key."""
    return _signed_by_ca(ca_cert_pem, ca_key_pem, _serving_subject(sans), sans, days, ExtendedKeyUsageOID.SERVER_AUTH)


def issue_client_certificate(ca_cert_pem: bytes, ca_key_pem: bytes, common_name: str, days: int) -> IssuedCertificate:
    """A client certificate (clientAuth) for ``common_name`` signed by the given CA: what kube-apiserver presents
    to a webhook through its AdmissionConfiguration kubeconfig (``serve --client-ca``)."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    return _signed_by_ca(ca_cert_pem, ca_key_pem, subject, [common_name], days, ExtendedKeyUsageOID.CLIENT_AUTH)


def self_signed_serving_certificate(sans: Sequence[str], days: int) -> IssuedCertificate:
    """A self-signed serving certificate (it is its own trust anchor), and its private key."""
    key = _new_key()
    name = _serving_subject(sans)
    builder = _certificate_builder(name, name, key, days)
    return _issued(_leaf_extensions(builder, sans, key).sign(key, hashes.SHA256()), key)
