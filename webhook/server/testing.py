"""A loopback harness: the real server on 127.0.0.1 over self-signed TLS, and a client that verifies it
the way the kube-apiserver does (against the certificate as CA bundle). Used by end-to-end tests.
"""

from __future__ import annotations

import dataclasses
import ssl
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from webhook.certs.issuance import generate_ca, issue_client_certificate
from webhook.config import Config
from webhook.server.app import RunningServer, make_app, start_server
from webhook.server.auth import Authenticator
from webhook.server.settings import ServerSettings
from webhook.server.tls import SelfSignedTLS
from webhook.sources.source import ClusterSource


def admission_review(request: Mapping[str, Any], uid: str | None = None) -> dict[str, Any]:
    """Wrap a request body in an ``admission.k8s.io/v1`` AdmissionReview (with a fresh uid by default)."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid or str(uuid.uuid4()), **request},
    }


class LoopbackWebhook:
    """``async with LoopbackWebhook(source) as hook:`` then ``await hook.post_json(path, body)``."""

    def __init__(self, source: ClusterSource, settings: ServerSettings | None = None, *, config: Config | None = None,
                 authenticator: Authenticator | None = None,
                 client_certificate: tuple[str | Path, str | Path] | None = None,
                 as_api_server: bool = False) -> None:
        """``client_certificate``: (cert file, key file) the client presents, as a kube-apiserver configured for
        ``serve --client-ca`` does. ``as_api_server``: serve with ``--client-ca`` of a CA made here, and present
        its client certificate (callers are authenticated)."""
        self.source = source
        self.settings = settings or ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True)
        self.config = config
        self.authenticator = authenticator
        self.client_certificate = client_certificate
        self.as_api_server = as_api_server
        self._pki: tempfile.TemporaryDirectory[str] | None = None
        self.server: RunningServer | None = None
        self.session: aiohttp.ClientSession | None = None
        self.client_context: ssl.SSLContext | None = None
        # A client of the /preview listener (settings.preview_port): trusts the server, presents no certificate.
        self.preview_session: aiohttp.ClientSession | None = None

    def _api_server_pki(self) -> None:
        self._pki = tempfile.TemporaryDirectory(prefix="preemptguard-loopback-")
        folder = Path(self._pki.name)
        ca = generate_ca("loopback-client-ca", 1)
        client = issue_client_certificate(ca.cert_pem, ca.key_pem, "kube-apiserver", 1)
        for name, data in (("ca.crt", ca.cert_pem), ("client.crt", client.cert_pem), ("client.key", client.key_pem)):
            (folder / name).write_bytes(data)
        self.settings = dataclasses.replace(self.settings, client_ca=folder / "ca.crt")
        self.client_certificate = (folder / "client.crt", folder / "client.key")

    async def __aenter__(self) -> LoopbackWebhook:
        if self.as_api_server:
            self._api_server_pki()
        tls = SelfSignedTLS(self.settings.tls_sans, client_ca=self.settings.client_ca)
        app = make_app(self.source, self.settings, config=self.config, authenticator=self.authenticator)
        self.server = await start_server(app, self.settings, tls=tls)
        self.client_context = ssl.create_default_context(cadata=tls.cert_pem.decode())
        if self.client_certificate is not None:
            self.client_context.load_cert_chain(*(str(path) for path in self.client_certificate))
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.client_context))
        if self.server.preview_port is not None:
            anonymous = ssl.create_default_context(cadata=tls.cert_pem.decode())
            self.preview_session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=anonymous))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for session in (self.session, self.preview_session):
            if session is not None:
                await session.close()
        if self.server is not None:
            await self.server.stop()
        if self._pki is not None:
            self._pki.cleanup()

    def url(self, path: str) -> str:
        assert self.server is not None, "use LoopbackWebhook as an async context manager"
        return f"https://127.0.0.1:{self.server.https_port}{path}"

    def preview_url(self, path: str) -> str:
        """``path`` on the /preview listener (``settings.preview_port``)."""
        assert self.server is not None and self.server.preview_port is not None, "serve with a preview_port"
        return f"https://127.0.0.1:{self.server.preview_port}{path}"

    async def post_preview_listener(self, path: str, body: object,
                                    headers: Mapping[str, str] | None = None) -> tuple[int, Any]:
        """POST ``body`` as JSON to ``path`` on the /preview listener, without a client certificate; the status and
        the decoded answer (None when it is not JSON)."""
        assert self.preview_session is not None, "serve with a preview_port"
        async with self.preview_session.post(self.preview_url(path), json=body, headers=headers) as response:
            try:
                return response.status, await response.json(content_type=None)
            except ValueError:
                return response.status, None

    async def post(self, path: str, data: bytes) -> tuple[int, bytes]:
        assert self.session is not None
        async with self.session.post(
            self.url(path), data=data, headers={"Content-Type": "application/json"}
        ) as response:
            return response.status, await response.read()

    async def post_json(self, path: str, body: object,
                        headers: Mapping[str, str] | None = None) -> tuple[int, Any]:
        assert self.session is not None
        async with self.session.post(self.url(path), json=body, headers=headers) as response:
            return response.status, await response.json(content_type=None)

    async def get(self, path: str) -> tuple[int, str]:
        assert self.session is not None
        async with self.session.get(self.url(path)) as response:
            return response.status, await response.text()
