"""A namespace's exposure to preemption, before the fact (docs/interfaces.md §7, "What a tenant can read").

Pure logic, no I/O: ``access`` says which tenants may use each PriorityClass under ``quota.classes`` and
``quota.limitedResources``; ``compute`` groups a namespace's running pods by priority band, names the classes
that could preempt each band and the PodDisruptionBudgets that protect them; ``report`` renders it as the
``wgpolicyk8s.io/v1alpha2`` PolicyReport that the server writes in each namespace and that ``kubectl
preempt-preview exposure`` prints. Other tenants are counted, never named.
"""

from webhook.exposure.access import ClassAccess, ClassAccessTable, class_access_table
from webhook.exposure.compute import NamespacePods, compute_exposure, namespace_exposure, running_pod
from webhook.exposure.model import NamespaceExposure, PdbBudget, PreemptingClass, PriorityBand

__all__ = [
    "ClassAccess",
    "ClassAccessTable",
    "NamespaceExposure",
    "NamespacePods",
    "PdbBudget",
    "PreemptingClass",
    "PriorityBand",
    "class_access_table",
    "compute_exposure",
    "namespace_exposure",
    "running_pod",
]
