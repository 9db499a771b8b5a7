"""The pod of a review is read once into the typed Pod; a malformed one is InvalidInput naming the field."""

from __future__ import annotations

import pytest
from pod_requests import pod_request

from webhook.admission.pod import read_pod_review
from webhook.admission.review import parse_admission_review
from webhook.errors import InvalidInput
from webhook.server.testing import admission_review


def test_the_typed_pod_carries_what_every_stage_reads() -> None:
    review = read_pod_review(pod_request(
        spec={"priorityClassName": "high", "priority": 7, "preemptionPolicy": "Never",
              "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]},
        meta={"name": "web-0", "namespace": "ignored"}, namespace="team-a"))
    pod = review.pod
    assert (pod.name, pod.namespace) == ("web-0", "team-a")  # the request's namespace wins
    assert (pod.priority_class_name, pod.priority, pod.preemption_policy) == ("high", 7, "Never")
    assert (pod.requests.milli_cpu, pod.requests.memory) == (250, 2**30)
    assert review.namespace == "team-a" and review.name_for_messages == "web-0" and review.old_pod is None


def test_namespace_falls_back_to_the_object_then_default() -> None:
    assert read_pod_review(pod_request(meta={"namespace": "own"}, namespace="")).namespace == "own"
    assert read_pod_review(pod_request(meta={}, namespace="")).namespace == "default"


@pytest.mark.parametrize(("spec", "fragment"), [
    ({"priority": "high"}, "request.object.spec.priority"),
    ({"priority": 2**40}, "32-bit"),
    ({"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
     "request.object.spec.containers[0].resources.requests.cpu"),
])
def test_malformed_fields_are_invalid_input_naming_them(spec: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        read_pod_review(pod_request(spec=spec))
    assert fragment in str(raised.value)


def test_non_pod_objects_are_invalid_input() -> None:
    request = parse_admission_review(admission_review({
        "kind": {"kind": "Pod"}, "resource": {"resource": "pods"}, "operation": "CREATE",
        "object": {"kind": "ConfigMap", "data": {}}}))
    with pytest.raises(InvalidInput, match="not a Pod"):
        read_pod_review(request)
