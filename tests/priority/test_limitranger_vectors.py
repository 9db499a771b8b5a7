"""tests/vectors/limitranger.yaml, case by case as upstream's unit tests run them: ``PodMutateLimitFunc`` then
``PodValidateLimitFunc`` on the objects as built (tests/priority/chain_vectors.py), allowed or refused as upstream
expects. What the real API server does with the same objects stored (defaulted) is checked in the conformance tier
(conformance/tests/test_admission_chain_parity.py) against each case's ``real``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.priority.chain_vectors import load, undefaulted_limit_range, undefaulted_resources
from webhook.cluster.quantity import parse_quantity
from webhook.priority.limitranger import (
    default_container_resources,
    mutate_pod_resources,
    validate_pod_resources,
)

VECTORS = load("limitranger.yaml")
POD_LIMIT_FUNC = [c for c in VECTORS if "TestPodLimitFunc (" in c["source"]]
ALLOWED_OR_NOT = [c for c in VECTORS if "allowed" in c["expect"]]


@pytest.mark.parametrize("case", ALLOWED_OR_NOT, ids=[c["name"] for c in ALLOWED_OR_NOT])
def test_admitted_or_refused(case: dict[str, Any]) -> None:
    limit_range = undefaulted_limit_range(case["limit_range"])
    spec = mutate_pod_resources(undefaulted_resources(case["pod"]), limit_range)
    errors = validate_pod_resources(spec, limit_range)
    assert (not errors) == case["expect"]["allowed"], errors


def test_every_upstream_case_is_carried() -> None:
    assert len(POD_LIMIT_FUNC) == 85  # TestPodLimitFunc: 40 successCases and 45 errorCases in v1.37.2
    assert sum(c["expect"]["allowed"] for c in POD_LIMIT_FUNC) == 40


DEFAULTS = [c for c in VECTORS if "expect" in c and "defaults" in c["expect"]]


@pytest.mark.parametrize("case", DEFAULTS, ids=[c["name"] for c in DEFAULTS])
def test_defaults(case: dict[str, Any]) -> None:
    """TestDefaultContainerResourceRequirements, TestMergePodResourceRequirements, TestPodLimitFuncApplyDefault:
    the defaults taken from the LimitRange, and each container as they leave it."""
    limit_range = undefaulted_limit_range(case["limit_range"])
    requests, limits = default_container_resources(limit_range)
    expected = case["expect"]["defaults"]
    assert {k: str(v) for k, v in requests.items()} == expected["requests"]
    assert {k: str(v) for k, v in limits.items()} == expected["limits"]
    if "pod" not in case:
        return
    spec = mutate_pod_resources(undefaulted_resources(case["pod"]), limit_range)
    for field, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        want = case["expect"].get(field, [])
        got = [{"requests": {k: str(v) for k, v in c.requests.items()},
                "limits": {k: str(v) for k, v in c.limits.items()}} for c in containers]
        assert got == [{"requests": {k: str(parse_quantity(v)) for k, v in w.get("requests", {}).items()},
                        "limits": {k: str(parse_quantity(v)) for k, v in w.get("limits", {}).items()}} for w in want]
