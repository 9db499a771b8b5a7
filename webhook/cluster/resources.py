"""Resource arithmetic: upstream ``PodRequests`` / ``PodLimits`` on quantities, written once.

Upstream: staging/src/k8s.io/component-helpers/resource/helpers.go (``PodRequests``, ``PodLimits``,
``AggregateContainerRequests``, ``IsPodLevelResourcesSet``). ResourceQuota admission reads the quantities
(its messages print them in their formats); the scheduler's integer requests (``Pod.requests``) are the same
sums converted afterwards, as pkg/scheduler/framework/plugins/noderesources/fit.go
(``computePodResourceRequest``) converts ``PodRequests`` with ``MilliValue`` for cpu and ``Value`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction

from webhook.cluster.model import (
    EMPTY_QUANTITIES,
    EMPTY_SCALARS,
    NO_RESOURCES,
    ContainerResources,
    ContainerStatusResources,
    FrozenMap,
    PodResourceSpec,
    PodResourceStatus,
    Resources,
)
from webhook.cluster.quantity import Quantity, int_value, milli_value
from webhook.cluster.sharing import SHARED_LIMIT, BoundedCache, shared

ResourceList = dict[str, Quantity]

STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")


def add_quantities(a: Quantity, b: Quantity) -> Quantity:
    """``Quantity.Add``: the sum keeps the receiver's format, unless the receiver is zero."""
    return Quantity(a.value + b.value, b.format if a.value == 0 else a.format)


def _add_into(target: ResourceList, other: Mapping[str, Quantity]) -> None:
    """``addResourceList``."""
    for name, qty in other.items():
        target[name] = add_quantities(target[name], qty) if name in target else qty


def _max_into(target: ResourceList, other: Mapping[str, Quantity]) -> None:
    """``maxResourceList``: the larger quantity (absent counts as unset, not as zero)."""
    for name, qty in other.items():
        if name not in target or qty.value > target[name].value:
            target[name] = qty


def is_supported_pod_level_resource(name: str) -> bool:
    """``IsSupportedPodLevelResource``: what ``spec.resources`` may set."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _supported(resources: Mapping[str, Quantity]) -> ResourceList:
    return {name: qty for name, qty in resources.items() if is_supported_pod_level_resource(name)}


def is_pod_level_resources_set(spec: PodResourceSpec) -> bool:
    """``IsPodLevelResourcesSet``: spec.resources names a supported resource in requests or limits."""
    return bool(_supported(spec.pod_requests) or _supported(spec.pod_limits))


def aggregate_container_resources(spec: PodResourceSpec,
                                  of: Callable[[ContainerResources], Mapping[str, Quantity]]) -> ResourceList:
    """``aggregateContainerResourcesByFn``: containers + sidecars, max with the init-container peak."""
    result: ResourceList = {}
    for ctr in spec.containers:
        _add_into(result, of(ctr))
    if not spec.init_containers:
        return result
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for ctr in spec.init_containers:
        if ctr.sidecar:
            # A sidecar runs for the pod's whole life, and beside every init container that starts after it.
            _add_into(result, of(ctr))
            _add_into(sidecars, of(ctr))
            _max_into(init_peak, sidecars)
        else:
            running: ResourceList = {}
            _add_into(running, of(ctr))
            _add_into(running, sidecars)
            _max_into(init_peak, running)
    _max_into(result, init_peak)
    return result


def _requests(ctr: ContainerResources) -> Mapping[str, Quantity]:
    return ctr.requests


def _limits(ctr: ContainerResources) -> Mapping[str, Quantity]:
    return ctr.limits


def aggregate_container_requests(spec: PodResourceSpec) -> ResourceList:
    """``AggregateContainerRequests`` without options: the containers alone (no pod-level values, no overhead)."""
    return aggregate_container_resources(spec, _requests)


def aggregate_container_limits(spec: PodResourceSpec) -> ResourceList:
    """``AggregateContainerLimits`` without options."""
    return aggregate_container_resources(spec, _limits)


def _with_non_missing(of: Callable[[ContainerResources], Mapping[str, Quantity]],
                      non_missing: Mapping[str, Quantity] | None,
                      ) -> Callable[[ContainerResources], Mapping[str, Quantity]]:
    """``of`` with ``NonMissingContainerRequests``: a resource a container's requests lack counts as this much."""
    if not non_missing:
        return of

    def with_defaults(ctr: ContainerResources) -> Mapping[str, Quantity]:
        found = of(ctr)
        missing = {name: qty for name, qty in non_missing.items() if name not in found}
        return {**found, **missing} if missing else found

    return with_defaults


def pod_requests(spec: PodResourceSpec, status: PodResourceStatus | None = None,
                 non_missing: Mapping[str, Quantity] | None = None) -> ResourceList:
    """``PodRequests``: the containers' aggregate, replaced by pod-level requests where set, plus overhead.

    With ``status`` (a running pod's), as the scheduler computes it in v1.37 (``PodInfo.CalculateResource``:
    ``UseStatusResources`` since InPlacePodVerticalScaling is GA, ``InPlacePodLevelResourcesVerticalScalingEnabled``
    on by default since v1.36): each aggregate is the larger of the spec's, the allocated and the actuated
    resources, the spec left out while the resize is ``Infeasible`` (``AggregateContainerRequests``,
    ``effectivePodLevelResources``).

    ``non_missing`` (``PodResourcesOptions.NonMissingContainerRequests``): a container that does not request one of
    these resources counts as requesting this much of it (an explicit zero stays zero).
    """
    if status is None:
        requests = aggregate_container_resources(spec, _with_non_missing(_requests, non_missing))
    else:
        requests = _container_requests_with_status(spec, status, non_missing)
    if _supported(spec.pod_requests):  # IsPodLevelRequestsSet
        effective = spec.pod_requests
        if status is not None and status.has_resources:
            effective = _max_of(None if status.resize_infeasible else spec.pod_requests,
                                status.actuated_requests, status.allocated)
        requests.update(_supported(effective))
    if spec.overhead:
        _add_into(requests, spec.overhead)
    return requests


# What the scheduler's scoring counts for a container without a cpu or memory request
# (pkg/scheduler/util/pod_resources.go: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_DEFAULT_NON_ZERO = {"cpu": Quantity(Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000), "DecimalSI"),
                     "memory": Quantity(Fraction(DEFAULT_MEMORY_REQUEST), "DecimalSI")}


def is_pod_level_requests_set(spec: PodResourceSpec) -> bool:
    """``IsPodLevelRequestsSet``: spec.resources.requests names a supported resource."""
    return bool(_supported(spec.pod_requests))


def pod_non_zero_requests(spec: PodResourceSpec, status: PodResourceStatus | None = None) -> tuple[int, int]:
    """(milli cpu, memory) as the scheduler's NodeInfo sums them for scoring (pkg/scheduler/framework/types.go,
    ``PodInfo.CalculateResource`` with ``getNonMissingContainerRequests``): a container missing a cpu or memory
    request counts 100m / 200 MiB; with pod-level requests, only a resource the pod's requests lack altogether
    (``status``: a running pod's, as ``pod_requests`` reads it)."""
    requests = pod_requests(spec, status)
    if is_pod_level_requests_set(spec):
        non_missing = {name: qty for name, qty in _DEFAULT_NON_ZERO.items() if name not in requests}
    else:
        non_missing = _DEFAULT_NON_ZERO
    if non_missing:
        requests = pod_requests(spec, status, non_missing)
    cpu, memory = requests.get("cpu"), requests.get("memory")
    return (milli_value(cpu) if cpu is not None else 0, int_value(memory) if memory is not None else 0)


# ---- in-place resize: the status half of PodRequests (issue #26) ----------------------------------------

def _max_of(first: Mapping[str, Quantity] | None, *others: Mapping[str, Quantity] | None) -> ResourceList:
    """component-helpers ``max(a, b...)``: per resource the largest, a nil ``first`` counting as empty."""
    result: ResourceList = dict(first) if first is not None else {}
    for other in others:
        if other:
            _max_into(result, other)
    return result


def _status_of(status: PodResourceStatus, name: str) -> ContainerStatusResources | None:
    """``findContainerStatus``: the first status of that name (containerStatuses before initContainerStatuses)."""
    for found in status.containers:
        if found.name == name:
            return found
    return None


def _container_requests_with_status(spec: PodResourceSpec, status: PodResourceStatus,
                                    non_missing: Mapping[str, Quantity] | None = None) -> ResourceList:
    """``AggregateContainerRequests`` with ``UseStatusResources`` (and ``NonMissingContainerRequests``)."""
    infeasible = status.resize_infeasible

    def allocated(ctr: ContainerResources) -> Mapping[str, Quantity]:  # containerAllocatedRequests
        found = _status_of(status, ctr.name)
        if found is not None and found.allocated is not None:
            return found.allocated
        return EMPTY_QUANTITIES if infeasible else ctr.requests

    def actuated(ctr: ContainerResources) -> Mapping[str, Quantity]:  # containerActuatedRequests
        found = _status_of(status, ctr.name)
        if found is not None and found.actuated_requests is not None:
            return found.actuated_requests
        if found is not None and found.allocated is not None:
            return found.allocated
        return EMPTY_QUANTITIES if infeasible else ctr.requests

    spec_requests = aggregate_container_resources(spec, _with_non_missing(_requests, non_missing))
    allocated_requests: Mapping[str, Quantity]
    actuated_requests: Mapping[str, Quantity]
    if status.allocated is not None and status.has_resources and status.actuated_requests is not None:
        # The pod-level status maps already hold the aggregate over every container.
        allocated_requests, actuated_requests = status.allocated, status.actuated_requests
    else:
        allocated_requests = aggregate_container_resources(spec, _with_non_missing(allocated, non_missing))
        actuated_requests = aggregate_container_resources(spec, _with_non_missing(actuated, non_missing))
    if infeasible:
        return _max_of(actuated_requests, allocated_requests)
    return _max_of(spec_requests, actuated_requests, allocated_requests)


def pod_limits(spec: PodResourceSpec) -> ResourceList:
    """``PodLimits``: like requests, but overhead is added only to the limits that are set."""
    limits = aggregate_container_resources(spec, _limits)
    if is_pod_level_resources_set(spec):
        limits.update(_supported(spec.pod_limits))
    for name, qty in spec.overhead.items():
        if name in limits:
            limits[name] = add_quantities(limits[name], qty)
    return limits


# The same few request sets recur on every pod: their Resources by the units' items.
_resources_by_units: BoundedCache[tuple[tuple[str, int], ...], Resources] = BoundedCache(SHARED_LIMIT)


def requests_as_resources(requests: Mapping[str, Quantity]) -> Resources:
    """A pod's ``PodRequests`` in the scheduler's integer units (shared: equal requests are one instance).

    ``pods`` is not a pod request the Fit filter reads, and zero extended resources are left out.
    """
    return requests_from_units({name: milli_value(qty) if name == "cpu" else int_value(qty)
                                for name, qty in requests.items()})


def requests_from_units(units_by_name: Mapping[str, int]) -> Resources:
    """``requests_as_resources`` of requests already in the scheduler's integer units."""
    units = tuple(units_by_name.items())
    found = _resources_by_units.get(units)
    if found is None:
        found = _resources_by_units.remember(units, _units_as_resources(dict(units)))
    return found


def _units_as_resources(units: Mapping[str, int]) -> Resources:
    if not any(units.values()):
        return NO_RESOURCES
    scalar = {name: value for name, value in units.items() if name not in STANDARD_RESOURCES and value}
    return shared(Resources(
        milli_cpu=units.get("cpu", 0),
        memory=units.get("memory", 0),
        ephemeral_storage=units.get("ephemeral-storage", 0),
        scalar=FrozenMap(scalar) if scalar else EMPTY_SCALARS,
    ))


def allocatable_as_resources(allocatable: Mapping[str, Quantity]) -> Resources:
    """A node's allocatable in the scheduler's integer units (``framework.NewResource``)."""
    if not allocatable:
        return NO_RESOURCES
    scalar = {name: int_value(qty) for name, qty in allocatable.items() if name not in STANDARD_RESOURCES}

    def units(name: str, convert: Callable[[Quantity], int] = int_value) -> int:
        return convert(allocatable[name]) if name in allocatable else 0

    return Resources(
        milli_cpu=units("cpu", milli_value),
        memory=units("memory"),
        ephemeral_storage=units("ephemeral-storage"),
        pods=units("pods"),
        scalar=FrozenMap(scalar) if scalar else EMPTY_SCALARS,
    )
