"""Typed field access on JSON and YAML documents: the one set of readers every package uses (API objects,
AdmissionReviews, PreviewRequests).

Each reader takes the raw value and the field's path for the message: absent (``None``) takes the API default
(the ``json_required_*`` readers refuse it: "request.uid is required"), a wrong type raises ``InvalidInput``
naming the field ("spec.priority: expected an integer, got str").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from webhook.errors import InvalidInput

JsonObject = Mapping[str, Any]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def json_object(value: object, path: str) -> JsonObject:
    if type(value) is dict:  # the common case, without the slower ABC isinstance check
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{path}: expected an object, got {type(value).__name__}")
    return value


def json_optional_object(value: object, path: str) -> JsonObject | None:
    return None if value is None else json_object(value, path)


def json_required_object(value: object, path: str) -> JsonObject:
    if value is None:
        raise InvalidInput(f"{path} is required")
    return json_object(value, path)


def json_list(value: object, path: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(f"{path}: expected a list, got {type(value).__name__}")
    return value


def json_str(value: object, path: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidInput(f"{path}: expected a string, got {type(value).__name__}")
    return value


def json_required_str(value: object, path: str) -> str:
    if value is None:
        raise InvalidInput(f"{path} is required")
    return json_str(value, path)


def json_str_list(value: object, path: str) -> list[str]:
    items = json_list(value, path)
    if all(type(item) is str for item in items):
        return list(items)
    return [json_required_str(item, f"{path}[{i}]") for i, item in enumerate(items)]


def json_int(value: object, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise InvalidInput(f"{path}: expected an integer, got {type(value).__name__}")
    return value


def json_int32(value: object, path: str) -> int | None:
    number = json_int(value, path)
    if number is not None and not INT32_MIN <= number <= INT32_MAX:
        raise InvalidInput(f"{path}: expected a 32-bit integer, got {number}")
    return number


def json_bool(value: object, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidInput(f"{path}: expected a boolean, got {type(value).__name__}")
    return value


def parse_time_ns(value: object, path: str) -> int | None:
    """RFC 3339 time (with optional fractional seconds) to integer nanoseconds since the epoch."""
    text = json_str(value, path)
    if not text:
        return None
    try:
        main, _, rest = text.partition(".")
        fraction = ""
        zone = "Z"
        if rest:
            digits = len(rest) - len(rest.lstrip("0123456789"))
            fraction, zone = rest[:digits], rest[digits:] or "Z"
        elif text.endswith("Z"):
            main, zone = text[:-1], "Z"
        elif len(text) > 19:
            main, zone = text[:19], text[19:]
        zone = "+00:00" if zone in ("Z", "z") else zone
        seconds = int(datetime.fromisoformat(main + zone).timestamp())
    except ValueError as exc:
        raise InvalidInput(f"{path}: invalid RFC 3339 time {text!r}") from exc
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    return seconds * 1_000_000_000 + nanos
