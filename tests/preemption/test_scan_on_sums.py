"""The Filter scan on the index's sums (``schedule_one._scan_on_sums``): NodeResourcesFit's every check at its exact
boundary, a pod asking exactly what a node has free fits there and one unit more does not, in each dimension."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.preemption.preview import preview_objects
from webhook.preemption.results import Outcome

from .clusters import cluster, pod_manifest


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 10, ephemeral: str = "") -> str:
    storage = f', ephemeral-storage: "{ephemeral}"' if ephemeral else ""
    return f"""
- apiVersion: v1
  kind: Node
  metadata: {{name: {name}}}
  spec: {{}}
  status: {{allocatable: {{cpu: "{cpu}", memory: "{memory}", pods: "{pods}"{storage}}}}}
"""


def holder(name: str, node_name: str, requests: str) -> str:
    """A pod of priority 1000 (as high as any preemptor here: nothing is preempted) asking ``requests``."""
    return f"""
- apiVersion: v1
  kind: Pod
  metadata: {{name: {name}, namespace: batch}}
  spec: {{nodeName: {node_name}, priority: 1000, containers: [{{name: c, resources: {{requests: {requests}}}}}]}}
  status: {{phase: Running, startTime: "2024-01-01T00:00:00Z"}}
"""


def asking(requests: dict[str, str]) -> dict[str, Any]:
    pod = pod_manifest()
    pod["spec"]["containers"][0]["resources"]["requests"] = requests
    return pod


# n1 has 1 CPU, 1 GiB, 1 GiB of ephemeral storage and one pod slot free; n2 is full in every dimension.
CLUSTER = (node("n1", ephemeral="5Gi") + holder("a", "n1", '{cpu: "3", memory: 7Gi, ephemeral-storage: 4Gi}')
           + node("n2", cpu="1", memory="1Gi", pods=1, ephemeral="1Gi") + holder("b", "n2", '{cpu: "1", memory: 1Gi}')
           + "".join(holder(f"p{i}", "n1", "{}") for i in range(8)))


@pytest.mark.parametrize(("requests", "reason"), [
    ({"cpu": "1"}, "Insufficient cpu"),
    ({"memory": "1Gi"}, "Insufficient memory"),
    ({"ephemeral-storage": "1Gi"}, "Insufficient ephemeral-storage"),
])
def test_exactly_what_is_free_fits_and_one_unit_more_does_not(requests: dict[str, str], reason: str) -> None:
    state = cluster(CLUSTER)
    (fits,) = preview_objects(state, [asking(requests)])["results"]
    assert (fits["outcome"], fits["node"]) == (Outcome.FITS, "n1")
    [resource] = requests
    one_more = {"cpu": "1001m", "memory": str(2**30 + 1), "ephemeral-storage": str(2**30 + 1)}[resource]
    (short,) = preview_objects(state, [asking({resource: one_more})])["results"]
    assert short["outcome"] == Outcome.UNSCHEDULABLE
    # n2 is short of it too (nothing free), and of pod slots
    assert short["message"].startswith(f"0/2 nodes are available: 1 Too many pods, 2 {reason}. ")


def test_the_last_pod_slot_fits_and_none_does_not() -> None:
    state = cluster(CLUSTER)  # n1: 9 pods of 10; n2: 1 of 1
    (fits,) = preview_objects(state, [asking({"cpu": "10m"})])["results"]
    assert (fits["outcome"], fits["node"]) == (Outcome.FITS, "n1")
    state = cluster(CLUSTER + holder("p9", "n1", "{}"))
    (full,) = preview_objects(state, [asking({"cpu": "10m"})])["results"]
    assert full["outcome"] == Outcome.UNSCHEDULABLE and "2 Too many pods" in full["message"]
