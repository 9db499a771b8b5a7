"""PreemptGuard's ``quota.classes``: which namespaces may use a (critical) PriorityClass at all.

Not an upstream rule: it runs before upstream ResourceQuota admission (``webhook.priority.quota``) and
denies the way upstream does (``admission.NewForbidden``). Described in docs/admission.md §5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook.cluster.model import Pod
from webhook.cluster.selectors import label_selector_matches
from webhook.config import ClassAccessRule
from webhook.priority.resource_quota import QuotaDenial, forbidden

RULE_CLASSES = "quota.classes"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def namespace_allowed(rule: ClassAccessRule, namespace: str, namespace_labels: Mapping[str, str]) -> bool:
    if namespace in rule.allowed_namespaces:
        return True
    if rule.namespace_selector is None:
        return False
    # The API server labels every namespace with its own name.
    labels = {**namespace_labels, NAMESPACE_NAME_LABEL: namespace}
    return label_selector_matches(rule.namespace_selector, labels)


def check_class_access(
    pod: Pod,
    *,
    namespace: str,
    namespace_labels: Mapping[str, str],
    rules: Sequence[ClassAccessRule],
) -> QuotaDenial | None:
    """``quota.classes``: the first rule whose ``match`` selects the class decides (403 if not allowed).

    The pod carries the resolved class (a class-less pod with a global default carries the default's name)
    and priority. A pod with no class at all is not subject to these rules.
    """
    class_name, priority = pod.priority_class_name, pod.effective_priority
    if not class_name:
        return None
    for index, rule in enumerate(rules):
        if not rule.match.matches(class_name, priority):
            continue
        if namespace_allowed(rule, namespace, namespace_labels):
            return None
        # Which other namespaces (or labels) the rule allows is not the requester's to learn: a tenant could map
        # the cluster's privileged namespaces, or the label that would let it in, by asking for each class.
        inner = (f"PriorityClass {class_name} (priority {priority}) may not be used in namespace {namespace}: "
                 f"PreemptGuard quota.classes[{index}] restricts it to other namespaces. "
                 f"To use it, ask a cluster admin to add namespace {namespace} to quota.classes[{index}] "
                 f"in the PreemptGuard configuration")
        return forbidden(pod, inner, RULE_CLASSES)
    return None
