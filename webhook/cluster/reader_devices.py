"""Read the DRA objects (DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate of resource.k8s.io/v1) and
a pod's claims from API dicts into ``webhook.cluster.devices``. Wrong types raise ``InvalidInput`` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.cluster.devices import (
    DEVICE_CLASS_RESOURCE_PREFIX,
    EXACT_COUNT,
    AllocatedDevice,
    Allocation,
    AttributeValue,
    CapacityPolicy,
    ClaimConsumer,
    ContainerDeviceRequests,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceTaint,
    DeviceToleration,
    ExactDeviceRequest,
    PodClaims,
    PodResourceClaim,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from webhook.cluster.jsonfields import JsonObject, json_bool, json_int, json_list, json_object, json_str, parse_time_ns
from webhook.cluster.model import FrozenMap
from webhook.cluster.quantity import Quantity, int_value, parse_quantity
from webhook.cluster.reader_constraints import distinct, node_selector_terms, read_labels
from webhook.cluster.reader_volumes import _controller
from webhook.errors import InvalidInput, QuantityError


def is_dra_extended_resource_name(name: str) -> bool:
    """``schedutil.IsDRAExtendedResourceName``: an extended resource (``v1helper.IsExtendedResourceName``: a prefixed
    name outside ``kubernetes.io/``), or a DeviceClass's own ``deviceclass.resource.kubernetes.io/<class>``."""
    if name.startswith(DEVICE_CLASS_RESOURCE_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _quantity(value: object, path: str) -> Quantity:
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise InvalidInput(f"{path}: {exc}") from exc


def _optional_quantity(value: object, path: str) -> Quantity | None:
    return None if value is None else _quantity(value, path)


def _quantities(value: object, path: str) -> Mapping[str, Quantity]:
    return FrozenMap({json_str(k, path): _quantity(v, f"{path}.{k}") for k, v in json_object(value, path).items()})


def _selectors(value: object, path: str) -> tuple[str, ...]:
    expressions = []
    for i, selector in enumerate(json_list(value, path)):
        selector = json_object(selector, f"{path}[{i}]")
        cel = json_object(selector.get("cel"), f"{path}[{i}].cel")
        expressions.append(json_str(cel.get("expression"), f"{path}[{i}].cel.expression"))
    return tuple(expressions)


def _attribute(value: object, path: str) -> AttributeValue:
    raw = json_object(value, path)
    for field, kind in (("int", "int"), ("bool", "bool"), ("string", "string"), ("version", "version")):
        if field in raw:
            item = raw[field]
            if kind == "int":
                return kind, json_int(item, f"{path}.int")
            if kind == "bool":
                return kind, json_bool(item, f"{path}.bool")
            return kind, json_str(item, f"{path}.{field}")
    return "unknown", None


def _capacity(value: object, path: str) -> DeviceCapacity:
    raw = json_object(value, path)
    policy = raw.get("requestPolicy")
    found = None
    if policy is not None:
        policy = json_object(policy, f"{path}.requestPolicy")
        valid_range = policy.get("validRange")
        rng = json_object(valid_range, f"{path}.requestPolicy.validRange")
        found = CapacityPolicy(
            default=_optional_quantity(policy.get("default"), f"{path}.requestPolicy.default"),
            valid_values=tuple(_quantity(v, f"{path}.requestPolicy.validValues")
                               for v in json_list(policy.get("validValues"), f"{path}.requestPolicy.validValues")),
            range_min=_optional_quantity(rng.get("min"), f"{path}.requestPolicy.validRange.min"),
            range_max=_optional_quantity(rng.get("max"), f"{path}.requestPolicy.validRange.max"),
            range_step=_optional_quantity(rng.get("step"), f"{path}.requestPolicy.validRange.step"),
            has_range=valid_range is not None,
        )
    return DeviceCapacity(_quantity(raw.get("value"), f"{path}.value"), found)


def _taints(value: object, path: str) -> tuple[DeviceTaint, ...]:
    taints = []
    for i, taint in enumerate(json_list(value, path)):
        taint = json_object(taint, f"{path}[{i}]")
        taints.append(DeviceTaint(json_str(taint.get("key"), f"{path}[{i}].key"),
                                  json_str(taint.get("value"), f"{path}[{i}].value"),
                                  json_str(taint.get("effect"), f"{path}[{i}].effect")))
    return tuple(taints)


def _device(raw: JsonObject, path: str) -> Device:
    consumes = []
    for i, consumption in enumerate(json_list(raw.get("consumesCounters"), f"{path}.consumesCounters")):
        cpath = f"{path}.consumesCounters[{i}]"
        consumption = json_object(consumption, cpath)
        counters = json_object(consumption.get("counters"), f"{cpath}.counters")
        consumes.append(CounterConsumption(
            json_str(consumption.get("counterSet"), f"{cpath}.counterSet"),
            FrozenMap({name: _quantity(json_object(c, f"{cpath}.counters.{name}").get("value"),
                                       f"{cpath}.counters.{name}.value") for name, c in counters.items()}),
            tuple(json_str(g, f"{cpath}.compatibilityGroups") for g in
                  json_list(consumption.get("compatibilityGroups"), f"{cpath}.compatibilityGroups"))))
    attributes = json_object(raw.get("attributes"), f"{path}.attributes")
    capacity = json_object(raw.get("capacity"), f"{path}.capacity")
    allow = raw.get("allowMultipleAllocations")
    return Device(
        name=json_str(raw.get("name"), f"{path}.name"),
        attributes=FrozenMap({k: _attribute(v, f"{path}.attributes.{k}") for k, v in attributes.items()}),
        capacity=FrozenMap({k: _capacity(v, f"{path}.capacity.{k}") for k, v in capacity.items()}),
        consumes_counters=tuple(consumes),
        node_name=json_str(raw.get("nodeName"), f"{path}.nodeName"),
        node_selector=node_selector_terms(raw.get("nodeSelector"), f"{path}.nodeSelector"),
        all_nodes=json_bool(raw.get("allNodes"), f"{path}.allNodes"),
        taints=_taints(raw.get("taints"), f"{path}.taints"),
        binds_to_node=json_bool(raw.get("bindsToNode"), f"{path}.bindsToNode"),
        binding_conditions=tuple(json_str(c, f"{path}.bindingConditions")
                                 for c in json_list(raw.get("bindingConditions"), f"{path}.bindingConditions")),
        allow_multiple_allocations=None if allow is None else json_bool(allow, f"{path}.allowMultipleAllocations"),
    )


def resource_slice_from_dict(raw: JsonObject) -> ResourceSlice:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    pool = json_object(spec.get("pool"), "spec.pool")
    counter_sets = []
    for i, counter_set in enumerate(json_list(spec.get("sharedCounters"), "spec.sharedCounters")):
        cpath = f"spec.sharedCounters[{i}]"
        counter_set = json_object(counter_set, cpath)
        counters = json_object(counter_set.get("counters"), f"{cpath}.counters")
        counter_sets.append(CounterSet(
            json_str(counter_set.get("name"), f"{cpath}.name"),
            FrozenMap({name: _quantity(json_object(c, f"{cpath}.counters.{name}").get("value"),
                                       f"{cpath}.counters.{name}.value") for name, c in counters.items()})))
    return ResourceSlice(
        name=json_str(meta.get("name"), "metadata.name"),
        driver=json_str(spec.get("driver"), "spec.driver"),
        pool=json_str(pool.get("name"), "spec.pool.name"),
        pool_generation=json_int(pool.get("generation"), "spec.pool.generation") or 0,
        resource_slice_count=json_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount") or 0,
        node_name=json_str(spec.get("nodeName"), "spec.nodeName"),
        node_selector=node_selector_terms(spec.get("nodeSelector"), "spec.nodeSelector"),
        all_nodes=json_bool(spec.get("allNodes"), "spec.allNodes"),
        per_device_node_selection=json_bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection"),
        devices=tuple(_device(json_object(d, f"spec.devices[{i}]"), f"spec.devices[{i}]")
                      for i, d in enumerate(json_list(spec.get("devices"), "spec.devices"))),
        shared_counters=tuple(counter_sets),
    )


def device_class_from_dict(raw: JsonObject) -> DeviceClass:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    extended = spec.get("extendedResourceName")
    return DeviceClass(
        name=json_str(meta.get("name"), "metadata.name"),
        selectors=_selectors(spec.get("selectors"), "spec.selectors"),
        extended_resource_name=None if extended is None else json_str(extended, "spec.extendedResourceName"),
        creation_ns=parse_time_ns(meta.get("creationTimestamp"), "metadata.creationTimestamp") or 0,
    )


def _tolerations(value: object, path: str) -> tuple[DeviceToleration, ...]:
    result = []
    for i, raw in enumerate(json_list(value, path)):
        raw = json_object(raw, f"{path}[{i}]")
        result.append(DeviceToleration(json_str(raw.get("key"), f"{path}[{i}].key"),
                                       json_str(raw.get("operator"), f"{path}[{i}].operator") or "Equal",
                                       json_str(raw.get("value"), f"{path}[{i}].value"),
                                       json_str(raw.get("effect"), f"{path}[{i}].effect")))
    return tuple(result)


def _exact(raw: JsonObject, path: str, name: str) -> ExactDeviceRequest:
    count = json_int(raw.get("count"), f"{path}.count")
    admin = raw.get("adminAccess")
    capacity = raw.get("capacity")
    requests = None
    if capacity is not None:
        requests = _quantities(json_object(capacity, f"{path}.capacity").get("requests"), f"{path}.capacity.requests")
    mode = json_str(raw.get("allocationMode"), f"{path}.allocationMode") or EXACT_COUNT
    return ExactDeviceRequest(
        name=name,
        device_class_name=json_str(raw.get("deviceClassName"), f"{path}.deviceClassName"),
        selectors=_selectors(raw.get("selectors"), f"{path}.selectors"),
        allocation_mode=mode,
        count=(1 if count is None else count) if mode == EXACT_COUNT else 0,
        admin_access=None if admin is None else json_bool(admin, f"{path}.adminAccess"),
        tolerations=_tolerations(raw.get("tolerations"), f"{path}.tolerations"),
        capacity_requests=requests,
    )


def claim_devices(spec: JsonObject, path: str) -> tuple[tuple[DeviceRequest, ...], tuple[DeviceConstraint, ...]]:
    """The requests and constraints of a ResourceClaimSpec (a claim's, or a template's ``spec.spec``)."""
    devices = json_object(spec.get("devices"), f"{path}.devices")
    requests = []
    for i, raw in enumerate(json_list(devices.get("requests"), f"{path}.devices.requests")):
        rpath = f"{path}.devices.requests[{i}]"
        raw = json_object(raw, rpath)
        name = json_str(raw.get("name"), f"{rpath}.name")
        exactly = raw.get("exactly")
        subrequests = []
        for j, sub in enumerate(json_list(raw.get("firstAvailable"), f"{rpath}.firstAvailable")):
            spath = f"{rpath}.firstAvailable[{j}]"
            sub = json_object(sub, spath)
            subrequests.append(_exact(sub, spath, json_str(sub.get("name"), f"{spath}.name")))
        exact = None if exactly is None else _exact(json_object(exactly, f"{rpath}.exactly"), f"{rpath}.exactly", name)
        requests.append(DeviceRequest(name, exact, tuple(subrequests)))
    constraints = []
    for i, raw in enumerate(json_list(devices.get("constraints"), f"{path}.devices.constraints")):
        cpath = f"{path}.devices.constraints[{i}]"
        raw = json_object(raw, cpath)
        match = raw.get("matchAttribute")
        distinct_attribute = raw.get("distinctAttribute")
        constraints.append(DeviceConstraint(
            tuple(json_str(r, f"{cpath}.requests") for r in json_list(raw.get("requests"), f"{cpath}.requests")),
            None if match is None else json_str(match, f"{cpath}.matchAttribute"),
            None if distinct_attribute is None else json_str(distinct_attribute, f"{cpath}.distinctAttribute")))
    return tuple(requests), tuple(constraints)


def _allocation(value: object, path: str) -> Allocation | None:
    if value is None:
        return None
    raw = json_object(value, path)
    devices = json_object(raw.get("devices"), f"{path}.devices")
    results = []
    for i, result in enumerate(json_list(devices.get("results"), f"{path}.devices.results")):
        rpath = f"{path}.devices.results[{i}]"
        result = json_object(result, rpath)
        share = result.get("shareID")
        consumed = result.get("consumedCapacity")
        results.append(AllocatedDevice(
            request=json_str(result.get("request"), f"{rpath}.request"),
            driver=json_str(result.get("driver"), f"{rpath}.driver"),
            pool=json_str(result.get("pool"), f"{rpath}.pool"),
            device=json_str(result.get("device"), f"{rpath}.device"),
            admin_access=json_bool(result.get("adminAccess"), f"{rpath}.adminAccess"),
            share_id=None if share is None else json_str(share, f"{rpath}.shareID"),
            consumed_capacity=None if consumed is None else _quantities(consumed, f"{rpath}.consumedCapacity"),
        ))
    return Allocation(tuple(results), node_selector_terms(raw.get("nodeSelector"), f"{path}.nodeSelector"))


def resource_claim_from_dict(raw: JsonObject) -> ResourceClaim:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(raw.get("spec"), "spec")
    status = json_object(raw.get("status"), "status")
    requests, constraints = claim_devices(spec, "spec")
    uid, kind, name = _controller(meta)
    consumers = []
    for i, ref in enumerate(json_list(status.get("reservedFor"), "status.reservedFor")):
        ref = json_object(ref, f"status.reservedFor[{i}]")
        consumers.append(ClaimConsumer(json_str(ref.get("resource"), f"status.reservedFor[{i}].resource"),
                                       json_str(ref.get("name"), f"status.reservedFor[{i}].name"),
                                       json_str(ref.get("uid"), f"status.reservedFor[{i}].uid"),
                                       json_str(ref.get("apiGroup"), f"status.reservedFor[{i}].apiGroup")))
    return ResourceClaim(
        name=json_str(meta.get("name"), "metadata.name"),
        namespace=json_str(meta.get("namespace"), "metadata.namespace") or "default",
        uid=json_str(meta.get("uid"), "metadata.uid"),
        deleting=bool(meta.get("deletionTimestamp")),
        controller_uid=uid,
        controller_kind=kind,
        controller_name=name,
        annotations=read_labels(meta.get("annotations"), "metadata.annotations"),
        requests=requests,
        constraints=constraints,
        allocation=_allocation(status.get("allocation"), "status.allocation"),
        reserved_for=tuple(consumers),
    )


def resource_claim_template_from_dict(raw: JsonObject) -> ResourceClaimTemplate:
    meta = json_object(raw.get("metadata"), "metadata")
    spec = json_object(json_object(raw.get("spec"), "spec").get("spec"), "spec.spec")
    requests, constraints = claim_devices(spec, "spec.spec")
    return ResourceClaimTemplate(
        name=json_str(meta.get("name"), "metadata.name"),
        namespace=json_str(meta.get("namespace"), "metadata.namespace") or "default",
        requests=requests,
        constraints=constraints,
    )


def _container_requests(containers: list[Any], init: bool, offset: int, path: str) -> list[ContainerDeviceRequests]:
    found = []
    for i, container in enumerate(containers):
        container = json_object(container, f"{path}[{i}]")
        resources = json_object(container.get("resources"), f"{path}[{i}].resources")
        requests = json_object(resources.get("requests"), f"{path}[{i}].resources.requests")
        limits = json_object(resources.get("limits"), f"{path}[{i}].resources.limits")
        extended = {}
        # Limits stand in for absent requests (the API's defaulting); extended resources need both equal anyway.
        for name, value in {**limits, **requests}.items():
            if not is_dra_extended_resource_name(name):
                continue
            count = int_value(_quantity(value, f"{path}[{i}].resources.requests.{name}"))
            if count:
                extended[name] = count
        if extended:
            found.append(ContainerDeviceRequests(
                offset + i, init, init and container.get("restartPolicy") == "Always", FrozenMap(extended)))
    return found


def may_have_pod_claims(spec: JsonObject) -> bool:
    """False only when ``pod_claims`` would return None: no ``spec.resourceClaims`` and no container names a
    resource with a ``/`` (every DRA extended resource name has one). The pod's summed requests cannot decide it: a
    negative overhead or container quantity cancels a container's extended resource there, not in ``pod_claims``.
    Anything but plain dicts and strings is left to ``pod_claims``'s checked reading."""
    if "resourceClaims" in spec:
        return True
    init_containers = spec.get("initContainers")
    try:
        return (_names_a_prefixed_resource(spec.get("containers") or ())
                or (init_containers is not None and _names_a_prefixed_resource(init_containers)))
    except (AttributeError, TypeError):
        return True


def _names_a_prefixed_resource(containers: Any) -> bool:
    for container in containers:
        resources = container.get("resources")
        if resources:
            # Every pod listed comes here: the names joined in C (str.join), about 0.6 us a pod read (measured).
            requests, limits = resources.get("requests"), resources.get("limits")
            if (requests and "/" in "".join(requests)) or (limits and "/" in "".join(limits)):
                return True
    return False


def pod_claims(spec: JsonObject, status: JsonObject) -> PodClaims | None:
    """A pod's ``spec.resourceClaims``, its ``status.resourceClaimStatuses`` and its containers' extended resource
    requests; None when it has neither claims nor extended resources."""
    claims = []
    for i, raw in enumerate(json_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        path = f"spec.resourceClaims[{i}]"
        raw = json_object(raw, path)
        claim_name = raw.get("resourceClaimName")
        template = raw.get("resourceClaimTemplateName")
        claims.append(PodResourceClaim(
            json_str(raw.get("name"), f"{path}.name"),
            None if claim_name is None else json_str(claim_name, f"{path}.resourceClaimName"),
            None if template is None else json_str(template, f"{path}.resourceClaimTemplateName")))
    init = json_list(spec.get("initContainers"), "spec.initContainers")
    containers = (_container_requests(init, True, 0, "spec.initContainers")
                  + _container_requests(json_list(spec.get("containers"), "spec.containers"), False, len(init),
                                        "spec.containers"))
    if not claims and not containers:
        return None
    statuses: dict[str, str | None] = {}
    for i, raw in enumerate(json_list(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses")):
        path = f"status.resourceClaimStatuses[{i}]"
        raw = json_object(raw, path)
        generated = raw.get("resourceClaimName")
        statuses[json_str(raw.get("name"), f"{path}.name")] = (
            None if generated is None else json_str(generated, f"{path}.resourceClaimName"))
    extended = json_object(status.get("extendedResourceClaimStatus"), "status.extendedResourceClaimStatus")
    return PodClaims(
        claims=distinct(claims), statuses=FrozenMap(statuses), containers=tuple(containers),
        extended_resource_claim=json_str(extended.get("resourceClaimName"),
                                         "status.extendedResourceClaimStatus.resourceClaimName"),
    )
