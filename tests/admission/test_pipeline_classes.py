"""The classes the Priority plugin resolves against: the per-version cache follows every change to the store,
and a class the cache lacks is looked up once at the source."""

from __future__ import annotations

import pytest
from pod_requests import FixedPredictor, admit, pipeline, pod_request

from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.config import parse_config
from webhook.priority.resolution import SYSTEM_CLUSTER_CRITICAL, effective_classes
from webhook.sources.source import MemorySource

OFF = parse_config({"guardrails": {"mode": "off"}}, "test")


def test_effective_classes_follow_upserts_and_deletes() -> None:
    state = ClusterState()
    assert set(effective_classes(state)) == {SYSTEM_CLUSTER_CRITICAL, "system-node-critical"}
    state.upsert(PriorityClass("gold", 1000))
    assert effective_classes(state)["gold"].value == 1000
    state.upsert(PriorityClass("gold", 2000))
    assert effective_classes(state)["gold"].value == 2000
    state.delete("PriorityClass", "gold")
    assert "gold" not in effective_classes(state)


def test_effective_classes_are_read_only_and_per_state() -> None:
    first, second = ClusterState(), ClusterState()
    second.upsert(PriorityClass("silver", 10))
    classes = effective_classes(first)
    with pytest.raises(TypeError):
        classes["silver"] = PriorityClass("silver", 10)  # type: ignore[index]
    assert "silver" not in effective_classes(first) and "silver" in effective_classes(second)


class LookupSource(MemorySource):
    def __init__(self, state: ClusterState, found: dict[str, PriorityClass]) -> None:
        super().__init__(state)
        self.found = found
        self.lookups: list[str] = []

    async def get_priority_class(self, name: str) -> PriorityClass | None:
        self.lookups.append(name)
        return self.found.get(name)


def test_a_class_missing_from_the_cache_is_looked_up_once_per_review() -> None:
    state = ClusterState()
    source = LookupSource(state, {"late": PriorityClass("late", 7)})
    admission = pipeline(state, config=OFF, source=source, predictor=FixedPredictor())
    outcome = admit(admission, pod_request(spec={"priorityClassName": "late"}))
    assert outcome.allowed and outcome.patch[0] == {"op": "add", "path": "/spec/priority", "value": 7}
    assert source.lookups == ["late"]
    state.upsert(PriorityClass("late", 5))  # now cached: no lookup
    assert admit(admission, pod_request(spec={"priorityClassName": "late"})).patch[0]["value"] == 5
    admit(admission, pod_request(spec={}))  # no class at all: no lookup
    admit(admission, pod_request("UPDATE", spec={"priorityClassName": "gone"}, old_spec={"priorityClassName": "gone"},
                                 meta={"name": "p"}))
    assert source.lookups == ["late"]
