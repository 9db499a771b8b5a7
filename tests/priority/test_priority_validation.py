"""Upstream PriorityClass validation messages, verbatim."""

from __future__ import annotations

import pytest

from webhook.cluster.model import PriorityClass
from webhook.priority.validation import (
    FieldError,
    PriorityClassObject,
    check_single_global_default,
    check_system_class_delete,
    invalid_message,
    is_dns1123_subdomain,
    system_class_already_exists,
    validate_priority_class,
    validate_priority_class_update,
)

REGEX_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
PREFIX = (
    "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: "
)


def messages(pc: PriorityClassObject) -> list[str]:
    return [str(e) for e in validate_priority_class(pc)]


@pytest.mark.parametrize(
    ("pc", "expected"),
    [
        (PriorityClassObject("tier1", 100), []),
        (PriorityClassObject("max", 1_000_000_000), []),
        (PriorityClassObject("lowest", -(2**31)), []),
        (PriorityClassObject("system-node-critical", 2_000_001_000), []),
        (PriorityClassObject("system-cluster-critical", 2_000_000_000), []),
        (PriorityClassObject("", 1), ["metadata.name: Required value: name or generateName is required"]),
        (PriorityClassObject("tier&1", 1), [f'metadata.name: Invalid value: "tier&1": {REGEX_MSG}']),
        (PriorityClassObject("a" * 254, 1), [f'metadata.name: Invalid value: "{"a" * 254}": must be no more than '
                                             f'253 characters']),
        (PriorityClassObject("too-high", 1_000_000_001),
         ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]),
        (PriorityClassObject("system-test", 1_000_000_001),
         [PREFIX + "system-test is not a known system priority class"]),
        (PriorityClassObject("system-node-critical", 0),
         [PREFIX + "value of system-node-critical PriorityClass must be 2000001000"]),
        (PriorityClassObject("system-cluster-critical", 2_000_000_000, global_default=True),
         [PREFIX + "globalDefault of system-cluster-critical PriorityClass must be false"]),
        (PriorityClassObject("weird", 1, preemption_policy="Sometimes"),
         ['preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"']),
        (PriorityClassObject("empty-policy", 1, preemption_policy=""), ["preemptionPolicy: Required value"]),
        (PriorityClassObject("never", 1, preemption_policy="Never"), []),
    ],
)
def test_validate_priority_class(pc: PriorityClassObject, expected: list[str]) -> None:
    assert messages(pc) == expected


def test_several_errors_are_bracketed_and_one_is_bare() -> None:
    errs = validate_priority_class(PriorityClassObject("Bad_Name", 1_000_000_001, preemption_policy="x"))
    message = invalid_message("PriorityClass.scheduling.k8s.io", "Bad_Name", errs)
    assert message.startswith('PriorityClass.scheduling.k8s.io "Bad_Name" is invalid: [metadata.name: Invalid value: ')
    assert message.endswith('preemptionPolicy: Unsupported value: "x": supported values: "PreemptLowerPriority", '
                            '"Never"]')
    assert message.count(", value: Forbidden: maximum allowed") == 1
    single = invalid_message("PriorityClass.scheduling.k8s.io", "x", [FieldError("value", "Forbidden", "d")])
    assert single == 'PriorityClass.scheduling.k8s.io "x" is invalid: value: Forbidden: d'


def test_generate_name_prefix_masks_trailing_dash() -> None:
    assert validate_priority_class(PriorityClassObject("ok", 1, generate_name="tier-")) == []
    assert [str(e) for e in validate_priority_class(PriorityClassObject("ok", 1, generate_name="Tier-"))] == [
        f'metadata.generateName: Invalid value: "Tier-": {REGEX_MSG}'
    ]
    assert is_dns1123_subdomain("a.b-c.d") == []


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        (PriorityClassObject("tier1", 100, description="new"), PriorityClassObject("tier1", 100), []),
        (PriorityClassObject("tier1", 100, global_default=True), PriorityClassObject("tier1", 100), []),
        (PriorityClassObject("tier1", 100), PriorityClassObject("tier1", 100, preemption_policy="PreemptLowerPriority"),
         []),
        (PriorityClassObject("tier2", 100), PriorityClassObject("tier1", 100),
         ['metadata.name: Invalid value: "tier2": field is immutable']),
        (PriorityClassObject("tier1", 101), PriorityClassObject("tier1", 100),
         ["value: Forbidden: may not be changed in an update."]),
        (PriorityClassObject("tier1", 100, preemption_policy="Never"), PriorityClassObject("tier1", 100),
         ['preemptionPolicy: Invalid value: "Never": field is immutable']),
        # Create-time rules are not re-run: a system class can become the global default by update.
        (PriorityClassObject("system-cluster-critical", 2_000_000_000, global_default=True),
         PriorityClassObject("system-cluster-critical", 2_000_000_000), []),
    ],
)
def test_validate_priority_class_update(
    new: PriorityClassObject, old: PriorityClassObject, expected: list[str]
) -> None:
    assert [str(e) for e in validate_priority_class_update(new, old)] == expected


def test_single_global_default_uses_the_lowest_stored_default() -> None:
    check = check_single_global_default
    stored = [PriorityClass("d2", 2000, global_default=True), PriorityClass("d1", 1000, global_default=True),
              PriorityClass("plain", 5)]
    message = "PriorityClass d1 is already marked as default. Only one default can exist"
    assert check("CREATE", PriorityClassObject("new", 1, global_default=True), stored) == message
    assert check("CREATE", PriorityClassObject("new", 1), stored) is None
    assert check("UPDATE", PriorityClassObject("d1", 1000, global_default=True), stored) is None
    assert check("UPDATE", PriorityClassObject("d2", 2000, global_default=True), stored) == message
    assert check("CREATE", PriorityClassObject("x", 1, global_default=True), stored[2:]) is None


def test_registry_rules_for_system_classes() -> None:
    assert check_system_class_delete("system-node-critical") == "this is a system priority class and cannot be deleted"
    assert check_system_class_delete("system-cluster-critical") is not None
    assert check_system_class_delete("system-other") is None
    stored = {"system-cluster-critical": PriorityClass("system-cluster-critical", 2_000_000_000)}
    assert system_class_already_exists("system-cluster-critical", stored)
    assert not system_class_already_exists("system-node-critical", stored)
    assert not system_class_already_exists("tier1", {"tier1": PriorityClass("tier1", 1)})
