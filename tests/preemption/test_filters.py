"""The Filter plugins through whole predictions: NodePorts (which containers hold host ports, conflicts)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.cluster.reader import pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.preview import preview_objects
from webhook.preemption.results import Outcome
from webhook.sources.loader import parse_documents

from .clusters import CLASSES, bound_item, cluster, host_port, node_item, pod_manifest, port_holder


def test_a_regular_init_containers_host_port_is_free_once_the_pod_runs() -> None:
    state = cluster(port_holder(None))
    wanting = pod_manifest(containers=[{"name": "c", "ports": [host_port(8080)]}])
    (result,) = preview_objects(state, [wanting])["results"]
    assert (result["outcome"], result["node"], result["victims"]) == (Outcome.FITS, "n1", [])


def test_a_sidecars_host_port_is_held_for_the_life_of_the_pod() -> None:
    state = cluster(port_holder("Always"))
    wanting = pod_manifest(containers=[{"name": "c", "ports": [host_port(8080)]}])
    (result,) = preview_objects(state, [wanting])["results"]
    assert result["outcome"] == Outcome.PREEMPTS
    assert [v["name"] for v in result["victims"]] == ["holder"]


def test_the_preemptors_own_init_container_ports_count_only_for_sidecars() -> None:
    ports = ", containers: [{name: c, ports: [{hostPort: 80, containerPort: 80}]}]"
    state = cluster(node_item("n1") + bound_item("web-server", "n1", spec=ports))
    regular = pod_manifest(initContainers=[{"name": "i", "ports": [host_port(80)]}])
    sidecar = pod_manifest(initContainers=[{"name": "i", "restartPolicy": "Always", "ports": [host_port(80)]}])
    assert preview_objects(state, [regular])["results"][0]["outcome"] == Outcome.FITS
    assert preview_objects(state, [sidecar])["results"][0]["outcome"] == Outcome.PREEMPTS


@pytest.mark.parametrize(("want", "have", "conflict"), [
    ({"hostIP": "10.0.0.1"}, {"hostIP": "10.0.0.2"}, False),
    ({"hostIP": "10.0.0.1"}, {}, True),  # an empty hostIP is 0.0.0.0: every address
    ({}, {"hostIP": "10.0.0.2"}, True),
    ({"protocol": "UDP"}, {}, False),
    ({"protocol": "TCP"}, {}, True),  # the protocol defaults to TCP
])
def test_host_port_conflict_semantics(want: dict[str, Any], have: dict[str, Any], conflict: bool) -> None:
    raw_have = [{"name": "c", "ports": [host_port(9000, **have)]}]
    state = ClusterState()
    for obj in parse_documents(f"apiVersion: v1\nkind: List\nitems:\n{CLASSES}{node_item('n1')}", "snapshot"):
        state.upsert(obj)
    holder = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder", "namespace": "batch"},
              "spec": {"nodeName": "n1", "priority": 10, "containers": raw_have}, "status": {"phase": "Running"}}
    state.upsert(pod_from_dict(holder))
    wanting = pod_manifest(containers=[{"name": "c", "ports": [host_port(9000, **want)]}])
    (result,) = preview_objects(state, [wanting])["results"]
    assert result["outcome"] == (Outcome.PREEMPTS if conflict else Outcome.FITS)


def test_host_port_zero_declares_nothing() -> None:
    pod = pod_from_dict({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "ports": [{"containerPort": 80, "hostPort": 0}, {"containerPort": 81}]}]}})
    assert pod.host_ports == ()
