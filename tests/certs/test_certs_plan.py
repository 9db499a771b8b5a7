"""The pure decisions of ``preempt-guard certs``: renew or reuse, trust bundles, Secret and patch objects."""

from __future__ import annotations

import base64
import datetime

import pytest
from cryptography import x509

from webhook.certs.issuance import generate_ca
from webhook.certs.material import (
    MAX_TRUSTED_CAS,
    ServingMaterial,
    dns_names,
    issue_serving_material,
    load_certificates,
    merge_trust_bundle,
    service_dns_names,
)
from webhook.certs.plan import (
    MUTATING_KIND,
    RenewalReason,
    ca_bundle_patch,
    decide_renewal,
    material_from_secret,
    tls_secret,
    webhooks_missing_ca_bundle,
)

SANS = service_dns_names("preemptguard", "preemptguard")
RENEW_BEFORE = datetime.timedelta(days=30)
NOW = datetime.datetime.now(datetime.UTC)


@pytest.fixture(scope="module")
def material() -> ServingMaterial:
    return issue_serving_material(SANS, 365, previous_bundle_pem=b"", now=NOW)


@pytest.fixture(scope="module")
def other() -> ServingMaterial:
    return issue_serving_material(SANS, 365, previous_bundle_pem=b"", now=NOW)


def not_after(m: ServingMaterial) -> datetime.datetime:
    return load_certificates(m.cert_pem)[0].not_valid_after_utc


def test_service_dns_names_cover_every_name_the_api_server_may_use() -> None:
    assert service_dns_names("pg", "ns") == ["pg", "pg.ns", "pg.ns.svc", "pg.ns.svc.cluster.local"]
    assert service_dns_names("pg", "ns", "corp.example") [-1] == "pg.ns.svc.corp.example"


def test_issued_certificate_covers_sans_and_is_signed_by_the_bundle(material: ServingMaterial) -> None:
    cert = load_certificates(material.cert_pem)[0]
    (ca,) = load_certificates(material.ca_bundle_pem)
    assert dns_names(cert) == set(SANS)
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_no_certificate_is_issued() -> None:
    decision = decide_renewal(None, SANS, NOW, RENEW_BEFORE)
    assert decision.renew and decision.reason is RenewalReason.MISSING


def test_a_sound_certificate_is_reused(material: ServingMaterial) -> None:
    decision = decide_renewal(material, SANS, NOW, RENEW_BEFORE)
    assert not decision.renew
    assert decision.reason is RenewalReason.VALID
    assert decision.not_after == not_after(material)


def test_renewal_window_boundary(material: ServingMaterial) -> None:
    window_start = not_after(material) - RENEW_BEFORE
    second = datetime.timedelta(seconds=1)
    assert not decide_renewal(material, SANS, window_start - second, RENEW_BEFORE).renew
    inside = decide_renewal(material, SANS, window_start + second, RENEW_BEFORE)
    assert inside.renew and inside.reason is RenewalReason.EXPIRING
    expired = decide_renewal(material, SANS, not_after(material) + second, RENEW_BEFORE)
    assert expired.renew and expired.reason is RenewalReason.EXPIRING


def test_a_zero_window_renews_only_at_expiry(material: ServingMaterial) -> None:
    assert not decide_renewal(material, SANS, not_after(material) - datetime.timedelta(minutes=1),
                              datetime.timedelta(0)).renew


def test_not_yet_valid_is_renewed(material: ServingMaterial) -> None:
    decision = decide_renewal(material, SANS, NOW - datetime.timedelta(days=1), RENEW_BEFORE)
    assert decision.renew and decision.reason is RenewalReason.NOT_YET_VALID


def test_a_renamed_service_is_renewed(material: ServingMaterial) -> None:
    decision = decide_renewal(material, service_dns_names("guard", "preemptguard"), NOW, RENEW_BEFORE)
    assert decision.renew and decision.reason is RenewalReason.NAMES_CHANGED
    # A subset of the names it already covers is fine.
    assert not decide_renewal(material, SANS[:2], NOW, RENEW_BEFORE).renew


def test_a_foreign_key_is_renewed(material: ServingMaterial, other: ServingMaterial) -> None:
    swapped = ServingMaterial(material.cert_pem, other.key_pem, material.ca_bundle_pem)
    decision = decide_renewal(swapped, SANS, NOW, RENEW_BEFORE)
    assert decision.renew and decision.reason is RenewalReason.KEY_MISMATCH


def test_a_certificate_outside_its_bundle_is_renewed(material: ServingMaterial, other: ServingMaterial) -> None:
    untrusted = ServingMaterial(material.cert_pem, material.key_pem, other.ca_bundle_pem)
    decision = decide_renewal(untrusted, SANS, NOW, RENEW_BEFORE)
    assert decision.renew and decision.reason is RenewalReason.UNTRUSTED
    garbage_bundle = ServingMaterial(material.cert_pem, material.key_pem, b"not pem")
    assert decide_renewal(garbage_bundle, SANS, NOW, RENEW_BEFORE).reason is RenewalReason.UNTRUSTED


@pytest.mark.parametrize("field", ["cert", "key"])
def test_unreadable_material_is_renewed(material: ServingMaterial, field: str) -> None:
    broken = ServingMaterial(b"garbage" if field == "cert" else material.cert_pem,
                             b"garbage" if field == "key" else material.key_pem, material.ca_bundle_pem)
    decision = decide_renewal(broken, SANS, NOW, RENEW_BEFORE)
    assert decision.renew and decision.reason is RenewalReason.UNREADABLE


def test_force_renews_a_sound_certificate(material: ServingMaterial) -> None:
    decision = decide_renewal(material, SANS, NOW, RENEW_BEFORE, force=True)
    assert decision.renew and decision.reason is RenewalReason.FORCED


def test_trust_bundle_keeps_the_previous_ca_until_it_expires(material: ServingMaterial) -> None:
    (old_ca,) = load_certificates(material.ca_bundle_pem)
    new_ca_pem, _ = generate_ca("new", 365)
    bundle = load_certificates(merge_trust_bundle(new_ca_pem, material.ca_bundle_pem, NOW))
    assert [c.subject for c in bundle] == [load_certificates(new_ca_pem)[0].subject, old_ca.subject]
    after_old_expiry = old_ca.not_valid_after_utc + datetime.timedelta(seconds=1)
    assert len(load_certificates(merge_trust_bundle(new_ca_pem, material.ca_bundle_pem, after_old_expiry))) == 1


def test_trust_bundle_dedups_caps_and_survives_garbage() -> None:
    cas = [generate_ca(f"ca{i}", 365)[0] for i in range(MAX_TRUSTED_CAS + 2)]
    previous = b"".join(cas[1:])
    merged = load_certificates(merge_trust_bundle(cas[0], previous + cas[1], NOW))
    assert len(merged) == MAX_TRUSTED_CAS
    assert [c.subject.rfc4514_string() for c in merged] == [f"CN=ca{i}" for i in range(MAX_TRUSTED_CAS)]
    assert len(load_certificates(merge_trust_bundle(cas[0], b"garbage", NOW))) == 1


def test_rotation_carries_the_old_ca_into_the_new_bundle(material: ServingMaterial) -> None:
    rotated = issue_serving_material(SANS, 365, previous_bundle_pem=material.ca_bundle_pem, now=NOW)
    bundle = load_certificates(rotated.ca_bundle_pem)
    assert len(bundle) == 2
    assert bundle[1] == load_certificates(material.ca_bundle_pem)[0]
    # Both the old and the new serving certificate are trusted by the new bundle.
    for pem in (material.cert_pem, rotated.cert_pem):
        cert = load_certificates(pem)[0]
        assert any(_issued_by(cert, ca) for ca in bundle)
    assert not decide_renewal(rotated, SANS, NOW, RENEW_BEFORE).renew


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:
        return False
    return True


def test_secret_round_trip(material: ServingMaterial) -> None:
    secret = tls_secret("ns", "tls", material, resource_version="42")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    assert secret["metadata"]["resourceVersion"] == "42"
    assert "resourceVersion" not in tls_secret("ns", "tls", material)["metadata"]
    assert material_from_secret(secret) == material


def test_broken_secret_data_reads_as_unreadable(material: ServingMaterial) -> None:
    secret = tls_secret("ns", "tls", material)
    secret["data"]["tls.crt"] = "%%% not base64 %%%"
    stored = material_from_secret(secret)
    assert stored.cert_pem == b""
    assert decide_renewal(stored, SANS, NOW, RENEW_BEFORE).reason is RenewalReason.UNREADABLE
    assert material_from_secret({"data": None}) == ServingMaterial(b"", b"", b"")


def test_ca_bundle_patch_and_missing_webhooks(material: ServingMaterial) -> None:
    encoded = base64.b64encode(material.ca_bundle_pem).decode()
    configuration = {"webhooks": [
        {"name": "a", "clientConfig": {"caBundle": encoded}},
        {"name": "b", "clientConfig": {"service": {"name": "x"}}},
        {"name": "c", "clientConfig": {"caBundle": "b2xk"}},
    ]}
    assert webhooks_missing_ca_bundle(configuration, material.ca_bundle_pem) == ["b", "c"]
    patch = ca_bundle_patch(MUTATING_KIND, "cfg", ["b", "c"], material.ca_bundle_pem)
    assert patch["metadata"] == {"name": "cfg"}
    assert patch["webhooks"] == [{"name": "b", "clientConfig": {"caBundle": encoded}},
                                 {"name": "c", "clientConfig": {"caBundle": encoded}}]


def test_material_repr_hides_the_key(material: ServingMaterial) -> None:
    text = repr(material) + str(material)
    assert "PRIVATE" not in text
    assert material.key_pem.decode() not in text
