"""A namespace's exposure to preemption, before the fact (docs/interfaces.md §7, "What a tenant can read").

Pure logic, no I/O: ``access`` says which tenants may use each PriorityClass under ``quota.classes`` and
``quota.limitedResources``; ``compute`` counts each namespace's running pods by priority band and by the
PodDisruptionBudgets that protect them, pod change by pod change (``ExposureIndex``), and names the classes that
could preempt each band; ``report`` renders it as the
``wgpolicyk8s.io/v1alpha2`` PolicyReport that the server writes in each namespace and that ``kubectl
preempt-preview exposure`` prints. Other tenants are counted, never named.
"""

from webhook.exposure.access import ClassAccess, ClassAccessTable, class_access_table
from webhook.exposure.compute import ExposureIndex, compute_exposure, index_of, running_pod
from webhook.exposure.model import NamespaceExposure, PdbBudget, PreemptingClass, PriorityBand

__all__ = [
    "ClassAccess",
    "ClassAccessTable",
    "ExposureIndex",
    "NamespaceExposure",
    "PdbBudget",
    "PreemptingClass",
    "PriorityBand",
    "class_access_table",
    "compute_exposure",
    "index_of",
    "running_pod",
]
