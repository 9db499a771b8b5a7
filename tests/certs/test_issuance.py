"""Certificate issuance: a CA, serving certificates it signs, and self-signed serving certificates."""

from __future__ import annotations

import datetime
import ipaddress

import pytest
from cryptography import x509

from webhook.certs.issuance import (
    generate_ca,
    issue_serving_certificate,
    self_signed_serving_certificate,
    subject_alternative_names,
)


def sans_of(cert_pem: bytes) -> tuple[set[str], set[str]]:
    cert = x509.load_pem_x509_certificate(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)), {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


def test_issued_certificate_chains_to_its_ca() -> None:
    ca_pem, ca_key = generate_ca("preempt-guard-ca", 30)
    cert_pem, _ = issue_serving_certificate(ca_pem, ca_key, ["svc.ns.svc"], 10)
    ca, cert = x509.load_pem_x509_certificate(ca_pem), x509.load_pem_x509_certificate(cert_pem)
    cert.verify_directly_issued_by(ca)
    assert sans_of(cert_pem) == ({"svc.ns.svc"}, set())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    self_pem, _ = self_signed_serving_certificate(["127.0.0.1"], 1)
    assert sans_of(self_pem) == (set(), {str(ipaddress.ip_address("127.0.0.1"))})


def test_names_are_deduplicated_and_an_empty_list_is_refused() -> None:
    names = subject_alternative_names([" a.svc", "a.svc", "", "10.0.0.1", "10.0.0.1"])
    assert list(names) == [x509.DNSName("a.svc"), x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]
    with pytest.raises(ValueError, match="at least one subject alternative name"):
        subject_alternative_names(["", " "])


def test_validity_is_positive_and_never_outlives_the_ca() -> None:
    with pytest.raises(ValueError, match="validity must be positive"):
        generate_ca("zero", 0)
    ca = generate_ca("short-ca", 2)
    issued = issue_serving_certificate(ca.cert_pem, ca.key_pem, ["svc.ns.svc"], 30)
    ca_cert, cert = x509.load_pem_x509_certificate(ca.cert_pem), x509.load_pem_x509_certificate(issued.cert_pem)
    assert cert.not_valid_after_utc == ca_cert.not_valid_after_utc
    assert cert.not_valid_before_utc < datetime.datetime.now(datetime.UTC)
    assert issued.key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")
