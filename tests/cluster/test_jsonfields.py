"""The typed field readers every package uses on API dicts and AdmissionReviews: defaults for absent fields, exact
messages in one style."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

import pytest

from webhook.cluster.jsonfields import (
    json_bool,
    json_int,
    json_int32,
    json_list,
    json_object,
    json_optional_object,
    json_required_object,
    json_required_str,
    json_str,
    json_str_list,
    parse_time_ns,
)
from webhook.errors import InvalidInput


def test_absent_fields_take_the_api_defaults() -> None:
    assert json_object(None, "spec") == {}
    assert json_list(None, "spec.containers") == []
    assert json_str(None, "metadata.name") == ""
    assert json_str(None, "spec.schedulerName", "default-scheduler") == "default-scheduler"
    assert json_int(None, "spec.priority") is None
    assert json_bool(None, "spec.unschedulable") is False


def test_values_of_the_right_type_pass_unchanged() -> None:
    obj = {"a": 1}
    proxy = MappingProxyType(obj)
    items = [1]
    assert json_object(obj, "x") is obj and json_object(proxy, "x") is proxy
    assert json_list(items, "x") is items
    assert json_str("web", "x") == "web"
    assert json_int(5, "x") == 5 and json_int(5.0, "x") == 5 and type(json_int(5.0, "x")) is int
    assert json_bool(True, "x") is True
    assert json_optional_object(None, "x") is None and json_optional_object(obj, "x") is obj
    assert json_str_list(["a", "b"], "x") == ["a", "b"] and json_str_list(None, "x") == []
    assert json_int32(2**31 - 1, "x") == 2**31 - 1 and json_int32(-(2**31), "x") == -(2**31)


@pytest.mark.parametrize(("read", "value", "message"), [
    (json_object, [], "spec: expected an object, got list"),
    (json_list, {}, "spec: expected a list, got dict"),
    (json_str, 7, "spec: expected a string, got int"),
    (json_int, "high", "spec: expected an integer, got str"),
    (json_int, True, "spec: expected an integer, got bool"),
    (json_int, 2.5, "spec: expected an integer, got float"),
    (json_bool, "yes", "spec: expected a boolean, got str"),
    (json_optional_object, "x", "spec: expected an object, got str"),
    (json_required_object, None, "spec is required"),
    (json_required_object, [1], "spec: expected an object, got list"),
    (json_required_str, None, "spec is required"),
    (json_str_list, ["a", 1], "spec[1]: expected a string, got int"),
    (json_str_list, ["a", None], "spec[1] is required"),
    (json_int32, 2**31, "spec: expected a 32-bit integer, got 2147483648"),
    (json_int32, -(2**31) - 1, "spec: expected a 32-bit integer, got -2147483649"),
])
def test_wrong_types_name_the_field(read: Callable[[object, str], object], value: object, message: str) -> None:
    with pytest.raises(InvalidInput) as excinfo:
        read(value, "spec")
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:01.5Z", 1_500_000_000),
        ("1970-01-01T00:00:01.000000001Z", 1_000_000_001),
        ("1970-01-01T00:00:01.123456789123Z", 1_123_456_789),  # beyond nanoseconds: truncated
        ("1970-01-01T01:00:00+01:00", 0),
        ("1970-01-01T01:00:00.25+01:00", 250_000_000),
        ("2025-06-02T09:30:00Z", 1_748_856_600 * 10**9),
    ],
)
def test_parse_time_ns(text: str, nanos: int) -> None:
    assert parse_time_ns(text, "status.startTime") == nanos


def test_invalid_times_name_the_field() -> None:
    with pytest.raises(InvalidInput) as excinfo:
        parse_time_ns("yesterday", "status.startTime")
    assert str(excinfo.value) == "status.startTime: invalid RFC 3339 time 'yesterday'"
    assert parse_time_ns("", "status.startTime") is None
