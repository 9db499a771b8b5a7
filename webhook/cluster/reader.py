"""Read Kubernetes API objects (plain dicts from JSON/YAML) into the slim domain model.

Wrong types raise ``InvalidInput`` naming the field (``webhook.cluster.jsonfields``); absent optional fields
take the API defaults. Pods are read by ``webhook.cluster.reader_pod``, their scheduling constraints by
``reader_constraints`` and their resources by ``reader_resources``; this module is the one entry point.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from webhook.cluster.jsonfields import JsonObject, json_bool, json_int, json_list, json_object, json_str, parse_time_ns
from webhook.cluster.model import (
    PREEMPT_LOWER_PRIORITY,
    ClusterObject,
    Namespace,
    Node,
    NodeImage,
    PodDisruptionBudget,
    PriorityClass,
    ResourceQuota,
    ScopedResourceSelectorRequirement,
    Taint,
)
from webhook.cluster.reader_constraints import label_selector, read_labels
from webhook.cluster.reader_pod import pod_from_dict, state_pod_from_dict
from webhook.cluster.reader_resources import quantity_map, resources_from_quantities
from webhook.cluster.sharing import shared

__all__ = [
    "SUPPORTED_KINDS",
    "label_selector",
    "namespace_from_dict",
    "node_from_dict",
    "object_from_dict",
    "parse_time_ns",
    "pdb_from_dict",
    "pod_from_dict",
    "priority_class_from_dict",
    "quantity_map",
    "resource_quota_from_dict",
    "resources_from_quantities",
    "state_pod_from_dict",
]


def _node_images(value: object) -> tuple[NodeImage, ...]:
    """``status.images``: each entry's names (interned) and size, equal entries shared across nodes."""
    images = []
    for i, entry in enumerate(json_list(value, "status.images")):
        path = f"status.images[{i}]"
        entry = json_object(entry, path)
        names = tuple(sys.intern(json_str(n, f"{path}.names")) for n in json_list(entry.get("names"), f"{path}.names"))
        if names:
            images.append(shared(NodeImage(names, json_int(entry.get("sizeBytes"), f"{path}.sizeBytes") or 0)))
    return tuple(images)


def node_from_dict(raw: JsonObject) -> Node:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    status = json_object(raw.get("status"), "status")
    allocatable = json_object(status.get("allocatable"), "status.allocatable") or json_object(
        status.get("capacity"), "status.capacity")
    taints = []
    for i, taint in enumerate(json_list(spec.get("taints"), "spec.taints")):
        taint = json_object(taint, f"spec.taints[{i}]")
        taints.append(Taint(json_str(taint.get("key"), f"spec.taints[{i}].key"),
                            json_str(taint.get("value"), f"spec.taints[{i}].value"),
                            json_str(taint.get("effect"), f"spec.taints[{i}].effect")))
    return Node(
        name=json_str(meta.get("name"), "metadata.name"),
        labels=read_labels(meta.get("labels"), "metadata.labels"),
        taints=tuple(taints),
        unschedulable=json_bool(spec.get("unschedulable"), "spec.unschedulable"),
        allocatable=resources_from_quantities(allocatable, "status.allocatable"),
        images=_node_images(status.get("images")),
    )


def priority_class_from_dict(raw: JsonObject) -> PriorityClass:
    meta = json_object(raw.get("metadata"), "metadata")
    return PriorityClass(
        name=json_str(meta.get("name"), "metadata.name"),
        value=json_int(raw.get("value"), "value") or 0,
        global_default=json_bool(raw.get("globalDefault"), "globalDefault"),
        preemption_policy=json_str(raw.get("preemptionPolicy"), "preemptionPolicy") or PREEMPT_LOWER_PRIORITY,
        description=json_str(raw.get("description"), "description"),
    )


def namespace_from_dict(raw: JsonObject) -> Namespace:
    meta = json_object(raw.get("metadata"), "metadata")
    status = json_object(raw.get("status"), "status")
    terminating = json_str(status.get("phase"), "status.phase") == "Terminating" or bool(meta.get("deletionTimestamp"))
    return Namespace(json_str(meta.get("name"), "metadata.name"), read_labels(meta.get("labels"), "metadata.labels"),
                     terminating=terminating)


def pdb_from_dict(raw: JsonObject) -> PodDisruptionBudget:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    status = json_object(raw.get("status"), "status")
    return PodDisruptionBudget(
        name=json_str(meta.get("name"), "metadata.name"),
        namespace=json_str(meta.get("namespace"), "metadata.namespace") or "default",
        selector=label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=json_int(status.get("disruptionsAllowed"), "status.disruptionsAllowed") or 0,
        disrupted_pods=frozenset(json_object(status.get("disruptedPods"), "status.disruptedPods")),
    )


def resource_quota_from_dict(raw: JsonObject) -> ResourceQuota:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    status = json_object(raw.get("status"), "status")
    selector = json_object(spec.get("scopeSelector"), "spec.scopeSelector")
    expressions = []
    for i, expr in enumerate(json_list(selector.get("matchExpressions"), "spec.scopeSelector.matchExpressions")):
        epath = f"spec.scopeSelector.matchExpressions[{i}]"
        expr = json_object(expr, epath)
        expressions.append(ScopedResourceSelectorRequirement(
            json_str(expr.get("scopeName"), f"{epath}.scopeName"),
            json_str(expr.get("operator"), f"{epath}.operator"),
            tuple(json_str(v, f"{epath}.values") for v in json_list(expr.get("values"), f"{epath}.values")),
        ))
    hard = status.get("hard") if status.get("hard") is not None else spec.get("hard")
    return ResourceQuota(
        name=json_str(meta.get("name"), "metadata.name"),
        namespace=json_str(meta.get("namespace"), "metadata.namespace") or "default",
        hard=quantity_map(hard, "status.hard"),
        used=quantity_map(status.get("used"), "status.used"),
        scopes=tuple(json_str(s, "spec.scopes") for s in json_list(spec.get("scopes"), "spec.scopes")),
        scope_selector=tuple(expressions),
    )


_CONVERTERS: dict[str, Callable[[JsonObject], ClusterObject]] = {
    "PriorityClass": priority_class_from_dict,
    "Namespace": namespace_from_dict,
    "Node": node_from_dict,
    "Pod": state_pod_from_dict,
    "PodDisruptionBudget": pdb_from_dict,
    "ResourceQuota": resource_quota_from_dict,
}

SUPPORTED_KINDS = tuple(_CONVERTERS)


def object_from_dict(raw: JsonObject) -> ClusterObject | None:
    """The cluster-state object for a supported kind, or None for any other kind (pods without quota facts:
    ``pod_from_dict`` reads the pod under admission)."""
    converter = _CONVERTERS.get(str(raw.get("kind", "")))
    if converter is None:
        return None
    return converter(raw)
