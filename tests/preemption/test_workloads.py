"""workloads.py: a Pod or a workload object expanded into the pods it would create, and their names."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.cluster.model import FrozenMap, LabelSelector
from webhook.errors import InvalidInput
from webhook.preemption.workloads import controller_owner, expand_object, expand_objects, replica_name


@pytest.mark.parametrize(("obj", "names"), [
    ({"kind": "Deployment", "metadata": {"name": "d", "namespace": "x"},
      "spec": {"replicas": 2, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}},
     ["x/d-0", "x/d-1"]),
    ({"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": {"spec": {}}}}, ["default/s"]),
    ({"kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": 5, "completions": 3,
                                                         "template": {"spec": {}}}}, ["default/j-0", "default/j-1",
                                                                                     "default/j-2"]),
    ({"kind": "CronJob", "metadata": {"name": "c"},
      "spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}, ["default/c"]),
    ({"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}},
                                {"kind": "ReplicaSet", "metadata": {"name": "r"},
                                 "spec": {"replicas": 0, "template": {"spec": {}}}}]}, ["default/p"]),
])
def test_workloads_expand_to_their_replicas(obj: dict[str, Any], names: list[str]) -> None:
    assert [p.key for p in expand_object(obj)] == names


def test_workload_labels_and_namespace_override() -> None:
    deployment = {"kind": "Deployment", "metadata": {"name": "d", "namespace": "x"},
                  "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {}}}}
    (pod,) = expand_object(deployment, namespace="y", replicas=1)
    assert (pod.namespace, dict(pod.labels)) == ("y", {"app": "web"})
    with pytest.raises(InvalidInput, match="unsupported kind"):
        expand_object({"kind": "Service", "metadata": {"name": "s"}})




def test_replica_names_are_statefulset_style_unless_alone() -> None:
    assert [replica_name("web", i, 3) for i in range(3)] == ["web-0", "web-1", "web-2"]
    assert replica_name("web", 0, 1) == "web"
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    assert [p.name for p in expand_object(pod, replicas=2)] == ["p-0", "p-1"]
    assert [p.name for p in expand_object(pod)] == ["p"]


def test_replicas_of_a_replicated_workload_carry_their_controller() -> None:
    """A Deployment's, ReplicaSet's or StatefulSet's replicas belong to a ReplicaSet or StatefulSet, whose
    selector upstream's DefaultSelector reads for PodTopologySpread's default constraints; a Pod's or a Job's do
    not."""
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    for kind, owner in (("Deployment", "ReplicaSet"), ("ReplicaSet", "ReplicaSet"), ("StatefulSet", "StatefulSet")):
        pods = expand_objects([{"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web"},
                                "spec": {"replicas": 2, "template": template}}])
        assert [p.controller_selector for p in pods] == [LabelSelector(FrozenMap({"app": "web"}))] * 2, kind
        assert controller_owner({"kind": kind, "metadata": {"name": "web"}}) == {
            "apiVersion": "apps/v1", "kind": owner, "name": "web", "uid": "", "controller": True}
    job = expand_objects([{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                           "spec": {"template": template}}])
    assert job[0].controller_selector is None
