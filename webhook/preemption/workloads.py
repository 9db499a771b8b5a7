"""Expand a Pod or a workload object into the pods it would create (docs/interfaces.md §3)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.cluster.jsonfields import json_object
from webhook.cluster.model import Node, Pod
from webhook.cluster.reader import pod_from_dict
from webhook.errors import InvalidInput
from webhook.preemption.daemonset import daemon_nodes, daemon_pod_name, daemon_pod_spec, pinned_to_node

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "CronJob")


def _count(value: object, what: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{what}: expected a non-negative integer")
    return value


def pod_template(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
    """The pod template of a workload and its default replica count."""
    kind = obj.get("kind")
    spec = json_object(obj.get("spec"), "spec")
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return json_object(spec.get("template"), "spec.template"), _count(spec.get("replicas"), "spec.replicas", 1)
    if kind == "DaemonSet":  # one pod per eligible node (daemonset_pods); one when the nodes are not known
        return json_object(spec.get("template"), "spec.template"), 1
    if kind == "Job":
        return json_object(spec.get("template"), "spec.template"), _job_pods(spec, "spec")
    if kind == "CronJob":
        job = json_object(json_object(spec.get("jobTemplate"), "spec.jobTemplate").get("spec"), "spec.jobTemplate.spec")
        template = json_object(job.get("template"), "spec.jobTemplate.spec.template")
        return template, _job_pods(job, "spec.jobTemplate.spec")
    raise InvalidInput(f"unsupported kind {kind!r}: expected Pod, List or one of {', '.join(WORKLOAD_KINDS)}")


def replica_name(name: str, index: int, count: int) -> str:
    """The name of replica ``index`` of ``count``: ``<name>-<index>`` (StatefulSet style), ``name`` when alone."""
    return name if count == 1 else f"{name}-{index}"


def _job_pods(spec: Mapping[str, Any], where: str) -> int:
    """Pods a Job runs at once: parallelism (default 1), capped by completions when set."""
    parallelism = _count(spec.get("parallelism"), f"{where}.parallelism", 1)
    completions = spec.get("completions")
    return min(parallelism, _count(completions, f"{where}.completions", parallelism))


def daemonset_pod_objects(obj: Mapping[str, Any], namespace: str, nodes: Iterable[Node]) -> list[dict[str, Any]]:
    """The Pod objects a DaemonSet's controller creates: one per node it runs on, each pinned to its node
    (daemonset.py), named ``<daemonset>-<node>``."""
    template, _ = pod_template(obj)
    meta = json_object(obj.get("metadata"), "metadata")
    name = str(meta.get("name") or meta.get("generateName") or "daemonset").rstrip("-")
    tmeta = {k: v for k, v in json_object(template.get("metadata"), "template.metadata").items()
             if k in ("labels", "annotations")}
    spec = daemon_pod_spec(json_object(template.get("spec"), "spec.template.spec"))
    eligibility = pod_from_dict({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                                 "metadata": {**tmeta, "name": name, "namespace": namespace}})
    return [{"apiVersion": "v1", "kind": "Pod", "spec": pinned_to_node(spec, node.name),
             "metadata": {**tmeta, "name": daemon_pod_name(name, node.name), "namespace": namespace}}
            for node in daemon_nodes(eligibility, nodes)]


def daemonset_pods(obj: Mapping[str, Any], namespace: str, nodes: Iterable[Node]) -> list[Pod]:
    return [pod_from_dict(pod) for pod in daemonset_pod_objects(obj, namespace, nodes)]


def expand_object(obj: Mapping[str, Any], *, namespace: str | None = None, replicas: int | None = None,
                  nodes: Iterable[Node] | None = None) -> list[Pod]:
    """The pods to predict, in order: a Pod (``replicas`` copies), each replica of a workload, or a List's items.

    ``namespace`` wins over the object's own namespace, which wins over ``default``. Replicas are named by
    ``replica_name``. A DaemonSet is one pod per eligible node of ``nodes`` (``replicas`` does not apply).
    """
    if not isinstance(obj, Mapping):
        raise InvalidInput("expected a Kubernetes object")
    kind = obj.get("kind")
    if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in obj):
        items = obj.get("items") or []
        if not isinstance(items, list):
            raise InvalidInput("items: expected a list")
        node_list = None if nodes is None else list(nodes)
        return [pod for item in items
                for pod in expand_object(item, namespace=namespace, replicas=replicas, nodes=node_list)]
    meta = json_object(obj.get("metadata"), "metadata")
    name = str(meta.get("name") or meta.get("generateName") or "pod").rstrip("-")
    ns = namespace or meta.get("namespace") or "default"
    if kind == "DaemonSet":
        if nodes is None:
            raise InvalidInput("a DaemonSet runs one pod per eligible node: its preview needs the cluster's nodes")
        return daemonset_pods(obj, ns, nodes)
    if kind == "Pod":
        template: Mapping[str, Any] = obj
        count = 1
    else:
        template, count = pod_template(obj)
    count = count if replicas is None else replicas
    if count < 0:
        raise InvalidInput("replicas must not be negative")
    tmeta = json_object(template.get("metadata"), "template.metadata")
    base = {"apiVersion": "v1", "kind": "Pod", "spec": template.get("spec") or {},
            "status": obj.get("status") if kind == "Pod" else None}
    pods = []
    for i in range(count):
        metadata = {**tmeta, "name": replica_name(name, i, count), "namespace": ns}
        metadata.pop("generateName", None)
        pods.append(pod_from_dict({**base, "metadata": metadata}))
    return pods
