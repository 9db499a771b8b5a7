"""What the two HTTP sources (``--webhook-url`` and the API server) share: the request timeout and the
one-line texts of error bodies and transport failures."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # aiohttp is imported where it is used: offline runs start faster without it
    import aiohttp

SECOND = 10**9  # nanoseconds, as Go's time.Duration counts
DEFAULT_REQUEST_TIMEOUT = "60s"
_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": SECOND, "m": 60 * SECOND,
          "h": 3600 * SECOND}
_DURATION_PART = re.compile(r"(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)")
INVALID_TIMEOUT = ("invalid timeout value. Timeout must be a single integer in seconds, or an integer followed by a "
                   "corresponding time unit (e.g. 1s | 2m | 3h)")


def parse_go_duration(text: str) -> int:
    """Go's ``time.ParseDuration`` in nanoseconds: ``1h2m``, ``1.5s``, ``300ms``, a sign, or ``0``."""
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    if body == "0":
        return 0
    total, position = Fraction(0), 0
    while position < len(body) or position == 0:
        match = _DURATION_PART.match(body, position)
        if match is None or not (match.group(1) or match.group(2)):
            raise ValueError(f"invalid duration {text!r}")
        whole, fraction, unit = match.group(1) or "0", match.group(2) or "", match.group(3)
        total += (int(whole) + (Fraction(int(fraction), 10 ** len(fraction)) if fraction else 0)) * _UNITS[unit]
        position = match.end()
    return sign * int(total)


def go_duration(nanoseconds: int) -> str:
    """Go's ``time.Duration.String``: ``30s``, ``1m0s``, ``1h2m0s``, ``1.5s``, ``500ms`` (as kubectl sends
    ``?timeout=``)."""
    if nanoseconds == 0:
        return "0s"
    if nanoseconds < SECOND:
        unit, size = next((u, s) for u, s in (("ms", 10**6), ("µs", 10**3), ("ns", 1)) if nanoseconds >= s)
        return _decimal(nanoseconds, size) + unit
    hours, rest = divmod(nanoseconds, 3600 * SECOND)
    minutes, rest = divmod(rest, 60 * SECOND)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + _decimal(rest, SECOND) + "s"


def _decimal(value: int, size: int) -> str:
    whole, part = divmod(value, size)
    digits = str(part).rjust(len(str(size)) - 1, "0").rstrip("0") if part else ""
    return f"{whole}.{digits}" if digits else str(whole)


@dataclass(frozen=True, slots=True)
class RequestTimeout:
    """kubectl's ``--request-timeout``: how long one request to the API server or to PreemptGuard may take,
    in nanoseconds; ``0`` waits as long as it takes."""

    nanoseconds: int

    @classmethod
    def parse(cls, text: str) -> RequestTimeout:
        """client-go's ``clientcmd.ParseTimeout``: a whole number of seconds, or a Go duration (``30s``, ``1m``,
        ``1h30m``, ``1.5s``); empty is the default. A negative duration, which no request can meet, is refused."""
        if not text:
            return cls.parse(DEFAULT_REQUEST_TIMEOUT)
        try:
            value = int(text) * SECOND if re.fullmatch(r"[+-]?\d+", text) else parse_go_duration(text)
        except ValueError:
            value = -1
        if value < 0:
            raise ValueError(INVALID_TIMEOUT)
        return cls(value)

    @property
    def seconds(self) -> float | None:
        return self.nanoseconds / SECOND if self.nanoseconds else None

    def client_timeout(self) -> aiohttp.ClientTimeout:
        """The whole request (connection, TLS, answer) within the timeout, or no limit at all for ``0``."""
        import aiohttp

        return aiohttp.ClientTimeout(total=self.seconds)

    def query(self) -> list[tuple[str, str]]:
        """``timeout=<duration>``, which client-go adds to every request so that the API server gives up too."""
        return [("timeout", go_duration(self.nanoseconds))] if self.nanoseconds else []

    def __str__(self) -> str:
        return go_duration(self.nanoseconds)


DEFAULT_TIMEOUT = RequestTimeout.parse(DEFAULT_REQUEST_TIMEOUT)


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


def describe(exc: BaseException, timeout: RequestTimeout | None = None) -> str:
    """One line for a transport failure; a timeout names ``--request-timeout``, whose value caused it."""
    if isinstance(exc, TimeoutError) and timeout is not None:
        return f"no answer within {timeout} (--request-timeout)"
    return " ".join(str(exc).split()) or type(exc).__name__
