"""``--webhook-url URL``: a PreviewRequest per object to a PreemptGuard server's ``/preview``, which simulates
a workload's replicas in order."""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubectl_plugin.inputs import JsonObject, flatten
from kubectl_plugin.render import Progress
from kubectl_plugin.sources.document import PreviewAnswer, check_preview
from kubectl_plugin.sources.http import DEFAULT_TIMEOUT, RequestTimeout, describe, error_text
from webhook.errors import ClusterUnavailable, ConfigError, Forbidden, InvalidInput, Unauthorized
from webhook.preemption.preview import preview_document
from webhook.routes import PREVIEW_PATH

if TYPE_CHECKING:  # aiohttp is imported where it is used: offline runs start faster without it
    import aiohttp


def client_ssl_context(*, certificate_authority: str | None, insecure: bool) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if certificate_authority:
        try:
            context.load_verify_locations(cafile=certificate_authority)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--certificate-authority {certificate_authority}: cannot load: {exc}") from exc
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


@dataclass(slots=True)
class WebhookPreviewSource:
    """``POST <url>/preview`` with a PreviewRequest (docs/interfaces.md §3) per object."""

    url: str
    token: str | None = None
    certificate_authority: str | None = None
    insecure_skip_tls_verify: bool = False
    timeout: RequestTimeout = DEFAULT_TIMEOUT

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith(PREVIEW_PATH) else base + PREVIEW_PATH

    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer:
        import aiohttp

        context = client_ssl_context(certificate_authority=self.certificate_authority,
                                     insecure=self.insecure_skip_tls_verify)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        results: list[JsonObject] = []
        redacted: set[str] = set()
        async with aiohttp.ClientSession(timeout=self.timeout.client_timeout(), headers=headers,
                                         connector=aiohttp.TCPConnector(ssl=context)) as session:
            items = flatten(objects)
            progress.start(len(items), "asking PreemptGuard")
            for obj in items:
                request: JsonObject = {"pod": obj}
                if namespace:
                    request["namespace"] = namespace
                if replicas is not None:
                    request["replicas"] = replicas
                document = await self._post(session, request)
                answer = check_preview(document, self.endpoint)
                results += answer["results"]
                redacted.update(answer.get("redactedNamespaces") or [])
                progress.advance()
            progress.finish()
        preview = preview_document(results)
        if redacted:  # the namespaces /preview redacted victims in, as one answer lists them
            preview["redactedNamespaces"] = sorted(redacted)
        return PreviewAnswer(preview)

    async def _post(self, session: aiohttp.ClientSession, request: JsonObject) -> object:
        import aiohttp

        try:
            async with session.post(self.endpoint, json=request) as response:
                body = await response.read()
                status = response.status
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ClusterUnavailable(
                f"cannot verify the certificate of {self.endpoint}: {exc.certificate_error}; pass "
                "--certificate-authority FILE (or --insecure-skip-tls-verify)") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ClusterUnavailable(
                f"cannot reach PreemptGuard at {self.endpoint}: {describe(exc, self.timeout)}") from exc
        if status == 401:
            raise Unauthorized(f"{self.endpoint}: HTTP 401 Unauthorized: {error_text(body)} (check --token)")
        if status == 403:
            raise Forbidden(f"{self.endpoint}: HTTP 403 Forbidden: {error_text(body)}")
        if status == 404:
            raise InvalidInput(f"{self.endpoint}: HTTP 404: no such endpoint (is --webhook-url a PreemptGuard server?)")
        if status >= 500:
            raise ClusterUnavailable(f"{self.endpoint}: HTTP {status}: {error_text(body)}")
        if status != 200:
            raise InvalidInput(f"{self.endpoint}: HTTP {status}: {error_text(body)}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise InvalidInput(f"{self.endpoint} did not return JSON") from exc
