"""Quota on critical PriorityClasses: upstream ResourceQuota admission for a pod CREATE, plus
PreemptGuard's ``quota.classes`` (which namespaces may use a class at all).

Upstream: staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go (``CheckRequest``)
and pkg/quota/v1/evaluator/core/pods.go (the pod evaluator). Described in docs/admission.md §5.

Order (``admit_pod_quota``): the ``quota.classes`` check first, then ``limitedResources`` and the
namespace's ResourceQuotas exactly as upstream. Both run on the pod *after* priority mutation, so a
class-less pod is checked under its global default's name.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from webhook.cluster.jsonfields import parse_time_ns
from webhook.cluster.model import LabelSelector, ResourceQuota, ScopedResourceSelectorRequirement
from webhook.cluster.quantity import Quantity, format_quantity, parse_quantity
from webhook.cluster.selectors import label_selector_matches
from webhook.config import (
    SCOPE_BEST_EFFORT,
    SCOPE_CROSS_NAMESPACE_POD_AFFINITY,
    SCOPE_NOT_BEST_EFFORT,
    SCOPE_NOT_TERMINATING,
    SCOPE_PRIORITY_CLASS,
    SCOPE_TERMINATING,
    ClassAccessRule,
    LimitedResource,
    QuotaConfig,
)
from webhook.errors import InvalidInput, QuantityError

JsonObject = Mapping[str, Any]
ResourceList = dict[str, Quantity]

FORBIDDEN = "Forbidden"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

RULE_CLASSES = "quota.classes"
RULE_LIMITED_SCOPES = "quota.limitedResources"
RULE_RESOURCE_QUOTA = "ResourceQuota"

_POD_OBJECT_COUNT = "count/pods"
# pods.go podResources: what a pod quota can track by exact name.
_POD_RESOURCES = frozenset({
    _POD_OBJECT_COUNT, "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods",
})
_POD_RESOURCE_PREFIXES = ("hugepages-", "requests.hugepages-")
# pods.go validationSet: "it was a mistake, but" quotas on these force every container to set them.
_VALIDATION_SET = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_QOS_RESOURCES = ("cpu", "memory")
_ONE = Quantity(Fraction(1), "DecimalSI")


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QuotaDenial:
    """A refused pod: ``code``/``reason``/``message`` go into the AdmissionResponse status unchanged."""

    code: int  # 403 Forbidden, or 500 for upstream's plain (non-status) errors
    reason: str  # "Forbidden", or "" (StatusReasonUnknown) for plain errors
    message: str  # full status.message, e.g. 'pods "x" is forbidden: exceeded quota: ...'
    rule: str  # which check refused: RULE_CLASSES | RULE_LIMITED_SCOPES | RULE_RESOURCE_QUOTA


class ScopeSelectorError(ValueError):
    """A scope selector that upstream cannot convert into a label selector."""


# --- small helpers ----------------------------------------------------------------------------------

def _mapping(value: object, path: str) -> JsonObject:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{path}: expected an object, got {type(value).__name__}")
    return value


def _list(value: object, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(f"{path}: expected a list, got {type(value).__name__}")
    return value


def pod_display_name(pod: JsonObject) -> str:
    """The name upstream puts in ``pods "<name>" is forbidden``: name, else generateName, else Unknown."""
    meta = _mapping(pod.get("metadata"), "metadata")
    return str(meta.get("name") or meta.get("generateName") or "Unknown")


def forbidden(pod: JsonObject, inner: str, rule: str) -> QuotaDenial:
    """``admission.NewForbidden``: HTTP 403 with the ``pods "<name>" is forbidden:`` prefix."""
    return QuotaDenial(403, FORBIDDEN, f'pods "{pod_display_name(pod)}" is forbidden: {inner}', rule)


def add_quantities(a: Quantity, b: Quantity) -> Quantity:
    """``Quantity.Add``: the sum keeps the receiver's format, unless the receiver is zero."""
    return Quantity(a.value + b.value, b.format if a.value == 0 else a.format)


def _add_resource_list(target: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, qty in other.items():
        target[name] = add_quantities(target[name], qty) if name in target else qty


def _max_resource_list(target: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, qty in other.items():
        if name not in target or qty.value > target[name].value:
            target[name] = qty


def _quantities(value: object, path: str) -> ResourceList:
    result: ResourceList = {}
    for name, raw in _mapping(value, path).items():
        try:
            result[str(name)] = parse_quantity(raw)
        except QuantityError as exc:
            raise InvalidInput(f"{path}.{name}: {exc}") from exc
    return result


# --- pod usage (pods.go PodUsageFunc) --------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Container:
    name: str
    requests: ResourceList
    limits: ResourceList
    restartable: bool  # an init container with restartPolicy Always (a sidecar)


def _containers(spec: JsonObject, field: str) -> list[_Container]:
    result = []
    for i, raw in enumerate(_list(spec.get(field), f"spec.{field}")):
        path = f"spec.{field}[{i}]"
        ctr = _mapping(raw, path)
        resources = _mapping(ctr.get("resources"), f"{path}.resources")
        requests = _quantities(resources.get("requests"), f"{path}.resources.requests")
        limits = _quantities(resources.get("limits"), f"{path}.resources.limits")
        # API defaulting (SetDefaults_Container): a limit without a request sets the request.
        for name, qty in limits.items():
            requests.setdefault(name, qty)
        result.append(_Container(str(ctr.get("name") or ""), requests, limits, ctr.get("restartPolicy") == "Always"))
    return result


def _is_supported_pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _pod_level(spec: JsonObject, kind: str) -> ResourceList:
    resources = _mapping(spec.get("resources"), "spec.resources")
    return _quantities(resources.get(kind), f"spec.resources.{kind}")


def _pod_level_resources_set(spec: JsonObject) -> bool:
    """``IsPodLevelResourcesSet``: spec.resources names a supported resource in requests or limits."""
    names = [*_pod_level(spec, "requests"), *_pod_level(spec, "limits")]
    return any(_is_supported_pod_level_resource(n) for n in names)


def _aggregate_containers(spec: JsonObject, kind: str) -> ResourceList:
    """``aggregateContainerResourcesByFn``: containers + sidecars, max with the init-container peak."""
    result: ResourceList = {}
    for ctr in _containers(spec, "containers"):
        _add_resource_list(result, getattr(ctr, kind))
    restartable: ResourceList = {}
    init_peak: ResourceList = {}
    for ctr in _containers(spec, "initContainers"):
        resources: ResourceList = getattr(ctr, kind)
        if ctr.restartable:
            _add_resource_list(result, resources)
            _add_resource_list(restartable, resources)
            resources = restartable
        else:
            combined: ResourceList = {}
            _add_resource_list(combined, resources)
            _add_resource_list(combined, restartable)
            resources = combined
        _max_resource_list(init_peak, resources)
    _max_resource_list(result, init_peak)
    return result


def pod_requests(spec: JsonObject) -> ResourceList:
    """``resourcehelper.PodRequests`` with quantities (formats kept as upstream keeps them)."""
    requests = _aggregate_containers(spec, "requests")
    pod_level = _pod_level(spec, "requests")
    if any(_is_supported_pod_level_resource(n) for n in pod_level):
        requests.update({n: q for n, q in pod_level.items() if _is_supported_pod_level_resource(n)})
    _add_resource_list(requests, _quantities(spec.get("overhead"), "spec.overhead"))
    return requests


def pod_limits(spec: JsonObject) -> ResourceList:
    """``resourcehelper.PodLimits``: overhead is added only to limits that are set."""
    limits = _aggregate_containers(spec, "limits")
    if _pod_level_resources_set(spec):
        limits.update({n: q for n, q in _pod_level(spec, "limits").items() if _is_supported_pod_level_resource(n)})
    for name, qty in _quantities(spec.get("overhead"), "spec.overhead").items():
        if name in limits:
            limits[name] = add_quantities(limits[name], qty)
    return limits


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended_resource_name(name: str) -> bool:
    """``helper.IsExtendedResourceName`` (without the qualified-name check of ``requests.<name>``)."""
    return not _is_native_resource(name) and not name.startswith("requests.")


def _compute_usage(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> ResourceList:
    """``podComputeUsageHelper``."""
    result: ResourceList = {"pods": _ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            result[name] = requests[name]
            result[f"requests.{name}"] = requests[name]
        if name in limits:
            result[f"limits.{name}"] = limits[name]
    for name, qty in requests.items():
        if name.startswith("hugepages-"):
            result[name] = qty
            result[f"requests.{name}"] = qty
        if _is_extended_resource_name(name):
            result[f"requests.{name}"] = qty
    return result


def is_quota_charged(pod: JsonObject, now_ns: int) -> bool:
    """``QuotaV1Pod``: terminal pods, and pods past their deletion grace period, hold no compute quota."""
    status = _mapping(pod.get("status"), "status")
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    meta = _mapping(pod.get("metadata"), "metadata")
    deleted_at = parse_time_ns(meta.get("deletionTimestamp"), "metadata.deletionTimestamp")
    grace = meta.get("deletionGracePeriodSeconds")
    if deleted_at is not None and isinstance(grace, int) and not isinstance(grace, bool):
        return now_ns <= deleted_at + grace * 1_000_000_000
    return True


def pod_usage(pod: JsonObject, now_ns: int | None = None) -> ResourceList:
    """``PodUsageFunc``: what creating this pod charges against a quota."""
    result: ResourceList = {_POD_OBJECT_COUNT: _ONE}
    if not is_quota_charged(pod, time.time_ns() if now_ns is None else now_ns):
        return result
    spec = _mapping(pod.get("spec"), "spec")
    result.update(_compute_usage(pod_requests(spec), pod_limits(spec)))
    return result


# --- scopes (pods.go podMatchesScopeFunc) -----------------------------------------------------------

def _qos_is_best_effort(pod: JsonObject) -> bool:
    """``qos.GetPodQOS(pod) == BestEffort``: no positive cpu/memory request or limit anywhere."""
    status = _mapping(pod.get("status"), "status")
    if status.get("qosClass"):
        return status.get("qosClass") == "BestEffort"
    spec = _mapping(pod.get("spec"), "spec")
    if _pod_level_resources_set(spec):
        lists = [_pod_level(spec, "requests"), _pod_level(spec, "limits")]
    else:
        lists = []
        for ctr in [*_containers(spec, "containers"), *_containers(spec, "initContainers")]:
            lists.extend((ctr.requests, ctr.limits))
    return not any(resources.get(name, Quantity(Fraction(0))).value > 0
                   for resources in lists for name in _QOS_RESOURCES)


def _is_terminating(spec: JsonObject) -> bool:
    deadline = spec.get("activeDeadlineSeconds")
    return isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0


def _cross_namespace_terms(terms: Iterable[object], weighted: bool) -> bool:
    for raw in terms:
        term = _mapping(raw, "affinity term")
        if weighted:
            term = _mapping(term.get("podAffinityTerm"), "podAffinityTerm")
        if term.get("namespaces") or term.get("namespaceSelector") is not None:
            return True
    return False


def uses_cross_namespace_pod_affinity(spec: JsonObject) -> bool:
    affinity = _mapping(spec.get("affinity"), "spec.affinity")
    for kind in ("podAffinity", "podAntiAffinity"):
        section = _mapping(affinity.get(kind), f"spec.affinity.{kind}")
        if _cross_namespace_terms(_list(section.get("requiredDuringSchedulingIgnoredDuringExecution"), kind), False):
            return True
        if _cross_namespace_terms(_list(section.get("preferredDuringSchedulingIgnoredDuringExecution"), kind), True):
            return True
    return False


def _priority_class_selector_matches(selector: ScopedResourceSelectorRequirement, class_name: str) -> bool:
    """``ScopedResourceSelectorRequirementsAsSelector`` over the one-key map {PriorityClass: name}."""
    operator, values = selector.operator, selector.values
    if operator in ("In", "NotIn"):
        if not values:
            raise ScopeSelectorError("for 'in', 'notin' operators, values set can't be empty")
        present = bool(class_name)
        if operator == "In":
            return present and class_name in values
        return not present or class_name not in values
    if operator in ("Exists", "DoesNotExist"):
        if values:
            raise ScopeSelectorError("values set must be empty for exists and does not exist")
        return bool(class_name) == (operator == "Exists")
    raise ScopeSelectorError(f'"{operator}" is not a valid scope selector operator')


def pod_matches_scope(selector: ScopedResourceSelectorRequirement, pod: JsonObject) -> bool:
    """``podMatchesScopeFunc``; unknown scope names match nothing. May raise ``ScopeSelectorError``."""
    spec = _mapping(pod.get("spec"), "spec")
    scope = selector.scope_name
    if scope == SCOPE_TERMINATING:
        return _is_terminating(spec)
    if scope == SCOPE_NOT_TERMINATING:
        return not _is_terminating(spec)
    if scope == SCOPE_BEST_EFFORT:
        return _qos_is_best_effort(pod)
    if scope == SCOPE_NOT_BEST_EFFORT:
        return not _qos_is_best_effort(pod)
    if scope == SCOPE_PRIORITY_CLASS:
        class_name = str(spec.get("priorityClassName") or "")
        if selector.operator == "Exists":
            # Upstream short-circuits Exists without parsing the selector (values are not checked).
            return bool(class_name)
        return _priority_class_selector_matches(selector, class_name)
    if scope == SCOPE_CROSS_NAMESPACE_POD_AFFINITY:
        return uses_cross_namespace_pod_affinity(spec)
    return False


def matching_scopes(pod: JsonObject, selectors: Iterable[ScopedResourceSelectorRequirement],
                    ) -> list[ScopedResourceSelectorRequirement]:
    """``MatchingScopes``: the selectors that individually match the pod."""
    return [selector for selector in selectors if pod_matches_scope(selector, pod)]


def quota_scope_selectors(quota: ResourceQuota) -> tuple[ScopedResourceSelectorRequirement, ...]:
    """``getScopeSelectorsFromQuota``: legacy ``spec.scopes`` as Exists, then ``scopeSelector``."""
    legacy = tuple(ScopedResourceSelectorRequirement(scope, "Exists") for scope in quota.scopes)
    return legacy + quota.scope_selector


def matching_resources(names: Iterable[str]) -> list[str]:
    """``podEvaluator.MatchingResources``: the quota resource names a pod can consume."""
    result = []
    for name in names:
        extended = name.startswith("requests.") and not _is_native_resource(name)
        if name in _POD_RESOURCES or name.startswith(_POD_RESOURCE_PREFIXES) or extended:
            result.append(name)
    return result


def quota_matches(quota: ResourceQuota, pod: JsonObject) -> bool:
    """``generic.Matches``: tracks a pod resource and every scope matches (no scopes: all match)."""
    if not matching_resources(quota.hard):
        return False
    return all(pod_matches_scope(selector, pod) for selector in quota_scope_selectors(quota))


def pod_constraints(required: Iterable[str], pod: JsonObject) -> str | None:
    """``podEvaluator.Constraints``: the ``must specify ...`` error, or None."""
    spec = _mapping(pod.get("spec"), "spec")
    if _pod_level_resources_set(spec):
        return None
    required_set = set(required) & _VALIDATION_SET
    missing: dict[str, set[str]] = {}
    for ctr in [*_containers(spec, "containers"), *_containers(spec, "initContainers")]:
        present = set(_compute_usage(ctr.requests, ctr.limits))
        for name in required_set - present:
            missing.setdefault(name, set()).add(ctr.name)
    if not missing:
        return None
    parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
    return "must specify " + "; ".join(parts)


def _pretty_print(resources: Mapping[str, Quantity]) -> str:
    return ",".join(f"{name}={format_quantity(resources[name])}" for name in sorted(resources))


def _format_scopes(scopes: Sequence[ScopedResourceSelectorRequirement]) -> str:
    # Go's %v of []ScopedResourceSelectorRequirement: [{Name Op [v1 v2]} {...}]
    return "[" + " ".join(f"{{{s.scope_name} {s.operator} [{' '.join(s.values)}]}}" for s in scopes) + "]"


def _limited_by_default(usage: Mapping[str, Quantity], limited: Iterable[LimitedResource]) -> set[str]:
    result = set()
    for entry in limited:
        for name, qty in usage.items():
            if qty.value > 0 and any(part in name for part in entry.match_contains):
                result.add(name)
    return result


def _exceeded(used: Mapping[str, Quantity], requested: Mapping[str, Quantity],
              hard: Mapping[str, Quantity]) -> list[str]:
    exceeded = []
    for name, qty in requested.items():
        new_usage = add_quantities(used[name], qty) if name in used else qty
        if name in hard and new_usage.value > hard[name].value:
            exceeded.append(name)
    return exceeded


# --- the admission check ----------------------------------------------------------------------------

def check_resource_quota(
    pod: JsonObject,
    *,
    operation: str,
    quotas: Sequence[ResourceQuota],
    limited_resources: Sequence[LimitedResource],
    subresource: str = "",
    now_ns: int | None = None,
) -> QuotaDenial | None:
    """Upstream ``CheckRequest`` for pods (docs/admission.md §5.4): None when allowed, else the denial.

    ``pod`` is the AdmissionReview object after priority mutation; ``quotas`` are the namespace's
    ResourceQuotas. Only CREATE without subresource is evaluated (a plain UPDATE is never quota-checked).
    Dry-run or not, nothing is persisted: the caller never writes ``status.used``.
    """
    if operation != "CREATE" or subresource:
        return None
    if not quotas and not limited_resources:
        return None
    try:
        limited_scopes = [scope for entry in limited_resources for scope in matching_scopes(pod, entry.match_scopes)]
    except ScopeSelectorError as exc:
        # Upstream logs the error and admits (getMatchedLimitedScopes failure returns no error): a broken
        # quota.limitedResources entry must not block every pod, but the operator has to hear of it.
        log.error("Error while matching limited scopes of quota.limitedResources (the pod is admitted"
                  " unchecked, as upstream does): %s", exc)
        return None
    usage = pod_usage(pod, now_ns)
    pod_limited = [entry for entry in limited_resources if (entry.api_group, entry.resource) == ("", "pods")]
    limited_names = _limited_by_default(usage, pod_limited)

    interesting: list[ResourceQuota] = []
    restricted_resources: set[str] = set()
    restricted_scopes: list[ScopedResourceSelectorRequirement] = []
    for quota in sorted(quotas, key=lambda q: q.name):
        try:
            restricted_scopes.extend(matching_scopes(pod, quota_scope_selectors(quota)))
            matches = quota_matches(quota, pod)
        except ScopeSelectorError as exc:
            return QuotaDenial(500, "", f"error matching scopes of quota {quota.name}, err: {exc}",
                               RULE_RESOURCE_QUOTA)
        if not matches:
            continue
        tracked = matching_resources(quota.hard)
        problem = pod_constraints(tracked, pod)
        if problem is not None:
            return forbidden(pod, f"failed quota: {quota.name}: {problem}", RULE_RESOURCE_QUOTA)
        if any(name not in quota.used for name in tracked if name in quota.hard):
            names = ",".join(sorted(tracked))
            return forbidden(pod, f"status unknown for quota: {quota.name}, resources: {names}", RULE_RESOURCE_QUOTA)
        interesting.append(quota)
        restricted_resources.update(tracked)

    negative = sorted(name for name, qty in usage.items() if qty.value < 0)
    if negative:
        return forbidden(pod, f"quota usage is negative for resource(s): {','.join(negative)}", RULE_RESOURCE_QUOTA)
    delta = {name: qty for name, qty in usage.items() if qty.value != 0}
    if not delta:
        return None

    uncovered_names = limited_names - restricted_resources
    if uncovered_names:
        return forbidden(pod, f"insufficient quota to consume: {','.join(sorted(uncovered_names))}",
                         RULE_LIMITED_SCOPES)
    covered = {scope.scope_name for scope in restricted_scopes}
    uncovered_scopes = [scope for scope in limited_scopes if scope.scope_name not in covered]
    if uncovered_scopes:
        # A plain error upstream (not a StatusError): HTTP 500, reason Unknown, no "pods ... forbidden" prefix.
        return QuotaDenial(500, "", f"insufficient quota to match these scopes: {_format_scopes(uncovered_scopes)}",
                           RULE_LIMITED_SCOPES)

    for quota in interesting:
        requested = {name: qty for name, qty in delta.items() if name in quota.hard}
        exceeded = sorted(_exceeded(quota.used, requested, quota.hard))
        if exceeded:
            inner = (f"exceeded quota: {quota.name}, "
                     f"requested: {_pretty_print({n: requested[n] for n in exceeded})}, "
                     f"used: {_pretty_print({n: quota.used[n] for n in exceeded if n in quota.used})}, "
                     f"limited: {_pretty_print({n: quota.hard[n] for n in exceeded})}")
            return forbidden(pod, inner, RULE_RESOURCE_QUOTA)
    return None


# --- quota.classes (PreemptGuard extension) ---------------------------------------------------------

def namespace_allowed(rule: ClassAccessRule, namespace: str, namespace_labels: Mapping[str, str]) -> bool:
    if namespace in rule.allowed_namespaces:
        return True
    if rule.namespace_selector is None:
        return False
    # The API server labels every namespace with its own name.
    labels = {**namespace_labels, NAMESPACE_NAME_LABEL: namespace}
    return label_selector_matches(rule.namespace_selector, labels)


def check_class_access(
    pod: JsonObject,
    *,
    namespace: str,
    namespace_labels: Mapping[str, str],
    class_name: str,
    priority: int,
    rules: Sequence[ClassAccessRule],
) -> QuotaDenial | None:
    """``quota.classes``: the first rule whose ``match`` selects the class decides (403 if not allowed).

    ``class_name``/``priority`` are the resolved values (a class-less pod with a global default carries the
    default's name). A pod with no class at all is not subject to these rules.
    """
    if not class_name:
        return None
    for index, rule in enumerate(rules):
        if not rule.match.matches(class_name, priority):
            continue
        if namespace_allowed(rule, namespace, namespace_labels):
            return None
        inner = (f"PriorityClass {class_name} (priority {priority}) may not be used in namespace {namespace}: "
                 f"PreemptGuard quota.classes[{index}] restricts it to {_describe_allowed(rule)}. "
                 f"To use it, ask a cluster admin to add namespace {namespace} to quota.classes[{index}] "
                 f"in the PreemptGuard configuration")
        return forbidden(pod, inner, RULE_CLASSES)
    return None


def _describe_allowed(rule: ClassAccessRule) -> str:
    parts = []
    if rule.allowed_namespaces:
        parts.append("namespaces " + ", ".join(rule.allowed_namespaces))
    if rule.namespace_selector is not None:
        parts.append("namespaces selected by " + _describe_selector(rule.namespace_selector))
    return " or ".join(parts) if parts else "no namespace"


def _describe_selector(selector: LabelSelector) -> str:
    terms = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for r in selector.match_expressions:
        if r.operator in ("Exists", "DoesNotExist"):
            terms.append(("!" if r.operator == "DoesNotExist" else "") + r.key)
        else:
            terms.append(f"{r.key} {r.operator.lower()} ({','.join(r.values)})")
    return ",".join(terms) if terms else "<everything>"


def _spec_priority(spec: JsonObject) -> int:
    value = spec.get("priority")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0
    return int(value)


def admit_pod_quota(
    pod: JsonObject,
    *,
    namespace: str,
    namespace_labels: Mapping[str, str],
    operation: str,
    quotas: Sequence[ResourceQuota],
    config: QuotaConfig,
    subresource: str = "",
    now_ns: int | None = None,
) -> QuotaDenial | None:
    """The whole quota decision for a pod request: ``quota.classes`` first, then upstream ResourceQuota.

    ``pod`` must already carry the priority plugin's mutation (``spec.priorityClassName`` resolved,
    ``spec.priority`` set). Only CREATE without subresource is checked; anything else is allowed.
    """
    if operation != "CREATE" or subresource:
        return None
    spec = _mapping(pod.get("spec"), "spec")
    denial = check_class_access(
        pod,
        namespace=namespace,
        namespace_labels=namespace_labels,
        class_name=str(spec.get("priorityClassName") or ""),
        priority=_spec_priority(spec),
        rules=config.classes,
    )
    if denial is not None:
        return denial
    return check_resource_quota(pod, operation=operation, subresource=subresource, quotas=quotas,
                                limited_resources=config.limited_resources, now_ns=now_ns)
