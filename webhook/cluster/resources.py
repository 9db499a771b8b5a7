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
    EMPTY_SCALARS,
    NO_RESOURCES,
    ContainerResources,
    FrozenMap,
    PodResourceSpec,
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


def _aggregate_containers(spec: PodResourceSpec, of: Callable[[ContainerResources], Mapping[str, Quantity]],
                          ) -> ResourceList:
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


def pod_requests(spec: PodResourceSpec, non_missing: Mapping[str, Quantity] | None = None) -> ResourceList:
    """``PodRequests``: the containers' aggregate, replaced by pod-level requests where set, plus overhead.

    ``non_missing`` (``PodResourcesOptions.NonMissingContainerRequests``): a container that does not request one of
    these resources counts as requesting this much of it (an explicit zero stays zero)."""
    if non_missing:
        def of(ctr: ContainerResources) -> Mapping[str, Quantity]:
            missing = {name: qty for name, qty in non_missing.items() if name not in ctr.requests}
            return {**ctr.requests, **missing} if missing else ctr.requests

        requests = _aggregate_containers(spec, of)
    else:
        requests = _aggregate_containers(spec, _requests)
    if spec.pod_requests:
        requests.update(_supported(spec.pod_requests))
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


def pod_non_zero_requests(spec: PodResourceSpec) -> tuple[int, int]:
    """(milli cpu, memory) as the scheduler's NodeInfo sums them for scoring (pkg/scheduler/framework/types.go,
    ``PodInfo.CalculateResource`` with ``getNonMissingContainerRequests``): a container missing a cpu or memory
    request counts 100m / 200 MiB; with pod-level requests, only a resource the pod's requests lack altogether."""
    requests = pod_requests(spec)
    if is_pod_level_requests_set(spec):
        non_missing = {name: qty for name, qty in _DEFAULT_NON_ZERO.items() if name not in requests}
    else:
        non_missing = _DEFAULT_NON_ZERO
    if non_missing:
        requests = pod_requests(spec, non_missing)
    cpu, memory = requests.get("cpu"), requests.get("memory")
    return (milli_value(cpu) if cpu is not None else 0, int_value(memory) if memory is not None else 0)


def pod_limits(spec: PodResourceSpec) -> ResourceList:
    """``PodLimits``: like requests, but overhead is added only to the limits that are set."""
    limits = _aggregate_containers(spec, _limits)
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
