"""The structured allocator DynamicResources runs on each node (k8s.io/dynamic-resource-allocation/structured, the
"incubating" implementation v1.37 selects with its default feature gates: PrioritizedList, PartitionableDevices,
DeviceTaints, AdminAccess, DeviceBindingConditions, ConsumableCapacity and FractionalCapacityRange on).

``Allocator.allocate`` is upstream's ``Allocate``: the node's pools (``gather_pools``: its ResourceSlices, the shared
ones that select it, complete and valid), then a depth-first search over claims, requests (a ``firstAvailable``
request tries its subrequests in order) and devices in upstream's order (pools by driver and name, slices by name,
devices as listed), each device checked for use, class and request selectors (CEL, ``webhook.cluster.cel``), its own
node selection, counters, capacity, taints and the claim's constraints; the first complete solution wins, so the same
devices are chosen as upstream chooses them. Devices allocated to any claim of the cluster are in use
(``AllocatedState``); nothing a victim's eviction would free is removed from it (v1.37 has no AddPod/RemovePod here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from webhook.cluster.devices import (
    ALL,
    EXACT_COUNT,
    AllocatedDevice,
    Allocation,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceRequest,
    DeviceTaint,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceSlice,
)
from webhook.cluster.model import LabelSelectorRequirement, Node, NodeSelectorTerm
from webhook.cluster.quantity import Quantity
from webhook.cluster.volume_helpers import node_selector_terms_match

# resourceapi.AllocationResultsMaxSize: the most devices one claim can be given.
ALLOCATION_RESULTS_MAX_SIZE = 32
TAINT_EFFECTS_PREVENTING_ALLOCATION = frozenset({"NoSchedule", "NoExecute"})

DeviceId = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True, slots=True)
class Features:
    """The allocator's feature switches (``structured.Features``), as v1.37's default gates set them; upstream's tests
    turn some off."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_binding_and_status: bool = True
    consumable_capacity: bool = True
    fractional_capacity_range: bool = True
    compatibility_groups: bool = False  # DRADeviceCompatibilityGroups: alpha and off in v1.37


DEFAULT_FEATURES = Features()


class AllocationError(Exception):
    """The claims cannot be allocated because something is wrong with them or the cluster's devices (upstream's
    Filter returns Error for it, except ``on_node``: an invalid pool, which only fails this node)."""

    def __init__(self, message: str, on_node: bool = False) -> None:
        super().__init__(message)
        self.on_node = on_node


class _AllocationMaxSizeExceeded(Exception):
    """``errAllocationResultMaxSizeExceeded``: a branch cannot stay within the claim's device limit."""


@dataclass(slots=True)
class AllocatedState:
    """The devices in use across the cluster (upstream ``AllocatedState``): dedicated ones, and the consumed
    capacity of devices shared between claims (ConsumableCapacity)."""

    devices: set[DeviceId] = field(default_factory=set)
    shared: set[DeviceId] = field(default_factory=set)
    capacity: dict[DeviceId, dict[str, Fraction]] = field(default_factory=dict)

    @classmethod
    def of(cls, claims: Iterable[ResourceClaim]) -> AllocatedState:
        """``foreachAllocatedDevice`` over every allocated claim: admin access is not a use."""
        state = cls()
        for claim in claims:
            if claim.allocation is None:
                continue
            for result in claim.allocation.devices:
                if result.admin_access:
                    continue
                device = (result.driver, result.pool, result.device)
                if result.share_id is not None:
                    state.shared.add(device)
                    if result.consumed_capacity:
                        consumed = state.capacity.setdefault(device, {})
                        for name, quantity in result.consumed_capacity.items():
                            consumed[name] = consumed.get(name, Fraction(0)) + quantity.value
                    continue
                state.devices.add(device)
        return state


# ---- pools ---------------------------------------------------------------------------------------------------

def node_matches(node: Node, node_name: str, all_nodes: bool, selector: tuple[NodeSelectorTerm, ...] | None) -> bool:
    """``NodeMatches``: a named node, every node, or a node selector."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_terms_match(selector, node.name, node.labels)
    return False


@dataclass(slots=True)
class Pool:
    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    slices: list[ResourceSlice] = field(default_factory=list)  # DeviceSlicesTargetingNode, by name
    other_slices: list[ResourceSlice] = field(default_factory=list)  # DeviceSlicesNotTargetingNode
    counter_sets: dict[str, CounterSet] = field(default_factory=dict)

    @property
    def has_binding_conditions(self) -> bool:
        return any(d.binding_conditions for s in self.slices for d in s.devices)


def _slice_targets(slice_: ResourceSlice, node: Node) -> bool | None:
    """Whether the slice is for the node (None: it selects no node at all and is skipped)."""
    if slice_.node_name or slice_.all_nodes or slice_.node_selector is not None:
        return node_matches(node, slice_.node_name, slice_.all_nodes, slice_.node_selector)
    if slice_.per_device_node_selection:
        return any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in slice_.devices)
    return None


def _uses_compatibility_groups(slice_: ResourceSlice) -> bool:
    return any(c.compatibility_groups for device in slice_.devices for c in device.consumes_counters)


def gather_pools(slices_for_node: Iterable[ResourceSlice], node: Node, all_slices: Sequence[ResourceSlice],
                 features: Features = DEFAULT_FEATURES) -> list[Pool]:
    """``GatherPools``: the node's pools at their newest generation, complete or marked incomplete, sorted by driver
    and name; pools with binding conditions last."""
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for slice_ in slices_for_node:
        if not features.partitionable_devices and (slice_.per_device_node_selection or slice_.shared_counters):
            continue
        # Without DRADeviceCompatibilityGroups the allocator cannot check co-allocation, so a slice whose devices
        # declare groups is ignored, and its pool counts as incomplete (pools_incubating.go, GatherPools).
        if not features.compatibility_groups and _uses_compatibility_groups(slice_):
            continue
        if not _slice_targets(slice_, node):
            continue
        key = (slice_.driver, slice_.pool)
        found = by_pool.get(key)
        if found is None or slice_.pool_generation > found[0].pool_generation:
            by_pool[key] = [slice_]
        elif slice_.pool_generation == found[0].pool_generation:
            found.append(slice_)
    pools: list[Pool] = []
    with_conditions: list[Pool] = []
    for (driver, pool_name), members in by_pool.items():
        count = members[0].resource_slice_count
        generation = members[0].pool_generation
        everything: list[ResourceSlice] | None = None
        if len(members) != count:
            obsolete = False
            everything = []
            for other in all_slices:
                if other.driver != driver or other.pool != pool_name:
                    continue
                if other.pool_generation == generation:
                    if features.compatibility_groups or not _uses_compatibility_groups(other):
                        everything.append(other)
                elif other.pool_generation > generation:
                    obsolete = True
                    break
            if obsolete:
                continue
            if len(everything) != count:
                pools.append(Pool(driver, pool_name, incomplete=True))
                continue
        pool = _build_pool(driver, pool_name, members, everything, features)
        (with_conditions if pool.has_binding_conditions else pools).append(pool)
    pools.sort(key=lambda p: (p.driver, p.pool))
    with_conditions.sort(key=lambda p: (p.driver, p.pool))
    return pools + with_conditions


def _build_pool(driver: str, name: str, members: list[ResourceSlice], everything: list[ResourceSlice] | None,
                features: Features = DEFAULT_FEATURES) -> Pool:
    """``buildPool``: device slices and counter sets; duplicate device names or dangling counters make it invalid."""
    members = sorted(members, key=lambda s: s.name)
    partitionable = features.partitionable_devices
    device_slices = [s for s in members if not (partitionable and s.shared_counters)]
    counter_slices = [s for s in members if partitionable and s.shared_counters]
    others: list[ResourceSlice] = []
    if everything is not None and len(members) < len(everything):
        names = {s.name for s in members}
        for other in everything:
            if other.name in names:
                continue
            (counter_slices if partitionable and other.shared_counters else others).append(other)
    seen: set[str] = set()
    for slice_ in device_slices:
        for device in slice_.devices:
            if device.name in seen:
                return Pool(driver, name, invalid=True)
            seen.add(device.name)
    if not partitionable:
        return Pool(driver, name, slices=device_slices)
    counter_sets: dict[str, CounterSet] = {}
    for slice_ in counter_slices:
        for counter_set in slice_.shared_counters:
            if counter_set.name in counter_sets:
                return Pool(driver, name, invalid=True)
            counter_sets[counter_set.name] = counter_set
    for slice_ in (*device_slices, *others):
        for device in slice_.devices:
            for consumption in device.consumes_counters:
                found = counter_sets.get(consumption.counter_set)
                if found is None or any(c not in found.counters for c in consumption.counters):
                    return Pool(driver, name, invalid=True)
    return Pool(driver, name, slices=device_slices, other_slices=others, counter_sets=counter_sets)


# ---- requests ------------------------------------------------------------------------------------------------

@dataclass(slots=True)
class _RequestData:
    request: ExactDeviceRequest
    parent: str | None  # the request's name when this is one of its subrequests
    device_class: DeviceClass | None
    num_devices: int = 0
    all_devices: list[tuple[Device, DeviceId, ResourceSlice, Pool]] = field(default_factory=list)
    selected_sub_request: int = 0

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent is not None else self.request.name


def _lookup_attribute(device: Device, device_id: DeviceId, name: str) -> tuple[str, object] | None:
    """``lookupAttribute``: the fully qualified name, or the short one for the device's own driver's domain."""
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, sep, short = name.partition("/")
    if not sep or domain != device_id[0]:
        return None
    return device.attributes.get(short)


class _Constraint:
    """``matchAttributeConstraint`` (``distinct`` False) and ``distinctAttributeConstraint``."""

    def __init__(self, requests: tuple[str, ...], attribute: str, distinct: bool) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.distinct = distinct
        self.values: list[tuple[str, object]] = []

    def _applies(self, request: str, sub_request: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(sub_request) and f"{request}/{sub_request}" in self.requests)

    def add(self, request: str, sub_request: str, device: Device, device_id: DeviceId) -> bool:
        if not self._applies(request, sub_request):
            return True
        value = _lookup_attribute(device, device_id, self.attribute)
        if value is None or value[0] not in ("int", "bool", "string", "version"):
            return False
        if self.distinct:
            if any(v == value for v in self.values):
                return False
        elif self.values and self.values[0] != value:
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, sub_request: str) -> None:
        if self._applies(request, sub_request):
            self.values.pop()


# ---- consumable capacity ---------------------------------------------------------------------------------------

def _consumed(requested: Quantity | None, capacity: DeviceCapacity) -> Fraction:
    """``calculateConsumedCapacity``: the request rounded up by the capacity's policy, or its default/whole value."""
    policy = capacity.policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default.value
        return capacity.value.value
    value = requested.value
    if policy is None:
        return value
    if policy.has_range and policy.range_min is not None:
        low = policy.range_min.value
        if value < low:
            return low
        if policy.range_step is None:
            return value
        step = policy.range_step.value
        return low + step * math.ceil((value - low) / step)
    if policy.valid_values:
        for valid in policy.valid_values:
            if value <= valid.value:
                return valid.value
    return value


def _violates_policy(value: Fraction, capacity: DeviceCapacity) -> bool:
    policy = capacity.policy
    if policy is None or (policy.default is not None and value == policy.default.value):
        return False
    if policy.has_range:
        if policy.range_max is not None and value > policy.range_max.value:
            return True
        if policy.range_step is not None and policy.range_min is not None:
            return (value - policy.range_min.value) % policy.range_step.value != 0
        return False
    if policy.valid_values:
        return all(value != v.value for v in policy.valid_values)
    return False


def request_fits_capacity(requests: Mapping[str, Quantity] | None, device: Device,
                          consumed: Mapping[str, Fraction], allocating: Mapping[str, Fraction]) -> bool:
    """``CmpRequestOverCapacity``: every capacity of the device, with what is consumed and being allocated, holds
    the request (rounded by its policy); a request for a capacity the device lacks never fits."""
    if requests and any(name not in device.capacity for name in requests):
        return False
    for name, capacity in device.capacity.items():
        amount = _consumed(requests.get(name) if requests else None, capacity)
        if _violates_policy(amount, capacity):
            return False
        if consumed.get(name, Fraction(0)) + amount + allocating.get(name, Fraction(0)) > capacity.value.value:
            return False
    return True


def _consumption(requests: Mapping[str, Quantity] | None, device: Device) -> dict[str, Fraction]:
    return {name: _consumed(requests.get(name) if requests else None, c) for name, c in device.capacity.items()}


# ---- the search -------------------------------------------------------------------------------------------------

@dataclass(slots=True)
class ClaimResult:
    """One claim's allocation: its devices (request name, device id, admin access, share), and where it is usable."""

    devices: list[tuple[str, DeviceId, bool, bool, Device, ResourceSlice]] = field(default_factory=list)

    def allocation(self, node: str) -> Allocation:
        """The ``AllocationResult``: bound to the node when a device is local to it (``createNodeSelector``)."""
        results = tuple(AllocatedDevice(request, d[0], d[1], d[2], admin_access=admin,
                                        share_id=f"share-{i}" if shared else None)
                        for i, (request, d, admin, shared, _, _) in enumerate(self.devices))
        terms: list[LabelSelectorRequirement] = []
        fields: list[LabelSelectorRequirement] = []
        for _, _, _, _, device, slice_ in self.devices:
            if slice_.per_device_node_selection:
                node_name, selector = device.node_name, device.node_selector
            else:
                node_name, selector = slice_.node_name, slice_.node_selector
            if node_name or device.binds_to_node:
                return Allocation(results, (NodeSelectorTerm(match_fields=(
                    LabelSelectorRequirement("metadata.name", "In", (node,)),)),))
            if selector is not None and len(selector) == 1:
                for req in selector[0].match_expressions:
                    if req not in terms:
                        terms.append(req)
                for req in selector[0].match_fields:
                    if req not in fields:
                        fields.append(req)
        if terms or fields:
            return Allocation(results, (NodeSelectorTerm(tuple(terms), tuple(fields)),))
        return Allocation(results, None)


class Allocator:
    """Upstream's ``Allocator``: built once per pod (the cluster's allocated devices, classes and slices), asked per
    node (``allocate``)."""

    def __init__(self, allocated: AllocatedState, classes: Mapping[str, DeviceClass],
                 slices: Sequence[ResourceSlice], features: Features = DEFAULT_FEATURES) -> None:
        self.features = features
        self.allocated = allocated
        self.classes = classes
        self.all_slices = slices
        self.slices_on_node: dict[str, list[ResourceSlice]] = {}
        self.slices_shared: list[ResourceSlice] = []
        for slice_ in slices:
            if slice_.node_name:
                self.slices_on_node.setdefault(slice_.node_name, []).append(slice_)
            else:
                self.slices_shared.append(slice_)

    def allocate(self, node: Node, claims: Sequence[ResourceClaim]) -> list[ClaimResult] | None:
        """Devices for every claim on ``node`` (one ``ClaimResult`` each), None when there are none; raises
        ``AllocationError`` where upstream's ``Allocate`` returns an error."""
        run = _Allocation(self, node, claims)
        return run.run()


class _Allocation:
    """One ``Allocate`` call (upstream's ``allocator``)."""

    def __init__(self, allocator: Allocator, node: Node, claims: Sequence[ResourceClaim]) -> None:
        self.a = allocator
        self.node = node
        self.claims = claims
        self.requests: dict[tuple[int, int, int], _RequestData] = {}
        self.constraints: list[list[_Constraint]] = []
        self.allocating: dict[DeviceId, set[int]] = {}
        self.allocating_capacity: dict[DeviceId, dict[str, Fraction]] = {}
        self.consumed_counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        self.available_counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        self.matches: dict[tuple[DeviceId, int, int, int], bool] = {}
        self.results = [ClaimResult() for _ in claims]
        self.pools: list[Pool] = []

    def run(self) -> list[ClaimResult] | None:
        slices = [*self.a.slices_on_node.get(self.node.name, ()), *self.a.slices_shared]
        features = self.a.features
        self.pools = gather_pools(slices, self.node, self.a.all_slices, features)
        for claim_index, claim in enumerate(self.claims):
            minimum = 0
            for request_index, request in enumerate(claim.requests):
                if request.first_available and not features.prioritized_list:
                    raise AllocationError(f"claim {claim.key}, request {request.name}: has subrequests, but the "
                                          "DRAPrioritizedList feature is disabled")
                if not features.consumable_capacity and any(
                        r.capacity_requests is not None for r in (request.exactly, *request.first_available)
                        if r is not None):
                    raise AllocationError(f"claim {claim.key}, request {request.name}: has capacity requests, but "
                                          "the DRAConsumableCapacity feature is disabled")
                if request.first_available:
                    least = math.inf
                    for sub_index, sub in enumerate(request.first_available):
                        data = self._validate(claim, sub, request.name, (claim_index, request_index, sub_index))
                        least = min(least, data.num_devices)
                    wanted = int(least)
                else:
                    exact = _exact(claim, request)
                    wanted = self._validate(claim, exact, None, (claim_index, request_index, 0)).num_devices
                if wanted > ALLOCATION_RESULTS_MAX_SIZE - minimum:
                    raise AllocationError(f"claim {claim.key}, request {request.name}: adding {wanted} devices "
                                          f"exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with "
                                          f"{minimum} already accounted for")
                minimum += wanted
            constraints = []
            for i, constraint in enumerate(claim.constraints):
                if constraint.match_attribute is not None:
                    constraints.append(_Constraint(constraint.requests, constraint.match_attribute, False))
                elif constraint.distinct_attribute is not None:
                    constraints.append(_Constraint(constraint.requests, constraint.distinct_attribute, True))
                else:
                    raise AllocationError(f"claim {claim.key}, constraint #{i}: empty constraint (unsupported "
                                          "constraint type?)")
            self.constraints.append(constraints)
        try:
            done = self._allocate_one(0, 0, 0, 0, False, (0, 0, 0))
        except _AllocationMaxSizeExceeded:
            done = False
        if not done:
            if any(p.invalid for p in self.pools):
                raise AllocationError("invalid resource pools were encountered", on_node=True)
            return None
        return self.results

    # -- validation --------------------------------------------------------------------------------------------
    def _validate(self, claim: ResourceClaim, request: ExactDeviceRequest, parent: str | None,
                  key: tuple[int, int, int]) -> _RequestData:
        """``validateDeviceRequest``: the class, and how many devices (for "All": which ones)."""
        name = request.name if parent is None else f"{parent}/{request.name}"
        for i, expression in enumerate(request.selectors):
            if not expression:
                raise AllocationError(f"claim {claim.key}, request {name}, selector #{i}: CEL expression empty "
                                      "(unsupported selector type?)")
        if not self.a.features.admin_access and request.admin_access is not None:
            raise AllocationError(f"claim {claim.key}, request {name}: admin access is requested, but the feature is "
                                  "disabled")
        if not request.device_class_name:
            raise AllocationError(f"claim {claim.key}, request {name}: missing device class name "
                                  "(unsupported request type?)")
        device_class = self.a.classes.get(request.device_class_name)
        if device_class is None:
            raise AllocationError(f"claim {claim.key}, request {name}: could not retrieve device class "
                                  f"{request.device_class_name}")
        data = _RequestData(request, parent, device_class)
        if request.allocation_mode == EXACT_COUNT:
            data.num_devices = request.count
        elif request.allocation_mode == ALL:
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(f"claim {claim.key}, request {name}: asks for all devices, but resource "
                                          f"pool {pool.driver}/{pool.pool} is currently being updated")
                if pool.invalid:
                    raise AllocationError(f"claim {claim.key}, request {name}: asks for all devices, but resource "
                                          f"pool {pool.driver}/{pool.pool} is currently invalid")
                for slice_ in pool.slices:
                    for device in slice_.devices:
                        device_id = (slice_.driver, slice_.pool, device.name)
                        if not self._selectable(key, data, slice_, device, device_id):
                            continue
                        if self.a.features.consumable_capacity and not request_fits_capacity(
                                request.capacity_requests, device, {}, {}):
                            continue
                        data.all_devices.append((device, device_id, slice_, pool))
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(f"claim {claim.key}, request {name}: unsupported count mode "
                                  f"{request.allocation_mode}")
        self.requests[key] = data
        return data

    def _selectable(self, key: tuple[int, int, int], data: _RequestData, slice_: ResourceSlice, device: Device,
                    device_id: DeviceId) -> bool:
        """``isSelectable``: the class's selectors, the request's, and per-device node selection."""
        if device.binding_conditions and not self.a.features.device_binding_and_status:
            return False
        cache_key = (device_id, *key)
        found = self.matches.get(cache_key)
        if found is not None:
            return found
        claim = self.claims[key[0]]
        device_class = data.device_class
        result = ((device_class is None or self._selectors_match(device, device_id, device_class.selectors,
                                                                  f"class {device_class.name}"))
                  and self._selectors_match(device, device_id, data.request.selectors, f"claim {claim.key}")
                  and (not slice_.per_device_node_selection
                       or node_matches(self.node, device.node_name, device.all_nodes, device.node_selector)))
        self.matches[cache_key] = result
        return result

    def _selectors_match(self, device: Device, device_id: DeviceId, selectors: tuple[str, ...], owner: str) -> bool:
        if not selectors:
            return True
        # Imported here: cel-python and its parser libraries take 60 ms to import, paid by every plugin run and
        # server start for clusters whose devices have no CEL selector.
        from webhook.cluster.cel import CelError, compile_selector, device_activation

        for i, expression in enumerate(selectors):
            try:
                selector = compile_selector(expression)
            except CelError as exc:
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {exc}") from exc
            try:
                # the driver is part of what CEL sees but not of the Device: two drivers' equal devices differ
                matched = selector.matches((device_id[0], device), lambda: device_activation(
                    device_id[0], device.attributes, {n: c.value for n, c in device.capacity.items()},
                    bool(device.allow_multiple_allocations)))
            except CelError as exc:
                raise AllocationError(f"{owner}: selector #{i} on device {'/'.join(device_id)}: CEL runtime error: "
                                      f"{exc}") from exc
            if not matched:
                return False
        return True

    # -- the depth-first search --------------------------------------------------------------------------------
    def _in_use(self, device_id: DeviceId) -> bool:
        return device_id in self.a.allocated.devices or bool(self.allocating.get(device_id))

    def _allocate_one(self, claim_index: int, request_index: int, sub_index: int, device_index: int,
                      allocate_sub_request: bool, start: tuple[int, int, int]) -> bool:
        if claim_index >= len(self.claims):
            return True
        claim = self.claims[claim_index]
        if request_index >= len(claim.requests):
            try:
                return self._allocate_one(claim_index + 1, 0, 0, 0, False, (0, 0, 0))
            except _AllocationMaxSizeExceeded:
                return False
        data = self.requests[(claim_index, request_index, sub_index)]
        if not allocate_sub_request and data.parent is not None:
            all_exceeded = True
            sub = 0
            while (claim_index, request_index, sub) in self.requests:
                try:
                    success = self._allocate_one(claim_index, request_index, sub, device_index, True, (0, 0, 0))
                except _AllocationMaxSizeExceeded:
                    sub += 1
                    continue
                all_exceeded = False
                if success:
                    self.requests[(claim_index, request_index, 0)].selected_sub_request = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _AllocationMaxSizeExceeded
            return False
        request = data.request
        all_devices = request.allocation_mode == ALL
        if all_devices and not data.all_devices:
            return False
        if device_index >= data.num_devices:
            return self._allocate_one(claim_index, request_index + 1, 0, 0, False, (0, 0, 0))
        if data.num_devices - device_index > ALLOCATION_RESULTS_MAX_SIZE - len(self.results[claim_index].devices):
            raise _AllocationMaxSizeExceeded
        position = (claim_index, request_index, sub_index, device_index)
        if all_devices:
            device, device_id, slice_, pool = data.all_devices[device_index]
            undo = self._allocate_device(position, data, device, device_id, slice_, pool, must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one(claim_index, request_index, sub_index, device_index + 1,
                                          allocate_sub_request, (0, 0, 0))
            except _AllocationMaxSizeExceeded:
                undo()
                raise
            if not done:
                undo()
            return done
        admin = bool(request.admin_access)
        for pool_index in range(start[0], len(self.pools)):
            pool = self.pools[pool_index]
            if pool.incomplete or pool.invalid:
                continue
            slice_start = start[1] if pool_index == start[0] else 0
            for slice_index in range(slice_start, len(pool.slices)):
                slice_ = pool.slices[slice_index]
                device_start = start[2] if pool_index == start[0] and slice_index == start[1] else 0
                for index in range(device_start, len(slice_.devices)):
                    device = slice_.devices[index]
                    device_id = (pool.driver, pool.pool, device.name)
                    if admin and claim_index in self.allocating.get(device_id, ()):
                        continue
                    if not admin and self._in_use(device_id):
                        continue
                    if not self._selectable((claim_index, request_index, sub_index), data, slice_, device, device_id):
                        continue
                    if self.a.features.consumable_capacity and not self._capacity_fits(request, device, device_id):
                        continue
                    undo = self._allocate_device(position, data, device, device_id, slice_, pool, must=False)
                    if undo is None:
                        continue
                    try:
                        done = self._allocate_one(claim_index, request_index, sub_index, device_index + 1,
                                                  allocate_sub_request, (pool_index, slice_index, index + 1))
                    except _AllocationMaxSizeExceeded:
                        undo()
                        raise
                    if done:
                        return True
                    undo()
        return False

    def _capacity_fits(self, request: ExactDeviceRequest, device: Device, device_id: DeviceId) -> bool:
        consumed = self.a.allocated.capacity.get(device_id, {})
        return request_fits_capacity(request.capacity_requests, device, consumed,
                                     self.allocating_capacity.get(device_id, {}))

    def _allocate_device(self, position: tuple[int, int, int, int], data: _RequestData, device: Device,
                         device_id: DeviceId, slice_: ResourceSlice, pool: Pool, must: bool
                         ) -> Callable[[], None] | None:
        """``allocateDevice``: the device taken for the request, and how to give it back (None: it cannot be)."""
        claim_index = position[0]
        request = data.request
        admin = bool(request.admin_access)
        features = self.a.features
        multiple = features.consumable_capacity and bool(device.allow_multiple_allocations)
        if not multiple and admin and claim_index in self.allocating.get(device_id, ()):
            return None
        if not admin and self._in_use(device_id):
            return None
        if not features.partitionable_devices and device.consumes_counters:
            return None
        in_use_shared = multiple and (device_id in self.a.allocated.capacity or device_id in self.a.allocated.shared
                                      or device_id in self.allocating_capacity)
        counters_reserved = False
        if not in_use_shared and device.consumes_counters:
            if not self._reserve_counters(pool, device):
                return None
            counters_reserved = True
        base = data.parent if data.parent is not None else request.name
        sub = request.name if data.parent is not None else ""
        if features.device_taints and any(t.effect in TAINT_EFFECTS_PREVENTING_ALLOCATION
               and not any(_tolerates(tol, t) for tol in request.tolerations) for t in device.taints):
            if counters_reserved:
                self._release_counters(pool, device)
            return None
        added = 0
        for constraint in self.constraints[claim_index]:
            if not constraint.add(base, sub, device, device_id):
                for undo_constraint in reversed(self.constraints[claim_index][:added]):
                    undo_constraint.remove(base, sub)
                if counters_reserved:
                    self._release_counters(pool, device)
                if must:
                    raise AllocationError(f"claim {self.claims[claim_index].key}, request {request.name}: cannot "
                                          f"add device {'/'.join(device_id)} because a claim constraint would not "
                                          "be satisfied")
                return None
            added += 1
        marked = False
        if not multiple:
            self.allocating.setdefault(device_id, set()).add(claim_index)
            marked = True
        consumption: dict[str, Fraction] | None = None
        if multiple:
            if not self._capacity_fits(request, device, device_id):
                self._rollback(claim_index, device_id, base, sub, added, marked, None, pool, device,
                               counters_reserved)
                return None
            consumption = _consumption(request.capacity_requests, device)
            allocating = self.allocating_capacity.setdefault(device_id, {})
            for name, amount in consumption.items():
                allocating[name] = allocating.get(name, Fraction(0)) + amount
        self.results[claim_index].devices.append((data.name, device_id, admin, multiple, device, slice_))

        def undo() -> None:
            self.results[claim_index].devices.pop()
            self._rollback(claim_index, device_id, base, sub, added, marked, consumption, pool, device,
                           counters_reserved)
        return undo

    def _rollback(self, claim_index: int, device_id: DeviceId, base: str, sub: str, constraints: int, marked: bool,
                  consumption: dict[str, Fraction] | None, pool: Pool, device: Device, counters: bool) -> None:
        if consumption is not None:
            allocating = self.allocating_capacity[device_id]
            for name, amount in consumption.items():
                allocating[name] -= amount
        if marked:
            self.allocating[device_id].discard(claim_index)
        for constraint in reversed(self.constraints[claim_index][:constraints]):
            constraint.remove(base, sub)
        if counters:
            self._release_counters(pool, device)

    # -- partitionable devices: shared counters ------------------------------------------------------------------
    def _available(self, pool: Pool) -> dict[str, dict[str, Fraction]]:
        key = (pool.driver, pool.pool)
        found = self.available_counters.get(key)
        if found is None:
            found = {name: {c: q.value for c, q in cs.counters.items()} for name, cs in pool.counter_sets.items()}
            # a device shared between claims consumes its counters once, whoever holds it (the cross-cycle case)
            allocated = self.a.allocated.devices | self.a.allocated.shared
            for slice_ in (*pool.slices, *pool.other_slices):
                for device in slice_.devices:
                    if (slice_.driver, slice_.pool, device.name) not in allocated:
                        continue
                    for consumption in device.consumes_counters:
                        counters = found.get(consumption.counter_set, {})
                        for name, quantity in consumption.counters.items():
                            if name in counters:
                                counters[name] -= quantity.value
            self.available_counters[key] = found
        return found

    def _reserve_counters(self, pool: Pool, device: Device) -> bool:
        """``checkAvailableCounters``: the device's counters added to those consumed, if every counter holds."""
        available = self._available(pool)
        consumed = self.consumed_counters.setdefault((pool.driver, pool.pool), {})
        for consumption in device.consumes_counters:
            counters = consumed.setdefault(consumption.counter_set, {})
            for name, quantity in consumption.counters.items():
                counters[name] = counters.get(name, Fraction(0)) + quantity.value
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            if any(value < used.get(name, Fraction(0)) for name, value in counters.items()):
                self._release_counters(pool, device)
                return False
        return True

    def _release_counters(self, pool: Pool, device: Device) -> None:
        consumed = self.consumed_counters[(pool.driver, pool.pool)]
        for consumption in device.consumes_counters:
            counters = consumed[consumption.counter_set]
            for name, quantity in consumption.counters.items():
                counters[name] -= quantity.value


def _tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """``ToleratesTaint`` for a device."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def _exact(claim: ResourceClaim, request: DeviceRequest) -> ExactDeviceRequest:
    if request.exactly is None:
        raise AllocationError(f"claim {claim.key}, request {request.name}: unknown request type")
    return request.exactly
