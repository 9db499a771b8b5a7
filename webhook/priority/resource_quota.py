"""Upstream ResourceQuota admission for a pod CREATE: usage, scopes, constraints, ``limitedResources``.

Upstream: staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go (``CheckRequest``)
and pkg/quota/v1/evaluator/core/pods.go (``PodUsageFunc``, ``podMatchesScopeFunc``, ``Constraints``).
Described in docs/admission.md §5. Reads only the typed ``Pod`` (``Pod.quota``, ``webhook.cluster.model``);
the sums are ``PodRequests``/``PodLimits`` of webhook/cluster/resources.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from webhook.cluster.copying import replace_fields
from webhook.cluster.model import Pod, ResourceQuota, ScopedResourceSelectorRequirement
from webhook.cluster.quantity import Quantity, format_quantity
from webhook.cluster.resources import ResourceList, add_quantities, is_pod_level_resources_set, pod_limits, pod_requests
from webhook.config import (
    SCOPE_BEST_EFFORT,
    SCOPE_CROSS_NAMESPACE_POD_AFFINITY,
    SCOPE_NOT_BEST_EFFORT,
    SCOPE_NOT_TERMINATING,
    SCOPE_PRIORITY_CLASS,
    SCOPE_TERMINATING,
    LimitedResource,
)

FORBIDDEN = "Forbidden"

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
_ZERO = Quantity(Fraction(0))


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QuotaDenial:
    """A refused pod: ``code``/``reason``/``message`` go into the AdmissionResponse status unchanged."""

    code: int  # 403 Forbidden, or 500 for upstream's plain (non-status) errors
    reason: str  # "Forbidden", or "" (StatusReasonUnknown) for plain errors
    message: str  # full status.message, e.g. 'pods "x" is forbidden: exceeded quota: ...'
    rule: str  # which check refused: quota.classes | quota.limitedResources | ResourceQuota


class ScopeSelectorError(ValueError):
    """A scope selector that upstream cannot convert into a label selector."""


def forbidden(pod: Pod, inner: str, rule: str) -> QuotaDenial:
    """``admission.NewForbidden``: HTTP 403 with the ``pods "<name>" is forbidden:`` prefix (name, else
    generateName, else Unknown)."""
    return QuotaDenial(403, FORBIDDEN, f'pods "{pod.name or "Unknown"}" is forbidden: {inner}', rule)


# --- pod usage (pods.go PodUsageFunc) --------------------------------------------------------------

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


def is_quota_charged(pod: Pod, now_ns: int) -> bool:
    """``QuotaV1Pod``: terminal pods, and pods past their deletion grace period, hold no compute quota."""
    if pod.is_terminal:
        return False
    deleted_at, grace = pod.quota.deletion_timestamp_ns, pod.quota.deletion_grace_period_seconds
    if deleted_at is not None and grace is not None:
        return now_ns <= deleted_at + grace * 1_000_000_000
    return True


def pod_usage(pod: Pod, now_ns: int | None = None) -> ResourceList:
    """``PodUsageFunc``: what creating this pod charges against a quota."""
    result: ResourceList = {_POD_OBJECT_COUNT: _ONE}
    if not is_quota_charged(pod, time.time_ns() if now_ns is None else now_ns):
        return result
    spec = pod.quota.resources
    result.update(_compute_usage(pod_requests(spec), pod_limits(spec)))
    return result


# --- scopes (pods.go podMatchesScopeFunc) -----------------------------------------------------------

def _qos_is_best_effort(pod: Pod) -> bool:
    """``qos.GetPodQOS(pod) == BestEffort``: no positive cpu/memory request or limit anywhere."""
    facts = pod.quota
    if facts.qos_class:
        return facts.qos_class == "BestEffort"
    spec = facts.resources
    if is_pod_level_resources_set(spec):
        lists = [spec.pod_requests, spec.pod_limits]
    else:
        lists = [resources for ctr in (*spec.containers, *spec.init_containers)
                 for resources in (ctr.requests, ctr.limits)]
    return not any(resources.get(name, _ZERO).value > 0 for resources in lists for name in _QOS_RESOURCES)


def _is_terminating(pod: Pod) -> bool:
    deadline = pod.quota.active_deadline_seconds
    return deadline is not None and deadline >= 0


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


def pod_matches_scope(selector: ScopedResourceSelectorRequirement, pod: Pod) -> bool:
    """``podMatchesScopeFunc``; unknown scope names match nothing. May raise ``ScopeSelectorError``."""
    scope = selector.scope_name
    if scope == SCOPE_TERMINATING:
        return _is_terminating(pod)
    if scope == SCOPE_NOT_TERMINATING:
        return not _is_terminating(pod)
    if scope == SCOPE_BEST_EFFORT:
        return _qos_is_best_effort(pod)
    if scope == SCOPE_NOT_BEST_EFFORT:
        return not _qos_is_best_effort(pod)
    if scope == SCOPE_PRIORITY_CLASS:
        if selector.operator == "Exists":
            # Upstream short-circuits Exists without parsing the selector (values are not checked).
            return bool(pod.priority_class_name)
        return _priority_class_selector_matches(selector, pod.priority_class_name)
    if scope == SCOPE_CROSS_NAMESPACE_POD_AFFINITY:
        return pod.quota.cross_namespace_pod_affinity
    return False


def matching_scopes(pod: Pod, selectors: Iterable[ScopedResourceSelectorRequirement],
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


def quota_matches(quota: ResourceQuota, pod: Pod) -> bool:
    """``generic.Matches``: tracks a pod resource and every scope matches (no scopes: all match)."""
    if not matching_resources(quota.hard):
        return False
    return all(pod_matches_scope(selector, pod) for selector in quota_scope_selectors(quota))


def pod_constraints(required: Iterable[str], pod: Pod) -> str | None:
    """``podEvaluator.Constraints``: the ``must specify ...`` error, or None."""
    spec = pod.quota.resources
    if is_pod_level_resources_set(spec):
        return None
    required_set = set(required) & _VALIDATION_SET
    missing: dict[str, set[str]] = {}
    for ctr in (*spec.containers, *spec.init_containers):
        present = set(_compute_usage(ctr.requests, ctr.limits))
        for name in required_set - present:
            missing.setdefault(name, set()).add(ctr.name)
    if not missing:
        return None
    parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
    return "must specify " + "; ".join(parts)


# --- the admission check (controller.go CheckRequest) ------------------------------------------------

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


def check_resource_quota(
    pod: Pod,
    *,
    operation: str,
    quotas: Sequence[ResourceQuota],
    limited_resources: Sequence[LimitedResource],
    subresource: str = "",
    now_ns: int | None = None,
) -> QuotaDenial | None:
    """Upstream ``CheckRequest`` for pods (docs/admission.md §5.4): None when allowed, else the denial.

    ``pod`` is the pod after priority mutation; ``quotas`` are the namespace's ResourceQuotas. Only CREATE
    without subresource is evaluated (a plain UPDATE is never quota-checked). Dry-run or not, nothing is
    persisted: the caller never writes ``status.used``.
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


def charge_quotas(pod: Pod, quotas: Sequence[ResourceQuota], now_ns: int | None = None) -> list[ResourceQuota]:
    """The namespace's quotas after admitting ``pod``: each quota that matches it is charged its usage, as the
    admission controller records it in ``status.used`` before the next create is checked (controller.go
    ``CheckRequest`` → the quota accessor's ``UpdateQuotaStatus``). Used to admit replicas one by one."""
    usage = pod_usage(pod, now_ns)
    charged = []
    for quota in quotas:
        try:
            matches = quota_matches(quota, pod)
        except ScopeSelectorError:
            matches = False
        if matches:
            used = dict(quota.used)
            for name, qty in usage.items():
                if name in quota.hard:
                    used[name] = add_quantities(used[name], qty) if name in used else qty
            quota = replace_fields(quota, used=used)
        charged.append(quota)
    return charged

