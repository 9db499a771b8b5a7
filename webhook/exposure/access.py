"""Who may use each PriorityClass: the tenants with at least one namespace where a pod of the class is admitted.

Two rules restrict a class, as admission applies them (docs/admission.md §5):

- ``quota.classes`` (``webhook.priority.class_access``): the first rule whose ``match`` selects the class
  decides which namespaces may use it; no rule selects it: every namespace may;
- ``quota.limitedResources`` (upstream ResourceQuota admission, ``webhook.priority.resource_quota``): when an
  entry's ``matchScopes`` select pods of the class, a namespace may use it only if one of its ResourceQuotas
  covers that scope (``insufficient quota to match these scopes`` otherwise). Only ``PriorityClass`` scopes are
  read: the others (BestEffort, Terminating, ...) depend on the pod, not on its class.

A tenant is PreemptGuard's (``webhook.guardrails.disclosure.tenant_of``): the value of ``guardrails.tenantLabel``
on the namespace, else the namespace itself. The table holds tenants only to count them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from webhook.cluster.model import (
    PREEMPT_LOWER_PRIORITY,
    Namespace,
    Pod,
    PriorityClass,
    ResourceQuota,
    ScopedResourceSelectorRequirement,
    labels_of_namespace,
)
from webhook.config import SCOPE_PRIORITY_CLASS, QuotaConfig
from webhook.exposure.model import PreemptingClass
from webhook.guardrails.disclosure import Tenant, tenant_of
from webhook.priority.class_access import RULE_CLASSES, namespace_allowed
from webhook.priority.resource_quota import (
    RULE_LIMITED_SCOPES,
    ScopeSelectorError,
    pod_matches_scope,
    quota_scope_selectors,
)


@dataclass(frozen=True, slots=True)
class ClassAccess:
    """One PriorityClass and the tenants that may create pods of it."""

    priority_class: PriorityClass
    tenants: frozenset[Tenant]
    restricted_by: tuple[str, ...] = ()

    @property
    def preempts(self) -> bool:
        return self.priority_class.preemption_policy == PREEMPT_LOWER_PRIORITY


def _probe(priority_class: PriorityClass, namespace: str) -> Pod:
    """A pod of the class, as quota admission sees it after the Priority plugin (name and value resolved)."""
    return Pod(name="", namespace=namespace, priority=priority_class.value,
               priority_class_name=priority_class.name)


def _class_scopes(selectors: Iterable[ScopedResourceSelectorRequirement], probe: Pod,
                  ) -> list[ScopedResourceSelectorRequirement]:
    """The ``PriorityClass`` scope selectors that select ``probe``; a selector upstream cannot parse selects none."""
    found = []
    for selector in selectors:
        if selector.scope_name != SCOPE_PRIORITY_CLASS:
            continue
        try:
            if pod_matches_scope(selector, probe):
                found.append(selector)
        except ScopeSelectorError:
            continue
    return found


def _covered_by_quotas(probe: Pod, quotas: Iterable[ResourceQuota]) -> bool:
    """Some ResourceQuota of the namespace has a ``PriorityClass`` scope that selects the probe pod (what
    ``CheckRequest`` needs to admit a pod under a limited scope)."""
    return any(_class_scopes(quota_scope_selectors(quota), probe) for quota in quotas)


def namespace_may_use(priority_class: PriorityClass, namespace: str, namespace_labels: Mapping[str, str],
                      quotas: Iterable[ResourceQuota], quota: QuotaConfig, *, limited: bool) -> bool:
    """Whether a pod of ``priority_class`` created in ``namespace`` passes ``quota.classes`` and the limited
    scopes (``limited``: some ``limitedResources`` entry selects the class; quantities left are not judged)."""
    for rule in quota.classes:
        if rule.match.matches(priority_class.name, priority_class.value):
            if not namespace_allowed(rule, namespace, namespace_labels):
                return False
            break
    return not limited or _covered_by_quotas(_probe(priority_class, namespace), quotas)


def restrictions(priority_class: PriorityClass, quota: QuotaConfig) -> tuple[str, ...]:
    """The rules that decide who may use the class: the first ``quota.classes`` rule that selects it and
    ``quota.limitedResources`` when an entry's scopes select it."""
    found: list[str] = []
    for index, rule in enumerate(quota.classes):
        if rule.match.matches(priority_class.name, priority_class.value):
            found.append(f"{RULE_CLASSES}[{index}]")
            break
    probe = _probe(priority_class, "")
    if any(_class_scopes(entry.match_scopes, probe) for entry in quota.limited_resources):
        found.append(RULE_LIMITED_SCOPES)
    return tuple(found)


def tenants_by_namespace(namespaces: Iterable[str], namespace_objects: Mapping[str, Namespace],
                         tenant_label: str | None) -> dict[str, Tenant]:
    return {namespace: tenant_of(namespace, namespace_objects, tenant_label) for namespace in sorted(set(namespaces))}


def class_access(priority_class: PriorityClass, tenants: Mapping[str, Tenant],
                 namespace_objects: Mapping[str, Namespace],
                 quotas_by_namespace: Mapping[str, Mapping[str, ResourceQuota]], quota: QuotaConfig) -> ClassAccess:
    """The tenants that may use ``priority_class`` (``tenants``: every namespace's tenant)."""
    restricted_by = restrictions(priority_class, quota)
    if not restricted_by:
        return ClassAccess(priority_class, frozenset(tenants.values()))
    limited = RULE_LIMITED_SCOPES in restricted_by
    allowed: set[Tenant] = set()
    for namespace, tenant in tenants.items():
        if tenant in allowed:
            continue
        if namespace_may_use(priority_class, namespace, labels_of_namespace(namespace_objects, namespace),
                             (quotas_by_namespace.get(namespace) or {}).values(), quota, limited=limited):
            allowed.add(tenant)
    return ClassAccess(priority_class, frozenset(allowed), restricted_by)


@dataclass(slots=True)
class ClassAccessTable:
    """Every class's access, and the preempting classes of a priority band as one tenant is told them."""

    classes: tuple[ClassAccess, ...]  # highest value first
    _preempting: dict[tuple[int, Tenant], tuple[PreemptingClass, ...]] = field(default_factory=dict)

    def preempting(self, priority: int, tenant: Tenant) -> tuple[PreemptingClass, ...]:
        """The classes whose pods could preempt a pod of ``priority`` (kube-scheduler's rule: a strictly higher
        priority and ``PreemptLowerPriority``; pkg/scheduler/framework/preemption ``PodEligibleToPreemptOthers``
        and ``SelectVictimsOnNode``'s ``corev1helpers.PodPriority(p) < podPriority``), highest first."""
        key = (priority, tenant)
        found = self._preempting.get(key)
        if found is None:
            found = self._preempting[key] = tuple(
                PreemptingClass(access.priority_class.name, access.priority_class.value,
                                len(access.tenants - {tenant}), tenant in access.tenants, access.restricted_by)
                for access in self.classes if access.preempts and access.priority_class.value > priority)
        return found


def make_table(accesses: Iterable[ClassAccess]) -> ClassAccessTable:
    return ClassAccessTable(tuple(sorted(accesses, key=lambda a: (-a.priority_class.value, a.priority_class.name))))


def class_access_table(priority_classes: Mapping[str, PriorityClass], namespaces: Iterable[str],
                       namespace_objects: Mapping[str, Namespace],
                       quotas_by_namespace: Mapping[str, Mapping[str, ResourceQuota]], quota: QuotaConfig,
                       tenant_label: str | None) -> ClassAccessTable:
    tenants = tenants_by_namespace(namespaces, namespace_objects, tenant_label)
    return make_table(class_access(pc, tenants, namespace_objects, quotas_by_namespace, quota)
                      for pc in priority_classes.values())
