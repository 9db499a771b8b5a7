"""Issue #24, TLS: a TLS 1.3 session ticket let a client of a rotated-out client CA resume without a certificate
check; an expired serving certificate was loaded without a word."""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import ssl
from pathlib import Path

import pytest

from webhook.certs.issuance import generate_ca, issue_client_certificate, issue_serving_certificate
from webhook.server.app import make_app, start_server
from webhook.server.settings import ServerSettings
from webhook.server.tls import ReloadingTLS, warn_if_expiring
from webhook.sources.source import MemorySource


def connect(port: int, context: ssl.SSLContext, session: ssl.SSLSession | None = None,
            ) -> tuple[ssl.SSLSession | None, bool]:
    """One request over a fresh connection (so a TLS 1.3 ticket arrives); the session and whether it resumed."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        answer = tls.recv(100)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        return tls.session, tls.session_reused


async def test_a_session_of_a_rotated_out_client_ca_cannot_be_resumed(tmp_path: Path) -> None:
    """No session tickets; and TLS 1.2, which also resumes by session ID from a cache Python cannot turn off, is
    refused under --client-ca."""
    server_ca = generate_ca("serving-ca", 1)
    serving = issue_serving_certificate(server_ca.cert_pem, server_ca.key_pem, ["localhost", "127.0.0.1"], 1)
    old_ca, new_ca = generate_ca("old-client-ca", 1), generate_ca("new-client-ca", 1)
    client = issue_client_certificate(old_ca.cert_pem, old_ca.key_pem, "kube-apiserver", 1)
    for name, data in (("tls.crt", serving.cert_pem), ("tls.key", serving.key_pem), ("ca.crt", old_ca.cert_pem),
                       ("client.crt", client.cert_pem), ("client.key", client.key_pem)):
        (tmp_path / name).write_bytes(data)
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_cert=tmp_path / "tls.crt",
                              tls_key=tmp_path / "tls.key", tls_reload_interval=0.05, client_ca=tmp_path / "ca.crt")
    server = await start_server(make_app(MemorySource(), settings), settings)
    context = ssl.create_default_context(cadata=server_ca.cert_pem.decode())
    context.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
    tls12 = ssl.create_default_context(cadata=server_ca.cert_pem.decode())
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    tls12.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
    try:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await asyncio.to_thread(connect, server.https_port, tls12)
        session, _ = await asyncio.to_thread(connect, server.https_port, context)
        (tmp_path / "ca.crt").write_bytes(new_ca.cert_pem)  # the old CA is rotated out
        tls = server.tls
        assert isinstance(tls, ReloadingTLS)
        for _ in range(100):
            if tls.reload_if_changed() or tls._current.identity == tls._identity():
                break
            await asyncio.sleep(0.05)
        with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
            await asyncio.to_thread(connect, server.https_port, context, session)
    finally:
        await server.stop()


def test_an_expired_or_expiring_serving_certificate_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    with caplog.at_level(logging.WARNING, logger="webhook.server.tls"):
        warn_if_expiring("tls.crt", now - datetime.timedelta(hours=1), now)
        warn_if_expiring("tls.crt", now + datetime.timedelta(days=3), now)
        warn_if_expiring("tls.crt", now + datetime.timedelta(days=90), now)
    assert [r.getMessage() for r in caplog.records] == [
        "the serving certificate tls.crt expired at 2025-12-31T23:00:00+00:00: the API server will refuse it",
        "the serving certificate tls.crt expires at 2026-01-04T00:00:00+00:00, in 3 days",
    ]


def test_loading_an_expired_serving_certificate_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ca = generate_ca("serving-ca", 1)
    serving = issue_serving_certificate(ca.cert_pem, ca.key_pem, ["localhost"], 1)
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    with caplog.at_level(logging.WARNING, logger="webhook.server.tls"):
        ReloadingTLS(tmp_path / "tls.crt", tmp_path / "tls.key")  # valid for 1 day: expiring soon
    assert any("expires at" in r.getMessage() for r in caplog.records)
