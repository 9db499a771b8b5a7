"""Caller authentication for the admission paths (docs/interfaces.md §7): ``serve --client-ca FILE
[--client-cn NAME ...]``.

The TLS layer (``tls.server_context``) asks every client for a certificate and fails the handshake of one that
does not chain to the bundle. This middleware then requires that a certificate was presented on the admission
paths, and, with ``--client-cn``, that its common name or a subject alternative name is one of those names:
without one an AdmissionReview is refused with 401 (403 for a wrong name) before its body is read. Kubelet probes
(no certificate) are answered on the metrics listener; /preview authenticates its callers by bearer token
(``auth.py``), and is served without a client certificate on the ``--preview-port`` listener, which answers no
admission path.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiohttp import web

from webhook.routes import MUTATE_PODS_PATH, VALIDATE_PRIORITYCLASSES_PATH

log = logging.getLogger(__name__)

AUTHENTICATED_PATHS = frozenset({MUTATE_PODS_PATH, VALIDATE_PRIORITYCLASSES_PATH})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def certificate_names(peercert: Mapping[str, Any]) -> set[str]:
    """The subject common names and the DNS/IP subject alternative names of ``ssl.getpeercert()``."""
    names = {value for rdn in peercert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names.update(value for kind, value in peercert.get("subjectAltName", ()) if kind in ("DNS", "IP Address"))
    return names


def client_certificate_middleware(allowed_names: Iterable[str]) -> Any:
    """Require a verified client certificate (named one of ``allowed_names``, when given) on the admission paths."""
    allowed = frozenset(allowed_names)

    @web.middleware
    async def require_client_certificate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in AUTHENTICATED_PATHS:
            return await handler(request)
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        if not peercert:
            log.info("refused %s without a client certificate from %s", request.path, request.remote)
            return _refusal(401, "a client certificate signed by the --client-ca bundle is required")
        if allowed and not certificate_names(peercert) & allowed:
            log.info("refused %s: client certificate %s is not one of --client-cn", request.path,
                     sorted(certificate_names(peercert)))
            return _refusal(403, "the client certificate's name is not one of --client-cn")
        return await handler(request)

    return require_client_certificate


def _refusal(status: int, message: str) -> web.Response:
    response = web.json_response({"error": message}, status=status)
    response.force_close()  # the unread review body stays unread
    return response
