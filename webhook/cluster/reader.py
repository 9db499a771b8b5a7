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
    EMPTY_LABELS,
    LIMIT_TYPE_CONTAINER,
    PREEMPT_LOWER_PRIORITY,
    ClusterObject,
    FrozenMap,
    LimitRange,
    LimitRangeItem,
    Namespace,
    Node,
    NodeImage,
    PodDisruptionBudget,
    PriorityClass,
    ResourceQuota,
    RuntimeClass,
    ScopedResourceSelectorRequirement,
    Taint,
)
from webhook.cluster.quantity import Quantity
from webhook.cluster.reader_constraints import checked_tolerations, label_selector, read_labels
from webhook.cluster.reader_devices import (
    device_class_from_dict,
    resource_claim_from_dict,
    resource_claim_template_from_dict,
    resource_slice_from_dict,
)
from webhook.cluster.reader_pod import pod_from_dict, state_pod_from_dict
from webhook.cluster.reader_resources import quantity_map, resources_from_quantities
from webhook.cluster.reader_volumes import (
    csinode_from_dict,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
    volume_attachment_from_dict,
)
from webhook.cluster.sharing import shared

__all__ = [
    "SUPPORTED_KINDS",
    "label_selector",
    "limit_range_from_dict",
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
    "runtime_class_from_dict",
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


# ---- what the API server's admission chain reads (issue #26) ------------------------------------------------

def _limit_range_item(raw: object, path: str) -> LimitRangeItem:
    """One ``spec.limits[]`` item, with the API server's defaulting (pkg/apis/core/v1/defaults.go
    ``SetDefaults_LimitRangeItem``): a stored LimitRange already carries it, a hand-written one gets it here."""
    item = json_object(raw, path)
    kind = json_str(item.get("type"), f"{path}.type")
    fields = {name: quantity_map(item.get(name), f"{path}.{name}")
              for name in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")}
    if kind == LIMIT_TYPE_CONTAINER:
        for name, qty in fields["max"].items():  # no default limit: the max
            fields["default"].setdefault(name, qty)
        for name, qty in fields["default"].items():  # no default request: the default limit
            fields["defaultRequest"].setdefault(name, qty)
        for name, qty in fields["min"].items():  # still none: the min
            fields["defaultRequest"].setdefault(name, qty)

    def frozen(quantities: dict[str, Quantity]) -> FrozenMap:
        return FrozenMap(quantities)

    return LimitRangeItem(type=kind, max=frozen(fields["max"]), min=frozen(fields["min"]),
                          default=frozen(fields["default"]), default_request=frozen(fields["defaultRequest"]),
                          max_limit_request_ratio=frozen(fields["maxLimitRequestRatio"]))


def limit_range_from_dict(raw: JsonObject) -> LimitRange:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    return LimitRange(
        name=json_str(meta.get("name"), "metadata.name"),
        namespace=json_str(meta.get("namespace"), "metadata.namespace") or "default",
        limits=tuple(_limit_range_item(item, f"spec.limits[{i}]")
                     for i, item in enumerate(json_list(spec.get("limits"), "spec.limits"))),
    )


def runtime_class_from_dict(raw: JsonObject) -> RuntimeClass:
    """node.k8s.io/v1 RuntimeClass (``handler``, ``overhead.podFixed``, ``scheduling``)."""
    meta = json_object(raw.get("metadata"), "metadata")
    overhead = raw.get("overhead")
    scheduling = raw.get("scheduling")
    scheduling_fields = json_object(scheduling, "scheduling")
    node_selector = scheduling_fields.get("nodeSelector")
    return RuntimeClass(
        name=json_str(meta.get("name"), "metadata.name"),
        handler=json_str(raw.get("handler"), "handler"),
        overhead=None if overhead is None else FrozenMap(
            quantity_map(json_object(overhead, "overhead").get("podFixed"), "overhead.podFixed")),
        node_selector=EMPTY_LABELS if node_selector is None else read_labels(node_selector, "scheduling.nodeSelector"),
        tolerations=checked_tolerations(scheduling_fields.get("tolerations"), "scheduling.tolerations"),
        has_scheduling=scheduling is not None,
    )


_CONVERTERS: dict[str, Callable[[JsonObject], ClusterObject]] = {
    "PriorityClass": priority_class_from_dict,
    "Namespace": namespace_from_dict,
    "Node": node_from_dict,
    "Pod": state_pod_from_dict,
    "PodDisruptionBudget": pdb_from_dict,
    "ResourceQuota": resource_quota_from_dict,
    "LimitRange": limit_range_from_dict,
    "RuntimeClass": runtime_class_from_dict,
    # Storage and devices (issue #27): what the volume plugins and DynamicResources read.
    "PersistentVolume": pv_from_dict,
    "PersistentVolumeClaim": pvc_from_dict,
    "StorageClass": storage_class_from_dict,
    "CSINode": csinode_from_dict,
    "VolumeAttachment": volume_attachment_from_dict,
    "DeviceClass": device_class_from_dict,
    "ResourceSlice": resource_slice_from_dict,
    "ResourceClaim": resource_claim_from_dict,
    "ResourceClaimTemplate": resource_claim_template_from_dict,
}

SUPPORTED_KINDS = tuple(_CONVERTERS)


def object_from_dict(raw: JsonObject) -> ClusterObject | None:
    """The cluster-state object for a supported kind, or None for any other kind (pods without quota facts:
    ``pod_from_dict`` reads the pod under admission)."""
    converter = _CONVERTERS.get(str(raw.get("kind", "")))
    if converter is None:
        return None
    return converter(raw)
