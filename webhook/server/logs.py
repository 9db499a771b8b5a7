"""Logs: plain text or JSON lines (``--log-format``), and one line per admission decision worth reading.

A JSON line carries ``time``, ``level``, ``logger`` and ``message``, plus the fields a log stack indexes:
``uid`` (the AdmissionReview's), ``namespace``, ``pod``, ``verdict``, ``rules``, ``duration_ms``. With
``--log-denials`` (the default) every denial and every guardrail warning is logged at info level, with what
the requester was told: the answer is already tenant-redacted (docs/interfaces.md §7), so the log names no
other tenant's pods either. Tokens and certificate material never reach a log line: nothing here is handed
request headers, bodies or key files.
"""

from __future__ import annotations

import datetime
import logging
import sys
from collections.abc import Mapping
from typing import Any, Literal

import orjson

from webhook.admission.decision import AdmissionDecision
from webhook.admission.review import AdmissionRequest

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
# The structured fields a decision line carries (``extra={"fields": {...}}``).
FIELDS = "fields"
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

decisions = logging.getLogger("webhook.decisions")

# Control characters (C0 but tab, DEL, C1) and the Unicode line and paragraph separators, as Python escapes:
# a pod or namespace name holding a newline must not start a forged line of its own in a text log.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x09), *range(0x0a, 0x20), *range(0x7f, 0xa0))}
_CONTROLS.update({0x2028: "\\u2028", 0x2029: "\\u2029"})


def escape_controls(text: str) -> str:
    """``text`` with every control character written as its escape (``\\n`` as ``\\x0a``)."""
    return text.translate(_CONTROLS)


class TextFormatter(logging.Formatter):
    """The text format, one line per message: control characters in the message are escaped (a traceback that
    follows keeps its own lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (RFC 3339, UTC), level, logger, message, and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, Mapping):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str, log_format: LogFormat = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter(_TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


def _pod_of(request: AdmissionRequest) -> str:
    meta = request.object.get("metadata") if request.object is not None else None
    if request.name:
        return request.name
    if isinstance(meta, Mapping):
        return str(meta.get("name") or meta.get("generateName") or "")
    return ""


def log_decision(request: AdmissionRequest, outcome: AdmissionDecision, seconds: float) -> None:
    """An info line for a denial or for an answer carrying guardrail warnings (nothing for a plain allow)."""
    decision = outcome.audit_annotations.get("guardrail-decision", "")
    if outcome.allowed and decision not in ("warned", "exempt"):
        return
    verdict = "denied" if not outcome.allowed else decision
    fields = {"uid": request.uid, "namespace": request.namespace, "pod": _pod_of(request), "verdict": verdict,
              "rules": list(outcome.denied_by), "duration_ms": round(seconds * 1000, 3)}
    said = outcome.status.message if outcome.status is not None else "; ".join(outcome.warnings)
    decisions.info("%s %s %s/%s: %s", request.resource["resource"] or "object", verdict, request.namespace,
                   fields["pod"], said, extra={FIELDS: fields})
