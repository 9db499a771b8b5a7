"""TLS: SANs, TLS 1.2 minimum, and certificate files re-read on change without a restart."""

from __future__ import annotations

import asyncio
import ssl
import warnings
from pathlib import Path

import aiohttp
from cryptography import x509

from webhook.certs.issuance import generate_ca, issue_serving_certificate
from webhook.server.app import make_app, start_server
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook
from webhook.server.tls import ReloadingTLS, SelfSignedTLS
from webhook.sources.source import MemorySource


def sans_of(cert_pem: bytes) -> tuple[set[str], set[str]]:
    cert = x509.load_pem_x509_certificate(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)), {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


async def peer_certificate(port: int, context: ssl.SSLContext) -> x509.Certificate:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()


def test_self_signed_certificate_has_default_and_extra_sans() -> None:
    tls = SelfSignedTLS(["preempt-guard.preempt-guard.svc", "10.0.0.7"])
    dns, ips = sans_of(tls.cert_pem)
    assert dns == {"localhost", "preempt-guard.preempt-guard.svc"}
    assert ips == {"127.0.0.1", "10.0.0.7"}
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_2


async def test_client_verifies_by_hostname_and_ip() -> None:
    async with LoopbackWebhook(MemorySource()) as hook:
        assert hook.server is not None and hook.client_context is not None
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=hook.client_context)) as session:
            for host in ("127.0.0.1", "localhost"):
                async with session.get(f"https://{host}:{hook.server.https_port}/healthz") as response:
                    assert response.status == 200


async def test_tls_1_1_client_is_refused_and_1_2_accepted() -> None:
    async with LoopbackWebhook(MemorySource()) as hook:
        assert hook.server is not None
        port = hook.server.https_port
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            old.check_hostname, old.verify_mode = False, ssl.CERT_NONE
            old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
            old.set_ciphers("ALL:@SECLEVEL=0")
        refused = False
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=old)
            writer.close()
        except (ssl.SSLError, ConnectionError):
            refused = True
        assert refused
        tls12 = ssl.create_default_context(cadata=hook.server.tls.cert_pem.decode())  # type: ignore[union-attr]
        tls12.maximum_version = ssl.TLSVersion.TLSv1_2
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls12)
        assert writer.get_extra_info("ssl_object").version() == "TLSv1.2"
        assert "GCM" in writer.get_extra_info("ssl_object").cipher()[0] or "CHACHA" in writer.get_extra_info(
            "ssl_object").cipher()[0]
        writer.close()


def _write_pair(directory: Path, cert: bytes, key: bytes) -> None:
    # Like a Secret volume update: new files renamed into place.
    for name, data in (("tls.key", key), ("tls.crt", cert)):
        tmp = directory / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(directory / name)


async def test_rotated_certificate_files_are_served_without_restart(tmp_path: Path) -> None:
    ca_pem, ca_key = generate_ca("rotation-ca", 30)
    cert_a, key_a = issue_serving_certificate(ca_pem, ca_key, ["localhost", "127.0.0.1"], 10)
    cert_b, key_b = issue_serving_certificate(ca_pem, ca_key, ["localhost", "127.0.0.1"], 10)
    serial_a = x509.load_pem_x509_certificate(cert_a).serial_number
    serial_b = x509.load_pem_x509_certificate(cert_b).serial_number
    _write_pair(tmp_path, cert_a, key_a)
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_cert=tmp_path / "tls.crt",
                              tls_key=tmp_path / "tls.key", tls_reload_interval=0.05)
    server = await start_server(make_app(MemorySource(), settings), settings)
    assert isinstance(server.tls, ReloadingTLS)
    client = ssl.create_default_context(cadata=ca_pem.decode())
    url = f"https://127.0.0.1:{server.https_port}/healthz"
    try:
        assert (await peer_certificate(server.https_port, client)).serial_number == serial_a
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client)) as session:
            async with session.get(url) as response:
                assert response.status == 200
            _write_pair(tmp_path, cert_b, key_b)
            for _ in range(100):
                if (await peer_certificate(server.https_port, client)).serial_number == serial_b:
                    break
                await asyncio.sleep(0.05)
            assert (await peer_certificate(server.https_port, client)).serial_number == serial_b
            # The kept-alive connection from before the rotation still serves requests.
            async with session.get(url) as response:
                assert response.status == 200
        # A broken pair (key of another certificate) keeps serving the last good certificate.
        _write_pair(tmp_path, cert_a, key_b)
        await asyncio.sleep(0.3)
        assert (await peer_certificate(server.https_port, client)).serial_number == serial_b
    finally:
        await server.stop()
