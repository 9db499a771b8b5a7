"""VolumeZone (pkg/scheduler/framework/plugins/volumezone/volume_zone.go): a bound PersistentVolume's zone and region
labels (``topology.kubernetes.io/zone``, ``/region`` and their beta names; several zones joined by ``__``) must
match the node's. Only ``persistentVolumeClaim`` volumes are read; an unbound claim of a WaitForFirstConsumer class is
VolumeBinding's. Every failure is UnschedulableAndUnresolvable: no eviction moves a disk. No AddPod/RemovePod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from webhook.cluster.model import Node, Pod
from webhook.cluster.volumes import VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER, PersistentVolume
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.nodelabels import NodeLabelIndex
from webhook.preemption.framework.status import OK, SKIPPED, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.types import NodeInfo

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "VolumeZone"
ERR_REASON_CONFLICT = "node(s) had no available volume zone"
CONFLICT = Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
GA_LABEL = {BETA_ZONE: ZONE, BETA_REGION: REGION}
NO_VOLUMES_NOTE = ("the snapshot holds no PersistentVolumes or StorageClasses, so the zones of the pod's volumes were "
                   "not checked (VolumeZone)")


def _unresolvable(message: str) -> Status:
    return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def pv_topologies(pv: PersistentVolume) -> list[PVTopology]:
    """``getPVTopologies``: a label whose zone list does not parse (an empty element) is ignored."""
    found = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        zones = [z.strip() for z in value.split("__")]
        if all(zones):
            found.append(PVTopology(pv.name, key, frozenset(zones)))
    return found


@dataclass(slots=True)
class ZoneState:
    topologies: tuple[PVTopology, ...]

    def copy(self) -> ZoneState:
        return self  # never changes after PreFilter

    def filter(self, node: Node) -> Status:
        labels = node.labels
        if not any(key in labels for key in TOPOLOGY_LABELS):
            return OK
        for topology in self.topologies:
            value = labels.get(topology.key)
            if value is None:
                value = labels.get(GA_LABEL.get(topology.key, topology.key))
            if value is None or value not in topology.values:
                return CONFLICT
        return OK


def zone_allowed_nodes(state: ZoneState, labels: NodeLabelIndex, nodes: set[str]) -> set[str]:
    """The ``nodes`` where ``ZoneState.filter`` passes, from the label index: those without any topology label, and
    those whose label (or its GA name, when the beta one is missing) holds one of each volume topology's values."""
    labelled: set[str] = set()
    for key in TOPOLOGY_LABELS:
        labelled |= labels.with_key.get(key, set())
    labelled &= nodes
    passing = labelled
    for topology in state.topologies:
        if not passing:
            break
        key = topology.key
        holding = set().union(*(labels.with_label(key, value) for value in topology.values))
        fallback = GA_LABEL.get(key, key)
        if fallback != key:
            holding |= set().union(*(labels.with_label(fallback, value) for value in topology.values)) - (
                labels.with_key.get(key, set()))
        passing = passing & holding
    return (nodes - labelled) | passing


class VolumeZone:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        volumes = pod.volumes
        if volumes is None:
            return SKIPPED
        claims = [c for c in volumes.claims if not c.ephemeral]
        if not claims or not view.knows("PersistentVolumeClaim"):
            return SKIPPED
        topologies: list[PVTopology] = []
        for volume in claims:
            if not volume.claim_name:
                return _unresolvable("PersistentVolumeClaim had no name")
            claim = view.pvc(pod.namespace, volume.claim_name)
            if claim is None:
                return _unresolvable(f'persistentvolumeclaim "{volume.claim_name}" not found')
            if not claim.volume_name:
                if not claim.storage_class:
                    return _unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                if not view.knows("StorageClass"):
                    cycle.note(NO_VOLUMES_NOTE)
                    continue
                storage_class = view.storage_class(claim.storage_class)
                if storage_class is None:
                    return _unresolvable(f'storageclass.storage.k8s.io "{claim.storage_class}" not found')
                if storage_class.volume_binding_mode is None:
                    return _unresolvable(f'VolumeBindingMode not set for StorageClass "{claim.storage_class}"')
                if storage_class.volume_binding_mode == VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER:
                    continue
                return _unresolvable("PersistentVolume had no name")
            if not view.knows("PersistentVolume"):
                cycle.note(NO_VOLUMES_NOTE)
                continue
            pv = view.pv(claim.volume_name)
            if pv is None:
                return _unresolvable(f'persistentvolume "{claim.volume_name}" not found')
            topologies.extend(pv_topologies(pv))
        if not topologies:
            return SKIPPED
        cycle.write(ZoneState(tuple(topologies)))
        return OK

    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        state = cycle.read(ZoneState)
        return OK if state is None else state.filter(info.node)
