"""Expand a Pod or a workload object into the pods it would create (docs/interfaces.md §3).

One request may ask for any number of pods (a StatefulSet's ``replicas: 2147483647``, a ``List`` of thirty
such objects, a Job's ``parallelism``): the total is counted first, from the counts alone, and a request over
``MAX_PODS_PER_REQUEST`` is refused (``TooManyPods``, HTTP 400) before any pod is built. Each object's pod
template is read once; its replicas are copies differing only by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from webhook.cluster.copying import replace_fields
from webhook.cluster.jsonfields import json_object
from webhook.cluster.model import Node, Pod
from webhook.cluster.reader import pod_from_dict
from webhook.errors import InvalidInput, TooManyPods
from webhook.preemption.complexity import check_pod_complexity
from webhook.preemption.daemonset import daemon_nodes, daemon_pod_name, daemon_pod_spec, pinned_to_node

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "CronJob")
# The most pods one prediction simulates, whatever asks for them (replicas, parallelism, Lists of workloads):
# each replica is a full scheduling cycle, and a prediction must end within its request's budget.
MAX_PODS_PER_REQUEST = 10_000


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


# Workloads whose pods' controller upstream's DefaultSelector reads (pkg/scheduler/framework/plugins/helper/
# spread.go: ReplicationController, ReplicaSet, StatefulSet; a Deployment's pods belong to its ReplicaSet), so
# PodTopologySpread's default constraints spread their replicas.
_SELECTED_BY_CONTROLLER = {"Deployment": "ReplicaSet", "ReplicaSet": "ReplicaSet", "StatefulSet": "StatefulSet"}


def controller_owner(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The controller reference a replica of ``obj`` carries in the cluster (its ReplicaSet or StatefulSet, by
    the workload's name; the uid is the API server's and unknown here), or None for a Pod, Job or DaemonSet."""
    kind = _SELECTED_BY_CONTROLLER.get(str(obj.get("kind")))
    if kind is None:
        return None
    meta = json_object(obj.get("metadata"), "metadata")
    name = str(meta.get("name") or meta.get("generateName") or "pod").rstrip("-")
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "", "controller": True}


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
    check_pod_complexity(eligibility)
    return [{"apiVersion": "v1", "kind": "Pod", "spec": pinned_to_node(spec, node.name),
             "metadata": {**tmeta, "name": daemon_pod_name(name, node.name), "namespace": namespace}}
            for node in daemon_nodes(eligibility, nodes)]


def daemonset_pods(obj: Mapping[str, Any], namespace: str, nodes: Iterable[Node]) -> list[Pod]:
    return [pod_from_dict(pod) for pod in daemonset_pod_objects(obj, namespace, nodes)]


def _is_list(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("kind")
    return kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in obj)


_END = object()


def _leaves(objects: Iterable[object]) -> Iterator[Mapping[str, Any]]:
    """Every Pod or workload of ``objects``, in order, with Lists (nested or not) flattened; no recursion, so no
    nesting depth a caller picks can exhaust the stack."""
    stack: list[Iterator[object]] = [iter(objects)]
    while stack:
        obj = next(stack[-1], _END)
        if obj is _END:
            stack.pop()
            continue
        if not isinstance(obj, Mapping):
            raise InvalidInput("expected a Kubernetes object")
        if _is_list(obj):
            items = obj.get("items") or []
            if not isinstance(items, list):
                raise InvalidInput("items: expected a list")
            stack.append(iter(items))
        else:
            yield obj


def _template_and_count(obj: Mapping[str, Any], replicas: int | None,
                        nodes: Sequence[Node] | None) -> tuple[Mapping[str, Any], int]:
    kind = obj.get("kind")
    if kind == "DaemonSet":  # at most one pod per node (``replicas`` does not apply): counted without reading any
        if nodes is None:
            raise InvalidInput("a DaemonSet runs one pod per eligible node: its preview needs the cluster's nodes")
        return pod_template(obj)[0], len(nodes)
    if kind == "Pod":
        template, count = obj, 1
    else:
        template, count = pod_template(obj)
    count = count if replicas is None else replicas
    if count < 0:
        raise InvalidInput("replicas must not be negative")
    return template, count


def pods_requested(objects: Iterable[Mapping[str, Any]], *, replicas: int | None = None,
                   nodes: Sequence[Node] | None = None) -> int:
    """How many pods ``expand_objects`` would build (at most, for a DaemonSet: one per node), from the objects'
    counts alone (no pod is read)."""
    return sum(_template_and_count(obj, replicas, nodes)[1] for obj in _leaves(objects))


def check_pods_requested(total: int, limit: int = MAX_PODS_PER_REQUEST) -> None:
    if total > limit:
        raise TooManyPods(f"the request asks for {total:,} pods (replicas, parallelism and List items together); "
                          f"PreemptGuard simulates at most {limit:,} pods per request: preview fewer replicas")


def expand_objects(objects: Iterable[Mapping[str, Any]], *, namespace: str | None = None,
                   replicas: int | None = None, nodes: Iterable[Node] | None = None,
                   max_pods: int = MAX_PODS_PER_REQUEST) -> list[Pod]:
    """The pods to predict, in order: a Pod (``replicas`` copies), each replica of a workload, a List's items.

    ``namespace`` wins over the object's own namespace, which wins over ``default``. Replicas are named by
    ``replica_name``. A DaemonSet is one pod per eligible node of ``nodes`` (``replicas`` does not apply).
    Raises ``TooManyPods`` before reading any pod when they number over ``max_pods``, and ``PodTooComplex``
    for a pod template beyond a limit of ``complexity.POD_LIMITS``.
    """
    objects = list(objects)
    node_list = None if nodes is None else list(nodes)
    check_pods_requested(pods_requested(objects, replicas=replicas, nodes=node_list), max_pods)
    pods: list[Pod] = []
    for obj in _leaves(objects):
        template, count = _template_and_count(obj, replicas, node_list)
        if obj.get("kind") == "DaemonSet" and node_list is not None:
            pods.extend(daemonset_pods(obj, _namespace_of(obj, namespace), node_list))
        elif count:
            pods.extend(_replicas(obj, template, count, namespace))
    return pods


def expand_object(obj: Mapping[str, Any], *, namespace: str | None = None, replicas: int | None = None,
                  nodes: Iterable[Node] | None = None, max_pods: int = MAX_PODS_PER_REQUEST) -> list[Pod]:
    """``expand_objects`` of one object (a Pod, a workload or a List)."""
    if not isinstance(obj, Mapping):
        raise InvalidInput("expected a Kubernetes object")
    return expand_objects([obj], namespace=namespace, replicas=replicas, nodes=nodes, max_pods=max_pods)


def _namespace_of(obj: Mapping[str, Any], namespace: str | None) -> str:
    meta = json_object(obj.get("metadata"), "metadata")
    return str(namespace or meta.get("namespace") or "default")


def _replicas(obj: Mapping[str, Any], template: Mapping[str, Any], count: int, namespace: str | None) -> list[Pod]:
    """``count`` pods of one object: its template read once, the copies renamed."""
    kind = obj.get("kind")
    meta = json_object(obj.get("metadata"), "metadata")
    name = str(meta.get("name") or meta.get("generateName") or "pod").rstrip("-")
    ns = _namespace_of(obj, namespace)
    tmeta = json_object(template.get("metadata"), "template.metadata")
    metadata = {**tmeta, "name": replica_name(name, 0, count), "namespace": ns}
    metadata.pop("generateName", None)
    owner = controller_owner(obj)
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    first = pod_from_dict({"apiVersion": "v1", "kind": "Pod", "spec": template.get("spec") or {},
                           "status": obj.get("status") if kind == "Pod" else None, "metadata": metadata})
    check_pod_complexity(first)
    return [first, *(replace_fields(first, name=replica_name(name, i, count)) for i in range(1, count))]
