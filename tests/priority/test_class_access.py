"""PreemptGuard's quota.classes (webhook/priority/class_access.py), and its place before upstream ResourceQuota."""

from __future__ import annotations

import pytest
from quota_builders import check, ctr, pod_dict, quota_config, typed

from webhook.priority.class_access import RULE_CLASSES, check_class_access
from webhook.priority.resource_quota import RULE_LIMITED_SCOPES

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
    pod = pod_dict(ctr("a"), class_name=class_name, priority=priority)
    denial = check(pod, [], quota_config(CLASSES), labels=labels, namespace=namespace)
    assert (denial is None) is allowed
    if denial is not None:
        assert (denial.code, denial.reason, denial.rule) == (403, "Forbidden", RULE_CLASSES)
        assert denial.message.startswith(f'pods "p" is forbidden: PriorityClass {class_name} ')
        assert f"may not be used in namespace {namespace}" in denial.message
        assert "ask a cluster admin to add namespace" in denial.message


def test_classes_are_checked_before_resource_quota() -> None:
    config = quota_config({**CLASSES, "limitedResources": [
        {"resource": "pods", "matchScopes": [{"scopeName": "PriorityClass", "operator": "Exists"}]}]})
    pod = pod_dict(ctr("a"), class_name="high", priority=1000000)
    denial = check(pod, [], config, namespace="team-a")
    assert denial.rule == RULE_CLASSES
    assert check(pod, [], config, namespace="prod-a").rule == RULE_LIMITED_SCOPES




def test_the_message_names_the_rule_but_no_other_namespace_or_selector() -> None:
    # The message as the code before the typed pod printed it (name from generateName).
    raw = pod_dict(ctr("a"), class_name="batch-high", priority=10)
    raw["metadata"] = {"generateName": "web-"}
    denial = check_class_access(typed(raw), namespace="team-a", namespace_labels={},
                                rules=quota_config(CLASSES).classes)
    assert denial is not None
    assert denial.message == (
        'pods "web-" is forbidden: PriorityClass batch-high (priority 10) may not be used in namespace team-a: '
        "PreemptGuard quota.classes[2] restricts it to other namespaces."
        " To use it, ask a cluster admin to add namespace team-a to quota.classes[2] in the PreemptGuard"
        " configuration")


def test_the_class_and_priority_are_read_from_the_typed_pod() -> None:
    rules = quota_config(CLASSES).classes
    unset = pod_dict(ctr("a"), class_name="high")
    del unset["spec"]["priority"]  # an unset priority counts as 0: below valueAtLeast, no rule matches
    assert check_class_access(typed(unset), namespace="team-a", namespace_labels={}, rules=rules) is None
    assert check_class_access(typed(pod_dict(ctr("a"), class_name="high", priority=1000000)), namespace="team-a",
                              namespace_labels={}, rules=rules) is not None
