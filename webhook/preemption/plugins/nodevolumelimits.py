"""NodeVolumeLimits (pkg/scheduler/framework/plugins/nodevolumelimits/csi.go): a node attaches at most
``allocatable.count`` volumes of each CSI driver its CSINode lists.

Volumes are counted as upstream counts them (``filterAttachableVolumes``): a claim's volume by its CSI driver and
volume handle (a bound claim's PersistentVolume; an unbound claim's class provisioner, one new volume per claim), an
in-tree volume by the CSI driver it migrates to when the node's CSINode says so; a volume the node's pods already
use is not new; a VolumeAttachment to the node counts even with no pod using its volume. Exceeding a limit is
Unschedulable: the Filter recounts the node's pods, so the dry run's evictions free attachments (except those a
VolumeAttachment still holds). PreFilter only decides whether to run (a pod with claims or in-tree volumes).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from webhook.cluster.model import Pod
from webhook.cluster.volumes import CSINode, PersistentVolumeClaim
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.index import SortedNames, StateIndex
from webhook.preemption.framework.status import OK, SKIPPED, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.summary import NodeSummary
from webhook.preemption.framework.types import NodeInfo

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "NodeVolumeLimits"
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
MAX_VOLUME_COUNT_EXCEEDED = Status(UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,))
# csi-translation-lib: the CSI driver each migratable in-tree plugin becomes.
CSI_DRIVER_OF_IN_TREE = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
# Upstream names an unbound claim's future volume "<random prefix>-<namespace>/<claim>": any constant that no real
# volume handle carries keeps claims apart the same way.
UNBOUND_HANDLE_PREFIX = "\x00unbound"


def limits_of(csinode: CSINode | None) -> dict[str, int]:
    """``getVolumeLimits``: each driver of the CSINode that states an allocatable count."""
    if csinode is None:
        return {}
    return {d.name: d.allocatable_count for d in csinode.drivers if d.allocatable_count is not None}


def _migrated(csinode: CSINode | None, plugin: str) -> bool:
    """``isCSIMigrationOn``: the five migratable in-tree plugins, on a node with a CSINode."""
    return csinode is not None and plugin in CSI_DRIVER_OF_IN_TREE


def _driver_of_claim(view: ClusterView, csinode: CSINode | None, claim: PersistentVolumeClaim) -> tuple[str, str]:
    """``getCSIDriverInfo``: (driver, volume handle) of a claim's volume; ("", "") when it is not counted."""
    if claim.volume_name:
        pv = view.pv(claim.volume_name)
        if pv is not None:
            if pv.csi_driver:
                return pv.csi_driver, pv.csi_volume_handle
            if pv.in_tree is None or not _migrated(csinode, pv.in_tree.plugin):
                return "", ""
            return CSI_DRIVER_OF_IN_TREE[pv.in_tree.plugin], pv.in_tree.volume_id
    # getCSIDriverInfoFromSC: a volume not bound (or not found) counts as one more of its class's provisioner.
    if not claim.storage_class:
        return "", ""
    storage_class = view.storage_class(claim.storage_class)
    if storage_class is None:
        return "", ""
    handle = f"{UNBOUND_HANDLE_PREFIX}-{claim.namespace}/{claim.name}"
    provisioner = storage_class.provisioner
    if provisioner in CSI_DRIVER_OF_IN_TREE:
        if not _migrated(csinode, provisioner):
            return "", ""
        return CSI_DRIVER_OF_IN_TREE[provisioner], handle
    return provisioner, handle


def attachable_volumes(view: ClusterView, pod: Pod, csinode: CSINode | None, new_pod: bool,
                       into: dict[str, str]) -> Status | None:
    """``filterAttachableVolumes``: the pod's volumes (unique name → driver) into ``into``; for the pod to place, the
    status of a claim that cannot be read (for a pod already placed such a volume is skipped)."""
    volumes = pod.volumes
    if volumes is None:
        return None
    for volume in volumes.claims:
        lookup = view.pod_claim(pod, volume) if new_pod else None
        claim = lookup.claim if lookup is not None else view.pvc(pod.namespace, volume.claim_name_for(pod.name))
        if claim is None:
            if new_pod:
                name = volume.claim_name_for(pod.name)
                return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (
                    f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" not found',))
            continue
        driver, handle = _driver_of_claim(view, csinode, claim)
        if driver and handle:
            into[f"{driver}/{handle}"] = driver
    for in_tree in volumes.in_tree:
        if _migrated(csinode, in_tree.plugin):
            driver = CSI_DRIVER_OF_IN_TREE[in_tree.plugin]
            into[f"{driver}/{in_tree.volume_id}"] = driver
    return None


def _attachments(view: ClusterView, node: str) -> dict[str, str]:
    """``getNodeVolumeAttachmentInfo``: the CSI volumes attached to the node (unique name → attacher)."""
    found = {}
    for attachment in view.attachments_on(node):
        if not attachment.attacher or not attachment.persistent_volume_name:
            continue
        pv = view.pv(attachment.persistent_volume_name)
        if pv is None or not pv.csi_driver:
            continue
        found[f"{attachment.attacher}/{pv.csi_volume_handle}"] = attachment.attacher
    return found


# A placed pod's attachable volumes on its node, remembered per (node, pod key) with the pod object itself: the
# dry run asks the Filter again for every reprieved victim, over the same pods (a pod that changes is a new object).
PlacedVolumes = dict[tuple[str, str], tuple[Pod, dict[str, str]]]


def _placed_volumes(view: ClusterView, other: Pod, csinode: CSINode | None, node: str,
                    cache: PlacedVolumes | None) -> dict[str, str]:
    if cache is None:
        found: dict[str, str] = {}
        attachable_volumes(view, other, csinode, False, found)
        return found
    key = (node, other.key)
    hit = cache.get(key)
    if hit is not None and hit[0] is other:
        return hit[1]
    found = {}
    attachable_volumes(view, other, csinode, False, found)
    cache[key] = (other, found)
    return found


def node_volume_limits_status(view: ClusterView, pod: Pod, node: str, pods: Iterable[Pod],
                              cache: PlacedVolumes | None = None) -> Status:
    """The Filter on one node whose pods are ``pods`` (``cache``: what the pods already placed there attach)."""
    csinode = view.csinode(node)
    new_volumes: dict[str, str] = {}
    failed = attachable_volumes(view, pod, csinode, True, new_volumes)
    if failed is not None:
        return failed
    if not new_volumes:
        return OK
    # VolumeLimitScaling (on in v1.37) refuses a node without the driver only when its CSIDriver asks for that
    # (preventPodSchedulingIfMissing); a snapshot holds no CSIDrivers, so the driver counts as installed.
    limits = limits_of(csinode)
    if not limits:
        return OK
    attached: dict[str, str] = {}
    for other in pods:
        if other.volumes is not None:
            attached.update(_placed_volumes(view, other, csinode, node, cache))
    counts: dict[str, int] = {}
    for unique, driver in attached.items():
        new_volumes.pop(unique, None)
        counts[driver] = counts.get(driver, 0) + 1
    for unique, driver in _attachments(view, node).items():
        if unique not in attached:
            counts[driver] = counts.get(driver, 0) + 1
    wanted: dict[str, int] = {}
    for driver in new_volumes.values():
        wanted[driver] = wanted.get(driver, 0) + 1
    for driver, count in wanted.items():
        limit = limits.get(driver)
        if limit is not None and counts.get(driver, 0) + count > limit:
            return MAX_VOLUME_COUNT_EXCEEDED
    return OK


# ---- the nodes where the Filter may fail, for every node at once (#27) ---------------------------------------------

# A CSINode that exists: migrated in-tree volumes count on it, so a pod's volumes counted against it are the most it
# can want on any node (a node without a CSINode has no limits).
_ANY_CSINODE = CSINode("")


class AttachIndex:
    """Per node with CSI limits: each driver's headroom with every bound pod's volumes attached (the limit minus the
    distinct volumes of the node's pods and its VolumeAttachments), and the nodes ordered by it per driver.

    Refreshed per changed node like the ``StateIndex`` (a node's pods are its summary's, compared by identity), and per
    changed storage object from the ``VolumeStore``'s log: the nodes whose pods mount a changed claim or volume, a
    changed CSINode's node, a changed VolumeAttachment's node; a StorageClass change (an unbound claim counts as its
    class's provisioner) or a log that no longer reaches back rebuilds it.
    """

    __slots__ = ("by_driver", "headroom", "index_version", "readers", "reads", "summaries", "volumes_version")

    def __init__(self) -> None:
        self.index_version = -1
        self.volumes_version = -1
        self.summaries: dict[str, NodeSummary] = {}
        self.headroom: dict[str, dict[str, int]] = {}
        self.by_driver: dict[str, SortedNames] = {}
        # The storage objects each node's count read, as (kind, key), and the nodes that read each of them.
        self.reads: dict[str, set[tuple[str, str]]] = {}
        self.readers: dict[tuple[str, str], set[str]] = {}

    def sync(self, view: ClusterView) -> None:
        index = view.index
        state = view.state
        volumes = state.volumes
        if self.volumes_version == volumes.version and self.index_version == index.version:
            return
        stale: set[str] | None = set()
        if self.volumes_version != volumes.version:
            changes = volumes.changed_since(self.volumes_version) if self.volumes_version >= 0 else None
            if changes is None or any(kind == "StorageClass" for kind, _ in changes):
                stale = None
            else:
                stale = self._readers_of(changes, view)
        changed = None
        if stale is not None and self.index_version >= 0:
            changed = state.nodes_changed_since(self.index_version)
        if stale is None or changed is None:
            self.summaries, self.headroom, self.by_driver, self.reads, self.readers = {}, {}, {}, {}, {}
            changed = set(index.summaries)
        for name in stale or ():
            self.summaries.pop(name, None)  # counted again even if its pods did not change
        for name in changed | (stale or set()):
            self._refresh(view, name)
        # A node the log names but the index dropped, or one the index holds that the log did not name (a rebuild).
        for name in [n for n in self.summaries if n not in index.summaries]:
            self._refresh(view, name)
        self.volumes_version = volumes.version
        self.index_version = index.version

    def _readers_of(self, changes: list[tuple[str, str]], view: ClusterView) -> set[str]:
        nodes: set[str] = set()
        for change in changes:
            nodes |= self.readers.get(change, set())
            kind, key = change
            if kind == "CSINode":
                nodes.add(key)
            elif kind == "VolumeAttachment":
                attachment = view.state.volumes.attachments.get(key)
                if attachment is not None:
                    nodes.add(attachment.node_name)
        return nodes

    def _forget(self, name: str) -> None:
        old = self.headroom.pop(name, None)
        if old is not None:
            for driver, room in old.items():
                self.by_driver[driver].discard(room, name)
        for read in self.reads.pop(name, ()):
            readers = self.readers.get(read)
            if readers is not None:
                readers.discard(name)
                if not readers:
                    del self.readers[read]
        self.summaries.pop(name, None)

    def _refresh(self, view: ClusterView, name: str) -> None:
        summary = view.index.summaries.get(name)
        if summary is not None and self.summaries.get(name) is summary:
            return
        self._forget(name)
        if summary is None:
            return
        self.summaries[name] = summary
        csinode = view.csinode(name)
        limits = limits_of(csinode)
        if not limits:
            return
        attached: dict[str, str] = {}
        reads: set[tuple[str, str]] = set()
        for pod in summary.pods:
            if pod.volumes is not None:
                attachable_volumes(view, pod, csinode, False, attached)
                for volume in pod.volumes.claims:
                    key = f"{pod.namespace}/{volume.claim_name_for(pod.name)}"
                    reads.add(("PersistentVolumeClaim", key))
                    claim = view.state.volumes.pvcs.get(key)
                    if claim is not None and claim.volume_name:
                        reads.add(("PersistentVolume", claim.volume_name))
        for attachment in view.attachments_on(name):
            reads.add(("VolumeAttachment", attachment.name))
            if attachment.persistent_volume_name:
                reads.add(("PersistentVolume", attachment.persistent_volume_name))
        for unique, driver in _attachments(view, name).items():
            attached.setdefault(unique, driver)
        self.reads[name] = reads
        for read in reads:
            self.readers.setdefault(read, set()).add(name)
        counts: dict[str, int] = {}
        for driver in attached.values():
            counts[driver] = counts.get(driver, 0) + 1
        headroom = {driver: limit - counts.get(driver, 0) for driver, limit in limits.items()}
        self.headroom[name] = headroom
        for driver, room in headroom.items():
            order = self.by_driver.get(driver)
            if order is None:
                order = self.by_driver[driver] = SortedNames(())
            order.add(room, name)

    def tight(self, wanted: dict[str, int]) -> set[str]:
        """The nodes where some driver has less headroom than the pod's volumes of it."""
        found: set[str] = set()
        for driver, count in wanted.items():
            order = self.by_driver.get(driver)
            if order is not None:
                found.update(order.below(count))
        return found


_ATTACH_INDEXES: weakref.WeakKeyDictionary[StateIndex, AttachIndex] = weakref.WeakKeyDictionary()


def nodes_where_limits_may_fail(view: ClusterView, pod: Pod) -> set[str] | None:
    """The nodes where the Filter may fail for ``pod`` with some subset of the node's bound pods: where a driver's
    headroom with every pod attached is less than the pod's volumes of that driver. Elsewhere removing pods only
    frees attachments, so the Filter passes whatever the dry run evicts. None: a claim of the pod cannot be read (the
    Filter's status then comes from the plugin itself, node by node)."""
    new_volumes: dict[str, str] = {}
    if attachable_volumes(view, pod, _ANY_CSINODE, True, new_volumes) is not None:
        return None
    if not new_volumes:
        return set()
    wanted: dict[str, int] = {}
    for driver in new_volumes.values():
        wanted[driver] = wanted.get(driver, 0) + 1
    attach = _ATTACH_INDEXES.get(view.index)
    if attach is None:
        attach = _ATTACH_INDEXES[view.index] = AttachIndex()
    attach.sync(view)
    return attach.tight(wanted)


class LimitsState:
    """The view the Filter reads claims through (the plugin keeps no per-pod state of its own)."""

    __slots__ = ("placed", "view")

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.placed: PlacedVolumes = {}

    def copy(self) -> LimitsState:
        return self


class NodeVolumeLimits:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        volumes = pod.volumes
        if volumes is None or not (volumes.claims or volumes.in_tree):
            return SKIPPED
        if volumes.claims and not view.knows("PersistentVolumeClaim") and not volumes.in_tree:
            return SKIPPED  # VolumeRestrictions notes it
        cycle.write(LimitsState(view))
        return OK

    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        state = cycle.read(LimitsState)
        if state is None:
            return OK
        return node_volume_limits_status(state.view, pod, info.node.name, info.pods.values(), state.placed)
