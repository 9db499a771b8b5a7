"""The Priority plugin on the typed pod: patch shapes, names in messages, UPDATE rules."""

from __future__ import annotations

from typing import Any

import pytest
from pod_requests import pod_request

from webhook.admission.decision import ALLOWED
from webhook.admission.pod import PodReview, read_pod_review
from webhook.admission.priority import RULE_PRIORITY, admit_priority
from webhook.cluster.model import PriorityClass
from webhook.errors import InvalidInput
from webhook.priority.resolution import effective_priority_classes

D1 = PriorityClass("default1", 1000, global_default=True)


def run(operation: str = "CREATE", *classes: PriorityClass, **kwargs: Any) -> tuple[Any, PodReview]:
    review = read_pod_review(pod_request(operation, **kwargs))
    return admit_priority(review, effective_priority_classes({c.name: c for c in classes})), review


def test_create_adds_fields_and_rewrites_class_name_to_the_default() -> None:
    outcome, review = run("CREATE", D1, spec={"containers": []})
    assert outcome is ALLOWED
    assert review.patch.operations == [
        {"op": "add", "path": "/spec/priority", "value": 1000},
        {"op": "add", "path": "/spec/preemptionPolicy", "value": "PreemptLowerPriority"},
        {"op": "add", "path": "/spec/priorityClassName", "value": "default1"},
    ]
    # Every later stage reads the mutated typed pod.
    assert (review.pod.priority, review.pod.priority_class_name, review.pod.preemption_policy) == (
        1000, "default1", "PreemptLowerPriority")


def test_present_null_and_empty_fields_are_replaced_and_missing_spec_is_added() -> None:
    _, review = run("CREATE", D1, spec={"priority": None, "priorityClassName": ""})
    assert [op["op"] for op in review.patch.operations] == ["replace", "add", "replace"]
    _, review = run("CREATE", spec=None)
    assert review.patch.operations == [{"op": "add", "path": "/spec", "value": {"priority": 0}},
                                       {"op": "add", "path": "/spec/preemptionPolicy",
                                        "value": "PreemptLowerPriority"}]


def test_consistent_pod_needs_no_patch() -> None:
    spec = {"priorityClassName": "default1", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority"}
    outcome, review = run("CREATE", D1, spec=spec)
    assert outcome is ALLOWED and review.patch.operations == []


@pytest.mark.parametrize(
    ("meta", "name", "shown"),
    [({"name": "a"}, "", "a"), ({"generateName": "web-"}, "", "web-"), ({}, "", "Unknown"), ({}, "req", "req")],
)
def test_forbidden_message_names_the_pod(meta: dict[str, str], name: str, shown: str) -> None:
    outcome, _ = run("CREATE", spec={"priorityClassName": "x"}, meta=meta, name=name)
    assert outcome.status is not None and outcome.denied_by == (RULE_PRIORITY,)
    assert outcome.status.message == f'pods "{shown}" is forbidden: no PriorityClass with name x was found'


def test_update_restores_old_values_and_rejects_changes() -> None:
    old = {"priorityClassName": "default1", "priority": 1000, "preemptionPolicy": "Never"}
    outcome, review = run("UPDATE", spec={"priorityClassName": "default1"}, old_spec=old, meta={"name": "p"})
    assert outcome.allowed and [op["path"] for op in review.patch.operations] == ["/spec/priority",
                                                                                  "/spec/preemptionPolicy"]
    outcome, _ = run("UPDATE", spec={**old, "preemptionPolicy": "PreemptLowerPriority"}, old_spec=old,
                     meta={"name": "p"})
    assert outcome.status is not None and outcome.status.code == 422 and outcome.denied_by == (RULE_PRIORITY,)
    assert outcome.status.message.startswith('Pod "p" is invalid: spec: Forbidden: pod updates may not change fields '
                                             'other than `spec.containers[*].image`')


def test_update_without_old_object_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match=r"request\.oldObject"):
        run("UPDATE", spec={})
