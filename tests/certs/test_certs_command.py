"""``preempt-guard certs`` without a cluster: ``--dry-run`` output against the Kubernetes schema, ``--out-dir``."""

from __future__ import annotations

import argparse
import base64
import copy
import ssl
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from fake_kube_api import manifest_webhook_configurations, strategic_merge_webhooks

from webhook.certs.command import add_arguments, run
from webhook.certs.material import dns_names, load_certificates
from webhook.server.tls import server_context

REPO = Path(__file__).resolve().parents[2]
SCHEMA_VERSION = kubernetes_validate.latest_version()
SERVICE_NAMES = {"preemptguard", "preemptguard.preemptguard", "preemptguard.preemptguard.svc",
                 "preemptguard.preemptguard.svc.cluster.local"}


def certs(*argv: str) -> subprocess.CompletedProcess[str]:
    """``preempt-guard certs ARGS`` through the server CLI, which delegates to webhook.certs.command."""
    return subprocess.run([sys.executable, "-m", "webhook.cli", "certs", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)


def parse_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture(scope="module")
def dry_run_documents() -> list[dict[str, Any]]:
    result = certs("--dry-run", "--san", "preemptguard.example.com")
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


def test_dry_run_secret_validates_against_the_kubernetes_schema(dry_run_documents: list[dict[str, Any]]) -> None:
    secret = dry_run_documents[0]
    kubernetes_validate.validate(secret, SCHEMA_VERSION, strict=True)
    assert secret["kind"] == "Secret" and secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["namespace"] == "preemptguard"
    data = {key: base64.b64decode(value) for key, value in secret["data"].items()}
    cert = load_certificates(data["tls.crt"])[0]
    assert dns_names(cert) == SERVICE_NAMES | {"preemptguard.example.com"}
    cert.verify_directly_issued_by(load_certificates(data["ca.crt"])[0])


def test_dry_run_patches_yield_valid_webhook_configurations(dry_run_documents: list[dict[str, Any]]) -> None:
    """Each printed patch, applied to the manifest's configuration, gives a schema-valid object with caBundle."""
    patches = {doc["kind"]: doc for doc in dry_run_documents[1:]}
    assert set(patches) == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    ca_crt = base64.b64decode(dry_run_documents[0]["data"]["ca.crt"])
    for _, _, configuration in manifest_webhook_configurations():
        patch = patches[configuration["kind"]]
        assert patch["metadata"]["name"] == configuration["metadata"]["name"]
        patched = copy.deepcopy(configuration)
        strategic_merge_webhooks(patched, patch)
        kubernetes_validate.validate(patched, SCHEMA_VERSION, strict=True)
        # The patch names every webhook of the manifest and adds none.
        assert [w["name"] for w in patched["webhooks"]] == [w["name"] for w in configuration["webhooks"]]
        for webhook in patched["webhooks"]:
            assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == ca_crt


def test_dry_run_validation_catches_a_broken_secret(dry_run_documents: list[dict[str, Any]]) -> None:
    broken = copy.deepcopy(dry_run_documents[0])
    broken["data"]["tls.crt"] = 42
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, SCHEMA_VERSION, strict=True)


def test_out_dir_writes_usable_files_and_reuses_them(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    first = certs("--out-dir", str(out), "--san", "localhost", "--san", "127.0.0.1")
    assert first.returncode == 0, first.stderr
    files = {name: (out / name).read_bytes() for name in ("tls.crt", "tls.key", "ca.crt")}
    assert stat.S_IMODE((out / "tls.key").stat().st_mode) == 0o600
    server_context(out / "tls.crt", out / "tls.key")  # loads as a serving pair
    client = ssl.create_default_context(cadata=files["ca.crt"].decode())
    assert client.cert_store_stats()["x509_ca"] == 1
    assert {"localhost", "127.0.0.1"} <= dns_names(x509.load_pem_x509_certificate(files["tls.crt"]))
    assert "PRIVATE KEY" not in first.stdout + first.stderr

    again = certs("--out-dir", str(out), "--san", "localhost", "--san", "127.0.0.1")
    assert again.returncode == 0 and "reusing" in again.stderr
    assert {name: (out / name).read_bytes() for name in files} == files

    forced = certs("--out-dir", str(out), "--san", "localhost", "--san", "127.0.0.1", "--force")
    assert forced.returncode == 0
    assert (out / "tls.crt").read_bytes() != files["tls.crt"]
    # The new bundle still trusts the previous CA (its certificate may still be served somewhere).
    assert len(load_certificates((out / "ca.crt").read_bytes())) == 2


@pytest.mark.parametrize(("argv", "message"), [
    (["--days", "0"], "--days must be positive"),
    (["--days", "10", "--renew-before-days", "10"], "less than --days"),
    (["--renew-before-days", "-1"], "at least 0"),
])
def test_bad_lifetimes_are_one_line_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    assert run(parse_args("--dry-run", *argv)) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
