"""Values every pod of a cluster repeats are one object in the state, not one per pod read (snapshot memory)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from webhook.cluster.reader import state_pod_from_dict


def raw_pod(name: str, priority: int = 100000) -> dict[str, Any]:
    """A pod as a parser hands it over: a fresh dict with fresh strings and ints (orjson, as the loader reads)."""
    return orjson.loads(json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"nodeName": "n1", "priority": priority, "priorityClassName": "high",
                 "preemptionPolicy": "PreemptLowerPriority", "schedulerName": "default-scheduler",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running"}}))


def test_priorities_policies_and_scheduler_names_are_one_object_each() -> None:
    first, second = raw_pod("a"), raw_pod("b")
    assert first["spec"]["priority"] is not second["spec"]["priority"]  # the parser's own, one per pod
    a, b = state_pod_from_dict(first), state_pod_from_dict(second)
    assert a.priority == 100000 and a.priority is b.priority
    assert a.preemption_policy == "PreemptLowerPriority" and a.preemption_policy is b.preemption_policy
    assert a.scheduler_name == "default-scheduler" and a.scheduler_name is b.scheduler_name


def test_a_shared_priority_keeps_its_value_and_type() -> None:
    values = [state_pod_from_dict(raw_pod(f"p{i}", priority)).priority for i, priority in enumerate((1, 1000, -5, 0))]
    assert values == [1, 1000, -5, 0] and all(type(v) is int for v in values)
    pod = raw_pod("none")
    del pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]
    unset = state_pod_from_dict(pod)
    assert unset.priority is None and unset.preemption_policy is None
