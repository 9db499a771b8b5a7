"""Caller authentication (docs/interfaces.md §7): under --client-ca the admission paths answer only a caller
presenting a client certificate of that CA (and, with --client-cn, of that name); probes need none."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from webhook.certs.issuance import generate_ca, issue_client_certificate, issue_serving_certificate
from webhook.cluster.snapshot import ClusterState
from webhook.errors import ConfigError
from webhook.routes import HEALTHZ_PATH, MUTATE_PODS_PATH, READYZ_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.app import METRICS_KEY, make_app, start_server
from webhook.server.client_auth import certificate_names
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.server.tls import serving_tls
from webhook.sources.source import MemorySource

FORGED = admission_review({
    "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1",
                                                                       "resource": "pods"},
    "name": "web-0", "namespace": "team-a", "operation": "CREATE",
    "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "team-a"},
               "spec": {"containers": [{"name": "c"}]}},
})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serving_metrics_on_a_free_port(pki: dict[str, Path]) -> AsyncIterator[tuple[LoopbackWebhook, int]]:
    """A webhook requiring client certificates, its metrics on a free port: a port picked free can be taken by
    another process before the server binds it (0 turns the listener off), so a few tries."""
    for attempt in range(5):
        metrics_port = free_port()
        settings_ = ServerSettings(host="127.0.0.1", port=0, metrics_port=metrics_port, tls_self_signed=True,
                                   client_ca=pki["ca"])
        webhook = LoopbackWebhook(MemorySource(ClusterState()), settings_, client_certificate=None)
        try:
            await webhook.__aenter__()
        except ConfigError as exc:
            if "--metrics-port" not in str(exc) or attempt == 4:
                raise
            continue
        try:
            yield webhook, metrics_port
        finally:
            await webhook.__aexit__(None, None, None)
        return


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    """A client CA with a certificate for kube-apiserver, and a stranger CA with one of its own."""
    ca = generate_ca("webhook-client-ca", 30)
    apiserver = issue_client_certificate(ca.cert_pem, ca.key_pem, "kube-apiserver", 30)
    other = issue_client_certificate(ca.cert_pem, ca.key_pem, "someone-else", 30)
    stranger_ca = generate_ca("stranger", 30)
    stranger = issue_client_certificate(stranger_ca.cert_pem, stranger_ca.key_pem, "kube-apiserver", 30)
    files = {"ca": write(tmp_path / "ca.crt", ca.cert_pem)}
    for name, issued in (("apiserver", apiserver), ("other", other), ("stranger", stranger)):
        files[f"{name}.crt"] = write(tmp_path / f"{name}.crt", issued.cert_pem)
        files[f"{name}.key"] = write(tmp_path / f"{name}.key", issued.key_pem)
    return files


def settings(pki: dict[str, Path], *names: str) -> ServerSettings:
    return ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True, client_ca=pki["ca"],
                          client_cns=names)


def hook(pki: dict[str, Path], who: str | None, *names: str) -> LoopbackWebhook:
    cert = (pki[f"{who}.crt"], pki[f"{who}.key"]) if who else None
    return LoopbackWebhook(MemorySource(ClusterState()), settings(pki, *names), client_certificate=cert)


async def test_a_forged_review_without_a_client_certificate_is_refused_at_the_handshake(pki: dict[str, Path]) -> None:
    """CERT_REQUIRED: a caller without a certificate never reaches HTTP (it holds no connection slot either);
    kubelet probes, which carry none, are answered on the metrics listener."""
    async with serving_metrics_on_a_free_port(pki) as (webhook, metrics_port):
        for path in (MUTATE_PODS_PATH, VALIDATE_PRIORITYCLASSES_PATH, HEALTHZ_PATH):
            with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
                await webhook.post_json(path, FORGED)
        async with aiohttp.ClientSession() as plain:
            for path in (HEALTHZ_PATH, READYZ_PATH):
                async with plain.get(f"http://127.0.0.1:{metrics_port}{path}") as response:
                    assert (response.status, await response.text()) == (200, "ok")


async def test_the_api_servers_certificate_is_answered(pki: dict[str, Path]) -> None:
    async with hook(pki, "apiserver", "kube-apiserver") as webhook:
        status, body = await webhook.post_json(MUTATE_PODS_PATH, FORGED)
    assert status == 200 and body["response"]["allowed"] is True


async def test_a_certificate_of_another_name_is_forbidden(pki: dict[str, Path]) -> None:
    async with hook(pki, "other", "kube-apiserver") as webhook:
        status, body = await webhook.post_json(MUTATE_PODS_PATH, FORGED)
    assert status == 403 and "--client-cn" in body["error"]
    async with hook(pki, "other") as webhook:  # no --client-cn: any certificate of the CA
        assert (await webhook.post_json(MUTATE_PODS_PATH, FORGED))[0] == 200


async def test_a_certificate_of_another_ca_fails_the_handshake(pki: dict[str, Path]) -> None:
    async with hook(pki, "stranger") as webhook:
        with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
            await webhook.post_json(MUTATE_PODS_PATH, FORGED)


def test_names_of_a_peer_certificate() -> None:
    peer: dict[str, Any] = {"subject": ((("organizationName", "x"),), (("commonName", "kube-apiserver"),)),
                            "subjectAltName": (("DNS", "apiserver.local"), ("IP Address", "10.0.0.1"),
                                               ("email", "a@b"))}
    assert certificate_names(peer) == {"kube-apiserver", "apiserver.local", "10.0.0.1"}


def test_an_unreadable_client_ca_is_a_configuration_error(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.crt", b"not a certificate")
    with pytest.raises(ConfigError, match="--client-ca"):
        serving_tls(cert_file=None, key_file=None, self_signed=True, client_ca=broken)


async def test_a_rotated_client_ca_bundle_and_the_expiry_gauge_follow_the_files(tmp_path: Path) -> None:
    """A CA rotation needs no restart: the bundle is re-read when it changes (docs/deploy.md); and the served
    certificate's expiry is what the metrics say."""
    server_ca = generate_ca("serving-ca", 30)
    serving = issue_serving_certificate(server_ca.cert_pem, server_ca.key_pem, ["localhost", "127.0.0.1"], 10)
    old_ca, new_ca = generate_ca("old-client-ca", 30), generate_ca("new-client-ca", 30)
    client = issue_client_certificate(new_ca.cert_pem, new_ca.key_pem, "kube-apiserver", 30)
    write(tmp_path / "tls.crt", serving.cert_pem)
    write(tmp_path / "tls.key", serving.key_pem)
    bundle = write(tmp_path / "client-ca.crt", old_ca.cert_pem)
    write(tmp_path / "client.crt", client.cert_pem)
    write(tmp_path / "client.key", client.key_pem)
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_cert=tmp_path / "tls.crt",
                              tls_key=tmp_path / "tls.key", tls_reload_interval=0.05, client_ca=bundle)
    app = make_app(MemorySource(), settings)
    server = await start_server(app, settings)
    context = ssl.create_default_context(cadata=server_ca.cert_pem.decode())
    context.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
    url = f"https://127.0.0.1:{server.https_port}{MUTATE_PODS_PATH}"

    async def status() -> int | None:
        try:
            async with (aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
                        session.post(url, json=FORGED) as response):
                return response.status
        except (aiohttp.ClientError, ssl.SSLError):
            return None  # the handshake refused the certificate

    try:
        assert await status() is None  # signed by a CA the bundle does not hold yet
        write(bundle, old_ca.cert_pem + new_ca.cert_pem)
        for _ in range(100):
            if await status() == 200:
                break
            await asyncio.sleep(0.05)
        assert await status() == 200
        expiry = app[METRICS_KEY].registry.get_sample_value(
            "preemptguard_serving_certificate_expiry_timestamp_seconds")
        served = x509.load_pem_x509_certificate(serving.cert_pem).not_valid_after_utc
        assert expiry == served.timestamp()
    finally:
        await server.stop()
