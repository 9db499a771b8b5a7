"""``--webhook-url URL``: a PreviewRequest per object to a PreemptGuard server's ``/preview``, which simulates
a workload's replicas in order.

A server that answers 429 (``prediction.previewsPerMinute``, or ``/preview``'s requests in flight) or a 5xx with
``Retry-After: N`` is asked again after N seconds, as client-go's REST client does (k8s.io/client-go/rest:
``checkWait``, whole seconds only; at most 10 retries): within ``--request-timeout`` counted from the first try,
since kubectl's timeout covers the retries too (``Request.request`` sets its context before the retry loop).
When it gives up, or a 429 says no ``Retry-After``, that is one error line and exit 3: PreemptGuard did not
answer.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Mapping, Sequence
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

# client-go's default (k8s.io/client-go/rest/request.go: maxRetries 10).
MAX_RETRIES = 10


def retry_after_seconds(status: int, headers: Mapping[str, str]) -> int | None:
    """How long the server asked to wait before trying again: a 429 or 5xx with ``Retry-After`` in whole seconds
    (client-go's ``checkWait``; an HTTP date is not honoured there either), else None (no retry)."""
    if status != 429 and status < 500:
        return None
    value = headers.get("Retry-After", "").strip()
    return int(value) if value.isdigit() else None


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
                document = await self._post(session, request, progress)
                answer = check_preview(document, self.endpoint)
                results += answer["results"]
                redacted.update(answer.get("redactedNamespaces") or [])
                progress.advance()
            progress.finish()
        preview = preview_document(results)
        if redacted:  # the namespaces /preview redacted victims in, as one answer lists them
            preview["redactedNamespaces"] = sorted(redacted)
        return PreviewAnswer(preview)

    async def _post(self, session: aiohttp.ClientSession, request: JsonObject, progress: Progress) -> object:
        """The decoded answer to ``request``, asked again while the server says when (``Retry-After``)."""
        started, retries = time.monotonic(), 0
        while True:
            status, body, headers = await self._exchange(session, request)
            wait = retry_after_seconds(status, headers)
            if wait is None:
                return self._decoded(status, body)
            refusal = f"{self.endpoint}: HTTP {status}: {error_text(body)}"
            if retries == MAX_RETRIES:
                raise ClusterUnavailable(f"{refusal}; still refused after {MAX_RETRIES} retries (Retry-After)")
            limit = self.timeout.seconds
            if limit is not None and time.monotonic() - started + wait > limit:
                raise ClusterUnavailable(f"{refusal}; not retried: Retry-After {wait}s is past --request-timeout "
                                         f"{self.timeout} (counted from the first try)")
            await self._wait(wait, status, progress)
            retries += 1

    @staticmethod
    async def _wait(seconds: int, status: int, progress: Progress) -> None:
        label = progress.label
        progress.label = f"asking PreemptGuard (HTTP {status}: retrying in {seconds}s as it asks)"
        progress.draw()
        await asyncio.sleep(seconds)
        progress.label = label

    async def _exchange(self, session: aiohttp.ClientSession,
                        request: JsonObject) -> tuple[int, bytes, Mapping[str, str]]:
        import aiohttp

        try:
            async with session.post(self.endpoint, json=request) as response:
                return response.status, await response.read(), response.headers
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ClusterUnavailable(
                f"cannot verify the certificate of {self.endpoint}: {exc.certificate_error}; pass "
                "--certificate-authority FILE (or --insecure-skip-tls-verify)") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ClusterUnavailable(
                f"cannot reach PreemptGuard at {self.endpoint}: {describe(exc, self.timeout)}") from exc

    def _decoded(self, status: int, body: bytes) -> object:
        if status == 401:
            raise Unauthorized(f"{self.endpoint}: HTTP 401 Unauthorized: {error_text(body)} (check --token)")
        if status == 403:
            raise Forbidden(f"{self.endpoint}: HTTP 403 Forbidden: {error_text(body)}")
        if status == 404:
            raise InvalidInput(f"{self.endpoint}: HTTP 404: no such endpoint (is --webhook-url a PreemptGuard server?)")
        if status == 429 or status >= 500:  # PreemptGuard cannot answer now (a 429 without Retry-After)
            raise ClusterUnavailable(f"{self.endpoint}: HTTP {status}: {error_text(body)}")
        if status != 200:
            raise InvalidInput(f"{self.endpoint}: HTTP {status}: {error_text(body)}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise InvalidInput(f"{self.endpoint} did not return JSON") from exc
