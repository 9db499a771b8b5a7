"""Expand a Pod or a workload object into the pods it would create (contract §3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.cluster.model import Pod
from webhook.cluster.reader import pod_from_dict
from webhook.errors import InvalidInput

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob")


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{what}: expected an object")
    return value


def _count(value: object, what: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{what}: expected a non-negative integer")
    return value


def pod_template(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
    """The pod template of a workload and its default replica count."""
    kind = obj.get("kind")
    spec = _mapping(obj.get("spec"), "spec")
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return _mapping(spec.get("template"), "spec.template"), _count(spec.get("replicas"), "spec.replicas", 1)
    if kind == "Job":
        return _mapping(spec.get("template"), "spec.template"), _job_pods(spec, "spec")
    if kind == "CronJob":
        job = _mapping(_mapping(spec.get("jobTemplate"), "spec.jobTemplate").get("spec"), "spec.jobTemplate.spec")
        return _mapping(job.get("template"), "spec.jobTemplate.spec.template"), _job_pods(job, "spec.jobTemplate.spec")
    raise InvalidInput(f"unsupported kind {kind!r}: expected Pod, List or one of {', '.join(WORKLOAD_KINDS)}")


def _job_pods(spec: Mapping[str, Any], where: str) -> int:
    """Pods a Job runs at once: parallelism (default 1), capped by completions when set."""
    parallelism = _count(spec.get("parallelism"), f"{where}.parallelism", 1)
    completions = spec.get("completions")
    return min(parallelism, _count(completions, f"{where}.completions", parallelism))


def expand_object(obj: Mapping[str, Any], *, namespace: str | None = None, replicas: int | None = None) -> list[Pod]:
    """The pods to predict, in order: a Pod (``replicas`` copies), each replica of a workload, or a List's items.

    ``namespace`` wins over the object's own namespace, which wins over ``default``. Replica names are
    ``<name>-<i>`` (StatefulSet style) when there is more than one.
    """
    if not isinstance(obj, Mapping):
        raise InvalidInput("expected a Kubernetes object")
    kind = obj.get("kind")
    if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in obj):
        items = obj.get("items") or []
        if not isinstance(items, list):
            raise InvalidInput("items: expected a list")
        return [pod for item in items for pod in expand_object(item, namespace=namespace, replicas=replicas)]
    meta = _mapping(obj.get("metadata"), "metadata")
    name = str(meta.get("name") or meta.get("generateName") or "pod").rstrip("-")
    ns = namespace or meta.get("namespace") or "default"
    if kind == "Pod":
        template: Mapping[str, Any] = obj
        count = 1
    else:
        template, count = pod_template(obj)
    count = count if replicas is None else replicas
    if count < 0:
        raise InvalidInput("replicas must not be negative")
    tmeta = _mapping(template.get("metadata"), "template.metadata")
    base = {"apiVersion": "v1", "kind": "Pod", "spec": template.get("spec") or {},
            "status": obj.get("status") if kind == "Pod" else None}
    pods = []
    for i in range(count):
        pod_name = name if count == 1 else f"{name}-{i}"
        metadata = {**tmeta, "name": pod_name, "namespace": ns}
        metadata.pop("generateName", None)
        pods.append(pod_from_dict({**base, "metadata": metadata}))
    return pods
