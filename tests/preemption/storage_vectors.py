"""Turn a case of tests/vectors/volumes.yaml (and devices.yaml) into a ``ClusterView`` and the pod to place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.cluster.model import Pod
from webhook.cluster.reader import object_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.cluster.storage_state import DEVICE_KINDS, VOLUME_KINDS
from webhook.preemption.framework.status import Status
from webhook.preemption.framework.view import ClusterView

API_VERSIONS = {"PersistentVolume": "v1", "PersistentVolumeClaim": "v1", "StorageClass": "storage.k8s.io/v1",
                "CSINode": "storage.k8s.io/v1", "VolumeAttachment": "storage.k8s.io/v1",
                "DeviceClass": "resource.k8s.io/v1", "ResourceSlice": "resource.k8s.io/v1",
                "ResourceClaim": "resource.k8s.io/v1", "ResourceClaimTemplate": "resource.k8s.io/v1"}


def node_dict(raw: Mapping[str, Any]) -> dict[str, Any]:
    if "metadata" in raw:
        return {"kind": "Node", **raw}
    allocatable = raw.get("allocatable") or {"cpu": "64", "memory": "256Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": raw["name"], "labels": raw.get("labels") or {}},
            "spec": {}, "status": {"allocatable": allocatable, "capacity": allocatable}}


def pod_dict(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A pod from the shorthand {name, namespace, uid, node, pvcs, volumes, containers, resourceClaims, priority}."""
    volumes = [{"name": f"pvc-{i}", "persistentVolumeClaim": {"claimName": claim}}
               for i, claim in enumerate(raw.get("pvcs") or [])]
    volumes += list(raw.get("volumes") or [])
    spec: dict[str, Any] = {"containers": raw.get("containers") or [{"name": "c"}]}
    for field in ("initContainers", "resourceClaims", "priority", "nodeSelector"):
        if field in raw:
            spec[field] = raw[field]
    if volumes:
        spec["volumes"] = volumes
    if raw.get("node"):
        spec["nodeName"] = raw["node"]
    meta: dict[str, Any] = {"name": raw.get("name", "pod"), "namespace": raw.get("namespace") or "default"}
    if raw.get("uid"):
        meta["uid"] = raw["uid"]
    status: dict[str, Any] = {"phase": "Running" if raw.get("node") else "Pending"}
    if "resourceClaimStatuses" in raw:
        status["resourceClaimStatuses"] = raw["resourceClaimStatuses"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


CSI_NODE = "node-for-max-pd-test-1"
CSI_CLASS = "csi-sc"
IN_TREE_AWS = "kubernetes.io/aws-ebs"
HOSTPATH = "kubernetes.io/hostpath"


def csi_limits_objects(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """csi_test.go's listers for ``driverNames``, ``maxVols``, ``limitSource``, ``vaCount`` (getFakeCSIPVLister,
    getFakeCSIPVCLister with volumeName "csi", getFakeCSIStorageClassLister, getNodeWithPodAndVolumeLimits,
    buildFakeClientWithVALister, enableMigrationOnNode)."""
    drivers = spec["driverNames"]
    objects: list[dict[str, Any]] = []
    for driver in drivers:
        for j in range(4):
            handle = f"csi-{driver}-{j}"
            if driver == IN_TREE_AWS:
                source: dict[str, Any] = {"awsElasticBlockStore": {"volumeID": handle}}
            elif driver == HOSTPATH:
                source = {"hostPath": {"path": "/tmp"}}
            else:
                source = {"csi": {"driver": driver, "volumeHandle": handle}}
            objects.append({"kind": "PersistentVolume", "metadata": {"name": handle}, "spec": source})
            objects.append({"kind": "PersistentVolumeClaim", "metadata": {"name": handle, "namespace": "default"},
                            "spec": {"volumeName": handle}})
    objects += [
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "csi-4", "namespace": "default"},
         "spec": {"storageClassName": CSI_CLASS}},
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "csi-5", "namespace": "default"}, "spec": {}},
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "csi-6", "namespace": "default"},
         "spec": {"storageClassName": CSI_CLASS, "volumeName": "missing-in-action"}},
        {"kind": "StorageClass", "metadata": {"name": CSI_CLASS}, "provisioner": drivers[0]},
    ]
    source_kind = spec["limitSource"]
    if source_kind in ("csinode", "csinode-with-no-limit", "no-csi-driver"):
        csi_drivers = []
        if source_kind != "no-csi-driver":
            for driver in drivers:
                entry: dict[str, Any] = {"name": driver, "nodeID": CSI_NODE}
                if source_kind == "csinode":
                    entry["allocatable"] = {"count": spec["maxVols"]}
                csi_drivers.append(entry)
        objects.append({"kind": "CSINode", "metadata": {
            "name": CSI_NODE, "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": IN_TREE_AWS}},
            "spec": {"drivers": csi_drivers}})
    for driver in drivers:
        for j in range(spec.get("vaCount", 0)):
            objects.append({"kind": "VolumeAttachment", "metadata": {"name": f"va-{driver}-{j}"},
                            "spec": {"nodeName": CSI_NODE, "attacher": driver,
                                     "source": {"persistentVolumeName": f"csi-{driver}-{j}"}}})
    return objects


def expand_csi_case(case: Mapping[str, Any], vectors: Mapping[str, Any]) -> dict[str, Any]:
    """A TestCSILimits case as a plain one: its listers as objects, its pods from ``csi_pods`` on the test's node."""
    limits = case.get("csi_limits")
    if limits is None:
        return dict(case)
    library = vectors["csi_pods"]
    objects = csi_limits_objects(limits) + [vectors["csi_claims"][n] for n in limits.get("extraClaims", [])]
    pods = [{"name": f"existing-{i}", **library[p["ref"]], "node": CSI_NODE} for i, p in enumerate(case["pods"])]
    return {**case, "objects": objects, "nodes": [{"name": CSI_NODE}], "pods": pods,
            "pod": {"name": "new", **library[case["pod"]["ref"]]}}


def build_state(case: Mapping[str, Any], fixtures: Mapping[str, list[dict[str, Any]]]) -> ClusterState:
    """The case's cluster, every storage and device kind listed (as an informer-fed state: empty is known)."""
    state = ClusterState()
    for kind in (*VOLUME_KINDS.values(), *DEVICE_KINDS.values()):
        state.mark_known(kind)
    objects = [*(fixtures.get(case["fixture"], []) if case.get("fixture") else []), *(case.get("objects") or [])]
    for raw in objects:
        raw = {"apiVersion": API_VERSIONS.get(raw["kind"], "v1"), **raw}
        obj = object_from_dict(raw)
        assert obj is not None, raw
        state.upsert(obj)
    for raw in case.get("nodes") or []:
        obj = object_from_dict(node_dict(raw))
        assert obj is not None
        state.upsert(obj)
    for raw in case.get("pods") or []:
        obj = object_from_dict(pod_dict(raw))
        assert obj is not None
        state.upsert(obj)
    return state


def case_view(case: Mapping[str, Any], fixtures: Mapping[str, list[dict[str, Any]]]) -> tuple[ClusterView, Pod]:
    return ClusterView(build_state(case, fixtures)), pod_from_dict(pod_dict(case["pod"]))


def expected_status(raw: object) -> str | Status:
    """``Skip``/``Success`` as the code's name, else the status."""
    if isinstance(raw, str):
        return raw
    assert isinstance(raw, Mapping)
    return Status(raw["code"], tuple(raw.get("reasons") or ()))
