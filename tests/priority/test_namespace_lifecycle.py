"""NamespaceLifecycle on the paths that predict without the API server (webhook/priority/namespace_lifecycle.py):
a pod in a namespace the cluster does not hold is NotFound, in a terminating one Forbidden, with the real API
server's words (found by `verify`: kube-apiserver answered NotFound where PreemptGuard predicted Preempts)."""

from __future__ import annotations

from typing import Any

from webhook.cluster.model import Namespace
from webhook.cluster.reader import namespace_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.results import Outcome
from webhook.preemption.simulate import predict_objects
from webhook.priority.namespace_lifecycle import check_namespace_lifecycle


def pod(namespace: str, name: str = "web", generate_name: str = "") -> dict[str, Any]:
    meta = {"namespace": namespace, **({"generateName": generate_name} if generate_name else {"name": name})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "x"}]}}


NAMESPACES = {"team-a": Namespace("team-a"), "old": Namespace("old", terminating=True)}


def test_a_missing_namespace_is_the_api_servers_not_found() -> None:
    assert check_namespace_lifecycle(NAMESPACES, pod_from_dict(pod("team-x"))) == 'namespaces "team-x" not found'


def test_a_terminating_namespace_is_forbidden_naming_the_pod_or_its_prefix() -> None:
    message = "is forbidden: unable to create new content in namespace old because it is being terminated"
    assert check_namespace_lifecycle(NAMESPACES, pod_from_dict(pod("old"))) == f'pods "web" {message}'
    assert check_namespace_lifecycle(NAMESPACES, pod_from_dict(pod("old", generate_name="web-"))) == (
        f'pods "web-" {message}')


def test_an_existing_namespace_or_unknown_namespaces_admit() -> None:
    assert check_namespace_lifecycle(NAMESPACES, pod_from_dict(pod("team-a"))) is None
    assert check_namespace_lifecycle({}, pod_from_dict(pod("anything"))) is None  # a snapshot without namespaces


def test_the_reader_marks_a_terminating_namespace_by_phase_or_deletion() -> None:
    assert namespace_from_dict({"metadata": {"name": "a"}, "status": {"phase": "Terminating"}}).terminating
    assert namespace_from_dict({"metadata": {"name": "a", "deletionTimestamp": "2025-01-01T00:00:00Z"}}).terminating
    assert not namespace_from_dict({"metadata": {"name": "a"}, "status": {"phase": "Active"}}).terminating


def test_the_prediction_rejects_before_the_priority_plugin() -> None:
    state = ClusterState()
    state.upsert(Namespace("team-a"))
    [result] = predict_objects(state, [dict(pod("team-x"), spec={"priorityClassName": "gold", "containers": []})])
    assert result.outcome == Outcome.REJECTED and result.message == 'namespaces "team-x" not found'
