"""tests/vectors/admission_chain.yaml through webhook.priority.chain: each refusal with the API server's code and
message, each admitted pod as the API server stores it. The conformance tier holds the same cases against a real
kube-apiserver (conformance/tests/test_admission_chain_parity.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.priority.chain_vectors import load
from webhook.cluster.model import Pod
from webhook.cluster.quantity import parse_quantity
from webhook.cluster.reader import object_from_dict, pod_from_dict
from webhook.cluster.reader_constraints import checked_tolerations
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.results import Outcome
from webhook.preemption.simulate import predict_pods
from webhook.priority.chain import LIMIT_RANGES_NOT_KNOWN, Admitted, Refused, admit_pods, runtime_class_not_known

VECTORS = load("admission_chain.yaml")


def state_of(objects: list[dict[str, Any]]) -> ClusterState:
    state = ClusterState()
    for raw in objects:
        obj = object_from_dict(raw)
        assert obj is not None, raw["kind"]
        state.upsert(obj)
    return state


def canonical(quantities: dict[str, Any]) -> dict[str, str]:
    return {name: str(parse_quantity(value)) for name, value in quantities.items()}


def stored(pod: Pod) -> dict[str, Any]:
    """The admitted pod's fields in the vectors' terms."""
    resources = pod.quota.resources
    return {
        "containers": [{"requests": {k: str(v) for k, v in c.requests.items()},
                        "limits": {k: str(v) for k, v in c.limits.items()}} for c in resources.containers],
        "overhead": {k: str(v) for k, v in resources.overhead.items()},
        "nodeSelector": dict(pod.node_selector),
        "tolerations": pod.tolerations,
    }


def expected_fields(expect: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if "containers" in expect:
        fields["containers"] = [{"requests": canonical(c.get("requests") or {}),
                                 "limits": canonical(c.get("limits") or {})} for c in expect["containers"]]
    if "overhead" in expect:
        fields["overhead"] = canonical(expect["overhead"])
    if "nodeSelector" in expect:
        fields["nodeSelector"] = expect["nodeSelector"]
    if "tolerations" in expect:
        fields["tolerations"] = checked_tolerations(expect["tolerations"], "expect.tolerations")
    return fields


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_admission_chain_vector(case: dict[str, Any]) -> None:
    [entry] = admit_pods(state_of(case["objects"]), [pod_from_dict(case["pod"])])
    expect = case["expect"]
    if not expect["allowed"]:
        assert isinstance(entry, Refused)
        assert entry.message == expect["message"]
        return
    assert isinstance(entry, Admitted) and not entry.not_known
    fields = expected_fields(expect)
    assert {k: v for k, v in stored(entry.pod).items() if k in fields} == fields


def test_the_scheduler_sees_the_defaulted_requests() -> None:
    """A pod that declares nothing needs what its namespace's LimitRange gives it: here more than any node has."""
    objects = [{"kind": "Namespace", "metadata": {"name": "a"}},
               {"kind": "LimitRange", "metadata": {"name": "l", "namespace": "a"},
                "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "3"}}]}},
               {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2", "pods": "10"}}}]
    pod = pod_from_dict({"kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
                         "spec": {"containers": [{"name": "c"}]}})
    [result] = predict_pods(state_of(objects), [pod])
    assert result.outcome == Outcome.UNSCHEDULABLE and "Insufficient cpu" in result.message


def test_a_snapshot_without_the_kinds_says_so_where_it_matters() -> None:
    node = {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2", "pods": "9"}}}
    state = state_of([{"kind": "Namespace", "metadata": {"name": "a"}}, node])
    state.unknown_kinds = frozenset({"LimitRange", "RuntimeClass"})
    bare = pod_from_dict({"kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
                          "spec": {"runtimeClassName": "kata", "containers": [{"name": "c"}]}})
    full = pod_from_dict({"kind": "Pod", "metadata": {"name": "q", "namespace": "a"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
    first, second = admit_pods(state, [bare, full])
    assert isinstance(first, Admitted) and first.not_known == (LIMIT_RANGES_NOT_KNOWN, runtime_class_not_known("kata"))
    assert isinstance(second, Admitted) and second.not_known == ()
    results = predict_pods(state, [bare, full])
    assert results[0].outcome == Outcome.FITS
    assert "Not known: LimitRanges: the snapshot holds none" in results[0].message
    assert "Not known" not in results[1].message
    state.unknown_kinds = frozenset()  # a cluster known to hold no RuntimeClass: the API server refuses the pod
    [refused] = admit_pods(state, [bare])
    assert isinstance(refused, Refused) and refused.message.endswith('RuntimeClass "kata" not found')
