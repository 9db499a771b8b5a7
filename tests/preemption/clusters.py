"""Small clusters written as snapshot YAML for the regression tests: PriorityClasses ``high`` (1000) and ``low``
(10), nodes, bound pods in namespace ``batch``, and pending pods in ``team-a``."""

from __future__ import annotations

from typing import Any

from webhook.cluster.snapshot import ClusterState
from webhook.sources.loader import parse_documents

CLASSES = """
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: 10}
"""


def cluster(items: str) -> ClusterState:
    state = ClusterState()
    for obj in parse_documents(f"apiVersion: v1\nkind: List\nitems:\n{CLASSES}{items}", "snapshot"):
        state.upsert(obj)
    return state


def node_item(name: str, cpu: str = "4", pods: int = 10, extra: str = "") -> str:
    return f"""
- apiVersion: v1
  kind: Node
  metadata: {{name: {name}}}
  spec: {{{extra}}}
  status: {{allocatable: {{cpu: "{cpu}", memory: 8Gi, pods: "{pods}"}}}}
"""


def bound_item(name: str, node: str, cpu: str = "1", priority: int = 10, labels: str = "{}", spec: str = "") -> str:
    return f"""
- apiVersion: v1
  kind: Pod
  metadata: {{name: {name}, namespace: batch, labels: {labels}}}
  spec: {{nodeName: {node}, priority: {priority},
          containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]{spec}}}
  status: {{phase: Running, startTime: "2024-01-01T00:00:00Z"}}
"""


def pod_manifest(name: str = "web", cpu: str = "1", cls: str | None = "high", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}
    if cls:
        body["priorityClassName"] = cls
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"}, "spec": body}


def host_port(port: int, **extra: Any) -> dict[str, Any]:
    return {"containerPort": port, "hostPort": port, **extra}


def port_holder(init_restart_policy: str | None) -> str:
    """A low-priority pod on n1 whose only host port 8080 is declared by an init container."""
    restart = f", restartPolicy: {init_restart_policy}" if init_restart_policy else ""
    init = f", initContainers: [{{name: i, ports: [{{containerPort: 8080, hostPort: 8080}}]{restart}}}]"
    return node_item("n1") + bound_item("holder", "n1", spec=init)
