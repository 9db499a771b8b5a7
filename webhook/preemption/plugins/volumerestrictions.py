"""VolumeRestrictions (pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go): inline disks
(GCE PD, AWS EBS, iSCSI, Ceph RBD) that another pod of the node already mounts, and ReadWriteOncePod claims that a
bound pod already uses.

PreFilter counts the bound pods of the whole cluster that use one of the pod's ReadWriteOncePod claims
(``IsPVCUsedByPods``); AddPod/RemovePod keep that count true in the dry run, so evicting the lower-priority pod that
holds the claim is what makes room, and then that pod is the victim. A claim held elsewhere, by a pod preemption
would not evict, fails every node: Unschedulable, so preemption tries, and finds no candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from webhook.cluster.model import Pod
from webhook.cluster.volumes import READ_WRITE_ONCE_POD, InlineDisk
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import (
    OK,
    SKIPPED,
    UNSCHEDULABLE,
    UNSCHEDULABLE_AND_UNRESOLVABLE,
    Status,
)
from webhook.preemption.framework.types import NodeInfo

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "VolumeRestrictions"
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                                           "access mode already in-use by another pod")
DISK_CONFLICT = Status(UNSCHEDULABLE, (ERR_REASON_DISK_CONFLICT,))
READ_WRITE_ONCE_POD_CONFLICT = Status(UNSCHEDULABLE, (ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,))
NO_CLAIMS_NOTE = ("the snapshot holds no PersistentVolumeClaims, so the pod's claims were not checked "
                  "(VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone)")


def claim_not_found(name: str) -> Status:
    """The lister's NotFound for a claim, as the PreFilters return it (UnschedulableAndUnresolvable)."""
    return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (f'persistentvolumeclaim "{name}" not found',))


def disks_conflict(disk: InlineDisk, other: InlineDisk) -> bool:
    """``isVolumeConflict`` for one pair: the same disk, mounted read-write by one of them (an EBS volume even
    read-only; RBD images share a monitor, pool and image)."""
    if disk.kind != other.kind or disk.identity != other.identity:
        return False
    if disk.kind == "awsElasticBlockStore":
        return True
    if disk.kind == "rbd" and not disk.monitors & other.monitors:
        return False
    return not (disk.read_only and other.read_only)


def satisfies_volume_conflicts(pod: Pod, info: NodeInfo) -> bool:
    volumes = pod.volumes
    if volumes is None or not volumes.disks:
        return True
    for other in info.pods.values():
        if other.volumes is None or not other.volumes.disks:
            continue
        for disk in volumes.disks:
            if any(disks_conflict(disk, theirs) for theirs in other.volumes.disks):
                return False
    return True


@dataclass(slots=True)
class RestrictionsState:
    """The pod's ReadWriteOncePod claims (by name) and how many bound pods use them."""

    read_write_once_pod_claims: frozenset[str]
    conflicting_claim_refs: int

    def copy(self) -> RestrictionsState:
        return RestrictionsState(self.read_write_once_pod_claims, self.conflicting_claim_refs)

    def update(self, other: Pod, delta: int) -> None:
        """``updateWithPod``: upstream compares claim names only, not namespaces."""
        volumes = other.volumes
        if volumes is None or not self.read_write_once_pod_claims:
            return
        names = self.read_write_once_pod_claims
        self.conflicting_claim_refs += delta * sum(1 for c in volumes.claims
                                                   if not c.ephemeral and c.claim_name in names)


class VolumeRestrictions:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        volumes = pod.volumes
        if volumes is None:
            return SKIPPED
        needs_check = bool(volumes.disks)
        claims = [c for c in volumes.claims if not c.ephemeral]
        if claims and not view.knows("PersistentVolumeClaim"):
            cycle.note(NO_CLAIMS_NOTE)
            claims = []
        exclusive: set[str] = set()
        for volume in claims:
            claim = view.pvc(pod.namespace, volume.claim_name)
            if claim is None:
                return claim_not_found(volume.claim_name)
            if READ_WRITE_ONCE_POD in claim.access_modes:
                exclusive.add(claim.name)
        count = sum(1 for name in exclusive if view.pvc_in_use(f"{pod.namespace}/{name}"))
        if not needs_check and count == 0:
            return SKIPPED
        cycle.write(RestrictionsState(frozenset(exclusive), count))
        return OK

    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        if not satisfies_volume_conflicts(pod, info):
            return DISK_CONFLICT
        state = cycle.read(RestrictionsState)
        if state is not None and state.conflicting_claim_refs > 0:
            return READ_WRITE_ONCE_POD_CONFLICT
        return OK

    def add_pod(self, cycle: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> None:
        state = cycle.read(RestrictionsState)
        if state is not None:
            state.update(other, 1)

    def remove_pod(self, cycle: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> None:
        state = cycle.read(RestrictionsState)
        if state is not None:
            state.update(other, -1)
