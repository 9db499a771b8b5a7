"""Attack: one small request asks for billions of pods (a StatefulSet's ``replicas: 2147483647``, a List of 30
workloads of 10,000 each, a Job's parallelism, a CronJob). Before #24 only the top-level ``replicas`` was capped
and the worker thread kept expanding replicas past 3.6 GiB after its 503. Now every shape is counted before
any pod is built and refused with 400 naming the limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.hostile import (
    INT32_MAX,
    MEMORY_LIMIT_MIB,
    Served,
    admit,
    guarded_pod,
    object_list,
    post,
    session_for,
    workload,
)
from webhook.cluster.model import Node
from webhook.errors import TooManyPods
from webhook.preemption import workloads
from webhook.preemption.workloads import MAX_PODS_PER_REQUEST, expand_objects

LIMIT_MESSAGE = "PreemptGuard simulates at most 10,000 pods per request"
KINDS = ("StatefulSet", "Deployment", "ReplicaSet", "Job", "CronJob")


def shapes() -> list[tuple[str, dict[str, Any]]]:
    pod = guarded_pod()
    return [
        *((f"{kind} of 2147483647", {"pod": workload(kind, pod, INT32_MAX)}) for kind in KINDS),
        ("List of 30 workloads of 10,000", {"pod": object_list([workload(KINDS[i % 5], pod, 10_000, f"w{i}")
                                                                for i in range(30)])}),
        ("List of 2 Pods x replicas 10,000", {"pod": object_list([pod, pod]), "replicas": 10_000}),
        ("Lists nested 200 deep", {"pod": _nested(object_list([workload("Job", pod, 10_001)]), 200)}),
    ]


def _nested(obj: dict[str, Any], depth: int) -> dict[str, Any]:
    for _ in range(depth):
        obj = object_list([obj])
    return obj


async def _send_all(target: Served) -> tuple[list[tuple[str, int, Any]], list[bool | None]]:
    """Every shape in turn; meanwhile the guarded cross-tenant pod, sent for admission every 100 ms."""
    done = asyncio.Event()
    guarded: list[bool | None] = []

    async def guarded_admissions() -> None:
        async with session_for(target, 2) as session:
            while not done.is_set():
                guarded.append((await admit(session, target, guarded_pod(), timeout=10)).allowed)
                await asyncio.sleep(0.1)

    admitting = asyncio.create_task(guarded_admissions())
    async with session_for(target) as session:
        answers = [(name, (a := await post(session, target, "/preview", body, 30)).status, a.body)
                   for name, body in shapes()]
    done.set()
    await admitting
    return answers, guarded


def test_every_shape_of_too_many_pods_is_refused_with_the_limit_named(enforcing: Served) -> None:
    answers, guarded = asyncio.run(_send_all(enforcing))
    # Enforce held meanwhile (before #24 both prediction workers were taken and admissions went unpredicted).
    assert guarded and guarded == [False] * len(guarded), guarded
    for name, status, body in answers:
        assert status == 400, (name, status, body)
        assert LIMIT_MESSAGE in body["error"], (name, body)
    assert enforcing.process.poll() is None
    assert enforcing.peak_rss_mib() < MEMORY_LIMIT_MIB


def test_the_pods_are_counted_before_any_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = workloads.pod_from_dict

    def counting(raw: Any, **kwargs: Any) -> Any:
        built.append(raw["metadata"]["name"])
        return real(raw, **kwargs)

    monkeypatch.setattr(workloads, "pod_from_dict", counting)
    pod = guarded_pod()
    items = [workload("Deployment", pod, 9_999, "first"), workload("Job", pod, 2, "second")]
    with pytest.raises(TooManyPods, match="asks for 10,001 pods"):
        expand_objects([object_list(items)])
    assert built == []
    # At the limit: every pod, each template read once.
    pods = expand_objects([object_list([workload("Deployment", pod, 9_999, "first"), pod])])
    assert len(pods) == MAX_PODS_PER_REQUEST and built == ["first-0", "search-reindex"]
    assert [p.name for p in pods[:2]] == ["first-0", "first-1"] and pods[-1].name == "search-reindex"


def test_a_daemonset_counts_one_pod_per_node_before_any_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = workloads.pod_from_dict
    monkeypatch.setattr(workloads, "pod_from_dict", lambda raw, **kw: built.append("x") or real(raw, **kw))
    nodes = [Node(f"node-{i}") for i in range(6_000)]
    pod = guarded_pod()
    daemonset = {**workload("Deployment", pod, 1, "agent"), "kind": "DaemonSet"}
    with pytest.raises(TooManyPods, match="asks for 11,000 pods"):
        expand_objects([object_list([daemonset, workload("Deployment", pod, 5_000)])], nodes=nodes)
    assert built == []
