"""What kube-apiserver does to a pod CREATE before the scheduler sees it: its built-in admission plugins in its
order, for the paths that predict without an API server (``/preview``, the plugin's snapshot source, ``verify``).
The admission webhook needs none of it: the API server has run these plugins before it calls a webhook.

Upstream: pkg/kubeapiserver/options/plugins.go (``AllOrderedPlugins``; every plugin here is on by default). The
mutating phase runs each plugin's ``Admit`` in that order, then the object is validated, then the validating phase
runs each ``Validate`` in the same order (staging/src/k8s.io/apiserver/pkg/admission/chain.go); so a pod is
refused by the first of:

1. NamespaceLifecycle (``namespace_lifecycle``): a missing or terminating namespace;
2. LimitRanger ``Admit`` (``limitranger``): the namespace's default requests and limits (it refuses nothing);
3. Priority (``resolution``): an unknown class, or a priority or policy that contradicts it;
4. DefaultTolerationSeconds (``defaulttolerationseconds``): the not-ready and unreachable tolerations;
5. RuntimeClass ``Admit`` (``runtimeclass``): a missing class, another overhead, a conflicting nodeSelector;
6. pod validation (pkg/apis/core/validation): a request above its limit, pod-level requests below the containers'
   (a LimitRange's defaults can cause either);
7. LimitRanger ``Validate``: min, max and maxLimitRequestRatio;
8. RuntimeClass ``Validate``: an overhead that is not the class's;
9. ResourceQuota (``resource_quota``), each admitted pod charged before the next one is checked.

What a source did not hold is not applied, and said so where it may matter (``Admitted.not_known``): a snapshot
taken without ``limitranges`` or ``runtimeclasses`` holds none of them (``ClusterState.knows``), and then neither
their defaults nor their refusals can be predicted; the note names them for a pod with a container that sets no
cpu or memory request (a LimitRange would default it) or that names a RuntimeClass. Namespaces likewise: without
any, no pod is refused for its namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from webhook.cluster.copying import replace_fields
from webhook.cluster.model import Pod, PodResourceSpec, ResourceQuota, RuntimeClass
from webhook.cluster.quantity import Quantity
from webhook.cluster.resources import aggregate_container_requests, pod_requests, requests_as_resources
from webhook.cluster.snapshot import ClusterState
from webhook.priority.defaulttolerationseconds import default_toleration_seconds
from webhook.priority.limitranger import admit_limit_ranges, validate_limit_ranges
from webhook.priority.namespace_lifecycle import check_namespace_lifecycle
from webhook.priority.resolution import PriorityRejection, effective_classes, resolve_pod_priority
from webhook.priority.resource_quota import QuotaDenial, charge_quotas, check_resource_quota
from webhook.priority.runtimeclass import runtime_class_not_found, set_overhead, set_scheduling, validate_overhead
from webhook.priority.validation import FieldError

# The quota stage a pod passes last: the pod (its priority resolved) and its namespace's quotas as charged so far,
# to a denial or None. /preview passes the admission pipeline's own (ResourceQuota plus ``quota.classes``).
PodQuotaCheck = Callable[[Pod, Sequence[ResourceQuota]], QuotaDenial | None]

LIMIT_RANGES_NOT_KNOWN = ("LimitRanges: the snapshot holds none (taken without limitranges), so no LimitRange"
                          " defaults or limits were applied to a container without a cpu or memory request")
# What a LimitRange's default requests would fill in, that the scheduler reads.
_DEFAULTED_REQUESTS = ("cpu", "memory")


def runtime_class_not_known(name: str) -> str:
    return (f"RuntimeClass {name}: the snapshot holds no RuntimeClass (taken without runtimeclasses), so its overhead"
            " and scheduling were not applied")


def _lacks_a_request(spec: PodResourceSpec) -> bool:
    return any(name not in ctr.requests for ctr in (*spec.containers, *spec.init_containers)
               for name in _DEFAULTED_REQUESTS)


def resource_quota_only(pod: Pod, quotas: Sequence[ResourceQuota]) -> QuotaDenial | None:
    """Upstream ResourceQuota admission alone (on by default in the API server)."""
    return check_resource_quota(pod, operation="CREATE", quotas=quotas, limited_resources=())


@dataclass(frozen=True, slots=True)
class Admitted:
    """The pod as the API server stores it, and what the chain could not apply for lack of objects."""

    pod: Pod
    not_known: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Refused:
    """The API server refuses the pod: its message, and the priority when the Priority plugin had resolved it."""

    pod: Pod
    message: str
    priority: int | None = None


def forbidden(pod: Pod, inner: str) -> str:
    """``admission.NewForbidden``: the pod's name, else its generateName (already in ``Pod.name``), else Unknown."""
    return f'pods "{pod.name or "Unknown"}" is forbidden: {inner}'


def _request_within_limit(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity], path: str,
                          errors: list[FieldError]) -> None:
    """``validateResourceRequirements``: a request above its limit (resources by name where upstream ranges over a
    Go map)."""
    for name in sorted(requests):
        limit = limits.get(name)
        if limit is not None and requests[name].value > limit.value:
            errors.append(FieldError(f"{path}.requests", "Invalid value",
                                     f"must be less than or equal to {name} limit of {limit}", str(requests[name])))


def validate_pod_resources(spec: PodResourceSpec) -> list[FieldError]:
    """Pod validation of what the mutating plugins may have changed (pkg/apis/core/validation/validation.go):
    each container's requests within its limits (containers, then init containers), then with pod-level resources
    (PodLevelResources, on by default since v1.34) theirs within their limits, the pod-level requests at least the
    containers' aggregate, and each container's limit within the pod-level one (``validatePodResourceConsistency``).
    A LimitRange's defaults can break any of them."""
    errors: list[FieldError] = []
    for field, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for i, ctr in enumerate(containers):
            _request_within_limit(ctr.requests, ctr.limits, f"spec.{field}[{i}].resources", errors)
    if not spec.pod_requests and not spec.pod_limits:
        return errors
    _request_within_limit(spec.pod_requests, spec.pod_limits, "spec.resources", errors)
    aggregate = aggregate_container_requests(spec)
    for name in sorted(aggregate):
        pod_request = spec.pod_requests.get(name)
        if pod_request is not None and aggregate[name].value > pod_request.value:
            errors.append(FieldError(f"spec.resources.requests[{name}]", "Invalid value",
                                     f"must be greater than or equal to aggregate container requests of"
                                     f" {aggregate[name]}", str(pod_request)))
    for i, ctr in enumerate(spec.containers):
        for name in sorted(ctr.limits):
            pod_limit = spec.pod_limits.get(name)
            if pod_limit is not None and ctr.limits[name].value > pod_limit.value:
                errors.append(FieldError(f"spec.resources.containers[{i}][{name}].limits", "Invalid value",
                                         f"must be less than or equal to pod limits of {pod_limit}",
                                         str(ctr.limits[name])))
    return errors


def invalid(pod: Pod, errors: Sequence[FieldError]) -> str:
    """``apierrors.NewInvalid`` for a Pod (422): one error as is, several in brackets."""
    inner = str(errors[0]) if len(errors) == 1 else f"[{', '.join(str(e) for e in errors)}]"
    return f'Pod "{pod.name}" is invalid: {inner}'


def admit_pod(state: ClusterState, pod: Pod) -> Admitted | Refused:
    """The mutating phase, pod validation and the validating phase but ResourceQuota (``admit_pods`` charges the
    quotas in order). ``pod`` carries its resource fields (``webhook.cluster.reader.pod_from_dict``)."""
    refused = check_namespace_lifecycle(state.namespaces, pod)
    if refused is not None:
        return Refused(pod, refused)
    not_known: list[str] = []
    spec = pod.quota.resources
    limit_ranges = state.limit_ranges_in(pod.namespace)
    if limit_ranges:
        spec = admit_limit_ranges(spec, limit_ranges)
    elif not state.knows("LimitRange") and _lacks_a_request(spec):
        not_known.append(LIMIT_RANGES_NOT_KNOWN)
    try:
        resolved = resolve_pod_priority(pod.priority_class_name, pod.priority, pod.preemption_policy,
                                        effective_classes(state))
    except PriorityRejection as exc:
        return Refused(pod, forbidden(pod, str(exc)))
    priority = resolved.priority
    tolerations = default_toleration_seconds(pod.tolerations)
    node_selector = pod.node_selector
    runtime_class: RuntimeClass | None = None
    if pod.runtime_class_name:
        runtime_class = state.runtime_classes.get(pod.runtime_class_name)
        if runtime_class is None and state.knows("RuntimeClass"):
            return Refused(pod, forbidden(pod, runtime_class_not_found(pod.runtime_class_name)), priority)
        if runtime_class is None:
            not_known.append(runtime_class_not_known(pod.runtime_class_name))
        else:
            overhead, refusal = set_overhead(spec.overhead, runtime_class)
            if refusal is None:
                node_selector, tolerations, refusal = set_scheduling(node_selector, tolerations, runtime_class)
            if refusal is not None:
                return Refused(pod, forbidden(pod, refusal), priority)
            if overhead is not spec.overhead:
                spec = replace_fields(spec, overhead=overhead)
    errors = validate_pod_resources(spec)
    if errors:
        return Refused(pod, invalid(pod, errors), priority)
    refusal = validate_limit_ranges(spec, limit_ranges)
    if refusal is None and (runtime_class is not None or not pod.runtime_class_name):
        refusal = validate_overhead(spec.overhead, runtime_class)
    if refusal is not None:
        return Refused(pod, forbidden(pod, refusal), priority)
    changes: dict[str, object] = {}
    if (resolved.priority, resolved.preemption_policy, resolved.priority_class_name) != (
            pod.priority, pod.preemption_policy, pod.priority_class_name):
        changes.update(priority=resolved.priority, preemption_policy=resolved.preemption_policy,
                       priority_class_name=resolved.priority_class_name)
    if spec is not pod.quota.resources:
        changes.update(quota=replace_fields(pod.quota, resources=spec),
                       requests=requests_as_resources(pod_requests(spec)))
    if tolerations is not pod.tolerations:
        changes["tolerations"] = tolerations
    if node_selector is not pod.node_selector:
        changes["node_selector"] = node_selector
    return Admitted(replace_fields(pod, **changes) if changes else pod, tuple(not_known))


def admit_pods(state: ClusterState, pods: Sequence[Pod], quota_check: PodQuotaCheck = resource_quota_only,
               check_deadline: Callable[[int], None] | None = None) -> list[Admitted | Refused]:
    """Each pod through the chain (``admit_pod``), then the quota stage against its namespace's quotas as the pods
    before it charged them (the real control plane refuses a pod over its quota before the scheduler sees it:
    tests/vectors/real_scheduler/quota-exceeded-is-rejected). ``check_deadline(i)`` is called before pod ``i``."""
    entries: list[Admitted | Refused] = []
    quotas: dict[str, list[ResourceQuota]] = {}
    for i, pod in enumerate(pods):
        if check_deadline is not None:
            check_deadline(i)
        entry = admit_pod(state, pod)
        if isinstance(entry, Refused):
            entries.append(entry)
            continue
        admitted = entry.pod
        namespace_quotas = quotas.get(admitted.namespace)
        if namespace_quotas is None:
            namespace_quotas = quotas[admitted.namespace] = state.quotas_in(admitted.namespace)
        denial = quota_check(admitted, namespace_quotas)
        if denial is not None:
            entries.append(Refused(admitted, denial.message, admitted.priority))
            continue
        if namespace_quotas:
            quotas[admitted.namespace] = charge_quotas(admitted, namespace_quotas)
        entries.append(entry)
    return entries
