"""Upstream ResourceQuota admission details beyond the vectors: usage, scopes, constraints, messages,
and PreemptGuard's quota.classes."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from webhook.cluster.model import ResourceQuota, ScopedResourceSelectorRequirement
from webhook.cluster.quantity import Quantity, format_quantity, parse_quantity
from webhook.cluster.reader import resource_quota_from_dict
from webhook.config import LimitedResource, QuotaConfig, parse_config
from webhook.priority.quota import (
    RULE_CLASSES,
    RULE_LIMITED_SCOPES,
    RULE_RESOURCE_QUOTA,
    add_quantities,
    admit_pod_quota,
    check_resource_quota,
    pod_matches_scope,
    pod_usage,
)


def _ctr(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
         **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "x", "resources": resources, **extra}


def _pod(*containers: dict[str, Any], name: str = "p", class_name: str = "", priority: int = 0,
         **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if class_name:
        body["priorityClassName"] = class_name
    body["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": body}


def _quota(name: str = "q", hard: dict[str, str] | None = None, used: dict[str, str] | None = None,
           scopes: list[str] | None = None, selector: list[dict[str, Any]] | None = None) -> ResourceQuota:
    spec: dict[str, Any] = {}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    status: dict[str, Any] = {}
    if hard is not None:
        status["hard"] = hard
    if used is not None:
        status["used"] = used
    return resource_quota_from_dict({"kind": "ResourceQuota", "metadata": {"name": name, "namespace": "ns"},
                                     "spec": spec, "status": status})


def _config(data: dict[str, Any]) -> QuotaConfig:
    return parse_config({"quota": data}, "test").quota


def _limited(*scopes: dict[str, Any], resource: str = "pods", contains: list[str] | None = None) -> QuotaConfig:
    entry: dict[str, Any] = {"resource": resource, "matchScopes": list(scopes)}
    if contains:
        entry["matchContains"] = contains
    return _config({"limitedResources": [entry]})


def _check(pod: dict[str, Any], quotas: list[ResourceQuota], config: QuotaConfig | None = None,
           labels: dict[str, str] | None = None, namespace: str = "ns", operation: str = "CREATE") -> Any:
    return admit_pod_quota(pod, namespace=namespace, namespace_labels=labels or {}, operation=operation,
                           quotas=quotas, config=config or QuotaConfig())


def _fmt(usage: dict[str, Quantity]) -> dict[str, str]:
    return {name: format_quantity(qty) for name, qty in usage.items()}


# --- usage ------------------------------------------------------------------------------------------

def test_usage_sums_keep_the_first_format() -> None:
    pod = _pod(_ctr("a", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "1"}),
               _ctr("b", {"cpu": "1", "memory": "512Mi", "example.com/gpu": "2", "hugepages-2Mi": "4Mi"}))
    assert _fmt(pod_usage(pod)) == {
        "count/pods": "1", "pods": "1", "cpu": "1500m", "requests.cpu": "1500m", "limits.cpu": "1",
        "memory": "1536Mi", "requests.memory": "1536Mi", "requests.example.com/gpu": "2",
        "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi",
    }


def test_usage_limits_default_requests_and_init_containers_take_the_peak() -> None:
    pod = _pod(_ctr("main", limits={"cpu": "200m", "memory": "100Mi"}),
               initContainers=[_ctr("init", {"cpu": "2", "memory": "50Mi"}),
                               _ctr("sidecar", {"cpu": "100m"}, restartPolicy="Always")],
               overhead={"cpu": "10m", "memory": "1Mi"})
    usage = _fmt(pod_usage(pod))
    # containers 200m + sidecar 100m = 300m vs init peak 2 + 0 (sidecar starts after) = 2 -> 2, + 10m overhead.
    assert usage["requests.cpu"] == "2010m"
    assert usage["requests.memory"] == "101Mi"
    assert usage["limits.cpu"] == "210m" and usage["limits.memory"] == "101Mi"


def test_terminal_pod_counts_only_the_object() -> None:
    pod = _pod(_ctr("a", {"cpu": "1"}))
    pod["status"] = {"phase": "Succeeded"}
    assert _fmt(pod_usage(pod)) == {"count/pods": "1"}


def test_pod_past_its_deletion_grace_is_not_charged() -> None:
    pod = _pod(_ctr("a", {"cpu": "1"}))
    pod["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z", deletionGracePeriodSeconds=30)
    deleted = 1_704_067_200 * 10**9
    assert "cpu" in pod_usage(pod, now_ns=deleted + 10 * 10**9)
    assert "cpu" not in pod_usage(pod, now_ns=deleted + 31 * 10**9)


def test_add_of_a_zero_receiver_takes_the_other_format() -> None:
    zero = Quantity(Fraction(0), "DecimalSI")
    assert format_quantity(add_quantities(zero, parse_quantity("1Gi"))) == "1Gi"
    assert format_quantity(add_quantities(parse_quantity("1"), parse_quantity("1Gi"))) == "1073741825"


# --- scopes -----------------------------------------------------------------------------------------

def _req(scope: str, operator: str = "Exists", *values: str) -> ScopedResourceSelectorRequirement:
    return ScopedResourceSelectorRequirement(scope, operator, values)


@pytest.mark.parametrize(("selector", "class_name", "expected"), [
    (_req("PriorityClass", "NotIn", "high"), "", True),
    (_req("PriorityClass", "NotIn", "high"), "high", False),
    (_req("PriorityClass", "NotIn", "high"), "low", True),
    (_req("PriorityClass", "In", "high"), "", False),
    (_req("PriorityClass", "DoesNotExist"), "", True),
    (_req("PriorityClass", "DoesNotExist"), "low", False),
    (_req("PriorityClass", "Exists"), "low", True),
    (_req("VolumeAttributesClass", "Exists"), "low", False),
])
def test_priority_class_scope(selector: ScopedResourceSelectorRequirement, class_name: str, expected: bool) -> None:
    assert pod_matches_scope(selector, _pod(_ctr("a"), class_name=class_name)) is expected


def test_pod_scopes() -> None:
    best_effort = _pod(_ctr("a"))
    burstable = _pod(_ctr("a", {"memory": "1Mi"}))
    zero_request = _pod(_ctr("a", {"cpu": "0"}))
    terminating = _pod(_ctr("a"), activeDeadlineSeconds=60)
    cross_ns = _pod(_ctr("a"), affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "x", "namespaceSelector": {}}}]}})
    assert pod_matches_scope(_req("BestEffort"), best_effort)
    assert pod_matches_scope(_req("BestEffort"), zero_request)
    assert not pod_matches_scope(_req("BestEffort"), burstable)
    assert pod_matches_scope(_req("NotBestEffort"), burstable)
    assert pod_matches_scope(_req("Terminating"), terminating)
    assert not pod_matches_scope(_req("Terminating"), best_effort)
    assert pod_matches_scope(_req("NotTerminating"), best_effort)
    assert pod_matches_scope(_req("CrossNamespacePodAffinity"), cross_ns)
    assert not pod_matches_scope(_req("CrossNamespacePodAffinity"), best_effort)


def test_legacy_scopes_and_selector_must_all_match() -> None:
    quota = _quota(hard={"pods": "10"}, used={"pods": "10"}, scopes=["NotTerminating"],
                   selector=[{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}])
    # Terminating pod: the quota does not match, so its full usage is irrelevant.
    assert _check(_pod(_ctr("a"), class_name="high", activeDeadlineSeconds=5), [quota]) is None
    denial = _check(_pod(_ctr("a"), class_name="high"), [quota])
    assert denial.message == ('pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=10, '
                              "limited: pods=10")


# --- quota checks -----------------------------------------------------------------------------------

def test_exceeded_lists_only_exceeded_resources_sorted() -> None:
    quota = _quota(hard={"requests.memory": "2Gi", "requests.cpu": "4", "pods": "10", "limits.memory": "1Gi"},
                   used={"requests.memory": "1536Mi", "requests.cpu": "1", "pods": "1", "limits.memory": "0"})
    pod = _pod(_ctr("a", {"cpu": "500m", "memory": "300Mi"}, {"memory": "1Gi"}),
               _ctr("b", {"cpu": "500m", "memory": "300Mi"}, {"memory": "600Mi"}))
    denial = _check(pod, [quota])
    assert denial.code == 403 and denial.reason == "Forbidden" and denial.rule == RULE_RESOURCE_QUOTA
    assert denial.message == ('pods "p" is forbidden: exceeded quota: q, '
                              "requested: limits.memory=1624Mi,requests.memory=600Mi, "
                              "used: limits.memory=0,requests.memory=1536Mi, "
                              "limited: limits.memory=1Gi,requests.memory=2Gi")


def test_at_the_limit_is_allowed() -> None:
    quota = _quota(hard={"pods": "2"}, used={"pods": "1"})
    assert _check(_pod(_ctr("a")), [quota]) is None


def test_first_exceeded_quota_by_name_is_reported() -> None:
    quotas = [_quota("zeta", {"pods": "1"}, {"pods": "1"}), _quota("alpha", {"count/pods": "1"}, {"count/pods": "1"})]
    assert "exceeded quota: alpha, requested: count/pods=1" in _check(_pod(_ctr("a")), quotas).message


def test_constraints_require_every_container_to_set_quota_tracked_compute() -> None:
    quota = _quota(hard={"requests.cpu": "10", "limits.memory": "10Gi", "pods": "5"},
                   used={"requests.cpu": "0", "limits.memory": "0", "pods": "0"})
    pod = _pod(_ctr("web", {"cpu": "1"}, {"memory": "1Gi"}), _ctr("log"), initContainers=[_ctr("init", {"cpu": "1"})])
    denial = _check(pod, [quota])
    assert denial.message == ('pods "p" is forbidden: failed quota: q: must specify limits.memory for: init,log; '
                              "requests.cpu for: log")
    pod_level = _pod(_ctr("web"), _ctr("log"), resources={"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}})
    assert _check(pod_level, [quota]) is None


def test_status_unknown_when_used_is_missing() -> None:
    quota = _quota(hard={"pods": "5", "count/pods": "5", "services": "1"}, used={"count/pods": "0"})
    denial = _check(_pod(_ctr("a")), [quota])
    assert denial.message == 'pods "p" is forbidden: status unknown for quota: q, resources: count/pods,pods'


def test_quota_without_pod_resources_does_not_match() -> None:
    quota = _quota(hard={"services": "1"}, used={})
    assert _check(_pod(_ctr("a")), [quota]) is None


def test_update_and_subresources_are_not_checked() -> None:
    full = _quota(hard={"pods": "0"}, used={"pods": "0"})
    pod = _pod(_ctr("a"))
    assert _check(pod, [full], operation="UPDATE") is None
    assert check_resource_quota(pod, operation="CREATE", subresource="binding", quotas=[full],
                                limited_resources=()) is None
    assert _check(pod, [full]) is not None


def test_generate_name_in_message() -> None:
    pod = _pod(_ctr("a"))
    pod["metadata"] = {"generateName": "web-", "namespace": "ns"}
    denial = _check(pod, [_quota(hard={"pods": "0"}, used={"pods": "0"})])
    assert denial.message.startswith('pods "web-" is forbidden: exceeded quota: q')


# --- limitedResources -------------------------------------------------------------------------------

def test_limited_scopes_are_not_filtered_by_resource() -> None:
    config = _limited({"scopeName": "PriorityClass", "operator": "In", "values": ["gold"]},
                      resource="persistentvolumeclaims")
    denial = _check(_pod(_ctr("a"), class_name="gold"), [], config)
    assert (denial.code, denial.reason, denial.rule) == (500, "", RULE_LIMITED_SCOPES)
    assert denial.message == "insufficient quota to match these scopes: [{PriorityClass In [gold]}]"


def test_match_contains_applies_only_to_the_pods_resource() -> None:
    other = _limited({"scopeName": "PriorityClass", "operator": "Exists"}, resource="services", contains=["cpu"])
    covering = _quota(selector=[{"scopeName": "PriorityClass", "operator": "Exists"}])
    assert _check(_pod(_ctr("a", {"cpu": "1"}), class_name="x"), [covering], other) is None
    pods = _limited({"scopeName": "PriorityClass", "operator": "Exists"}, contains=["cpu", "memory"])
    denial = _check(_pod(_ctr("a", {"cpu": "1", "memory": "1Mi"}), class_name="x"), [covering], pods)
    assert denial.message == ('pods "p" is forbidden: insufficient quota to consume: '
                              "cpu,memory,requests.cpu,requests.memory")


def test_coverage_needs_a_matching_scope_expression_not_a_matching_quota() -> None:
    config = _limited({"scopeName": "PriorityClass", "operator": "In", "values": ["gold"]})
    # The quota as a whole does not match (Terminating), but its PriorityClass expression does: covered.
    partial = _quota(hard={"pods": "1"}, used={"pods": "1"}, scopes=["Terminating"],
                     selector=[{"scopeName": "PriorityClass", "operator": "Exists"}])
    assert _check(_pod(_ctr("a"), class_name="gold"), [partial], config) is None
    # A PriorityClass expression that does not match the pod does not cover.
    other = _quota(selector=[{"scopeName": "PriorityClass", "operator": "In", "values": ["silver"]}])
    assert _check(_pod(_ctr("a"), class_name="gold"), [other], config) is not None


def test_invalid_quota_selector_is_a_plain_error() -> None:
    bad = _quota(hard={"pods": "1"}, used={"pods": "0"},
                 selector=[{"scopeName": "PriorityClass", "operator": "In", "values": []}])
    denial = _check(_pod(_ctr("a"), class_name="x"), [bad])
    assert denial.code == 500 and denial.message.startswith("error matching scopes of quota q")


# --- quota.classes ----------------------------------------------------------------------------------

CLASSES = {"classes": [
    {"match": {"names": ["system-node-critical"]}, "allowedNamespaces": ["kube-system", "monitoring"]},
    {"match": {"valueAtLeast": 1000000}, "allowedNamespaces": ["prod-a"],
     "namespaceSelector": {"matchLabels": {"tier": "prod"}}},
    {"match": {"names": ["batch-high"]}, "namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["batch"]}]}},
]}


@pytest.mark.parametrize(("class_name", "priority", "namespace", "labels", "allowed"), [
    ("system-node-critical", 2000001000, "monitoring", {}, True),  # first matching rule decides
    ("system-node-critical", 2000001000, "team-a", {"tier": "prod"}, False),
    ("high", 1000000, "prod-a", {}, True),
    ("high", 1000000, "team-a", {"tier": "prod"}, True),
    ("high", 1000000, "team-a", {"tier": "dev"}, False),
    ("medium", 999999, "team-a", {}, True),
    ("batch-high", 10, "batch", {}, True),  # the API server's kubernetes.io/metadata.name label
    ("batch-high", 10, "team-a", {}, False),
    ("", 0, "team-a", {}, True),
])
def test_class_access(class_name: str, priority: int, namespace: str, labels: dict[str, str], allowed: bool) -> None:
    pod = _pod(_ctr("a"), class_name=class_name, priority=priority)
    denial = _check(pod, [], _config(CLASSES), labels=labels, namespace=namespace)
    assert (denial is None) is allowed
    if denial is not None:
        assert (denial.code, denial.reason, denial.rule) == (403, "Forbidden", RULE_CLASSES)
        assert denial.message.startswith(f'pods "p" is forbidden: PriorityClass {class_name} ')
        assert f"may not be used in namespace {namespace}" in denial.message
        assert "ask a cluster admin to add namespace" in denial.message


def test_classes_are_checked_before_resource_quota() -> None:
    config = _config({**CLASSES, "limitedResources": [
        {"resource": "pods", "matchScopes": [{"scopeName": "PriorityClass", "operator": "Exists"}]}]})
    pod = _pod(_ctr("a"), class_name="high", priority=1000000)
    denial = _check(pod, [], config, namespace="team-a")
    assert denial.rule == RULE_CLASSES
    assert _check(pod, [], config, namespace="prod-a").rule == RULE_LIMITED_SCOPES


def test_a_limited_scope_upstream_cannot_evaluate_admits_the_pod_and_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    # Config loading refuses such a scope (test_config_loading); the rule itself still follows upstream
    # (getMatchedLimitedScopes logs and admits) for a configuration built any other way.
    broken = LimitedResource("pods", match_scopes=(ScopedResourceSelectorRequirement("PriorityClass", "In", ()),))
    with caplog.at_level("ERROR", logger="webhook.priority.quota"):
        assert check_resource_quota(_pod(_ctr("a"), class_name="gold"), operation="CREATE", quotas=[],
                                    limited_resources=[broken]) is None
    (record,) = [r for r in caplog.records if r.name == "webhook.priority.quota"]
    assert record.levelname == "ERROR"
    assert "quota.limitedResources" in record.getMessage()
    assert "values set can't be empty" in record.getMessage()
