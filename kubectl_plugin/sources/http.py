"""What the two HTTP sources (``--webhook-url`` and the API server) share: the request timeout and the
one-line texts of error bodies and transport failures."""

from __future__ import annotations

import json
from collections.abc import Mapping

REQUEST_TIMEOUT_SECONDS = 60.0


def error_text(body: bytes) -> str:
    """The ``error`` (PreemptGuard) or ``message`` (Kubernetes Status) of an error body, else its start."""
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, Mapping):
        for key in ("error", "message"):
            if isinstance(document.get(key), str):
                return " ".join(document[key].split())
    return " ".join(body[:200].decode("utf-8", "replace").split())


def describe(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
