"""Read Kubernetes API objects (plain dicts from JSON/YAML) into the slim domain model.

Wrong types raise ``InvalidInput`` naming the field; absent optional fields take the API defaults.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Hashable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from webhook.cluster.model import (
    EMPTY_LABELS,
    EMPTY_SCALARS,
    NO_RESOURCES,
    PREEMPT_LOWER_PRIORITY,
    ClusterObject,
    FrozenMap,
    HostPort,
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    Node,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    PriorityClass,
    ResourceQuota,
    Resources,
    ScopedResourceSelectorRequirement,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from webhook.cluster.quantity import Quantity, parse_quantity, quantity_milli_value, quantity_value
from webhook.errors import InvalidInput, QuantityError

JsonObject = Mapping[str, Any]

_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
# Pod-level resources (spec.resources) may set only these (PodLevelResources).
_POD_LEVEL_RESOURCES = ("cpu", "memory")


def _mapping(value: object, path: str) -> JsonObject:
    if type(value) is dict:  # the common case, without the slower ABC isinstance check
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{path}: expected an object, got {type(value).__name__}")
    return value


def _list(value: object, path: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(f"{path}: expected a list, got {type(value).__name__}")
    return value


def _str(value: object, path: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidInput(f"{path}: expected a string, got {type(value).__name__}")
    return value


def _int(value: object, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise InvalidInput(f"{path}: expected an integer, got {type(value).__name__}")
    return value


def _bool(value: object, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidInput(f"{path}: expected a boolean, got {type(value).__name__}")
    return value


# A large cluster repeats the same label maps, requests and tolerations across thousands of pods:
# equal immutable values are shared, and repeated strings interned (see bench/cluster_state.py).
_SHARED_LIMIT = 1 << 16
_shared_values: dict[Hashable, Any] = {}
_H = TypeVar("_H", bound=Hashable)


def shared(value: _H) -> _H:
    """One canonical instance per equal immutable value (a bounded cache, emptied when full)."""
    existing = _shared_values.get(value)
    if existing is not None:
        return existing
    if len(_shared_values) >= _SHARED_LIMIT:
        _shared_values.clear()
    _shared_values[value] = value
    return value


def _interned(value: str) -> str:
    return sys.intern(value) if value else value


# The fast paths remember results by the items of the raw API dicts (fresh strings, not interned: kept fewer
# than ``shared`` values). Only inputs the checked path accepted are stored, so a hit equals a valid input.
_FAST_PATH_LIMIT = 4096
_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class _BoundedCache(dict[_K, _V]):
    """A dict emptied when full (like ``shared``)."""

    __slots__ = ()

    def remember(self, key: _K, value: _V) -> _V:
        if len(self) >= _FAST_PATH_LIMIT:
            self.clear()
        self[key] = value
        return value


_labels_by_items: _BoundedCache[tuple[tuple[str, str], ...], Mapping[str, str]] = _BoundedCache()


def _labels(value: object, path: str) -> Mapping[str, str]:
    if value is None:
        return EMPTY_LABELS
    if type(value) is not dict or not value:
        return _checked_labels(value, path)
    items = tuple(value.items())
    try:
        found = _labels_by_items.get(items)
    except TypeError:  # an unhashable value: the checked path names it
        return _checked_labels(value, path)
    if found is None:
        found = _labels_by_items.remember(items, _checked_labels(value, path))
    return found


def _checked_labels(value: object, path: str) -> Mapping[str, str]:
    raw = _mapping(value, path)
    if not raw:
        return EMPTY_LABELS
    labels: dict[str, str] = {}
    for key, val in raw.items():
        if not isinstance(key, str):
            raise InvalidInput(f"{path}: keys must be strings")
        if not isinstance(val, str):
            val = _str(val, f"{path}.{key}")
        labels[sys.intern(key)] = sys.intern(val)
    return shared(FrozenMap(labels))


def parse_time_ns(value: object, path: str) -> int | None:
    """RFC 3339 time (with optional fractional seconds) to integer nanoseconds since the epoch."""
    text = _str(value, path)
    if not text:
        return None
    try:
        main, _, rest = text.partition(".")
        fraction = ""
        zone = "Z"
        if rest:
            digits = len(rest) - len(rest.lstrip("0123456789"))
            fraction, zone = rest[:digits], rest[digits:] or "Z"
        elif text.endswith("Z"):
            main, zone = text[:-1], "Z"
        elif len(text) > 19:
            main, zone = text[:19], text[19:]
        zone = "+00:00" if zone in ("Z", "z") else zone
        seconds = int(datetime.fromisoformat(main + zone).timestamp())
    except ValueError as exc:
        raise InvalidInput(f"{path}: invalid RFC 3339 time {text!r}") from exc
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    return seconds * 1_000_000_000 + nanos


def _json_quantity(value: object) -> object:
    """Quantity.UnmarshalJSON trims surrounding whitespace before parsing (upstream TestJSONWhitespace)."""
    return value.strip() if isinstance(value, str) else value


def quantity_map(value: object, path: str) -> dict[str, Quantity]:
    raw = _mapping(value, path)
    result: dict[str, Quantity] = {}
    for name, qty in raw.items():
        try:
            result[str(name)] = parse_quantity(_json_quantity(qty))
        except QuantityError as exc:
            raise InvalidInput(f"{path}.{name}: {exc}") from exc
    return result


def resources_from_quantities(raw: Mapping[str, object], path: str) -> Resources:
    """A ResourceList (``{"cpu": "100m", ...}``) as integer millicores/bytes/counts."""
    if not raw:
        return NO_RESOURCES
    try:
        raw = {k: _json_quantity(v) for k, v in raw.items()}
        scalar = {str(k): quantity_value(v) for k, v in raw.items() if k not in _STANDARD_RESOURCES}
        return Resources(
            milli_cpu=quantity_milli_value(raw["cpu"]) if "cpu" in raw else 0,
            memory=quantity_value(raw["memory"]) if "memory" in raw else 0,
            ephemeral_storage=quantity_value(raw["ephemeral-storage"]) if "ephemeral-storage" in raw else 0,
            pods=quantity_value(raw["pods"]) if "pods" in raw else 0,
            scalar=FrozenMap(scalar) if scalar else EMPTY_SCALARS,
        )
    except QuantityError as exc:
        raise InvalidInput(f"{path}: {exc}") from exc


def _add(a: dict[str, int], b: Mapping[str, int]) -> None:
    for name, val in b.items():
        a[name] = a.get(name, 0) + val


def _max_into(a: dict[str, int], b: Mapping[str, int]) -> None:
    for name, val in b.items():
        if val > a.get(name, 0):
            a[name] = val


def _to_units(raw: Mapping[str, object], path: str) -> dict[str, int]:
    result: dict[str, int] = {}
    for name, qty in raw.items():
        try:
            qty = _json_quantity(qty)
            if isinstance(qty, str):
                result[str(name)] = _milli_value_of(qty) if name == "cpu" else _value_of(qty)
            else:
                result[str(name)] = quantity_milli_value(qty) if name == "cpu" else quantity_value(qty)
        except QuantityError as exc:
            raise InvalidInput(f"{path}.{name}: {exc}") from exc
    return result


# The same few quantity strings ("100m", "256Mi") recur on every pod; exact parsing is not cheap.
@functools.lru_cache(maxsize=4096)
def _milli_value_of(text: str) -> int:
    return quantity_milli_value(text)


@functools.lru_cache(maxsize=4096)
def _value_of(text: str) -> int:
    return quantity_value(text)


def container_requests(container: JsonObject, path: str) -> dict[str, int]:
    """A container's requests in integer units; limits stand in for absent requests (API defaulting)."""
    resources = _mapping(container.get("resources"), f"{path}.resources")
    requests = dict(_mapping(resources.get("requests"), f"{path}.resources.requests"))
    for name, qty in _mapping(resources.get("limits"), f"{path}.resources.limits").items():
        requests.setdefault(name, qty)
    return _to_units(requests, f"{path}.resources.requests")


def pod_request_units(spec: JsonObject) -> dict[str, int]:
    """Effective pod requests like upstream ``resource.PodRequests`` (cpu in millicores).

    max(sum of containers + sidecars, peak during init) + overhead; pod-level resources replace the
    aggregate for cpu and memory.
    """
    total: dict[str, int] = {}
    for i, ctr in enumerate(_list(spec.get("containers"), "spec.containers")):
        path = f"spec.containers[{i}]"
        _add(total, container_requests(_mapping(ctr, path), path))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, ctr in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        path = f"spec.initContainers[{i}]"
        ctr = _mapping(ctr, path)
        requests = container_requests(ctr, path)
        if ctr.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            _add(total, requests)
            _max_into(init_peak, sidecars)
        else:
            peak = dict(sidecars)
            _add(peak, requests)
            _max_into(init_peak, peak)
    _max_into(total, init_peak)
    pod_level = _mapping(_mapping(spec.get("resources"), "spec.resources").get("requests"),
                         "spec.resources.requests")
    for name, val in _to_units(pod_level, "spec.resources.requests").items():
        if name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
            total[name] = val
    _add(total, _to_units(_mapping(spec.get("overhead"), "spec.overhead"), "spec.overhead"))
    return total


# The same few request sets recur on every pod: their Resources by the units' items (bounded like ``shared``).
_resources_by_units: dict[tuple[tuple[str, int], ...], Resources] = {}


def resources_from_units(units: Mapping[str, int]) -> Resources:
    key = tuple(units.items())
    found = _resources_by_units.get(key)
    if found is not None:
        return found
    if not any(units.values()):
        return NO_RESOURCES
    scalar = {k: v for k, v in units.items() if k not in _STANDARD_RESOURCES and v}
    resources = shared(Resources(
        milli_cpu=units.get("cpu", 0),
        memory=units.get("memory", 0),
        ephemeral_storage=units.get("ephemeral-storage", 0),
        scalar=FrozenMap(scalar) if scalar else EMPTY_SCALARS,
    ))
    if len(_resources_by_units) >= _SHARED_LIMIT:
        _resources_by_units.clear()
    _resources_by_units[key] = resources
    return resources


# A container's requests items, limits items and whether it is a sidecar (an init container that keeps running).
_ContainerItems = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], bool]
_RequestsKey = tuple[tuple[_ContainerItems, ...], tuple[_ContainerItems, ...]]
_requests_by_containers: _BoundedCache[_RequestsKey, Resources] = _BoundedCache()


def _pod_requests(spec: JsonObject) -> Resources:
    """``resources_from_units(pod_request_units(spec))``, remembered by the containers' requests and limits."""
    key = _requests_key(spec)
    if key is None:
        return resources_from_units(pod_request_units(spec))
    try:
        found = _requests_by_containers.get(key)
    except TypeError:  # an unhashable quantity: the checked path names it
        return resources_from_units(pod_request_units(spec))
    if found is None:
        found = resources_from_units(pod_request_units(spec))
        if _only_strings(key):  # 1, 1.0 and True are equal keys, but not the same quantity
            _requests_by_containers.remember(key, found)
    return found


def _requests_key(spec: JsonObject) -> _RequestsKey | None:
    """All that decides the pod's requests; None with overhead, pod-level resources or other than plain dicts."""
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
        result.append((tuple(requests.items()) if requests else (), tuple(limits.items()) if limits else (),
                       ctr.get("restartPolicy") == "Always"))
    return tuple(result)


def _only_strings(key: _RequestsKey) -> bool:
    return all(type(name) is str and type(qty) is str
               for containers in key for requests, limits, _ in containers for name, qty in (*requests, *limits))


def label_selector(value: object, path: str) -> LabelSelector | None:
    if value is None:
        return None
    raw = _mapping(value, path)
    expressions = tuple(
        _requirement(_mapping(expr, f"{path}.matchExpressions[{i}]"), f"{path}.matchExpressions[{i}]")
        for i, expr in enumerate(_list(raw.get("matchExpressions"), f"{path}.matchExpressions"))
    )
    return LabelSelector(_labels(raw.get("matchLabels"), f"{path}.matchLabels"), expressions)


def _requirement(raw: JsonObject, path: str) -> LabelSelectorRequirement:
    values = tuple(_str(v, f"{path}.values") for v in _list(raw.get("values"), f"{path}.values"))
    return LabelSelectorRequirement(_str(raw.get("key"), f"{path}.key"),
                                    _str(raw.get("operator"), f"{path}.operator"), values)


def _node_selector_terms(value: object, path: str) -> tuple[NodeSelectorTerm, ...] | None:
    if value is None:
        return None
    raw = _mapping(value, path)
    terms = []
    for i, term in enumerate(_list(raw.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")):
        tpath = f"{path}.nodeSelectorTerms[{i}]"
        term = _mapping(term, tpath)
        terms.append(NodeSelectorTerm(
            tuple(_requirement(_mapping(e, tpath), tpath)
                  for e in _list(term.get("matchExpressions"), f"{tpath}.matchExpressions")),
            tuple(_requirement(_mapping(e, tpath), tpath)
                  for e in _list(term.get("matchFields"), f"{tpath}.matchFields")),
        ))
    return tuple(terms)


def _affinity_terms(value: object, path: str) -> tuple[PodAffinityTerm, ...]:
    if value is None:
        return ()
    terms = []
    for i, term in enumerate(_list(value, path)):
        tpath = f"{path}[{i}]"
        term = _mapping(term, tpath)
        namespace_selector = term.get("namespaceSelector")
        terms.append(PodAffinityTerm(
            label_selector=label_selector(term.get("labelSelector"), f"{tpath}.labelSelector"),
            topology_key=_str(term.get("topologyKey"), f"{tpath}.topologyKey"),
            namespaces=tuple(_str(n, f"{tpath}.namespaces") for n in _list(term.get("namespaces"), tpath)),
            namespace_selector=label_selector(namespace_selector, f"{tpath}.namespaceSelector"),
        ))
    return tuple(terms)


def _spread_constraints(value: object, path: str) -> tuple[TopologySpreadConstraint, ...]:
    if value is None:
        return ()
    constraints = []
    for i, raw in enumerate(_list(value, path)):
        cpath = f"{path}[{i}]"
        raw = _mapping(raw, cpath)
        constraints.append(TopologySpreadConstraint(
            max_skew=_int(raw.get("maxSkew"), f"{cpath}.maxSkew") or 1,
            topology_key=_str(raw.get("topologyKey"), f"{cpath}.topologyKey"),
            when_unsatisfiable=_str(raw.get("whenUnsatisfiable"), f"{cpath}.whenUnsatisfiable", "DoNotSchedule"),
            label_selector=label_selector(raw.get("labelSelector"), f"{cpath}.labelSelector"),
            min_domains=_int(raw.get("minDomains"), f"{cpath}.minDomains"),
            node_affinity_policy=_str(raw.get("nodeAffinityPolicy"), f"{cpath}.nodeAffinityPolicy", "Honor"),
            node_taints_policy=_str(raw.get("nodeTaintsPolicy"), f"{cpath}.nodeTaintsPolicy", "Ignore"),
            match_label_keys=tuple(_str(k, cpath) for k in _list(raw.get("matchLabelKeys"), cpath)),
        ))
    return tuple(constraints)


_tolerations_by_items: _BoundedCache[tuple[tuple[tuple[str, object], ...], ...], tuple[Toleration, ...]] = (
    _BoundedCache())


def _tolerations(value: object, path: str) -> tuple[Toleration, ...]:
    if value is None:
        return ()
    if type(value) is not list:
        return _checked_tolerations(value, path)
    # Most pods carry the same default tolerations (not-ready and unreachable, NoExecute for 300 s).
    items = tuple([tuple(raw.items()) for raw in value if type(raw) is dict])
    if len(items) != len(value):
        return _checked_tolerations(value, path)
    try:
        found = _tolerations_by_items.get(items)
    except TypeError:  # an unhashable value: the checked path names it if it matters
        return _checked_tolerations(value, path)
    if found is None:
        found = _tolerations_by_items.remember(items, _checked_tolerations(value, path))
    return found


def _checked_tolerations(value: object, path: str) -> tuple[Toleration, ...]:
    result = []
    for i, raw in enumerate(_list(value, path)):
        tpath = f"{path}[{i}]"
        raw = _mapping(raw, tpath)
        result.append(Toleration(
            key=_str(raw.get("key"), f"{tpath}.key"),
            operator=_str(raw.get("operator"), f"{tpath}.operator", "Equal") or "Equal",
            value=_str(raw.get("value"), f"{tpath}.value"),
            effect=_str(raw.get("effect"), f"{tpath}.effect"),
        ))
    return shared(tuple(result)) if result else ()


def _holds_host_ports(ctr: object, init: bool) -> bool:
    """Upstream ``GetHostPorts``: app containers, and init containers only when they are sidecars
    (``restartPolicy: Always``); a regular init container has exited before the pod runs."""
    if type(ctr) is not dict and not isinstance(ctr, Mapping):
        return False
    return not init or ctr.get("restartPolicy") == "Always"


def _host_ports(spec: JsonObject) -> tuple[HostPort, ...]:
    ports = []
    for init, containers in ((True, _list(spec.get("initContainers"), "spec.initContainers")),
                             (False, _list(spec.get("containers"), "spec.containers"))):
        for ctr in containers:
            if not _holds_host_ports(ctr, init):
                continue
            container_ports = ctr.get("ports")
            if container_ports is None:
                continue
            for i, port in enumerate(_list(container_ports, "ports")):
                if type(port) is not dict:
                    port = _mapping(port, f"ports[{i}]")
                host_port = port.get("hostPort")
                if host_port is None:
                    continue
                host_port = _int(host_port, f"ports[{i}].hostPort")
                if host_port:
                    ports.append(HostPort(_str(port.get("hostIP"), "hostIP") or "0.0.0.0",
                                          _str(port.get("protocol"), "protocol") or "TCP", host_port))
    return tuple(ports)


def _unmodeled_features(spec: JsonObject) -> tuple[str, ...]:
    gaps = []
    for volume in _list(spec.get("volumes"), "spec.volumes"):
        if (type(volume) is dict or isinstance(volume, Mapping)) and "persistentVolumeClaim" in volume:
            gaps.append("persistentVolumeClaim volumes (VolumeBinding/VolumeZone)")
            break
    if spec.get("resourceClaims"):
        gaps.append("resourceClaims (DynamicResources)")
    if spec.get("schedulingGates"):
        gaps.append("schedulingGates (the pod is not scheduled until they are removed)")
    scheduler = spec.get("schedulerName")
    if scheduler not in (None, "", "default-scheduler"):
        gaps.append(f"schedulerName {scheduler} (not the default scheduler)")
    return tuple(gaps)


def _disruption_target_by_preemption(conditions: object) -> bool:
    for cond in _list(conditions, "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "DisruptionTarget":
            return cond.get("status") == "True" and cond.get("reason") == "PreemptionByScheduler"
    return False


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_NODE_AFFINITY_REQUIRED_PATH = f"spec.affinity.nodeAffinity.{_REQUIRED}"
_POD_AFFINITY_REQUIRED_PATH = f"spec.affinity.podAffinity.{_REQUIRED}"
_POD_ANTI_AFFINITY_REQUIRED_PATH = f"spec.affinity.podAntiAffinity.{_REQUIRED}"
_NO_AFFINITY: tuple[object, object, object] = (None, None, None)


def _required_affinity(value: object) -> tuple[object, object, object]:
    """The raw required node affinity, pod affinity and pod anti-affinity (None when absent)."""
    if value is None:
        return _NO_AFFINITY
    affinity = _mapping(value, "spec.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    pod_affinity = _mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_affinity = _mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    return node_affinity.get(_REQUIRED), pod_affinity.get(_REQUIRED), anti_affinity.get(_REQUIRED)


def _interned_str(value: object, path: str) -> str:
    if type(value) is str:
        return sys.intern(value) if value else value
    return "" if value is None else _interned(_str(value, path))


def pod_from_dict(raw: JsonObject) -> Pod:
    # Fields are checked in this order, so the first wrong one is the one named. Plain JSON values pass the
    # inline ``type(...) is`` checks; anything else (absent, Mapping subclasses, wrong types) takes the
    # generic helpers, which apply the defaults and raise the errors.
    meta = raw.get("metadata")
    if type(meta) is not dict:
        meta = _mapping(meta, "metadata")
    spec = raw.get("spec")
    if type(spec) is not dict:
        spec = _mapping(spec, "spec")
    status = raw.get("status")
    if type(status) is not dict:
        status = _mapping(status, "status")
    node_affinity, pod_affinity, pod_anti_affinity = _required_affinity(spec.get("affinity"))

    name = meta.get("name")
    if type(name) is not str or not name:
        name = _str(name, "metadata.name") or _str(meta.get("generateName"), "metadata.generateName")
    namespace = meta.get("namespace")
    if type(namespace) is str and namespace:
        namespace = sys.intern(namespace)
    else:
        namespace = _interned(_str(namespace, "metadata.namespace") or "default")
    uid = meta.get("uid")
    if type(uid) is not str:
        uid = "" if uid is None else _str(uid, "metadata.uid")
    labels = _labels(meta.get("labels"), "metadata.labels")
    node_name = _interned_str(spec.get("nodeName"), "spec.nodeName")
    priority = spec.get("priority")
    if priority is not None and type(priority) is not int:
        priority = _int(priority, "spec.priority")
    priority_class_name = _interned_str(spec.get("priorityClassName"), "spec.priorityClassName")
    preemption_policy = spec.get("preemptionPolicy")
    if preemption_policy is not None and type(preemption_policy) is not str:
        preemption_policy = _str(preemption_policy, "spec.preemptionPolicy")
    phase = _interned_str(status.get("phase"), "status.phase")
    start_time = status.get("startTime")
    start_time_ns = None if start_time is None else parse_time_ns(start_time, "status.startTime")
    deleting = bool(meta.get("deletionTimestamp"))
    conditions = status.get("conditions")
    preempted_by_scheduler = conditions is not None and _disruption_target_by_preemption(conditions)
    nominated_node_name = _interned_str(status.get("nominatedNodeName"), "status.nominatedNodeName")
    requests = _pod_requests(spec)
    host_ports = _host_ports(spec)
    node_selector = _labels(spec.get("nodeSelector"), "spec.nodeSelector")
    required_node_affinity = _node_selector_terms(node_affinity, _NODE_AFFINITY_REQUIRED_PATH)
    pod_affinity_terms = _affinity_terms(pod_affinity, _POD_AFFINITY_REQUIRED_PATH)
    pod_anti_affinity_terms = _affinity_terms(pod_anti_affinity, _POD_ANTI_AFFINITY_REQUIRED_PATH)
    topology_spread = _spread_constraints(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")
    tolerations = _tolerations(spec.get("tolerations"), "spec.tolerations")
    grace_period = spec.get("terminationGracePeriodSeconds")
    if grace_period is not None and type(grace_period) is not int:
        grace_period = _int(grace_period, "spec.terminationGracePeriodSeconds")
    scheduler_name = spec.get("schedulerName")
    if type(scheduler_name) is not str or not scheduler_name:
        scheduler_name = _str(scheduler_name, "spec.schedulerName", "default-scheduler") or "default-scheduler"
    return Pod(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        node_name=node_name,
        priority=priority,
        priority_class_name=priority_class_name,
        preemption_policy=preemption_policy,
        phase=phase,
        start_time_ns=start_time_ns,
        deleting=deleting,
        preempted_by_scheduler=preempted_by_scheduler,
        nominated_node_name=nominated_node_name,
        requests=requests,
        host_ports=host_ports,
        node_selector=node_selector,
        required_node_affinity=required_node_affinity,
        pod_affinity=pod_affinity_terms,
        pod_anti_affinity=pod_anti_affinity_terms,
        topology_spread=topology_spread,
        tolerations=tolerations,
        termination_grace_period_seconds=grace_period,
        scheduler_name=scheduler_name,
        unmodeled=_unmodeled_features(spec),
    )


def node_from_dict(raw: JsonObject) -> Node:
    meta = _mapping(raw.get("metadata"), "metadata")
    spec = _mapping(raw.get("spec"), "spec")
    status = _mapping(raw.get("status"), "status")
    allocatable = _mapping(status.get("allocatable"), "status.allocatable") or _mapping(
        status.get("capacity"), "status.capacity")
    taints = []
    for i, taint in enumerate(_list(spec.get("taints"), "spec.taints")):
        taint = _mapping(taint, f"spec.taints[{i}]")
        taints.append(Taint(_str(taint.get("key"), f"spec.taints[{i}].key"),
                            _str(taint.get("value"), f"spec.taints[{i}].value"),
                            _str(taint.get("effect"), f"spec.taints[{i}].effect")))
    return Node(
        name=_str(meta.get("name"), "metadata.name"),
        labels=_labels(meta.get("labels"), "metadata.labels"),
        taints=tuple(taints),
        unschedulable=_bool(spec.get("unschedulable"), "spec.unschedulable"),
        allocatable=resources_from_quantities(allocatable, "status.allocatable"),
    )


def priority_class_from_dict(raw: JsonObject) -> PriorityClass:
    meta = _mapping(raw.get("metadata"), "metadata")
    return PriorityClass(
        name=_str(meta.get("name"), "metadata.name"),
        value=_int(raw.get("value"), "value") or 0,
        global_default=_bool(raw.get("globalDefault"), "globalDefault"),
        preemption_policy=_str(raw.get("preemptionPolicy"), "preemptionPolicy") or PREEMPT_LOWER_PRIORITY,
        description=_str(raw.get("description"), "description"),
    )


def namespace_from_dict(raw: JsonObject) -> Namespace:
    meta = _mapping(raw.get("metadata"), "metadata")
    return Namespace(_str(meta.get("name"), "metadata.name"), _labels(meta.get("labels"), "metadata.labels"))


def pdb_from_dict(raw: JsonObject) -> PodDisruptionBudget:
    meta = _mapping(raw.get("metadata"), "metadata")
    spec = _mapping(raw.get("spec"), "spec")
    status = _mapping(raw.get("status"), "status")
    return PodDisruptionBudget(
        name=_str(meta.get("name"), "metadata.name"),
        namespace=_str(meta.get("namespace"), "metadata.namespace") or "default",
        selector=label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=_int(status.get("disruptionsAllowed"), "status.disruptionsAllowed") or 0,
        disrupted_pods=frozenset(_mapping(status.get("disruptedPods"), "status.disruptedPods")),
    )


def resource_quota_from_dict(raw: JsonObject) -> ResourceQuota:
    meta = _mapping(raw.get("metadata"), "metadata")
    spec = _mapping(raw.get("spec"), "spec")
    status = _mapping(raw.get("status"), "status")
    selector = _mapping(spec.get("scopeSelector"), "spec.scopeSelector")
    expressions = []
    for i, expr in enumerate(_list(selector.get("matchExpressions"), "spec.scopeSelector.matchExpressions")):
        epath = f"spec.scopeSelector.matchExpressions[{i}]"
        expr = _mapping(expr, epath)
        expressions.append(ScopedResourceSelectorRequirement(
            _str(expr.get("scopeName"), f"{epath}.scopeName"),
            _str(expr.get("operator"), f"{epath}.operator"),
            tuple(_str(v, f"{epath}.values") for v in _list(expr.get("values"), f"{epath}.values")),
        ))
    hard = status.get("hard") if status.get("hard") is not None else spec.get("hard")
    return ResourceQuota(
        name=_str(meta.get("name"), "metadata.name"),
        namespace=_str(meta.get("namespace"), "metadata.namespace") or "default",
        hard=quantity_map(hard, "status.hard"),
        used=quantity_map(status.get("used"), "status.used"),
        scopes=tuple(_str(s, "spec.scopes") for s in _list(spec.get("scopes"), "spec.scopes")),
        scope_selector=tuple(expressions),
    )


_CONVERTERS: dict[str, Callable[[JsonObject], ClusterObject]] = {
    "PriorityClass": priority_class_from_dict,
    "Namespace": namespace_from_dict,
    "Node": node_from_dict,
    "Pod": pod_from_dict,
    "PodDisruptionBudget": pdb_from_dict,
    "ResourceQuota": resource_quota_from_dict,
}

SUPPORTED_KINDS = tuple(_CONVERTERS)


def object_from_dict(raw: JsonObject) -> ClusterObject | None:
    """The model object for a supported kind, or None for any other kind."""
    converter = _CONVERTERS.get(str(raw.get("kind", "")))
    if converter is None:
        return None
    return converter(raw)
