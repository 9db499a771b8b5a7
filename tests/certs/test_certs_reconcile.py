"""``preempt-guard certs`` against a fake API server: what it writes, what it patches, which calls it makes."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_kube_api import FakeApiServer, manifest_webhook_configurations

from webhook.certs.kube import CertsApi, CertsSettings, reconcile
from webhook.certs.material import load_certificates, service_dns_names
from webhook.certs.plan import RenewalReason
from webhook.errors import ApiError, ConfigError
from webhook.rbac import CERTS_CLUSTER_PERMISSIONS, CERTS_NAMESPACED_PERMISSIONS, Permission, allows

NAMESPACE = "preemptguard"
REPO = Path(__file__).resolve().parents[2]


def settings(**overrides: Any) -> CertsSettings:
    values: dict[str, Any] = {
        "namespace": NAMESPACE, "secret_name": "preemptguard-tls",
        "sans": tuple(service_dns_names("preemptguard", NAMESPACE)),
        "mutating_configuration": "preemptguard.io", "validating_configuration": "preemptguard.io",
        "days": 365, "renew_before": datetime.timedelta(days=30),
    }
    values.update(overrides)
    return CertsSettings(**values)


def install_webhook_configurations(fake: FakeApiServer, extra_mutating_webhook: bool = True) -> None:
    """The two configurations exactly as in manifests/base, the mutating one with a second webhook entry."""
    for group, resource, obj in manifest_webhook_configurations():
        obj = copy.deepcopy(obj)
        if extra_mutating_webhook and obj["kind"] == "MutatingWebhookConfiguration":
            second = copy.deepcopy(obj["webhooks"][0])
            second["name"] = "second.preemptguard.io"
            obj["webhooks"].append(second)
        fake.put(group, resource, obj)


def stored_secret(fake: FakeApiServer) -> dict[str, Any]:
    secret = fake.get("", "secrets", NAMESPACE, "preemptguard-tls")
    assert secret is not None
    return secret


def ca_bundles(fake: FakeApiServer) -> list[bytes]:
    bundles = []
    for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        configuration = fake.get("admissionregistration.k8s.io", resource, "", "preemptguard.io")
        assert configuration is not None
        for webhook in configuration["webhooks"]:
            bundles.append(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    return bundles


def assert_certs_rbac_allows_every_call(fake: FakeApiServer) -> None:
    for request in fake.requests:
        permissions: tuple[Permission, ...] = CERTS_CLUSTER_PERMISSIONS
        if request.namespace:
            assert request.namespace == NAMESPACE, request
            permissions = CERTS_NAMESPACED_PERMISSIONS
        assert allows(permissions, request.api_group, request.resource, request.verb, request.name), request


async def test_first_run_creates_secret_and_patches_every_webhook(fake_api: FakeApiServer, api_client: Any) -> None:
    install_webhook_configurations(fake_api)
    result = await reconcile(CertsApi(api_client), settings())

    assert result.decision.reason is RenewalReason.MISSING and result.secret_written
    assert result.patched == ("MutatingWebhookConfiguration/preemptguard.io",
                              "ValidatingWebhookConfiguration/preemptguard.io")
    secret = stored_secret(fake_api)
    assert secret["type"] == "kubernetes.io/tls"
    ca_crt = base64.b64decode(secret["data"]["ca.crt"])
    cert = load_certificates(base64.b64decode(secret["data"]["tls.crt"]))[0]
    cert.verify_directly_issued_by(load_certificates(ca_crt)[0])
    bundles = ca_bundles(fake_api)
    assert len(bundles) == 3 and all(bundle == ca_crt for bundle in bundles)
    # The patch touched caBundle only: the rest of each webhook is as applied from the manifests.
    mutating = fake_api.get("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "preemptguard.io")
    assert mutating is not None
    assert mutating["webhooks"][0]["clientConfig"]["service"]["path"] == "/mutate/pods"
    assert mutating["webhooks"][0]["failurePolicy"] == "Ignore"
    assert [(r.verb, r.resource) for r in fake_api.requests] == [
        ("get", "secrets"),
        ("get", "mutatingwebhookconfigurations"), ("patch", "mutatingwebhookconfigurations"),
        ("get", "validatingwebhookconfigurations"), ("patch", "validatingwebhookconfigurations"),
        ("create", "secrets"),
    ]
    assert all(r.content_type == "application/strategic-merge-patch+json"
               for r in fake_api.requests if r.verb == "patch")
    assert_certs_rbac_allows_every_call(fake_api)


async def test_second_run_reuses_and_changes_nothing(fake_api: FakeApiServer, api_client: Any) -> None:
    install_webhook_configurations(fake_api)
    await reconcile(CertsApi(api_client), settings())
    before = copy.deepcopy(fake_api.objects)
    fake_api.requests.clear()

    result = await reconcile(CertsApi(api_client), settings())

    assert not result.decision.renew and not result.secret_written and result.patched == ()
    assert fake_api.objects == before
    assert {r.verb for r in fake_api.requests} == {"get"}
    assert_certs_rbac_allows_every_call(fake_api)


async def test_lost_ca_bundle_is_restored_without_a_new_certificate(fake_api: FakeApiServer, api_client: Any
                                                                    ) -> None:
    install_webhook_configurations(fake_api)
    await reconcile(CertsApi(api_client), settings())
    secret_before = copy.deepcopy(stored_secret(fake_api))
    # Someone replaced both configurations (e.g. `kubectl replace -k`), dropping caBundle.
    install_webhook_configurations(fake_api)
    fake_api.requests.clear()

    result = await reconcile(CertsApi(api_client), settings())

    assert not result.secret_written
    assert set(result.patched) == {"MutatingWebhookConfiguration/preemptguard.io",
                                   "ValidatingWebhookConfiguration/preemptguard.io"}
    assert stored_secret(fake_api) == secret_before
    assert all(bundle == base64.b64decode(secret_before["data"]["ca.crt"]) for bundle in ca_bundles(fake_api))


async def test_renewal_trusts_old_and_new_ca_and_updates_with_resource_version(
        fake_api: FakeApiServer, api_client: Any) -> None:
    install_webhook_configurations(fake_api)
    await reconcile(CertsApi(api_client), settings())
    old = stored_secret(fake_api)
    old_cert = load_certificates(base64.b64decode(old["data"]["tls.crt"]))[0]
    fake_api.requests.clear()

    inside_window = old_cert.not_valid_after_utc - datetime.timedelta(days=10)
    result = await reconcile(CertsApi(api_client), settings(), now=inside_window)

    assert result.decision.reason is RenewalReason.EXPIRING and result.secret_written
    new = stored_secret(fake_api)
    new_cert = load_certificates(base64.b64decode(new["data"]["tls.crt"]))[0]
    assert new_cert.serial_number != old_cert.serial_number
    bundle = load_certificates(base64.b64decode(new["data"]["ca.crt"]))
    assert len(bundle) == 2
    new_cert.verify_directly_issued_by(bundle[0])
    old_cert.verify_directly_issued_by(bundle[1])  # pods still serving the old certificate stay trusted
    assert all(b == base64.b64decode(new["data"]["ca.crt"]) for b in ca_bundles(fake_api))
    update = next(r for r in fake_api.requests if r.verb == "update")
    assert update.body["metadata"]["resourceVersion"] == old["metadata"]["resourceVersion"]
    # caBundle is patched before the Secret changes, so no pod ever serves a certificate the API server distrusts.
    verbs = [r.verb for r in fake_api.requests]
    assert verbs.index("update") > max(i for i, v in enumerate(verbs) if v == "patch")
    assert_certs_rbac_allows_every_call(fake_api)


async def test_conflicting_secret_update_fails_cleanly(fake_api: FakeApiServer, api_client: Any) -> None:
    install_webhook_configurations(fake_api)
    await reconcile(CertsApi(api_client), settings())
    fake_api.fail_next["update"] = 409
    with pytest.raises(ApiError) as caught:
        await reconcile(CertsApi(api_client), settings(force=True))
    assert caught.value.code == 409 and caught.value.exit_code == 3


async def test_missing_webhook_configuration_is_a_config_error(fake_api: FakeApiServer, api_client: Any) -> None:
    with pytest.raises(ConfigError, match=r"MutatingWebhookConfiguration preemptguard\.io not found"):
        await reconcile(CertsApi(api_client), settings())
    assert fake_api.get("", "secrets", NAMESPACE, "preemptguard-tls") is None


async def test_every_declared_certs_permission_is_exercised(fake_api: FakeApiServer, api_client: Any) -> None:
    """The Role and ClusterRole of the certificate job grant nothing the code does not use."""
    install_webhook_configurations(fake_api)
    await reconcile(CertsApi(api_client), settings())  # create
    await reconcile(CertsApi(api_client), settings(force=True))  # update
    used = {(r.api_group, r.resource, r.verb) for r in fake_api.requests}
    declared = {(p.api_group, p.resource, verb) for p in CERTS_NAMESPACED_PERMISSIONS + CERTS_CLUSTER_PERMISSIONS
                for verb in p.verbs}
    assert used == declared
    assert_certs_rbac_allows_every_call(fake_api)


async def test_cli_runs_against_the_cluster_of_a_kubeconfig(fake_api: FakeApiServer, kubeconfig: Path) -> None:
    install_webhook_configurations(fake_api)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhook.cli", "certs", "--kubeconfig", str(kubeconfig), "--days", "90",
        "--renew-before-days", "20", cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    secret = stored_secret(fake_api)
    cert = load_certificates(base64.b64decode(secret["data"]["tls.crt"]))[0]
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert datetime.timedelta(days=89) < lifetime <= datetime.timedelta(days=90, minutes=10)
    # Logs name the certificate, never the key.
    log = stdout + stderr
    key_b64 = secret["data"]["tls.key"]
    key_body = base64.b64decode(key_b64).decode().splitlines()[1]
    assert b"PRIVATE KEY" not in log and key_body.encode() not in log and key_b64.encode() not in log
    assert b"serial" in stderr

    # Failing calls give one line on stderr and the error's exit code.
    fake_api.fail_next["get"] = 403
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhook.cli", "certs", "--kubeconfig", str(kubeconfig), cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 3
    assert "HTTP 403" in stderr.decode() and "Traceback" not in stderr.decode()
