"""Read the storage objects (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, VolumeAttachment) and a
pod's volumes from API dicts into ``webhook.cluster.volumes``. Wrong types raise ``InvalidInput`` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.cluster.jsonfields import JsonObject, json_bool, json_int, json_list, json_object, json_str, parse_time_ns
from webhook.cluster.model import LabelSelectorRequirement
from webhook.cluster.quantity import Quantity, parse_quantity
from webhook.cluster.reader_constraints import distinct, label_selector, node_selector_terms, read_labels
from webhook.cluster.volumes import (
    FILESYSTEM,
    ClaimRef,
    ClaimVolume,
    CSIDriverLimit,
    CSINode,
    InlineDisk,
    InTreeVolume,
    PersistentVolume,
    PersistentVolumeClaim,
    PodVolumes,
    StorageClass,
    VolumeAttachment,
)
from webhook.errors import InvalidInput, QuantityError

# v1.BetaStorageClassAnnotation: read before spec.storageClassName (GetPersistentVolume[Claim]Class).
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
IS_DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                                "storageclass.beta.kubernetes.io/is-default-class")
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"

# csi-translation-lib: the in-tree volume sources kube-scheduler translates to CSI, their plugin names and the
# field that identifies the disk.
IN_TREE_SOURCES: dict[str, tuple[str, str]] = {
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "volumeID"),
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pdName"),
    "azureDisk": ("kubernetes.io/azure-disk", "diskURI"),
    "cinder": ("kubernetes.io/cinder", "volumeID"),
    "portworxVolume": ("kubernetes.io/portworx-volume", "volumeID"),
}


def _annotations(meta: JsonObject) -> Mapping[str, str]:
    return read_labels(meta.get("annotations"), "metadata.annotations")


def _quantity(value: object, path: str) -> Quantity | None:
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise InvalidInput(f"{path}: {exc}") from exc


def _str_tuple(value: object, path: str) -> tuple[str, ...]:
    return distinct(json_str(v, f"{path}[{i}]") for i, v in enumerate(json_list(value, path)))


def _controller(meta: JsonObject) -> tuple[str, str, str]:
    """(uid, kind, name) of the controller owner reference (``metav1.GetControllerOf``), empty when none."""
    for i, ref in enumerate(json_list(meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = json_object(ref, f"metadata.ownerReferences[{i}]")
        if json_bool(ref.get("controller"), f"metadata.ownerReferences[{i}].controller"):
            return (json_str(ref.get("uid"), f"metadata.ownerReferences[{i}].uid"),
                    json_str(ref.get("kind"), f"metadata.ownerReferences[{i}].kind"),
                    json_str(ref.get("name"), f"metadata.ownerReferences[{i}].name"))
    return "", "", ""


def _in_tree(spec: JsonObject, path: str, labels: Mapping[str, str] | None = None) -> InTreeVolume | None:
    """The in-tree source and the CSI volume handle csi-translation-lib gives it (its ``TranslateInTree*ToCSI``)."""
    for field, (plugin, id_field) in IN_TREE_SOURCES.items():
        source = spec.get(field)
        if source is not None:
            source = json_object(source, f"{path}.{field}")
            volume_id = json_str(source.get(id_field), f"{path}.{field}.{id_field}")
            return InTreeVolume(plugin, _csi_handle(field, volume_id, labels))
    return None


def _csi_handle(field: str, volume_id: str, labels: Mapping[str, str] | None) -> str:
    if field == "awsElasticBlockStore" and volume_id.startswith("aws://"):
        return volume_id.rstrip("/").rsplit("/", 1)[-1]  # KubernetesVolumeIDToEBSVolumeID
    if field == "gcePersistentDisk":
        zone = "UNSPECIFIED"
        if labels is not None:  # a PersistentVolume's zone label (a regional disk keeps UNSPECIFIED here)
            zones = (labels.get("topology.kubernetes.io/zone") or labels.get("failure-domain.beta.kubernetes.io/zone")
                     or "UNSPECIFIED").split("__")
            zone = zones[0] if len(zones) == 1 else "UNSPECIFIED"
        return f"projects/UNSPECIFIED/zones/{zone}/disks/{volume_id}"
    return volume_id


def pv_from_dict(raw: JsonObject) -> PersistentVolume:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    status = json_object(raw.get("status"), "status")
    annotations = _annotations(meta)
    affinity = json_object(spec.get("nodeAffinity"), "spec.nodeAffinity")
    claim_ref = spec.get("claimRef")
    ref = None
    if claim_ref is not None:
        claim_ref = json_object(claim_ref, "spec.claimRef")
        ref = ClaimRef(json_str(claim_ref.get("namespace"), "spec.claimRef.namespace"),
                       json_str(claim_ref.get("name"), "spec.claimRef.name"),
                       json_str(claim_ref.get("uid"), "spec.claimRef.uid"))
    csi = json_object(spec.get("csi"), "spec.csi")
    capacity = json_object(spec.get("capacity"), "spec.capacity")
    storage_class = annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    return PersistentVolume(
        name=json_str(meta.get("name"), "metadata.name"),
        labels=read_labels(meta.get("labels"), "metadata.labels"),
        storage_class=storage_class if storage_class is not None else json_str(spec.get("storageClassName"),
                                                                              "spec.storageClassName"),
        capacity=_quantity(capacity.get("storage"), "spec.capacity.storage"),
        access_modes=_str_tuple(spec.get("accessModes"), "spec.accessModes"),
        volume_mode=json_str(spec.get("volumeMode"), "spec.volumeMode") or FILESYSTEM,
        node_affinity=node_selector_terms(affinity.get("required"), "spec.nodeAffinity.required"),
        claim_ref=ref,
        phase=json_str(status.get("phase"), "status.phase"),
        deleting=bool(meta.get("deletionTimestamp")),
        volume_attributes_class=json_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        csi_driver=json_str(csi.get("driver"), "spec.csi.driver"),
        csi_volume_handle=json_str(csi.get("volumeHandle"), "spec.csi.volumeHandle"),
        in_tree=_in_tree(spec, "spec", read_labels(meta.get("labels"), "metadata.labels")),
    )


def claim_spec(spec: JsonObject, path: str, name: str = "", namespace: str = "",
               annotations: Mapping[str, str] | None = None) -> PersistentVolumeClaim:
    """A claim from its spec (a PersistentVolumeClaim's, or an ephemeral volume's ``volumeClaimTemplate``)."""
    annotations = annotations or {}
    beta_class = annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    spec_class = spec.get("storageClassName")
    resources = json_object(spec.get("resources"), f"{path}.resources")
    requests = json_object(resources.get("requests"), f"{path}.resources.requests")
    return PersistentVolumeClaim(
        name=name,
        namespace=namespace,
        storage_class=beta_class if beta_class is not None else json_str(spec_class, f"{path}.storageClassName"),
        has_class=beta_class is not None or spec_class is not None,
        volume_name=json_str(spec.get("volumeName"), f"{path}.volumeName"),
        access_modes=_str_tuple(spec.get("accessModes"), f"{path}.accessModes"),
        volume_mode=json_str(spec.get("volumeMode"), f"{path}.volumeMode") or FILESYSTEM,
        storage_request=_quantity(requests.get("storage"), f"{path}.resources.requests.storage"),
        selector=label_selector(spec.get("selector"), f"{path}.selector"),
        volume_attributes_class=json_str(spec.get("volumeAttributesClassName"), f"{path}.volumeAttributesClassName"),
    )


def pvc_from_dict(raw: JsonObject) -> PersistentVolumeClaim:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    status = json_object(raw.get("status"), "status")
    annotations = _annotations(meta)
    base = claim_spec(spec, "spec", annotations=annotations)
    uid, kind, name = _controller(meta)
    return PersistentVolumeClaim(
        name=json_str(meta.get("name"), "metadata.name"),
        namespace=json_str(meta.get("namespace"), "metadata.namespace") or "default",
        uid=json_str(meta.get("uid"), "metadata.uid"),
        storage_class=base.storage_class,
        has_class=base.has_class,
        volume_name=base.volume_name,
        bind_completed=BIND_COMPLETED_ANNOTATION in annotations,
        selected_node=annotations.get(SELECTED_NODE_ANNOTATION),
        phase=json_str(status.get("phase"), "status.phase"),
        deleting=bool(meta.get("deletionTimestamp")),
        access_modes=base.access_modes,
        volume_mode=base.volume_mode,
        storage_request=base.storage_request,
        selector=base.selector,
        volume_attributes_class=base.volume_attributes_class,
        controller_uid=uid,
        controller_kind=kind,
        controller_name=name,
    )


def storage_class_from_dict(raw: JsonObject) -> StorageClass:
    meta = json_object(raw.get("metadata"), "metadata")
    annotations = _annotations(meta)
    terms = []
    for i, term in enumerate(json_list(raw.get("allowedTopologies"), "allowedTopologies")):
        tpath = f"allowedTopologies[{i}]"
        term = json_object(term, tpath)
        requirements = []
        for j, expr in enumerate(json_list(term.get("matchLabelExpressions"), f"{tpath}.matchLabelExpressions")):
            epath = f"{tpath}.matchLabelExpressions[{j}]"
            expr = json_object(expr, epath)
            requirements.append(LabelSelectorRequirement(json_str(expr.get("key"), f"{epath}.key"), "In",
                                                         _str_tuple(expr.get("values"), f"{epath}.values")))
        terms.append(tuple(requirements))
    mode = raw.get("volumeBindingMode")
    return StorageClass(
        name=json_str(meta.get("name"), "metadata.name"),
        provisioner=json_str(raw.get("provisioner"), "provisioner"),
        volume_binding_mode=None if mode is None else json_str(mode, "volumeBindingMode"),
        allowed_topologies=tuple(terms),
        is_default=any(annotations.get(a) == "true" for a in IS_DEFAULT_CLASS_ANNOTATIONS),
        creation_ns=parse_time_ns(meta.get("creationTimestamp"), "metadata.creationTimestamp") or 0,
    )


def csinode_from_dict(raw: JsonObject) -> CSINode:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    drivers = []
    for i, driver in enumerate(json_list(spec.get("drivers"), "spec.drivers")):
        dpath = f"spec.drivers[{i}]"
        driver = json_object(driver, dpath)
        allocatable = json_object(driver.get("allocatable"), f"{dpath}.allocatable")
        drivers.append(CSIDriverLimit(json_str(driver.get("name"), f"{dpath}.name"),
                                      json_int(allocatable.get("count"), f"{dpath}.allocatable.count")))
    migrated = _annotations(meta).get(MIGRATED_PLUGINS_ANNOTATION, "")
    return CSINode(
        name=json_str(meta.get("name"), "metadata.name"),
        drivers=tuple(drivers),
        migrated_plugins=frozenset(p for p in migrated.split(",") if p),
    )


def volume_attachment_from_dict(raw: JsonObject) -> VolumeAttachment:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    source = json_object(spec.get("source"), "spec.source")
    return VolumeAttachment(
        name=json_str(meta.get("name"), "metadata.name"),
        node_name=json_str(spec.get("nodeName"), "spec.nodeName"),
        attacher=json_str(spec.get("attacher"), "spec.attacher"),
        persistent_volume_name=json_str(source.get("persistentVolumeName"), "spec.source.persistentVolumeName"),
    )


def _inline_disk(volume: JsonObject, path: str) -> InlineDisk | None:
    """The volume sources VolumeRestrictions compares between pods of one node (``isVolumeConflict``)."""
    for kind, id_field in (("gcePersistentDisk", "pdName"), ("awsElasticBlockStore", "volumeID"), ("iscsi", "iqn")):
        source = volume.get(kind)
        if source is not None:
            source = json_object(source, f"{path}.{kind}")
            return InlineDisk(kind, json_str(source.get(id_field), f"{path}.{kind}.{id_field}"),
                              json_bool(source.get("readOnly"), f"{path}.{kind}.readOnly"))
    rbd = volume.get("rbd")
    if rbd is not None:
        rbd = json_object(rbd, f"{path}.rbd")
        pool = json_str(rbd.get("pool"), f"{path}.rbd.pool") or "rbd"
        return InlineDisk("rbd", f"{pool}/{json_str(rbd.get('image'), f'{path}.rbd.image')}",
                          json_bool(rbd.get("readOnly"), f"{path}.rbd.readOnly"),
                          frozenset(_str_tuple(rbd.get("monitors"), f"{path}.rbd.monitors")))
    return None


# The volume sources the storage plugins read; a pod's other volumes (its projected token, ConfigMaps, Secrets,
# emptyDirs: almost every pod has some) are skipped by one set intersection each.
_STORAGE_SOURCES = frozenset({"persistentVolumeClaim", "ephemeral", "gcePersistentDisk", "awsElasticBlockStore",
                              "iscsi", "rbd", "azureDisk", "cinder", "portworxVolume"})


def pod_volumes(spec: JsonObject) -> PodVolumes | None:
    """The claims, inline disks and in-tree inline volumes of a pod's ``spec.volumes``; None when it has none."""
    volumes = json_list(spec.get("volumes"), "spec.volumes")
    if all(type(v) is dict and not v.keys() & _STORAGE_SOURCES for v in volumes):
        return None
    claims: list[ClaimVolume] = []
    disks: list[InlineDisk] = []
    in_tree: list[InTreeVolume] = []
    for i, volume in enumerate(volumes):
        path = f"spec.volumes[{i}]"
        volume = json_object(volume, path)
        name = json_str(volume.get("name"), f"{path}.name")
        pvc = volume.get("persistentVolumeClaim")
        if pvc is not None:
            pvc = json_object(pvc, f"{path}.persistentVolumeClaim")
            claims.append(ClaimVolume(name, json_str(pvc.get("claimName"), f"{path}.persistentVolumeClaim.claimName"),
                                      read_only=json_bool(pvc.get("readOnly"),
                                                          f"{path}.persistentVolumeClaim.readOnly")))
            continue
        ephemeral = volume.get("ephemeral")
        if ephemeral is not None:
            ephemeral = json_object(ephemeral, f"{path}.ephemeral")
            template = json_object(ephemeral.get("volumeClaimTemplate"), f"{path}.ephemeral.volumeClaimTemplate")
            tmeta = json_object(template.get("metadata"), f"{path}.ephemeral.volumeClaimTemplate.metadata")
            claims.append(ClaimVolume(name, template=claim_spec(
                json_object(template.get("spec"), f"{path}.ephemeral.volumeClaimTemplate.spec"),
                f"{path}.ephemeral.volumeClaimTemplate.spec", annotations=_annotations(tmeta))))
            continue
        disk = _inline_disk(volume, path)
        if disk is not None:
            disks.append(disk)
        found = _in_tree(volume, path)
        if found is not None:
            in_tree.append(found)
    if not claims and not disks and not in_tree:
        return None
    return PodVolumes(tuple(claims), tuple(disks), tuple(in_tree))
