"""The storage and device objects as one scheduling cycle sees them (``StorageView``, a part of ``ClusterView``): the
listers the volume plugins and DynamicResources read, and the scheduler's assume caches.

Upstream reads claims through two doors: the informers' listers (VolumeRestrictions, VolumeZone, NodeVolumeLimits)
and VolumeBinding's assume caches, where a PersistentVolume chosen for a claim, or a claim given a node to be
provisioned on, counts as such for every later pod before the API server says so (volumebinding/binder.go,
AssumePodVolumes). DynamicResources likewise sees the devices it allocated for an earlier pod as in use. A replica
bound in the simulation records those here (``assume_volumes``, ``assume_allocations``), never in the
``ClusterState``.

A pod's ``ephemeral`` volume is the claim the ephemeral volume controller creates once the pod exists; the
prediction of a pod the cluster does not hold yet reads that claim as it will be (``ephemeral_claim``), and a
template claim of DRA likewise (``claim_from_template``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from webhook.cluster.copying import replace_fields
from webhook.cluster.devices import DEVICE_CLASS_RESOURCE_PREFIX, DeviceClass, ResourceClaim, ResourceSlice
from webhook.cluster.model import Pod
from webhook.cluster.storage_state import DeviceStore
from webhook.cluster.volume_helpers import default_storage_class, ephemeral_claim
from webhook.cluster.volumes import (
    ClaimRef,
    ClaimVolume,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)

if TYPE_CHECKING:
    from webhook.cluster.snapshot import ClusterState


# Per DeviceStore, by identity: (the store, its version, extended resource name -> DeviceClass), rebuilt when the
# store changes. Keyed by id() with a weak reference to check it, not a WeakKeyDictionary: a DeviceStore compares
# by value and so has no hash.
_EXTENDED_CACHE: dict[int, tuple[weakref.ref[DeviceStore], int, dict[str, DeviceClass]]] = {}


class ClaimLookup:
    """What a pod volume's claim resolves to: the claim, or why there is none (``missing``: the claim's name)."""

    __slots__ = ("claim", "error", "missing")

    def __init__(self, claim: PersistentVolumeClaim | None = None, missing: str = "", error: str = "") -> None:
        self.claim = claim
        self.missing = missing
        self.error = error


class StorageView:
    """The storage and device listers of a ``ClusterView``, with what simulated bindings assumed."""

    state: ClusterState
    removed: set[str]
    added: dict[str, dict[str, Pod]]

    def _init_storage(self) -> None:
        self.assumed_pvs: dict[str, PersistentVolume] = {}
        self.assumed_pvcs: dict[str, PersistentVolumeClaim] = {}
        self.assumed_claims: dict[str, ResourceClaim] = {}

    # ---- what the state holds -------------------------------------------------------------------
    def knows(self, kind: str) -> bool:
        """Whether the state holds the kind at all (a snapshot taken without it knows nothing of it)."""
        return self.state.knows(kind)

    # ---- listers (informer view) ------------------------------------------------------------------
    def pvc(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.state.volumes.pvcs.get(f"{namespace}/{name}")

    def pv(self, name: str) -> PersistentVolume | None:
        return self.state.volumes.pvs.get(name)

    def storage_class(self, name: str) -> StorageClass | None:
        return self.state.volumes.storage_classes.get(name)

    def csinode(self, node: str) -> CSINode | None:
        return self.state.volumes.csinodes.get(node)

    def attachments_on(self, node: str) -> Iterable[VolumeAttachment]:
        return self.state.volumes.attachments_by_node.get(node, {}).values()

    def pvc_in_use(self, key: str) -> bool:
        """``IsPVCUsedByPods``: a bound pod of the snapshot (evictions and bindings simulated) uses the claim."""
        count = self.state.pvc_ref_counts.get(key, 0)
        if self.removed or self.added:
            namespace, _, name = key.partition("/")
            for removed in self.removed:
                pod = self.state.pods.get(removed)
                if pod is not None and pod.namespace == namespace and pod.node_name:
                    count -= _claim_refs(pod, name)
            for pods in self.added.values():
                count += sum(_claim_refs(pod, name) for pod in pods.values() if pod.namespace == namespace)
        return count > 0

    def pod_claim(self, pod: Pod, volume: ClaimVolume) -> ClaimLookup:
        """The claim of one of ``pod``'s volumes through the listers. A pod not created yet (no uid: the pod under
        admission, a preview) reads an ephemeral volume's claim as the ephemeral volume controller will create it
        once the pod exists; a created pod waits for the controller as upstream's does."""
        name = volume.claim_name_for(pod.name)
        found = self.pvc(pod.namespace, name)
        if volume.template is None:
            return ClaimLookup(found, "" if found is not None else name)
        if found is None:
            if pod.uid:
                return ClaimLookup(missing=name)
            return ClaimLookup(ephemeral_claim(volume.template, name, pod.namespace, pod.uid,
                                               default_storage_class(self.state.volumes.storage_classes.values())))
        if not pod.uid or found.controller_uid != pod.uid:
            # ephemeral.VolumeIsForPod
            return ClaimLookup(error=f"PVC {found.namespace}/{found.name} was not created for pod "
                                     f"{pod.namespace}/{pod.name} (pod is not owner)")
        return ClaimLookup(found)

    # ---- VolumeBinding's assume caches ------------------------------------------------------------
    def pvc_assumed(self, claim: PersistentVolumeClaim) -> PersistentVolumeClaim:
        return self.assumed_pvcs.get(claim.key, claim)

    def pv_assumed(self, name: str) -> PersistentVolume | None:
        return self.assumed_pvs.get(name) or self.state.volumes.pvs.get(name)

    def pvs_of_class(self, storage_class: str) -> list[PersistentVolume]:
        """``pvCache.ListPVs``: the volumes of a class, as assumed."""
        volumes = self.state.volumes.pvs_by_class.get(storage_class, {})
        if not self.assumed_pvs:
            return list(volumes.values())
        listed = [self.assumed_pvs.get(name, pv) for name, pv in volumes.items()]
        return listed

    def assume_volumes(self, bindings: Iterable[tuple[PersistentVolume, PersistentVolumeClaim]],
                       provisions: Iterable[PersistentVolumeClaim], node: str) -> None:
        """``AssumePodVolumes`` for a pod bound to ``node``: each chosen volume reserved for its claim, each claim to
        provision given the node."""
        for pv, claim in bindings:
            self.assumed_pvs[pv.name] = replace_fields(pv, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid))
        for claim in provisions:
            self.assumed_pvcs[claim.key] = replace_fields(claim, selected_node=node)

    # ---- DynamicResources' claims and devices -------------------------------------------------------
    def device_classes(self) -> Mapping[str, DeviceClass]:
        return self.state.devices.device_classes

    def resource_slices(self) -> Iterable[ResourceSlice]:
        return self.state.devices.slices.values()

    def resource_claim(self, namespace: str, name: str) -> ResourceClaim | None:
        key = f"{namespace}/{name}"
        return self.assumed_claims.get(key) or self.state.devices.claims.get(key)

    def resource_claims(self) -> Iterator[ResourceClaim]:
        """Every claim, as allocated so far (the DRA manager's claim tracker)."""
        assumed = self.assumed_claims
        for key, claim in self.state.devices.claims.items():
            yield assumed.get(key, claim)
        for key, claim in assumed.items():
            if key not in self.state.devices.claims:
                yield claim

    def extended_resource_class(self, resource: str) -> DeviceClass | None:
        """``DeviceClassResolver.GetDeviceClass``: the DeviceClass backing an extended resource (DRAExtendedResource,
        on in v1.37): the class naming it in ``spec.extendedResourceName`` (of several, the newest, then the first by
        name: extendedresourcecache), or the class ``<name>`` for ``deviceclass.resource.kubernetes.io/<name>``."""
        devices = self.state.devices
        cached = _EXTENDED_CACHE.get(id(devices))
        if cached is None or cached[0]() is not devices or cached[1] != devices.version:
            mapping: dict[str, DeviceClass] = {}
            for device_class in devices.device_classes.values():
                mapping[DEVICE_CLASS_RESOURCE_PREFIX + device_class.name] = device_class
            explicit: dict[str, DeviceClass] = {}
            for device_class in devices.device_classes.values():
                name = device_class.extended_resource_name
                if name is None:
                    continue
                held = explicit.get(name)
                if held is None or (device_class.creation_ns, held.name) > (held.creation_ns, device_class.name):
                    explicit[name] = device_class
            mapping.update(explicit)
            for key in [key for key, entry in _EXTENDED_CACHE.items() if entry[0]() is None]:
                del _EXTENDED_CACHE[key]  # stores gone (states replaced): the cache stays as small as the live ones
            cached = (weakref.ref(devices), devices.version, mapping)
            _EXTENDED_CACHE[id(devices)] = cached
        return cached[2].get(resource)

    def assume_allocations(self, claims: Iterable[ResourceClaim]) -> None:
        """Claims a bound pod allocated (or reserved): what the next pods see of them."""
        for claim in claims:
            self.assumed_claims[claim.key] = claim


def _claim_refs(pod: Pod, name: str) -> int:
    """How many of the pod's ``persistentVolumeClaim`` volumes name the claim (``PVCRefCounts`` counts each)."""
    volumes = pod.volumes
    return 0 if volumes is None else sum(1 for c in volumes.claims if not c.ephemeral and c.claim_name == name)
