"""Attack: the tenant chooses how long its own prediction takes. Before #24 the cross-tenant example pod padded
with 6,000 required anti-affinity terms that match nothing (620 KiB, valid for the API server) ran over the
250 ms budget and was allowed under enforce; 10,000 no-op spread constraints or pod-affinity terms did the same.
Now repeats count once, a pod beyond a documented limit is not simulated, and under enforce it is denied."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from bench.hostile import (
    Answer,
    Served,
    admit,
    guarded_pod,
    padded_anti_affinity,
    padded_pod_affinity,
    padded_spread,
    post,
    session_for,
)

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
TRIES = 3  # every time, not once

PADDINGS: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], str]] = {
    "6,000 anti-affinity terms": (lambda pod: padded_anti_affinity(pod, 6000),
                                  f"spec.affinity.podAntiAffinity.{REQUIRED}: 6,000 distinct terms, more than the 32"),
    "10,000 pod-affinity terms": (lambda pod: padded_pod_affinity(pod, 10_000),
                                  f"spec.affinity.podAffinity.{REQUIRED}: 10,000 distinct terms, more than the 32"),
    "10,000 spread constraints": (lambda pod: padded_spread(pod, 10_000),
                                  "spec.topologySpreadConstraints: 10,000 distinct constraints, more than the 32"),
}


async def _admit_all(target: Served, pods: list[dict[str, Any]]) -> list[Answer]:
    async with session_for(target) as session:
        return [await admit(session, target, pod) for pod in pods]


@pytest.mark.parametrize("padding", sorted(PADDINGS))
def test_a_padded_cross_tenant_pod_is_denied_every_time(enforcing: Served, padding: str) -> None:
    pad, limit = PADDINGS[padding]
    answers = asyncio.run(_admit_all(enforcing, [pad(guarded_pod())] * TRIES))
    for answer in answers:
        assert answer.status == 200 and answer.allowed is False, answer.body
        status = answer.response["status"]
        assert (status["code"], status["reason"]) == (400, "BadRequest")
        assert limit in status["message"] and "To get it through" in status["message"]
        assert answer.response["auditAnnotations"]["prediction-skipped"] == "too-complex"


@pytest.mark.parametrize("pad", [lambda pod: padded_anti_affinity(pod, 6000, distinct=False),
                                 lambda pod: padded_pod_affinity(pod, 10_000, distinct=False)],
                         ids=["6,000 copies of one anti-affinity term", "10,000 copies of one pod-affinity term"])
def test_repeated_terms_count_once_and_the_pod_is_judged_by_its_prediction(
        enforcing: Served, pad: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    plain, padded = asyncio.run(_admit_all(enforcing, [guarded_pod(), pad(guarded_pod())]))
    for answer in (plain, padded):
        assert answer.allowed is False and answer.response["status"]["code"] == 403
        assert "denyCrossTenantPreemption: the pod would preempt" in answer.response["status"]["message"]
    assert padded.response["status"]["message"] == plain.response["status"]["message"]


def test_a_preview_of_a_padded_pod_is_400_naming_the_limit(enforcing: Served) -> None:
    async def send() -> list[Answer]:
        async with session_for(enforcing) as session:
            return [await post(session, enforcing, "/preview", {"pod": pad(guarded_pod())})
                    for pad, _ in PADDINGS.values()]

    for answer, (_, limit) in zip(asyncio.run(send()), PADDINGS.values(), strict=True):
        assert answer.status == 400 and limit in answer.body["error"], answer.body
