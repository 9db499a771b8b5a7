"""The per-version cache of the effective PriorityClasses follows every change to the store."""

from __future__ import annotations

import pytest

from webhook.admission.pods import effective_classes, priority_class_to_fetch
from webhook.admission.review import parse_admission_review
from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.priority.resolution import SYSTEM_CLUSTER_CRITICAL


def create_review(class_name: str) -> object:
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "default",
            "operation": "CREATE", "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"priorityClassName": class_name, "containers": [{"name": "c"}]}},
        },
    }


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


def test_class_to_fetch_sees_a_class_added_after_a_lookup() -> None:
    state = ClusterState()
    review = parse_admission_review(create_review("late"))
    assert priority_class_to_fetch(review, state) == "late"
    state.upsert(PriorityClass("late", 5))
    assert priority_class_to_fetch(review, state) is None
