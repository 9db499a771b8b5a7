"""``NodeSummary.patched`` (summary.py): a node's summary patched for one pod created, deleted or updated in what the
sums do not read equals ``NodeSummary.build`` over the same pods, field by field, through long random histories of
one node (few priority levels, ties in start, pods not started yet, extended resources, containers without
requests); and it declines (None) what it does not patch."""

from __future__ import annotations

import random
from typing import Any

import pytest

from webhook.cluster.model import Node, Pod
from webhook.cluster.reader import node_from_dict, object_from_dict
from webhook.preemption.framework.summary import NodeSummary

GPU = "example.com/gpu"


def a_node() -> Node:
    return node_from_dict({"kind": "Node", "metadata": {"name": "n1"}, "status": {
        "allocatable": {"cpu": "64", "memory": "256Gi", "ephemeral-storage": "100Gi", "pods": "110", GPU: "8"}}})


def a_pod(rng: random.Random, serial: int) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if rng.random() < 0.8:  # else no requests: the scheduler's non-zero defaults count
        requests = {"cpu": f"{rng.choice([10, 100, 250])}m", "memory": str(rng.choice([1, 2, 3]) * 2**20)}
    if rng.random() < 0.3:
        requests["ephemeral-storage"] = str(rng.choice([1, 2]) * 2**30)
    if rng.random() < 0.15:
        requests[GPU] = "1"
    status: dict[str, Any] = {"phase": "Running"}
    # Ties in start; None: not started yet; a clock before 1970 (a level's latest start is never below 0, as build's).
    start = rng.choice([None, "2024-01-01T00:00:01Z", "2024-01-01T00:00:02Z", "2024-01-01T00:00:02Z",
                        "1969-12-31T23:59:58Z"])
    if start is not None:
        status["startTime"] = start
    return {"kind": "Pod", "metadata": {"name": f"p{serial}", "namespace": rng.choice(["a", "b"]),
                                        "uid": f"uid-{serial}", "labels": {}},
            "spec": {"nodeName": "n1", "priority": rng.choice([-5, 0, 0, 100, 1000]),
                     "containers": [{"name": "c", "resources": {"requests": requests}}]},
            "status": status}


def as_pod(raw: dict[str, Any]) -> Pod:
    pod = object_from_dict(raw)
    assert isinstance(pod, Pod)
    return pod


def fields(summary: NodeSummary) -> tuple[object, ...]:
    return (summary.node, summary.pods, summary.used, summary.levels, summary.cumulative, summary.has_scalar,
            summary.level_latest_start, summary.free, summary.non_zero_used,
            [summary.largest_first(i) for i in range(len(summary.levels))])


@pytest.mark.parametrize("seed", range(8))
def test_a_patched_summary_equals_a_build_through_creates_deletes_and_updates(seed: int) -> None:
    rng = random.Random(seed)
    node = a_node()
    raws: dict[str, dict[str, Any]] = {}
    pods: dict[str, Pod] = {}
    serial = 0
    summary = NodeSummary.build(node, [])
    for _ in range(600):
        draw = rng.random()
        if not pods or (draw < 0.45 and len(pods) < 40):
            serial += 1
            raw = a_pod(rng, serial)
            pod = as_pod(raw)
            raws[pod.key], pods[pod.key] = raw, pod
        elif draw < 0.8:
            key = rng.choice(list(pods))
            del pods[key], raws[key]
        else:  # a label update: the same pod in everything the sums read
            key = rng.choice(list(pods))
            raws[key] = {**raws[key], "metadata": {**raws[key]["metadata"], "labels": {"v": str(serial)}}}
            pods[key] = as_pod(raws[key])
        if summary.levels and rng.random() < 0.5:  # an entry cached in the summary the patch starts from
            summary.largest_first(rng.randrange(len(summary.levels)))
        listed = list(pods.values())
        found = summary.patched(node, listed)
        assert found is not None  # one pod in, out or relabelled: always patched
        built = NodeSummary.build(node, listed)
        assert fields(found) == fields(built)
        assert all(a is b for a, b in zip(found.pods, built.pods, strict=True))
        summary = found


def test_a_summary_is_not_patched_for_two_pods_changed_a_sum_changed_or_another_node() -> None:
    rng = random.Random(7)
    node = a_node()
    raws = [a_pod(rng, i) for i in range(6)]
    pods = [as_pod(raw) for raw in raws]
    summary = NodeSummary.build(node, pods[:4])
    assert summary.patched(node, pods[:2]) is None  # two gone
    assert summary.patched(node, pods) is None  # two new
    assert summary.patched(node, [*pods[:3], pods[4]]) is None  # one gone, one new
    assert summary.patched(a_node(), pods[:4]) is None  # another node object
    moved = {**raws[0], "spec": {**raws[0]["spec"], "priority": raws[0]["spec"]["priority"] + 1}}
    assert summary.patched(node, [as_pod(moved), *pods[1:4]]) is None  # a priority changed
    kept = summary.patched(node, pods[:4])
    assert kept is not None and kept.cumulative is summary.cumulative  # nothing changed: the sums shared
