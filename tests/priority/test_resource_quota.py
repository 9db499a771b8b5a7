"""Upstream ResourceQuota admission details beyond the vectors (webhook/priority/resource_quota.py): usage,
scopes, constraints, limitedResources and messages."""

from __future__ import annotations

from fractions import Fraction

import pytest
from quota_builders import check, ctr, limited, pod_dict, printed, resource_quota, typed

from webhook.cluster.model import ScopedResourceSelectorRequirement
from webhook.cluster.quantity import Quantity, format_quantity, parse_quantity
from webhook.cluster.resources import add_quantities
from webhook.config import LimitedResource
from webhook.priority.resource_quota import (
    RULE_LIMITED_SCOPES,
    RULE_RESOURCE_QUOTA,
    check_resource_quota,
    pod_matches_scope,
    pod_usage,
)

# --- usage ------------------------------------------------------------------------------------------

def test_usage_sums_keep_the_first_format() -> None:
    pod = pod_dict(ctr("a", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "1"}),
               ctr("b", {"cpu": "1", "memory": "512Mi", "example.com/gpu": "2", "hugepages-2Mi": "4Mi"}))
    assert printed(pod_usage(typed(pod))) == {
        "count/pods": "1", "pods": "1", "cpu": "1500m", "requests.cpu": "1500m", "limits.cpu": "1",
        "memory": "1536Mi", "requests.memory": "1536Mi", "requests.example.com/gpu": "2",
        "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi",
    }


def test_usage_limits_default_requests_and_init_containers_take_the_peak() -> None:
    pod = pod_dict(ctr("main", limits={"cpu": "200m", "memory": "100Mi"}),
               initContainers=[ctr("init", {"cpu": "2", "memory": "50Mi"}),
                               ctr("sidecar", {"cpu": "100m"}, restartPolicy="Always")],
               overhead={"cpu": "10m", "memory": "1Mi"})
    usage = printed(pod_usage(typed(pod)))
    # containers 200m + sidecar 100m = 300m vs init peak 2 + 0 (sidecar starts after) = 2 -> 2, + 10m overhead.
    assert usage["requests.cpu"] == "2010m"
    assert usage["requests.memory"] == "101Mi"
    assert usage["limits.cpu"] == "210m" and usage["limits.memory"] == "101Mi"


def test_terminal_pod_counts_only_the_object() -> None:
    pod = pod_dict(ctr("a", {"cpu": "1"}))
    pod["status"] = {"phase": "Succeeded"}
    assert printed(pod_usage(typed(pod))) == {"count/pods": "1"}


def test_pod_past_its_deletion_grace_is_not_charged() -> None:
    pod = pod_dict(ctr("a", {"cpu": "1"}))
    pod["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z", deletionGracePeriodSeconds=30)
    deleted = 1_704_067_200 * 10**9
    assert "cpu" in pod_usage(typed(pod), now_ns=deleted + 10 * 10**9)
    assert "cpu" not in pod_usage(typed(pod), now_ns=deleted + 31 * 10**9)


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
    assert pod_matches_scope(selector, typed(pod_dict(ctr("a"), class_name=class_name))) is expected


def test_pod_scopes() -> None:
    best_effort = pod_dict(ctr("a"))
    burstable = pod_dict(ctr("a", {"memory": "1Mi"}))
    zero_request = pod_dict(ctr("a", {"cpu": "0"}))
    terminating = pod_dict(ctr("a"), activeDeadlineSeconds=60)
    cross_ns = pod_dict(ctr("a"), affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "x", "namespaceSelector": {}}}]}})
    assert pod_matches_scope(_req("BestEffort"), typed(best_effort))
    assert pod_matches_scope(_req("BestEffort"), typed(zero_request))
    assert not pod_matches_scope(_req("BestEffort"), typed(burstable))
    assert pod_matches_scope(_req("NotBestEffort"), typed(burstable))
    assert pod_matches_scope(_req("Terminating"), typed(terminating))
    assert not pod_matches_scope(_req("Terminating"), typed(best_effort))
    assert pod_matches_scope(_req("NotTerminating"), typed(best_effort))
    assert pod_matches_scope(_req("CrossNamespacePodAffinity"), typed(cross_ns))
    assert not pod_matches_scope(_req("CrossNamespacePodAffinity"), typed(best_effort))


def test_legacy_scopes_and_selector_must_all_match() -> None:
    quota = resource_quota(hard={"pods": "10"}, used={"pods": "10"}, scopes=["NotTerminating"],
                   selector=[{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}])
    # Terminating pod: the quota does not match, so its full usage is irrelevant.
    assert check(pod_dict(ctr("a"), class_name="high", activeDeadlineSeconds=5), [quota]) is None
    denial = check(pod_dict(ctr("a"), class_name="high"), [quota])
    assert denial.message == ('pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=10, '
                              "limited: pods=10")


# --- quota checks -----------------------------------------------------------------------------------

def test_exceeded_lists_only_exceeded_resources_sorted() -> None:
    quota = resource_quota(hard={"requests.memory": "2Gi", "requests.cpu": "4", "pods": "10", "limits.memory": "1Gi"},
                   used={"requests.memory": "1536Mi", "requests.cpu": "1", "pods": "1", "limits.memory": "0"})
    pod = pod_dict(ctr("a", {"cpu": "500m", "memory": "300Mi"}, {"memory": "1Gi"}),
               ctr("b", {"cpu": "500m", "memory": "300Mi"}, {"memory": "600Mi"}))
    denial = check(pod, [quota])
    assert denial.code == 403 and denial.reason == "Forbidden" and denial.rule == RULE_RESOURCE_QUOTA
    assert denial.message == ('pods "p" is forbidden: exceeded quota: q, '
                              "requested: limits.memory=1624Mi,requests.memory=600Mi, "
                              "used: limits.memory=0,requests.memory=1536Mi, "
                              "limited: limits.memory=1Gi,requests.memory=2Gi")


def test_at_the_limit_is_allowed() -> None:
    quota = resource_quota(hard={"pods": "2"}, used={"pods": "1"})
    assert check(pod_dict(ctr("a")), [quota]) is None


def test_first_exceeded_quota_by_name_is_reported() -> None:
    quotas = [resource_quota("zeta", {"pods": "1"}, {"pods": "1"}),
              resource_quota("alpha", {"count/pods": "1"}, {"count/pods": "1"})]
    assert "exceeded quota: alpha, requested: count/pods=1" in check(pod_dict(ctr("a")), quotas).message


def test_constraints_require_every_container_to_set_quota_tracked_compute() -> None:
    quota = resource_quota(hard={"requests.cpu": "10", "limits.memory": "10Gi", "pods": "5"},
                   used={"requests.cpu": "0", "limits.memory": "0", "pods": "0"})
    pod = pod_dict(ctr("web", {"cpu": "1"}, {"memory": "1Gi"}), ctr("log"), initContainers=[ctr("init", {"cpu": "1"})])
    denial = check(pod, [quota])
    assert denial.message == ('pods "p" is forbidden: failed quota: q: must specify limits.memory for: init,log; '
                              "requests.cpu for: log")
    pod_level = pod_dict(ctr("web"), ctr("log"), resources={"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}})
    assert check(pod_level, [quota]) is None


def test_status_unknown_when_used_is_missing() -> None:
    quota = resource_quota(hard={"pods": "5", "count/pods": "5", "services": "1"}, used={"count/pods": "0"})
    denial = check(pod_dict(ctr("a")), [quota])
    assert denial.message == 'pods "p" is forbidden: status unknown for quota: q, resources: count/pods,pods'


def test_quota_without_pod_resources_does_not_match() -> None:
    quota = resource_quota(hard={"services": "1"}, used={})
    assert check(pod_dict(ctr("a")), [quota]) is None


def test_update_and_subresources_are_not_checked() -> None:
    full = resource_quota(hard={"pods": "0"}, used={"pods": "0"})
    pod = pod_dict(ctr("a"))
    assert check(pod, [full], operation="UPDATE") is None
    assert check_resource_quota(typed(pod), operation="CREATE", subresource="binding", quotas=[full],
                                limited_resources=()) is None
    assert check(pod, [full]) is not None


def test_generate_name_in_message() -> None:
    pod = pod_dict(ctr("a"))
    pod["metadata"] = {"generateName": "web-", "namespace": "ns"}
    denial = check(pod, [resource_quota(hard={"pods": "0"}, used={"pods": "0"})])
    assert denial.message.startswith('pods "web-" is forbidden: exceeded quota: q')


# --- limitedResources -------------------------------------------------------------------------------

def test_limited_scopes_are_not_filtered_by_resource() -> None:
    config = limited({"scopeName": "PriorityClass", "operator": "In", "values": ["gold"]},
                      resource="persistentvolumeclaims")
    denial = check(pod_dict(ctr("a"), class_name="gold"), [], config)
    assert (denial.code, denial.reason, denial.rule) == (500, "", RULE_LIMITED_SCOPES)
    assert denial.message == "insufficient quota to match these scopes: [{PriorityClass In [gold]}]"


def test_match_contains_applies_only_to_the_pods_resource() -> None:
    other = limited({"scopeName": "PriorityClass", "operator": "Exists"}, resource="services", contains=["cpu"])
    covering = resource_quota(selector=[{"scopeName": "PriorityClass", "operator": "Exists"}])
    assert check(pod_dict(ctr("a", {"cpu": "1"}), class_name="x"), [covering], other) is None
    pods = limited({"scopeName": "PriorityClass", "operator": "Exists"}, contains=["cpu", "memory"])
    denial = check(pod_dict(ctr("a", {"cpu": "1", "memory": "1Mi"}), class_name="x"), [covering], pods)
    assert denial.message == ('pods "p" is forbidden: insufficient quota to consume: '
                              "cpu,memory,requests.cpu,requests.memory")


def test_coverage_needs_a_matching_scope_expression_not_a_matching_quota() -> None:
    config = limited({"scopeName": "PriorityClass", "operator": "In", "values": ["gold"]})
    # The quota as a whole does not match (Terminating), but its PriorityClass expression does: covered.
    partial = resource_quota(hard={"pods": "1"}, used={"pods": "1"}, scopes=["Terminating"],
                     selector=[{"scopeName": "PriorityClass", "operator": "Exists"}])
    assert check(pod_dict(ctr("a"), class_name="gold"), [partial], config) is None
    # A PriorityClass expression that does not match the pod does not cover.
    other = resource_quota(selector=[{"scopeName": "PriorityClass", "operator": "In", "values": ["silver"]}])
    assert check(pod_dict(ctr("a"), class_name="gold"), [other], config) is not None


def test_invalid_quota_selector_is_a_plain_error() -> None:
    bad = resource_quota(hard={"pods": "1"}, used={"pods": "0"},
                 selector=[{"scopeName": "PriorityClass", "operator": "In", "values": []}])
    denial = check(pod_dict(ctr("a"), class_name="x"), [bad])
    assert denial.code == 500 and denial.message.startswith("error matching scopes of quota q")


def test_a_limited_scope_upstream_cannot_evaluate_admits_the_pod_and_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    # Config loading refuses such a scope (test_config_loading); the rule itself still follows upstream
    # (getMatchedLimitedScopes logs and admits) for a configuration built any other way.
    broken = LimitedResource("pods", match_scopes=(ScopedResourceSelectorRequirement("PriorityClass", "In", ()),))
    with caplog.at_level("ERROR", logger="webhook.priority.resource_quota"):
        assert check_resource_quota(typed(pod_dict(ctr("a"), class_name="gold")), operation="CREATE", quotas=[],
                                    limited_resources=[broken]) is None
    (record,) = [r for r in caplog.records if r.name == "webhook.priority.resource_quota"]
    assert record.levelname == "ERROR"
    assert "quota.limitedResources" in record.getMessage()
    assert "values set can't be empty" in record.getMessage()
