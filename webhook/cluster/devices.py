"""The Dynamic Resource Allocation objects (resource.k8s.io/v1) the DynamicResources plugin and its structured
allocator read: DeviceClasses, ResourceSlices and their devices, ResourceClaims (with their allocation) and
ResourceClaimTemplates, and what a pod asks of them (``PodClaims``).

CEL selectors are kept as their expressions (text): ``webhook.cluster.cel`` compiles them once per process, so the
model stays plain data (snapshot caches pickle it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.cluster.model import EMPTY_LABELS, FrozenMap, NodeSelectorTerm
from webhook.cluster.quantity import Quantity

EXACT_COUNT = "ExactCount"
ALL = "All"
# resource.k8s.io/extended-resource-claim: the claim the scheduler creates for a pod's DRA-backed extended resources.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# A DeviceClass is reachable as the extended resource ``deviceclass.resource.kubernetes.io/<class>`` too.
DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"

EMPTY: Mapping[str, Any] = FrozenMap()
# A device attribute's value: ("int", 3), ("bool", True), ("string", "a"), ("version", "1.2.3").
AttributeValue = tuple[str, object]


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = ""  # NoSchedule | NoExecute | None


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" tolerates every effect


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A device capacity's ``requestPolicy`` (DRAConsumableCapacity): a default, and valid values or a range."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    range_min: Quantity | None = None
    range_max: Quantity | None = None
    range_step: Quantity | None = None
    has_range: bool = False


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Quantity
    policy: CapacityPolicy | None = None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity]
    compatibility_groups: tuple[str, ...] = ()  # DRADeviceCompatibilityGroups (alpha in v1.37, off)


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    # Qualified attribute name (as written: "model" or "gpu.example.com/model") to its typed value.
    attributes: Mapping[str, AttributeValue] = EMPTY
    capacity: Mapping[str, DeviceCapacity] = EMPTY
    consumes_counters: tuple[CounterConsumption, ...] = ()
    # Per-device node selection (perDeviceNodeSelection slices): exactly one of these is set.
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool | None = None


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    pool_generation: int = 0
    resource_slice_count: int = 1
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions
    extended_resource_name: str | None = None
    creation_ns: int = 0


@dataclass(frozen=True, slots=True)
class ExactDeviceRequest:
    """An ``exactly`` request or one ``firstAvailable`` subrequest (``name`` is then the subrequest's)."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity_requests: Mapping[str, Quantity] | None = None


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[ExactDeviceRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One ``status.allocation.devices.results`` entry."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] | None = None


@dataclass(frozen=True, slots=True)
class Allocation:
    devices: tuple[AllocatedDevice, ...] = ()
    # Where the allocated devices are usable; None: every node.
    node_selector: tuple[NodeSelectorTerm, ...] | None = None


@dataclass(frozen=True, slots=True)
class ClaimConsumer:
    """One ``status.reservedFor`` entry."""

    resource: str
    name: str
    uid: str = ""
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    name: str
    namespace: str
    uid: str = ""
    deleting: bool = False
    controller_uid: str = ""  # the controller owner reference (a pod for claims made from a template)
    controller_kind: str = ""
    controller_name: str = ""
    annotations: Mapping[str, str] = EMPTY_LABELS
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[ClaimConsumer, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    name: str
    namespace: str
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One ``spec.resourceClaims`` entry: a claim by name, or one the resourceclaim controller makes from a template."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass(frozen=True, slots=True)
class ContainerDeviceRequests:
    """A container's requests of extended resources (those DRA may back, DRAExtendedResource)."""

    index: int  # position among init containers then containers
    init: bool
    sidecar: bool
    requests: Mapping[str, int] = EMPTY


@dataclass(frozen=True, slots=True)
class PodClaims:
    """What a pod asks of DRA (None on a pod without claims or extended resources)."""

    claims: tuple[PodResourceClaim, ...] = ()
    # status.resourceClaimStatuses: pod claim name to the generated claim's name (None: none was needed).
    statuses: Mapping[str, str | None] = FrozenMap()
    containers: tuple[ContainerDeviceRequests, ...] = ()
    # status.extendedResourceClaimStatus.resourceClaimName
    extended_resource_claim: str = ""


DeviceObject = DeviceClass | ResourceSlice | ResourceClaim | ResourceClaimTemplate
