"""DynamicResources' PreFilter and Filter (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go).

PreFilter gathers the pod's claims (``foreachPodResourceClaim``: by name, or the claim the resourceclaim controller
made from a template, which must belong to the pod; a pod not created yet reads the claim its template becomes), the
claim of its DRA-backed extended resources, checks their device classes exist, and builds the allocator over every
device the cluster's claims hold. Filter, per node: an allocated claim must be usable there (its allocation's node
selector), the others allocatable by the allocator.

Every failure is UnschedulableAndUnresolvable (upstream's ``statusUnschedulable``): preemption never tries a node
DynamicResources rejects. There is no AddPod/RemovePod, so in the dry run a victim's devices stay allocated: evicting a
pod never frees a device in v1.37 (its claim is only deallocated after the pod is gone, by the resourceclaim
controller). Not modelled: DeviceTaintRules (a snapshot holds none), binding conditions' timeouts, the filter timeout
(DRASchedulerFilterTimeout), and the PostFilter's deallocation of an allocated claim reserved for nobody.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webhook.cluster.copying import replace_fields
from webhook.cluster.devices import EXTENDED_RESOURCE_CLAIM_ANNOTATION, ClaimConsumer, ResourceClaim
from webhook.cluster.model import FrozenMap, Node, Pod
from webhook.cluster.reader_devices import is_dra_extended_resource_name
from webhook.cluster.volume_helpers import node_selector_terms_match
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import ERROR, OK, SKIPPED, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.types import NodeInfo
from webhook.preemption.plugins.dynamicresources.allocator import AllocatedState, AllocationError, Allocator
from webhook.preemption.plugins.dynamicresources.extended import device_requests

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "DynamicResources"
SPECIAL_CLAIM_NAME = "<extended-resources>"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
NO_DEVICES_NOTE = ("the snapshot holds no ResourceClaims, ResourceClaimTemplates or DeviceClasses, so the pod's "
                   "devices were not checked (DynamicResources)")


def unschedulable(message: str) -> Status:
    """``statusUnschedulable``: UnschedulableAndUnresolvable, whatever its name says."""
    return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))


@dataclass(slots=True)
class DeviceState:
    """DynamicResources' PreFilter state (``stateData``)."""

    claims: list[ResourceClaim]
    # The claim of the pod's extended resources (its index in ``claims``), and those resources.
    extended_index: int | None
    extended: dict[str, int]
    allocator: Allocator | None
    pod: Pod
    view: ClusterView
    # Per node: the claims as Filter allocated them there (what Reserve would write), for a replica bound there.
    node_allocations: dict[str, list[ResourceClaim]] = field(default_factory=dict)

    def copy(self) -> DeviceState:
        return self  # upstream's Clone returns the same state

    def filter(self, node: Node, info: NodeInfo) -> Status:
        claims = list(self.claims)
        needs_extended = False
        if self.extended_index is not None:
            special = claims[self.extended_index]
            status, needs_extended = self._extended_on(node, special)
            if status is not None:
                return status
            if needs_extended and special.allocation is None:
                claims[self.extended_index] = replace_fields(special, requests=device_requests(
                    self.pod.claims.containers if self.pod.claims is not None else (), {
                        r: n for r, n in self.extended.items()
                        if self.view.extended_resource_class(r) is not None
                        and node.allocatable.scalar.get(r, 0) == 0},
                    self.view.extended_resource_class))
            user_claims = len(claims) - 1
            if not needs_extended and user_claims == 0:
                return OK
        unavailable = False
        for index, claim in enumerate(claims):
            if index == self.extended_index and not needs_extended:
                continue
            allocation = claim.allocation
            if allocation is not None and allocation.node_selector is not None and not node_selector_terms_match(
                    allocation.node_selector, node.name, node.labels):
                unavailable = True
        to_allocate = [c for i, c in enumerate(claims) if c.allocation is None
                       and (i != self.extended_index or needs_extended)]
        allocated: list[ResourceClaim] = []
        if self.allocator is not None and to_allocate:
            try:
                results = self.allocator.allocate(node, to_allocate)
            except AllocationError as exc:
                if exc.on_node:
                    return unschedulable(str(exc))
                return Status(ERROR, (str(exc),))
            if results is None or len(results) != len(to_allocate):
                return unschedulable(CANNOT_ALLOCATE)
            allocated = [replace_fields(c, allocation=r.allocation(node.name)) for c, r in zip(to_allocate, results,
                                                                                            strict=True)]
        if unavailable:
            return unschedulable(NOT_AVAILABLE)
        self.node_allocations[node.name] = allocated + [c for c in claims if c.allocation is not None]
        return OK

    def _extended_on(self, node: Node, special: ResourceClaim) -> tuple[Status | None, bool]:
        """``filterExtendedResources``: whether the node leaves some extended resource to DRA, or a status."""
        needs = False
        view = self.view
        for resource, count in self.extended.items():
            if not count or not is_dra_extended_resource_name(resource):
                continue
            have = node.allocatable.scalar.get(resource)
            if view.extended_resource_class(resource) is not None and not have:
                needs = True
            elif have is None:
                return unschedulable("cannot fit resource"), False
        return None, needs


def _claim_from_template(view: ClusterView, pod: Pod, pod_claim: str, template_name: str) -> ResourceClaim | None:
    """The claim the resourceclaim controller creates from a template for a pod (``<pod>-<claim>-<random>``)."""
    template = view.state.devices.templates.get(f"{pod.namespace}/{template_name}")
    if template is None:
        return None
    return ResourceClaim(name=f"{pod.name}-{pod_claim}", namespace=pod.namespace, controller_uid=pod.uid,
                         controller_kind="Pod", controller_name=pod.name, requests=template.requests,
                         constraints=template.constraints)


def pod_resource_claims(view: ClusterView, pod: Pod) -> list[ResourceClaim] | Status:
    """``foreachPodResourceClaim``: the pod's claims in ``spec.resourceClaims`` order, or the status that stops it
    (upstream's PreEnqueue refuses such a pod before any attempt; its PreFilter the same way)."""
    claims: list[ResourceClaim] = []
    if pod.claims is None:
        return claims
    for pod_claim in pod.claims.claims:
        must_check_owner = False
        if pod_claim.resource_claim_name is not None:
            name = pod_claim.resource_claim_name
        elif pod_claim.resource_claim_template_name is not None:
            if pod_claim.name not in pod.claims.statuses:
                if not pod.uid:  # a pod not created yet: the claim its template becomes
                    made = _claim_from_template(view, pod, pod_claim.name, pod_claim.resource_claim_template_name)
                    if made is None:
                        return unschedulable(f'resourceclaimtemplate.resource.k8s.io '
                                             f'"{pod_claim.resource_claim_template_name}" not found')
                    claims.append(made)
                    continue
                return unschedulable(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet')
            generated = pod.claims.statuses[pod_claim.name]
            if generated is None:
                continue  # no claim was needed for it
            name, must_check_owner = generated, True
        else:
            return unschedulable(f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{pod_claim.name}": none of '
                                 "the supported fields are set")
        claim = view.resource_claim(pod.namespace, name)
        if claim is None:
            return unschedulable(f'could not find ResourceClaim "{pod.namespace}/{name}"')
        if claim.deleting:
            return unschedulable(f'resourceclaim "{claim.name}" is being deleted')
        if must_check_owner and (not pod.uid or claim.controller_uid != pod.uid):
            return unschedulable(f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
                                 f"{pod.namespace}/{pod.name} (Pod is not owner)")
        claims.append(claim)
    return claims


def _extended_claim(view: ClusterView, pod: Pod) -> tuple[ResourceClaim | None, dict[str, int]]:
    """``preFilterExtendedResources``: the pod's extended resource claim (an existing one it owns, or the in-memory
    special claim) when one of its extended resources is backed by a DeviceClass, and the pod's extended requests."""
    scalar = pod.requests.scalar
    if not scalar or not any(n and is_dra_extended_resource_name(r) and view.extended_resource_class(r) is not None
                             for r, n in scalar.items()):
        return None, {}
    extended = {r: n for r, n in scalar.items() if is_dra_extended_resource_name(r)}
    if pod.uid:
        for claim in view.resource_claims():
            if (claim.namespace == pod.namespace and claim.annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
                    and claim.controller_uid == pod.uid):
                return claim, extended
    special = ResourceClaim(name=SPECIAL_CLAIM_NAME, namespace=pod.namespace, controller_uid=pod.uid,
                            controller_kind="Pod", controller_name=pod.name,
                            annotations=FrozenMap({EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}))
    return special, extended


class DynamicResources:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        if pod.claims is None:
            return SKIPPED
        if not any(view.knows(k) for k in ("ResourceClaim", "ResourceClaimTemplate", "DeviceClass")):
            if pod.claims.claims:
                cycle.note(NO_DEVICES_NOTE)
            return SKIPPED
        found = pod_resource_claims(view, pod)
        if isinstance(found, Status):
            return found
        claims = found
        special, extended = _extended_claim(view, pod)
        extended_index = None
        if special is not None:
            extended_index = len(claims)
            claims = [*claims, special]
        if not claims:
            return SKIPPED
        to_allocate = 0
        classes = view.device_classes()
        for index, claim in enumerate(claims):
            if claim.allocation is not None:
                continue
            to_allocate += 1
            if index == extended_index:
                continue
            for request in claim.requests:
                if request.exactly is not None:
                    named = [(request.name, request.exactly.device_class_name)]
                elif request.first_available:
                    named = [(f"{request.name}/{sub.name}", sub.device_class_name) for sub in request.first_available]
                else:
                    return unschedulable(f"resource claim {claim.key}, request {request.name}: unknown request type")
                for request_name, class_name in named:
                    if not class_name:
                        return Status(ERROR, (f"request {request_name}: unsupported request type",))
                    if class_name not in classes:
                        return unschedulable(f"request {request_name}: device class {class_name} does not exist")
        allocator = None
        if to_allocate:
            allocator = Allocator(AllocatedState.of(view.resource_claims()), classes, list(view.resource_slices()))
        cycle.write(DeviceState(claims, extended_index, extended, allocator, pod, view))
        return OK

    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        state = cycle.read(DeviceState)
        return OK if state is None else state.filter(info.node, info)


def reserved_claims(cycle: CycleState, pod: Pod, node: str) -> list[ResourceClaim]:
    """What Reserve and PreBind write for a pod bound to ``node``: its claims as allocated there, reserved for it."""
    state = cycle.read(DeviceState)
    if state is None:
        return []
    claims = state.node_allocations.get(node, [])
    consumer = ClaimConsumer("pods", pod.name, pod.uid)
    reserved = []
    for claim in claims:
        if claim.name == SPECIAL_CLAIM_NAME:
            claim = replace_fields(claim, name=f"{pod.name}-extended-resources")
        reserved.append(replace_fields(claim, reserved_for=(*claim.reserved_for, consumer)))
    return reserved
