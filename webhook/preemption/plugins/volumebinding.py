"""VolumeBinding (pkg/scheduler/framework/plugins/volumebinding/volume_binding.go, binder.go): the pod's claims
must be bound, or bindable on the node.

PreFilter: every claim (``persistentVolumeClaim``, and the ``<pod>-<volume>`` claim of an ``ephemeral`` volume) must
exist, not be Lost or deleting, and an ephemeral one must belong to the pod; a claim that is not bound and whose
class binds Immediately (or that names a volume not yet bound back) makes the pod unschedulable everywhere. The rest
are sorted as upstream's ``GetPodVolumeClaims`` does: bound claims, and unbound claims of WaitForFirstConsumer classes
with the volumes of their class.

Filter (``FindPodVolumes``), for one node: a bound claim's volume must exist and its node affinity match the node;
an unbound claim already given a node (``volume.kubernetes.io/selected-node``) fits that node only; the others must
find an available static volume there (``FindMatchingVolume``, each volume used once) or be provisionable there (a
provisioner, and the class's ``allowedTopologies``). Every failure is UnschedulableAndUnresolvable, so preemption
never tries such a node; there is no AddPod/RemovePod.

What a chosen node's Filter found (its static bindings and provisions) is kept per node: a replica bound in the
simulation assumes them (``ClusterView.assume_volumes``), as upstream's Reserve does. Storage capacity tracking
(CSIStorageCapacity, CSIDriver.storageCapacity) and the CSI translation of in-tree volumes' node affinity are not
modelled: a snapshot holds neither CSIDrivers nor CSIStorageCapacities.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webhook.cluster.model import LabelSelectorRequirement, Node, Pod
from webhook.cluster.volume_helpers import check_node_affinity, find_matching_volume, match_topology_selector_terms
from webhook.cluster.volumes import (
    CLAIM_LOST,
    NOT_SUPPORTED_PROVISIONER,
    VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
)
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.nodelabels import NodeLabelIndex
from webhook.preemption.framework.status import ERROR, OK, SKIPPED, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.types import NodeInfo
from webhook.preemption.plugins.helper import terms_matching

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "VolumeBinding"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NO_CLAIMS_NOTE = ("the snapshot holds no PersistentVolumeClaims, so the pod's claims were not checked "
                  "(VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone)")
NO_PVS_NOTE = ("the snapshot holds no PersistentVolumes, so the node affinity of the pod's bound volumes was not "
               "checked (VolumeBinding)")
NO_CLASSES_NOTE = ("the snapshot holds no StorageClasses, so the pod's unbound claims were not checked "
                   "(VolumeBinding)")


def _unresolvable(*reasons: str) -> Status:
    return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


NODE_CONFLICT = _unresolvable(ERR_REASON_NODE_CONFLICT)
PV_NOT_EXIST = _unresolvable(ERR_REASON_PV_NOT_EXIST)


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What ``FindPodVolumes`` found on one node: the static volumes chosen for claims, and the claims to provision."""

    static_bindings: tuple[tuple[PersistentVolume, PersistentVolumeClaim], ...] = ()
    dynamic_provisions: tuple[PersistentVolumeClaim, ...] = ()


NO_POD_VOLUMES = PodVolumes()


@dataclass(slots=True)
class BindingState:
    """VolumeBinding's PreFilter state: the pod's claims sorted as ``GetPodVolumeClaims`` sorts them."""

    bound_claims: tuple[PersistentVolumeClaim, ...]
    unbound_delay_binding: tuple[PersistentVolumeClaim, ...]
    # The volumes of each unbound claim's class (``unboundVolumesDelayBinding``), as assumed at PreFilter.
    volumes_by_class: dict[str, list[PersistentVolume]]
    check_bound: bool  # False when the snapshot holds no PersistentVolumes
    view: ClusterView
    # The per-node result of Filter (``podVolumesByNode``), for the node a bound replica assumes.
    pod_volumes_by_node: dict[str, PodVolumes] = field(default_factory=dict)

    def copy(self) -> BindingState:
        return self  # upstream's Clone returns the same state: Filter only adds per-node results

    def find_pod_volumes(self, node: Node) -> tuple[PodVolumes, Status]:
        """``FindPodVolumes`` on one node (``binder.go``): the volumes found, and OK or the conflict reasons."""
        bound_satisfied, bound_found, unbound_satisfied, storage_sufficient = True, True, True, True
        view = self.view
        if self.check_bound:
            for claim in self.bound_claims:
                pv = view.pv_assumed(claim.volume_name)
                if pv is None:
                    bound_found = False
                    break
                if not check_node_affinity(pv, node.name, node.labels):
                    bound_satisfied = False
                    break
        bindings: list[tuple[PersistentVolume, PersistentVolumeClaim]] = []
        provisions: list[PersistentVolumeClaim] = []
        status = OK
        if self.unbound_delay_binding:
            unbound_satisfied, storage_sufficient, error = self._unbound(node, bindings, provisions)
            if error:
                return NO_POD_VOLUMES, Status(ERROR, (error,))
        reasons = []
        if not bound_satisfied:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_satisfied:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not storage_sufficient:
            reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not bound_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        if reasons:
            status = _unresolvable(*reasons)
        return PodVolumes(tuple(bindings), tuple(provisions)), status

    def _unbound(self, node: Node, bindings: list[tuple[PersistentVolume, PersistentVolumeClaim]],
                 provisions: list[PersistentVolumeClaim]) -> tuple[bool, bool, str]:
        """The unbound claims on ``node``: (satisfied, enough storage, an error)."""
        to_match: list[PersistentVolumeClaim] = []
        for claim in self.unbound_delay_binding:
            if claim.selected_node is not None:
                if claim.selected_node != node.name:
                    return False, True, ""  # the fast path: another node was chosen for it
                provisions.append(claim)
            else:
                to_match.append(claim)
        satisfied = True
        if to_match:
            chosen: dict[str, PersistentVolume] = {}
            # byPVCSize: increasing requested size, so the smallest volumes go to the smallest claims.
            for claim in sorted(to_match, key=lambda c: c.storage_request.value if c.storage_request else 0):
                pv = find_matching_volume(claim, self.volumes_by_class.get(claim.storage_class, ()), node.name,
                                          node.labels, chosen)
                if pv is None:
                    provisions.append(claim)
                    satisfied = False
                    continue
                chosen[pv.name] = pv
                bindings.append((pv, claim))
        if provisions:
            return self._provisions(node, provisions)
        return satisfied, True, ""

    def _provisions(self, node: Node, claims: list[PersistentVolumeClaim]) -> tuple[bool, bool, str]:
        """``checkVolumeProvisions``: each claim's class provisions volumes, where the node is allowed."""
        for claim in claims:
            if not claim.storage_class:
                return False, False, f'no class for claim "{claim.key}"'
            storage_class = self.view.storage_class(claim.storage_class)
            if storage_class is None:
                return False, False, f'failed to find storage class "{claim.storage_class}"'
            if storage_class.provisioner in ("", NOT_SUPPORTED_PROVISIONER):
                return False, True, ""
            if not match_topology_selector_terms(storage_class.allowed_topologies, node.labels):
                return False, True, ""
        return True, True, ""


def node_restriction(state: BindingState, labels: NodeLabelIndex, nodes: set[str],
                     ) -> tuple[set[str], list[tuple[set[str], Status]]] | None:
    """``find_pod_volumes`` over ``nodes`` at once: the nodes where it passes, and the others by their status. Bound
    claims: the first in order whose volume is missing or whose node affinity the node does not match. Unbound claims
    (WaitForFirstConsumer): a node chosen for one already, else provisioned where the class's ``allowedTopologies``
    allow; both read from the label index. None (the Filter runs node by node): an unbound claim whose class has
    static volumes to match, or whose class is missing (an Error)."""
    remaining = nodes
    bound_failed: list[tuple[set[str], str]] = []
    if state.check_bound:
        for claim in state.bound_claims:
            pv = state.view.pv_assumed(claim.volume_name)
            if pv is None:
                if remaining:
                    bound_failed.append((remaining, ERR_REASON_PV_NOT_EXIST))
                remaining = set()
                break
            if pv.node_affinity is None:
                continue
            matching = terms_matching(labels, pv.node_affinity, remaining)
            if len(matching) < len(remaining):
                bound_failed.append((remaining - matching, ERR_REASON_NODE_CONFLICT))
            remaining = matching
    unbound = _unbound_restriction(state, labels, nodes) if state.unbound_delay_binding else nodes
    if unbound is None:
        return None
    failed: list[tuple[set[str], Status]] = []
    for part, reason in [*bound_failed, (remaining, "")]:
        satisfied = part & unbound if unbound is not nodes else part
        if len(satisfied) < len(part):
            # find_pod_volumes' order of reasons: node affinity, binding, then missing volumes.
            reasons = [r for r in (reason,) if r == ERR_REASON_NODE_CONFLICT]
            reasons.append(ERR_REASON_BIND_CONFLICT)
            reasons += [r for r in (reason,) if r == ERR_REASON_PV_NOT_EXIST]
            failed.append((part - satisfied, _unresolvable(*reasons)))
        if reason and satisfied:
            failed.append((satisfied, _unresolvable(reason)))
        elif not reason:
            remaining = satisfied
    return remaining, failed


def _unbound_restriction(state: BindingState, labels: NodeLabelIndex, nodes: set[str]) -> set[str] | None:
    """The ``nodes`` where ``_unbound`` is satisfied, when no claim has static volumes to match and every class is
    found (else None)."""
    allowed = nodes
    provisions = []
    for claim in state.unbound_delay_binding:
        if claim.selected_node is not None:
            allowed = allowed & {claim.selected_node}
            provisions.append(claim)
        elif state.volumes_by_class.get(claim.storage_class):
            return None
        else:
            provisions.append(claim)
    for claim in provisions:
        storage_class = state.view.storage_class(claim.storage_class) if claim.storage_class else None
        if storage_class is None:
            return None  # no class, or not found: an Error on every node that gets this far
        if storage_class.provisioner in ("", NOT_SUPPORTED_PROVISIONER):
            return set()
        if storage_class.allowed_topologies:
            allowed = _topology_matching(labels, storage_class.allowed_topologies, allowed)
    return allowed


def _topology_matching(labels: NodeLabelIndex, terms: tuple[tuple[LabelSelectorRequirement, ...], ...],
                       nodes: set[str]) -> set[str]:
    """``match_topology_selector_terms`` over ``nodes``: any term; a term ANDs ``key In values`` (an empty term, or a
    requirement without values, selects nothing)."""
    matched: set[str] = set()
    for term in terms:
        found = nodes if term else set()
        for req in term:
            found = found & set().union(*(labels.with_label(req.key, value) for value in req.values))
        matched |= found
    return matched


class VolumeBinding:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        volumes = pod.volumes
        if volumes is None or not volumes.claims:
            return SKIPPED
        if not view.knows("PersistentVolumeClaim"):
            cycle.note(NO_CLAIMS_NOTE)
            return SKIPPED
        claims: list[PersistentVolumeClaim] = []
        for volume in volumes.claims:  # podHasPVCs
            lookup = view.pod_claim(pod, volume)
            if lookup.error:
                return _unresolvable(lookup.error)
            claim = lookup.claim
            if claim is None:
                return _unresolvable(
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{lookup.missing}"'
                    if volume.ephemeral else f'persistentvolumeclaim "{lookup.missing}" not found')
            if claim.phase == CLAIM_LOST:
                return _unresolvable(f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume '
                                     f'"{claim.volume_name}"')
            if claim.deleting:
                return _unresolvable(f'persistentvolumeclaim "{claim.name}" is being deleted')
            claims.append(claim)
        bound: list[PersistentVolumeClaim] = []
        delayed: list[PersistentVolumeClaim] = []
        immediate = False
        check_classes = view.knows("StorageClass")
        for claim in claims:  # GetPodVolumeClaims, through the assume cache
            claim = view.pvc_assumed(claim)
            if claim.fully_bound:
                bound.append(claim)
                continue
            if not check_classes:
                cycle.note(NO_CLASSES_NOTE)
                continue
            delay = False
            if claim.storage_class:
                storage_class = view.storage_class(claim.storage_class)
                if storage_class is not None:
                    if storage_class.volume_binding_mode is None:
                        return Status(ERROR, (f'VolumeBindingMode not set for StorageClass "{claim.storage_class}"',))
                    delay = storage_class.volume_binding_mode == VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER
            if delay and not claim.volume_name:
                delayed.append(claim)
            else:
                immediate = True  # prebound claims count as unbound immediate ones
        if immediate:
            return _unresolvable(UNBOUND_IMMEDIATE)
        check_bound = view.knows("PersistentVolume")
        if bound and not check_bound:
            cycle.note(NO_PVS_NOTE)
        cycle.write(BindingState(tuple(bound), tuple(delayed),
                                 {c.storage_class: view.pvs_of_class(c.storage_class) for c in delayed},
                                 check_bound, view))
        return OK

    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        state = cycle.read(BindingState)
        if state is None:
            return OK
        found, status = state.find_pod_volumes(info.node)
        if status.ok:
            state.pod_volumes_by_node[info.node.name] = found
        return status


def assumed_volumes(cycle: CycleState, node: str) -> PodVolumes | None:
    """What Reserve assumes for a pod bound to ``node``: the volumes Filter found there (None: nothing to bind)."""
    state = cycle.read(BindingState)
    if state is None:
        return None
    found = state.pod_volumes_by_node.get(node)
    if found is None and node in state.view.state.nodes:
        # The resource-only paths (#27) did not run the Filter there: what it finds on a node reads only the node.
        pod_volumes, status = state.find_pod_volumes(state.view.node(node))
        if status.ok:
            found = state.pod_volumes_by_node[node] = pod_volumes
    return found
