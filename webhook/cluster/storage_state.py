"""The storage and device objects of a ``ClusterState``, indexed as the volume plugins and DynamicResources read them:
``VolumeStore`` (PersistentVolumes by name and by class, claims by namespace/name, StorageClasses, CSINodes,
VolumeAttachments by node) and ``DeviceStore`` (DeviceClasses, ResourceSlices, ResourceClaims and their templates).

Each store is written by ``ClusterState.upsert``/``delete`` (O(changed object)) and bumps its ``version`` on every
change, so what the predictor derives from it (the allocated devices, the slices per node) is rebuilt only then.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from webhook.cluster.devices import DeviceClass, DeviceObject, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from webhook.cluster.volumes import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
    VolumeObject,
)

VOLUME_KINDS: dict[type, str] = {
    PersistentVolume: "PersistentVolume",
    PersistentVolumeClaim: "PersistentVolumeClaim",
    StorageClass: "StorageClass",
    CSINode: "CSINode",
    VolumeAttachment: "VolumeAttachment",
}
DEVICE_KINDS: dict[type, str] = {
    DeviceClass: "DeviceClass",
    ResourceSlice: "ResourceSlice",
    ResourceClaim: "ResourceClaim",
    ResourceClaimTemplate: "ResourceClaimTemplate",
}
NAMESPACED_KINDS = frozenset({"PersistentVolumeClaim", "ResourceClaim", "ResourceClaimTemplate"})


# How many changes ``VolumeStore.changed_since`` can name; further back, a reader rebuilds what it derived.
CHANGE_LOG_LENGTH = 4096


class VolumeStore:
    """PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes and VolumeAttachments, with a bounded log
    of the last changes (kind, key), so what the predictor derives per node is refreshed for the objects changed."""

    def __eq__(self, other: object) -> bool:  # two states with the same objects are equal (snapshot cache tests)
        if type(other) is not type(self):
            return False
        mine, theirs = dict(vars(self)), dict(vars(other))
        mine.pop("changes"), theirs.pop("changes")
        return mine == theirs

    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.pvs: dict[str, PersistentVolume] = {}
        self.pvs_by_class: dict[str, dict[str, PersistentVolume]] = {}
        self.pvcs: dict[str, PersistentVolumeClaim] = {}
        self.storage_classes: dict[str, StorageClass] = {}
        self.csinodes: dict[str, CSINode] = {}
        self.attachments: dict[str, VolumeAttachment] = {}
        self.attachments_by_node: dict[str, dict[str, VolumeAttachment]] = {}
        self.version = 0
        # (version, kind, key) of the last changes.
        self.changes: deque[tuple[int, str, str]] = deque(maxlen=CHANGE_LOG_LENGTH)

    def changed_since(self, version: int) -> list[tuple[str, str]] | None:
        """(kind, key) of every change after ``version``; None when the log no longer reaches back that far."""
        if version == self.version:
            return []
        log = self.changes
        if not log or log[0][0] > version + 1:
            return None
        return [(kind, key) for stamp, kind, key in log if stamp > version]

    def upsert(self, obj: VolumeObject) -> None:
        self.version += 1
        self.changes.append((self.version, VOLUME_KINDS[type(obj)],
                             obj.key if isinstance(obj, PersistentVolumeClaim) else obj.name))
        if isinstance(obj, PersistentVolume):
            self._remove_pv(obj.name)
            self.pvs[obj.name] = obj
            self.pvs_by_class.setdefault(obj.storage_class, {})[obj.name] = obj
        elif isinstance(obj, PersistentVolumeClaim):
            self.pvcs[obj.key] = obj
        elif isinstance(obj, StorageClass):
            self.storage_classes[obj.name] = obj
        elif isinstance(obj, CSINode):
            self.csinodes[obj.name] = obj
        else:
            self._remove_attachment(obj.name)
            self.attachments[obj.name] = obj
            self.attachments_by_node.setdefault(obj.node_name, {})[obj.name] = obj

    def delete(self, kind: str, key: str) -> None:
        self.version += 1
        self.changes.append((self.version, kind, key))
        if kind == "PersistentVolume":
            self._remove_pv(key)
        elif kind == "PersistentVolumeClaim":
            self.pvcs.pop(key, None)
        elif kind == "StorageClass":
            self.storage_classes.pop(key, None)
        elif kind == "CSINode":
            self.csinodes.pop(key, None)
        elif kind == "VolumeAttachment":
            self._remove_attachment(key)

    def objects(self, kind: str) -> Iterator[VolumeObject]:
        if kind == "PersistentVolume":
            yield from self.pvs.values()
        elif kind == "PersistentVolumeClaim":
            yield from self.pvcs.values()
        elif kind == "StorageClass":
            yield from self.storage_classes.values()
        elif kind == "CSINode":
            yield from self.csinodes.values()
        elif kind == "VolumeAttachment":
            yield from self.attachments.values()

    def _remove_pv(self, name: str) -> None:
        old = self.pvs.pop(name, None)
        if old is not None:
            members = self.pvs_by_class.get(old.storage_class)
            if members is not None:
                members.pop(name, None)
                if not members:
                    del self.pvs_by_class[old.storage_class]

    def _remove_attachment(self, name: str) -> None:
        old = self.attachments.pop(name, None)
        if old is not None:
            members = self.attachments_by_node.get(old.node_name)
            if members is not None:
                members.pop(name, None)
                if not members:
                    del self.attachments_by_node[old.node_name]


class DeviceStore:
    """DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates."""

    def __eq__(self, other: object) -> bool:  # two states with the same objects are equal (snapshot cache tests)
        return type(other) is type(self) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.device_classes: dict[str, DeviceClass] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.claims: dict[str, ResourceClaim] = {}
        self.templates: dict[str, ResourceClaimTemplate] = {}
        self.version = 0

    def upsert(self, obj: DeviceObject) -> None:
        self.version += 1
        if isinstance(obj, DeviceClass):
            self.device_classes[obj.name] = obj
        elif isinstance(obj, ResourceSlice):
            self.slices[obj.name] = obj
        elif isinstance(obj, ResourceClaim):
            self.claims[obj.key] = obj
        else:
            self.templates[obj.key] = obj

    def delete(self, kind: str, key: str) -> None:
        self.version += 1
        if kind == "DeviceClass":
            self.device_classes.pop(key, None)
        elif kind == "ResourceSlice":
            self.slices.pop(key, None)
        elif kind == "ResourceClaim":
            self.claims.pop(key, None)
        elif kind == "ResourceClaimTemplate":
            self.templates.pop(key, None)

    def objects(self, kind: str) -> Iterator[DeviceObject]:
        if kind == "DeviceClass":
            yield from self.device_classes.values()
        elif kind == "ResourceSlice":
            yield from self.slices.values()
        elif kind == "ResourceClaim":
            yield from self.claims.values()
        elif kind == "ResourceClaimTemplate":
            yield from self.templates.values()
