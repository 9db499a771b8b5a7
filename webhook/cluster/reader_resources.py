"""Reading quantities and a pod's resource fields from API dicts: ``PodResourceSpec``, ``QuotaFacts``.

``Pod.requests`` is ``resources.pod_requests`` of the spec read here, converted once. The same request
sets recur on every pod of a workload, so the spec, its requests and its quota facts are remembered by
the raw containers' items (only inputs the checked reading accepted, so a hit equals a valid input).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from webhook.cluster.copying import replace_fields
from webhook.cluster.jsonfields import JsonObject, json_int, json_list, json_object, json_str, parse_time_ns
from webhook.cluster.model import (
    EMPTY_QUANTITIES,
    ContainerResources,
    ContainerStatusResources,
    FrozenMap,
    Pod,
    PodResourceSpec,
    PodResourceStatus,
    QuotaFacts,
    Resources,
)
from webhook.cluster.quantity import Quantity, parse_quantity
from webhook.cluster.resources import (
    allocatable_as_resources,
    pod_non_zero_requests,
    pod_requests,
    requests_as_resources,
    requests_from_units,
)
from webhook.cluster.sharing import FAST_PATH_LIMIT, BoundedCache, interned
from webhook.errors import InvalidInput, QuantityError

# ---- quantities --------------------------------------------------------------------------------------

# The same quantity strings ("100m", "256Mi") recur on every pod; exact parsing is not cheap. A large cluster
# writes thousands of distinct ones (6,300 in bench/cluster_state.py's): a cache emptied by them would miss.
_quantity_by_text: BoundedCache[str, Quantity] = BoundedCache(1 << 14)


def read_quantity(value: object) -> Quantity:
    """A quantity as staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go (``UnmarshalJSON``) reads
    it: surrounding whitespace trimmed. Raises ``QuantityError``."""
    if type(value) is str:
        found = _quantity_by_text.get(value)
        if found is None:
            found = _quantity_by_text.remember(value, parse_quantity(value.strip()))
        return found
    return parse_quantity(value)


def _quantities(raw: JsonObject, path: str, field: str = "", names: Iterable[Any] | None = None,
                ) -> dict[str, Quantity]:
    """The quantities of ``raw`` (of ``names`` only, if given); ``path + field`` is spelled out for an error."""
    result: dict[str, Quantity] = {}
    for name in raw if names is None else names:
        try:
            result[str(name)] = read_quantity(raw[name])
        except QuantityError as exc:
            raise InvalidInput(f"{path}{field}.{name}: {exc}") from exc
    return result


def quantity_map(value: object, path: str) -> dict[str, Quantity]:
    """A ResourceList (``{"cpu": "100m", ...}``) as exact quantities; a bad one is named by its field."""
    return _quantities(json_object(value, path), path)


def _frozen(quantities: dict[str, Quantity]) -> Mapping[str, Quantity]:
    return FrozenMap(quantities) if quantities else EMPTY_QUANTITIES


def resources_from_quantities(raw: Mapping[str, object], path: str) -> Resources:
    """A node's ResourceList as integer millicores/bytes/counts."""
    try:
        quantities = {str(name): read_quantity(qty) for name, qty in raw.items()}
    except QuantityError as exc:
        raise InvalidInput(f"{path}: {exc}") from exc
    return allocatable_as_resources(quantities)


# ---- the resource fields of a pod spec (checked) ---------------------------------------------------------

def _container_resources(raw: object, path: str) -> ContainerResources:
    # Paths are spelled out only where a field is not a plain dict (the common case reads none).
    ctr = raw if type(raw) is dict else json_object(raw, path)
    resources = ctr.get("resources")
    if type(resources) is not dict:
        resources = json_object(resources, f"{path}.resources")
    raw_requests = resources.get("requests")
    if type(raw_requests) is not dict:
        raw_requests = json_object(raw_requests, f"{path}.resources.requests")
    raw_limits = resources.get("limits")
    if type(raw_limits) is not dict:
        raw_limits = json_object(raw_limits, f"{path}.resources.limits")
    defaulted = raw_requests
    if raw_limits:  # pkg/apis/core/v1/defaults.go (SetDefaults_Pod): a limit without a request sets the request
        defaulted = dict(raw_requests)
        for name, qty in raw_limits.items():
            defaulted.setdefault(name, qty)
    requests = _quantities(defaulted, path, ".resources.requests")
    limits: dict[str, Quantity] = {}
    if raw_limits:
        explicit = _quantities(raw_limits, path, ".resources.limits", [n for n in raw_limits if n in raw_requests])
        limits = {str(name): explicit[str(name)] if name in raw_requests else requests[str(name)]
                  for name in raw_limits}
    name = ctr.get("name")
    return ContainerResources(
        name=sys.intern(name) if type(name) is str else interned(json_str(name, f"{path}.name")),
        requests=_frozen(requests),
        limits=_frozen(limits),
        sidecar=ctr.get("restartPolicy") == "Always",
    )


def _containers(value: object, path: str) -> tuple[ContainerResources, ...]:
    if value is None:
        return ()
    return tuple([_container_resources(ctr, f"{path}[{i}]") for i, ctr in enumerate(json_list(value, path))])


def pod_resource_spec(spec: JsonObject) -> PodResourceSpec:
    """The resource fields of a pod spec, every field checked (nothing remembered)."""
    containers = _containers(spec.get("containers"), "spec.containers")
    init_containers = _containers(spec.get("initContainers"), "spec.initContainers")
    if spec.get("resources") is None and spec.get("overhead") is None:
        return PodResourceSpec(containers, init_containers)
    pod_level = json_object(spec.get("resources"), "spec.resources")
    return PodResourceSpec(
        containers=containers,
        init_containers=init_containers,
        pod_requests=_frozen(quantity_map(pod_level.get("requests"), "spec.resources.requests")),
        pod_limits=_frozen(quantity_map(pod_level.get("limits"), "spec.resources.limits")),
        overhead=_frozen(quantity_map(spec.get("overhead"), "spec.overhead")),
    )


# ---- quota facts (checked) -------------------------------------------------------------------------------

_AFFINITY_KINDS = ("podAffinity", "podAntiAffinity")
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _cross_namespace_term(term: JsonObject) -> bool:
    """pkg/quota/v1/evaluator/core/pods.go (``crossNamespacePodAffinityTerm``)."""
    return bool(term.get("namespaces")) or term.get("namespaceSelector") is not None


def uses_cross_namespace_pod_affinity(value: object) -> bool:
    """pkg/quota/v1/evaluator/core/pods.go (``usesCrossNamespacePodAffinity``): any required or preferred
    (anti-)affinity term."""
    if value is None:
        return False
    affinity = json_object(value, "spec.affinity")
    for kind in _AFFINITY_KINDS:
        path = f"spec.affinity.{kind}"
        section = json_object(affinity.get(kind), path)
        for i, term in enumerate(json_list(section.get(_REQUIRED), f"{path}.{_REQUIRED}")):
            if _cross_namespace_term(json_object(term, f"{path}.{_REQUIRED}[{i}]")):
                return True
        for i, weighted in enumerate(json_list(section.get(_PREFERRED), f"{path}.{_PREFERRED}")):
            wpath = f"{path}.{_PREFERRED}[{i}]"
            term = json_object(json_object(weighted, wpath).get("podAffinityTerm"), f"{wpath}.podAffinityTerm")
            if _cross_namespace_term(term):
                return True
    return False


@dataclass(frozen=True, slots=True)
class QuotaExtras:
    """The quota facts besides the resources (few distinct values: remembered per resource spec)."""

    qos_class: str = ""
    active_deadline_seconds: int | None = None
    cross_namespace_pod_affinity: bool = False
    deletion_timestamp_ns: int | None = None
    deletion_grace_period_seconds: int | None = None


NO_EXTRAS = QuotaExtras()


def quota_extras(meta: JsonObject, spec: JsonObject, status: JsonObject) -> QuotaExtras:
    """Every field checked, in this order."""
    extras = QuotaExtras(
        qos_class=interned(json_str(status.get("qosClass"), "status.qosClass")),
        active_deadline_seconds=json_int(spec.get("activeDeadlineSeconds"), "spec.activeDeadlineSeconds"),
        cross_namespace_pod_affinity=uses_cross_namespace_pod_affinity(spec.get("affinity")),
        deletion_timestamp_ns=parse_time_ns(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        deletion_grace_period_seconds=json_int(meta.get("deletionGracePeriodSeconds"),
                                               "metadata.deletionGracePeriodSeconds"),
    )
    return NO_EXTRAS if extras == NO_EXTRAS else extras


def quota_facts(resources: PodResourceSpec, extras: QuotaExtras) -> QuotaFacts:
    return QuotaFacts(resources, extras.qos_class, extras.active_deadline_seconds,
                      extras.cross_namespace_pod_affinity, extras.deletion_timestamp_ns,
                      extras.deletion_grace_period_seconds)


# ---- what a pod reads: checked once per request set, then remembered ---------------------------------

@dataclass(slots=True)
class PodResources:
    """A pod spec's resource fields, its requests in integer units, and its quota facts by extras."""

    spec: PodResourceSpec
    requests: Resources
    _facts: BoundedCache[QuotaExtras, QuotaFacts] | None = None

    @classmethod
    def read(cls, spec: JsonObject) -> PodResources:
        """The checked reading: every field through the generic readers."""
        resources = pod_resource_spec(spec)
        return cls(resources, requests_as_resources(pod_requests(resources)))

    def quota_facts(self, extras: QuotaExtras) -> QuotaFacts:
        if self._facts is None:
            self._facts = BoundedCache(16)
        found = self._facts.get(extras)
        if found is None:
            found = self._facts.remember(extras, quota_facts(self.spec, extras))
        return found


def read_pod_requests(spec: JsonObject) -> Resources:
    """The checked reading of a pod's requests alone (the resource fields are not kept)."""
    return requests_as_resources(pod_requests(pod_resource_spec(spec)))


# A container's name, requests items, limits items and whether it is a sidecar.
_ContainerItems = tuple[object, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], bool]
_ResourcesKey = tuple[tuple[_ContainerItems, ...], tuple[_ContainerItems, ...]]
_T = TypeVar("_T")
_resources_by_containers: BoundedCache[_ResourcesKey, PodResources] = BoundedCache(FAST_PATH_LIMIT)
# The cluster state's pods remember only their requests: objects kept by a cache that a large cluster
# cycles through are work for every full garbage collection.
_requests_by_containers: BoundedCache[_ResourcesKey, Resources] = BoundedCache(FAST_PATH_LIMIT)


def pod_resources(spec: JsonObject) -> PodResources:
    """``PodResources.read(spec)``, remembered by the containers' names, requests and limits."""
    return _remembered(_resources_by_containers, spec, PodResources.read)


def pod_requests_resources(spec: JsonObject) -> Resources:
    """``read_pod_requests(spec)``: summed in whole units when it can be (``_app_requests_in_whole_units``), else
    remembered by the containers' names, requests and limits."""
    containers = spec.get("containers")
    if (type(containers) is list and spec.get("initContainers") is None and spec.get("overhead") is None
            and spec.get("resources") is None):
        found = _app_requests_in_whole_units(containers)
        if found is not None:
            return found
    return _remembered(_requests_by_containers, spec, read_pod_requests)


def _remembered(cache: BoundedCache[_ResourcesKey, _T], spec: JsonObject, read: Callable[[JsonObject], _T]) -> _T:
    key = _resources_key(spec)
    if key is None:
        return read(spec)
    try:
        found = cache.get(key)
    except TypeError:  # an unhashable quantity: the checked path names it
        return read(spec)
    if found is None:
        found = read(spec)
        if _only_strings(key):  # 1, 1.0 and True are equal keys, but not the same quantity
            cache.remember(key, found)
    return found


# A quantity's text, read as whole millicores (cpu) or whole units (other resources): None when it is not a
# whole number of them, or not a quantity.
_whole_units_by_text: BoundedCache[tuple[str, bool], int | None] = BoundedCache(1 << 14)
_NOT_READ = object()


def _whole_units(text: str, milli: bool) -> int | None:
    found = _whole_units_by_text.get((text, milli), _NOT_READ)
    if found is _NOT_READ:
        try:
            numerator, denominator = read_quantity(text).value.as_integer_ratio()
        except QuantityError:
            found = None
        else:
            numerator *= 1000 if milli else 1
            found = numerator // denominator if numerator % denominator == 0 else None
        _whole_units_by_text.remember((text, milli), found)
    return found  # type: ignore[return-value]


def _app_requests_in_whole_units(containers: list[Any]) -> Resources | None:
    """``read_pod_requests`` of a spec with app containers only (no init containers, overhead or pod-level
    resources), when every quantity is a string and a whole number of the scheduler's units (millicores for cpu,
    units otherwise): then the integer sums equal the exact sums converted (``requests_as_resources``). None when
    the checked reading must look (anything else, or a value it would refuse)."""
    totals: dict[str, int] = {}
    for ctr in containers:
        if type(ctr) is not dict:
            return None
        name = ctr.get("name")
        if name is not None and type(name) is not str:
            return None
        resources = ctr.get("resources")
        if resources is None:
            continue
        if type(resources) is not dict:
            return None
        requests = resources.get("requests")
        limits = resources.get("limits")
        if not (requests is None or type(requests) is dict) or not (limits is None or type(limits) is dict):
            return None
        for quantities, defaults_only in ((requests, False), (limits, True)):
            if not quantities:
                continue
            for resource, text in quantities.items():
                if type(text) is not str or type(resource) is not str:
                    return None
                # A limit beside its request is not counted, but must still be a quantity (the checked reading
                # refuses it otherwise).
                units = _whole_units(text, resource == "cpu")
                if units is None:
                    return None
                # A limit without a request sets the request: pkg/apis/core/v1/defaults.go (SetDefaults_Pod).
                if defaults_only and requests and resource in requests:
                    continue
                totals[resource] = totals.get(resource, 0) + units
    return requests_from_units(totals)


def _resources_key(spec: JsonObject) -> _ResourcesKey | None:
    """All that decides the resource fields; None with overhead, pod-level resources or other than plain dicts."""
    if spec.get("overhead") is not None or spec.get("resources") is not None:
        return None
    containers = _containers_items(spec.get("containers"))
    init_containers = _containers_items(spec.get("initContainers"))
    if containers is None or init_containers is None:
        return None
    return containers, init_containers


def _containers_items(value: object) -> tuple[_ContainerItems, ...] | None:
    if value is None:
        return ()
    if type(value) is not list:
        return None
    result = []
    for ctr in value:
        if type(ctr) is not dict:
            return None
        resources = ctr.get("resources")
        if resources is None:
            requests = limits = None
        elif type(resources) is dict:
            requests, limits = resources.get("requests"), resources.get("limits")
        else:
            return None
        if not (requests is None or type(requests) is dict) or not (limits is None or type(limits) is dict):
            return None
        result.append((ctr.get("name"), tuple(requests.items()) if requests else (),
                       tuple(limits.items()) if limits else (), ctr.get("restartPolicy") == "Always"))
    return tuple(result)


def _only_strings(key: _ResourcesKey) -> bool:
    return all(type(name) is str and all(type(k) is str and type(v) is str for k, v in (*requests, *limits))
               for containers in key for name, requests, limits, _ in containers)


def without_pod_level_resources(pod: Pod) -> Pod:
    """The pod as an API server without PodLevelResources stores it (v1.33: the feature is alpha and off, and
    ``dropDisabledPodLevelResources`` removes ``spec.resources`` on create): its requests from the containers
    alone. A pod read without its resource fields (the cluster state's) is returned as it is."""
    spec = pod.quota.resources
    if not spec.pod_requests and not spec.pod_limits:
        return pod
    stripped = replace(spec, pod_requests=EMPTY_QUANTITIES, pod_limits=EMPTY_QUANTITIES)
    return replace_fields(pod, requests=requests_as_resources(pod_requests(stripped)),
                          quota=replace(pod.quota, resources=stripped))


# ---- the scheduler's non-zero requests (scoring) -------------------------------------------------------

def _requests_cpu_and_memory(ctr: object) -> bool:
    """Whether a container requests cpu and memory (a limit alone defaults the request), read without checks;
    False also for anything not plainly shaped, which then takes the checked reading."""
    if type(ctr) is not dict:
        return False
    resources = ctr.get("resources")
    if type(resources) is not dict:
        return False
    requests = resources.get("requests")
    limits = resources.get("limits")
    requests = requests if type(requests) is dict else {}
    limits = limits if type(limits) is dict else {}
    return ("cpu" in requests or "cpu" in limits) and ("memory" in requests or "memory" in limits)


def _non_zero_or_none(spec: JsonObject) -> tuple[int, int] | None:
    resources = pod_resource_spec(spec)
    requests = requests_as_resources(pod_requests(resources))
    found = pod_non_zero_requests(resources)
    return None if found == (requests.milli_cpu, requests.memory) else found


# Remembered as a 1-tuple: None is a value here.
_non_zero_by_containers: BoundedCache[_ResourcesKey, tuple[tuple[int, int] | None]] = BoundedCache(FAST_PATH_LIMIT)


def _non_zero_remembered(spec: JsonObject) -> tuple[tuple[int, int] | None]:
    return (_non_zero_or_none(spec),)


def pod_non_zero_requests_of(spec: JsonObject) -> tuple[int, int] | None:
    """``Pod.non_zero_requests``: None when every container requests both cpu and memory and the pod sets no
    pod-level requests (then they equal the requests), else ``pod_non_zero_requests`` of the checked spec."""
    if spec.get("resources") is None:
        containers = spec.get("containers")
        init_containers = spec.get("initContainers")
        if (type(containers) is list and (init_containers is None or type(init_containers) is list)
                and all(_requests_cpu_and_memory(c) for c in containers)
                and all(_requests_cpu_and_memory(c) for c in init_containers or ())):
            return None
    return _remembered(_non_zero_by_containers, spec, _non_zero_remembered)[0]


# ---- a running pod's requests with its status: in-place resize (issue #26) ---------------------------------

# The status fields component-helpers ``PodRequests`` reads with ``UseStatusResources``.
POD_RESIZE_PENDING = "PodResizePending"
REASON_INFEASIBLE = "Infeasible"


def resize_infeasible(conditions: object) -> bool:
    """``IsPodResizeInfeasible``: the first PodResizePending condition has reason Infeasible."""
    for cond in json_list(conditions, "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == POD_RESIZE_PENDING:
            return cond.get("reason") == REASON_INFEASIBLE
    return False


def _optional_quantities(value: object, path: str) -> Mapping[str, Quantity] | None:
    return None if value is None else _frozen(quantity_map(value, path))


def _container_status(raw: object, path: str) -> ContainerStatusResources:
    cs = json_object(raw, path)
    resources = cs.get("resources")
    actuated = None
    if resources is not None:
        actuated = _optional_quantities(json_object(resources, f"{path}.resources").get("requests"),
                                        f"{path}.resources.requests")
    return ContainerStatusResources(
        name=json_str(cs.get("name"), f"{path}.name"),
        allocated=_optional_quantities(cs.get("allocatedResources"), f"{path}.allocatedResources"),
        actuated_requests=actuated,
    )


def pod_resource_status(status: JsonObject) -> PodResourceStatus:
    """The status fields ``PodRequests`` reads, every field checked."""
    containers: list[ContainerStatusResources] = []
    for field in ("containerStatuses", "initContainerStatuses"):
        path = f"status.{field}"
        containers.extend(_container_status(raw, f"{path}[{i}]")
                          for i, raw in enumerate(json_list(status.get(field), path)))
    resources = status.get("resources")
    actuated = None
    if resources is not None:
        actuated = _optional_quantities(json_object(resources, "status.resources").get("requests"),
                                        "status.resources.requests")
    return PodResourceStatus(
        containers=tuple(containers),
        allocated=_optional_quantities(status.get("allocatedResources"), "status.allocatedResources"),
        has_resources=resources is not None,
        actuated_requests=actuated,
        resize_infeasible=resize_infeasible(status.get("conditions")),
    )


def says_more_than_spec(status: JsonObject, spec: JsonObject | None = None) -> bool:
    """Whether a pod's status holds anything ``PodRequests`` reads beyond the spec (most pending pods' does not).

    With ``spec``, container statuses that only repeat their container's requests say nothing more: a kubelet
    of v1.33+ reports every running container's ``resources``, and upstream's ``podRequests`` takes the larger
    of the spec's and the status's requests (k8s.io/component-helpers/resource/helpers.go), which is the spec's
    when they are equal (an Infeasible resize, which takes the status's alone, is still read in full). Reading
    every running pod's status in full doubled the cost of listing pods (bench/scale.py)."""
    if not isinstance(status, Mapping):
        return False
    if status.get("allocatedResources") is not None or status.get("resources") is not None:
        return True
    for field in ("containerStatuses", "initContainerStatuses"):
        statuses = status.get(field)
        if statuses is not None and (spec is None or _statuses_say_more(statuses, spec)):
            return True
    conditions = status.get("conditions")
    return conditions is not None and resize_infeasible(conditions)


def _statuses_say_more(statuses: object, spec: JsonObject) -> bool:
    """Whether a container status has allocated resources, or actual requests other than its container's."""
    if not isinstance(statuses, list):
        return True  # read in full: the full reading says what is wrong with it
    requests: dict[object, object] | None = None
    for cs in statuses:
        if not isinstance(cs, Mapping) or cs.get("allocatedResources") is not None:
            return True
        actual = cs.get("resources")
        if actual is None:
            continue
        if not isinstance(actual, Mapping):
            return True
        if requests is None:
            requests = _spec_requests_by_container(spec)
        if cs.get("name") not in requests or actual.get("requests") != requests[cs.get("name")]:
            return True
    return False


_NOT_COMPARABLE = object()


def _spec_requests_by_container(spec: JsonObject) -> dict[object, object]:
    """Each container's ``resources.requests`` as written; not comparable (so the status is read in full) where a
    limit names a resource its requests do not, which the requests then take from the limit (API defaulting)."""
    found: dict[object, object] = {}
    for field in ("initContainers", "containers"):
        containers = spec.get(field) if isinstance(spec, Mapping) else None
        for container in containers if isinstance(containers, list) else ():
            if not isinstance(container, Mapping):
                continue
            resources = container.get("resources")
            requests = resources.get("requests") if isinstance(resources, Mapping) else None
            limits = resources.get("limits") if isinstance(resources, Mapping) else None
            if limits and not (isinstance(limits, Mapping) and isinstance(requests, Mapping)
                               and all(name in requests for name in limits)):
                requests = _NOT_COMPARABLE
            found[container.get("name")] = requests
    return found


def read_pod_requests_with_status(spec: JsonObject, status: JsonObject) -> Resources:
    """The checked reading of a running pod's requests, status included."""
    return requests_as_resources(pod_requests(pod_resource_spec(spec), pod_resource_status(status)))


def pod_requests_with_status(spec: JsonObject, status: JsonObject, spec_requests: Resources) -> Resources:
    """``read_pod_requests_with_status``; summed in whole units when it can be (app containers only, no overhead,
    pod-level requests or Infeasible resize, every quantity a string of whole units): then the larger of integer
    sums equals the exact larger sum converted, since rounding up keeps the order (``spec_requests`` is the spec's
    own, already read)."""
    found = _status_requests_in_whole_units(spec, status, spec_requests)
    return found if found is not None else read_pod_requests_with_status(spec, status)


def _units_of(quantities: object) -> dict[str, int] | None:
    if type(quantities) is not dict:
        return None
    units: dict[str, int] = {}
    for resource, text in quantities.items():
        if type(text) is not str or type(resource) is not str:
            return None
        value = _whole_units(text, resource == "cpu")
        if value is None:
            return None
        units[resource] = value
    return units


def _spec_units(ctr: dict[str, Any]) -> dict[str, int] | None:
    """One container's requests in whole units, limits standing in for absent requests (SetDefaults_Pod)."""
    resources = ctr.get("resources")
    if resources is None:
        return {}
    if type(resources) is not dict:
        return None
    requests = _units_of(resources.get("requests") or {})
    limits = _units_of(resources.get("limits") or {})
    if requests is None or limits is None:
        return None
    return {**limits, **requests}


def _add_units(total: dict[str, int], units: Mapping[str, int]) -> None:
    for name, value in units.items():
        total[name] = total.get(name, 0) + value


def _resources_units(resources: Resources) -> dict[str, int]:
    units = dict(resources.scalar)
    for name, value in (("cpu", resources.milli_cpu), ("memory", resources.memory),
                        ("ephemeral-storage", resources.ephemeral_storage)):
        if value:
            units[name] = value
    return units


def _status_units(cs: object) -> tuple[object, dict[str, int] | None, dict[str, int] | None] | None:
    """A container status's name, allocated and actuated requests in whole units (None where absent); None when
    the checked reading must look."""
    if type(cs) is not dict:
        return None
    name, allocated, resources = cs.get("name"), cs.get("allocatedResources"), cs.get("resources")
    if not (name is None or type(name) is str) or not (resources is None or type(resources) is dict):
        return None
    allocated_units = None if allocated is None else _units_of(allocated)
    requests = None if resources is None else resources.get("requests")
    actuated_units = None if requests is None else _units_of(requests)
    if (allocated is not None and allocated_units is None) or (requests is not None and actuated_units is None):
        return None
    if resources is not None and resources.get("limits") is not None and _units_of(resources["limits"]) is None:
        return None
    return name, allocated_units, actuated_units


def _status_requests_in_whole_units(spec: JsonObject, status: JsonObject, spec_requests: Resources,
                                    ) -> Resources | None:
    containers = spec.get("containers")
    statuses = status.get("containerStatuses") if type(status) is dict else None
    if (type(status) is not dict or type(containers) is not list or spec.get("initContainers")
            or spec.get("overhead") is not None or spec.get("resources") is not None
            or status.get("initContainerStatuses") is not None or not (statuses is None or type(statuses) is list)
            or resize_infeasible(status.get("conditions"))):
        return None
    by_name: dict[object, tuple[dict[str, int] | None, dict[str, int] | None]] = {}
    for cs in reversed(statuses or []):
        read = _status_units(cs)
        if read is None:
            return None
        by_name[read[0]] = read[1:]  # the first of a name wins (findContainerStatus)
    pod_resources = status.get("resources")
    if pod_resources is not None and type(pod_resources) is not dict:
        return None
    allocated_pod = None if status.get("allocatedResources") is None else _units_of(status["allocatedResources"])
    pod_requests = None if pod_resources is None else pod_resources.get("requests")
    actuated_pod = None if pod_requests is None else _units_of(pod_requests)
    if ((status.get("allocatedResources") is not None and allocated_pod is None)
            or (pod_requests is not None and actuated_pod is None)
            or (pod_resources is not None and pod_resources.get("limits") is not None
                and _units_of(pod_resources["limits"]) is None)):
        return None
    candidates: list[Mapping[str, int]] = [_resources_units(spec_requests)]
    if allocated_pod is not None and actuated_pod is not None:
        # The pod-level status maps already hold the aggregate over every container.
        candidates += [allocated_pod, actuated_pod]
    else:
        allocated_total: dict[str, int] = {}
        actuated_total: dict[str, int] = {}
        for ctr in containers:
            if type(ctr) is not dict:
                return None
            own = _spec_units(ctr)
            if own is None:
                return None
            allocated, actuated = by_name.get(ctr.get("name"), (None, None))
            _add_units(allocated_total, own if allocated is None else allocated)  # containerAllocatedRequests
            # containerActuatedRequests: the actuated requests, else the allocated ones, else the spec's
            _add_units(actuated_total, actuated if actuated is not None else allocated if allocated is not None
                       else own)
        candidates += [allocated_total, actuated_total]
    largest: dict[str, int] = {}
    for units in candidates:
        for name, value in units.items():
            if name not in largest or value > largest[name]:
                largest[name] = value
    return requests_from_units(largest)


def pod_non_zero_requests_with_status(spec: JsonObject, status: JsonObject, requests: Resources,
                                      ) -> tuple[int, int] | None:
    """``Pod.non_zero_requests`` of a running pod whose status says more than its spec (in-place resize): the
    scheduler's non-zero requests read with its status, None when they equal ``requests`` (its requests)."""
    found = pod_non_zero_requests(pod_resource_spec(spec), pod_resource_status(status))
    return None if found == (requests.milli_cpu, requests.memory) else found
