"""The quota decision for a pod request: PreemptGuard's ``quota.classes`` first, then upstream ResourceQuota.

Both run on the pod *after* priority mutation, so a class-less pod is checked under its global default's
name. Described in docs/admission.md §5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook.cluster.model import Pod, ResourceQuota
from webhook.config import QuotaConfig
from webhook.priority.class_access import RULE_CLASSES, check_class_access
from webhook.priority.resource_quota import RULE_LIMITED_SCOPES, RULE_RESOURCE_QUOTA, QuotaDenial, check_resource_quota

__all__ = [
    "RULE_CLASSES",
    "RULE_LIMITED_SCOPES",
    "RULE_RESOURCE_QUOTA",
    "QuotaDenial",
    "admit_pod_quota",
    "check_class_access",
    "check_resource_quota",
]


def admit_pod_quota(
    pod: Pod,
    *,
    namespace: str,
    namespace_labels: Mapping[str, str],
    operation: str,
    quotas: Sequence[ResourceQuota],
    config: QuotaConfig,
    subresource: str = "",
    now_ns: int | None = None,
) -> QuotaDenial | None:
    """``quota.classes``, then upstream ResourceQuota admission; None when the pod is allowed.

    ``pod`` must already carry the priority plugin's mutation (class name resolved, priority set): read it
    with ``webhook.cluster.reader.pod_from_dict``. Only CREATE without subresource is checked.
    """
    if operation != "CREATE" or subresource:
        return None
    denial = check_class_access(pod, namespace=namespace, namespace_labels=namespace_labels, rules=config.classes)
    if denial is not None:
        return denial
    return check_resource_quota(pod, operation=operation, subresource=subresource, quotas=quotas,
                                limited_resources=config.limited_resources, now_ns=now_ns)
