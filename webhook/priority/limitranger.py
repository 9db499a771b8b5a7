"""The LimitRanger admission plugin on a pod CREATE: the namespace's LimitRanges default a container's requests and
limits (mutating), then bound them (validating), with upstream's messages.

Upstream: plugin/pkg/admission/limitranger/admission.go (``PodMutateLimitFunc``:
``defaultContainerResourceRequirements`` and ``mergePodResourceRequirements``; ``PodValidateLimitFunc``:
``minConstraint``, ``maxConstraint``, ``limitRequestRatioConstraint``, its own ``podRequests``/``podLimits``).
The requests a container got from its
limits (API defaulting, pkg/apis/core/v1/defaults.go ``SetDefaults_Pod``) are already in ``ContainerResources``:
defaulting runs before admission, so a limit LimitRanger adds does not become a request.

Where upstream's order is Go's map order (the resources of one item, the LimitRanges of a namespace in its
informer's store) no client can reproduce it; PreemptGuard takes the items in order, the resources by name and the
LimitRanges by name. It matters only for which message a pod breaking several limits at once gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

from webhook.cluster.copying import replace_fields
from webhook.cluster.model import (
    LIMIT_TYPE_CONTAINER,
    LIMIT_TYPE_POD,
    ContainerResources,
    FrozenMap,
    LimitRange,
    PodResourceSpec,
)
from webhook.cluster.quantity import Quantity, int_value, milli_value
from webhook.cluster.resources import aggregate_container_resources

ResourceList = dict[str, Quantity]

# resource.MaxMilliValue: above it a value's millis overflow int64, and upstream compares whole units instead.
MAX_MILLI_VALUE = (2**63 - 1) // 1000
_ZERO = Quantity(Fraction(0))  # an absent quantity: ``resource.Quantity{}``
# LimitRanger's own podRequests/podLimits override only these with pod-level resources (isSupportedPodLevelResource).
_POD_LEVEL_RESOURCES = ("cpu", "memory")


# ---- mutating: defaults ------------------------------------------------------------------------------------

def default_container_resources(limit_range: LimitRange) -> tuple[Mapping[str, Quantity], Mapping[str, Quantity]]:
    """``defaultContainerResourceRequirements``: the default requests and limits of the Container items (a later
    item's value for a resource replaces an earlier one's)."""
    requests: ResourceList = {}
    limits: ResourceList = {}
    for item in limit_range.limits:
        if item.type == LIMIT_TYPE_CONTAINER:
            requests.update(item.default_request)
            limits.update(item.default)
    return requests, limits


def _merge_container(ctr: ContainerResources, requests: Mapping[str, Quantity],
                     limits: Mapping[str, Quantity]) -> ContainerResources:
    """``mergeContainerResources``: a default only where the container sets nothing for that resource."""
    missing_limits = {name: qty for name, qty in limits.items() if name not in ctr.limits}
    missing_requests = {name: qty for name, qty in requests.items() if name not in ctr.requests}
    if not missing_limits and not missing_requests:
        return ctr
    return replace_fields(ctr, requests=FrozenMap({**ctr.requests, **missing_requests}),
                          limits=FrozenMap({**ctr.limits, **missing_limits}))


def mutate_pod_resources(spec: PodResourceSpec, limit_range: LimitRange) -> PodResourceSpec:
    """``PodMutateLimitFunc``: every container and init container defaulted from ``limit_range``."""
    requests, limits = default_container_resources(limit_range)
    if not requests and not limits:
        return spec
    containers = tuple(_merge_container(ctr, requests, limits) for ctr in spec.containers)
    init_containers = tuple(_merge_container(ctr, requests, limits) for ctr in spec.init_containers)
    if containers == spec.containers and init_containers == spec.init_containers:
        return spec
    return replace_fields(spec, containers=containers, init_containers=init_containers)


# ---- validating: min, max, maxLimitRequestRatio ---------------------------------------------------------------

def _enforced_values(request: Quantity, limit: Quantity, enforced: Quantity) -> tuple[int, int, int]:
    """``requestLimitEnforcedValues``: millis when none overflows, else whole units (both rounded up)."""
    values = (int_value(request), int_value(limit), int_value(enforced))
    if all(v <= MAX_MILLI_VALUE for v in values):
        return milli_value(request), milli_value(limit), milli_value(enforced)
    return values


def min_constraint(limit_type: str, resource: str, enforced: Quantity, requests: Mapping[str, Quantity],
                   limits: Mapping[str, Quantity]) -> str | None:
    """``minConstraint``."""
    request, limit = requests.get(resource), limits.get(resource)
    observed_request, observed_limit, enforced_value = _enforced_values(request or _ZERO, limit or _ZERO, enforced)
    if request is None:
        return f"minimum {resource} usage per {limit_type} is {enforced}.  No request is specified"
    if observed_request < enforced_value:
        return f"minimum {resource} usage per {limit_type} is {enforced}, but request is {request}"
    if limit is not None and observed_limit < enforced_value:
        return f"minimum {resource} usage per {limit_type} is {enforced}, but limit is {limit}"
    return None


def max_constraint(limit_type: str, resource: str, enforced: Quantity, requests: Mapping[str, Quantity],
                   limits: Mapping[str, Quantity]) -> str | None:
    """``maxConstraint``."""
    request, limit = requests.get(resource), limits.get(resource)
    observed_request, observed_limit, enforced_value = _enforced_values(request or _ZERO, limit or _ZERO, enforced)
    if limit is None:
        return f"maximum {resource} usage per {limit_type} is {enforced}.  No limit is specified"
    if observed_limit > enforced_value:
        return f"maximum {resource} usage per {limit_type} is {enforced}, but limit is {limit}"
    if request is not None and observed_request > enforced_value:
        return f"maximum {resource} usage per {limit_type} is {enforced}, but request is {request}"
    return None


def limit_request_ratio_constraint(limit_type: str, resource: str, enforced: Quantity,
                                   requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> str | None:
    """``limitRequestRatioConstraint``: the ratio compared in thousandths unless the maximum overflows them."""
    request, limit = requests.get(resource), limits.get(resource)
    observed_request, observed_limit, _ = _enforced_values(request or _ZERO, limit or _ZERO, enforced)
    if request is None or observed_request == 0:
        return (f"{resource} max limit to request ratio per {limit_type} is {enforced},"
                " but no request is specified or request is 0")
    if limit is None or observed_limit == 0:
        return (f"{resource} max limit to request ratio per {limit_type} is {enforced},"
                " but no limit is specified or limit is 0")
    observed_ratio = float(observed_limit) / float(observed_request)
    shown_ratio = observed_ratio
    max_ratio = float(int_value(enforced))
    if int_value(enforced) <= MAX_MILLI_VALUE:
        observed_ratio *= 1000
        max_ratio = float(milli_value(enforced))
    if observed_ratio > max_ratio:
        return (f"{resource} max limit to request ratio per {limit_type} is {enforced},"
                f" but provided ratio is {shown_ratio:f}")
    return None


Constraint = Callable[[str, str, Quantity, Mapping[str, Quantity], Mapping[str, Quantity]], str | None]


def _check(limit_type: str, bounds: Iterable[tuple[Constraint, Mapping[str, Quantity]]],
           requests: Mapping[str, Quantity], limits: Mapping[str, Quantity], errors: list[str]) -> None:
    for constraint, enforced in bounds:
        for resource in sorted(enforced):
            error = constraint(limit_type, resource, enforced[resource], requests, limits)
            if error is not None:
                errors.append(error)


def _aggregate(spec: PodResourceSpec, of: Callable[[ContainerResources], Mapping[str, Quantity]],
               pod_level: Mapping[str, Quantity]) -> ResourceList:
    """LimitRanger's ``podRequests``/``podLimits``: the sidecar-aware aggregate, overridden by the pod-level cpu and
    memory (PodLevelResources is on by default since v1.34), without overhead."""
    result = aggregate_container_resources(spec, of)  # aggregateContainerResourcesByFn, shared with the scheduler's
    result.update({name: qty for name, qty in pod_level.items() if name in _POD_LEVEL_RESOURCES})
    return result


def validate_pod_resources(spec: PodResourceSpec, limit_range: LimitRange) -> list[str]:
    """``PodValidateLimitFunc``: every broken bound of ``limit_range``, in order (empty when the pod keeps them)."""
    errors: list[str] = []
    for item in limit_range.limits:
        bounds = ((min_constraint, item.min), (max_constraint, item.max),
                  (limit_request_ratio_constraint, item.max_limit_request_ratio))
        if item.type == LIMIT_TYPE_CONTAINER:
            for ctr in (*spec.containers, *spec.init_containers):
                _check(item.type, bounds, ctr.requests, ctr.limits, errors)
        if item.type == LIMIT_TYPE_POD:
            requests = _aggregate(spec, lambda ctr: ctr.requests, spec.pod_requests)
            limits = _aggregate(spec, lambda ctr: ctr.limits, spec.pod_limits)
            _check(item.type, bounds, requests, limits, errors)
    return errors


def aggregate_message(errors: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message as is, several deduplicated in brackets."""
    distinct = list(dict.fromkeys(errors))
    return distinct[0] if len(distinct) == 1 else f"[{', '.join(distinct)}]"


# ---- the plugin --------------------------------------------------------------------------------------------

def admit_limit_ranges(spec: PodResourceSpec, limit_ranges: Sequence[LimitRange]) -> PodResourceSpec:
    """``LimitRanger.Admit``: the defaults of every LimitRange of the namespace, in turn."""
    for limit_range in limit_ranges:
        spec = mutate_pod_resources(spec, limit_range)
    return spec


def validate_limit_ranges(spec: PodResourceSpec, limit_ranges: Sequence[LimitRange]) -> str | None:
    """``LimitRanger.Validate``: the first LimitRange the pod breaks, as its inner Forbidden message."""
    for limit_range in limit_ranges:
        errors = validate_pod_resources(spec, limit_range)
        if errors:
            return aggregate_message(errors)
    return None
