"""The Kubernetes API calls PreemptGuard makes, declared once; the RBAC in manifests/ grants exactly these.

Tests keep three things equal: these declarations, the Role/ClusterRole objects that ``kubectl kustomize``
builds from manifests/, and the requests the code really sends (recorded against a fake API server).
"""

from __future__ import annotations

from typing import NamedTuple

from webhook.routes import LEADER_ELECTION_LEASE, MUTATING_WEBHOOK_CONFIGURATION, VALIDATING_WEBHOOK_CONFIGURATION


class Permission(NamedTuple):
    """One RBAC rule: ``verbs`` on ``resource`` of ``api_group`` ("" is the core group)."""

    api_group: str
    resource: str
    verbs: frozenset[str]
    # Empty: any object of the resource. Otherwise only these names (RBAC ``resourceNames``).
    resource_names: frozenset[str] = frozenset()


def _permission(api_group: str, resource: str, *verbs: str, names: tuple[str, ...] = ()) -> Permission:
    return Permission(api_group, resource, frozenset(verbs), frozenset(names))


# The webhook server (ClusterRole ``preemptguard``): webhook/sources/informer.py lists and watches eight
# kinds, and the storage and device ones (#27), and webhook/sources/kube_source.py GETs a PriorityClass the
# cache has not seen yet. The policy
# ConfigMap and the TLS Secret are mounted files, so the server reads no ConfigMap or Secret.
# webhook/server/auth.py authenticates /preview callers with a TokenReview and authorises them with
# SubjectAccessReviews (tests/certs/test_certs_rbac_calls.py keeps code, this list and the manifest equal).
REQUIRED_PERMISSIONS: tuple[Permission, ...] = (
    _permission("scheduling.k8s.io", "priorityclasses", "get", "list", "watch"),
    _permission("", "namespaces", "list", "watch"),
    _permission("", "nodes", "list", "watch"),
    _permission("", "pods", "list", "watch"),
    _permission("", "resourcequotas", "list", "watch"),
    _permission("", "limitranges", "list", "watch"),
    _permission("policy", "poddisruptionbudgets", "list", "watch"),
    _permission("node.k8s.io", "runtimeclasses", "list", "watch"),
    # Storage and devices (#27), for the volume plugins and DynamicResources.
    _permission("", "persistentvolumes", "list", "watch"),
    _permission("", "persistentvolumeclaims", "list", "watch"),
    _permission("storage.k8s.io", "storageclasses", "list", "watch"),
    _permission("storage.k8s.io", "csinodes", "list", "watch"),
    _permission("storage.k8s.io", "volumeattachments", "list", "watch"),
    _permission("resource.k8s.io", "deviceclasses", "list", "watch"),
    _permission("resource.k8s.io", "resourceslices", "list", "watch"),
    _permission("resource.k8s.io", "resourceclaims", "list", "watch"),
    _permission("resource.k8s.io", "resourceclaimtemplates", "list", "watch"),
    _permission("authentication.k8s.io", "tokenreviews", "create"),
    _permission("authorization.k8s.io", "subjectaccessreviews", "create"),
    # webhook/server/attributing.py: the Event in each preempted pod's namespace (docs/interfaces.md §7).
    _permission("", "events", "create"),
)

# Leader election (webhook/server/leaderelection.py), in the server's own namespace only (a Role): the Lease is
# created once, then read and updated by name.
LEADER_ELECTION_PERMISSIONS: tuple[Permission, ...] = (
    _permission("coordination.k8s.io", "leases", "create"),
    _permission("coordination.k8s.io", "leases", "get", "update", names=(LEADER_ELECTION_LEASE,)),
)

# ``serve --exposure-reports`` (webhook/server/exposing.py): the PolicyReport of each namespace, listed once per
# term as leader, then written by server-side apply (patch, and create for a new one). Granted only by the
# exposure-reports component and the chart's exposure.reports value, with the CRD.
EXPOSURE_REPORTS_PERMISSIONS: tuple[Permission, ...] = (
    _permission("wgpolicyk8s.io", "policyreports", "list", "create", "patch"),
)

# ``serve --events`` (webhook/server/events.py): an Event on a pod whose prediction the scheduler did not bear
# out. Since the preemption Events (#31) the server's ClusterRole grants it always (REQUIRED_PERMISSIONS).
EVENTS_PERMISSIONS: tuple[Permission, ...] = (
    _permission("", "events", "create"),
)

# ``preempt-guard certs`` (webhook/certs/kube.py), as the ServiceAccount ``preemptguard-certs``:
# Secrets of its own namespace only (Role) ...
CERTS_NAMESPACED_PERMISSIONS: tuple[Permission, ...] = (
    _permission("", "secrets", "get", "create", "update"),
)
# ... and caBundle of PreemptGuard's own webhook configurations only (ClusterRole with resourceNames).
CERTS_CLUSTER_PERMISSIONS: tuple[Permission, ...] = (
    _permission("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get", "patch",
                names=(MUTATING_WEBHOOK_CONFIGURATION,)),
    _permission("admissionregistration.k8s.io", "validatingwebhookconfigurations", "get", "patch",
                names=(VALIDATING_WEBHOOK_CONFIGURATION,)),
)


def allows(permissions: tuple[Permission, ...], api_group: str, resource: str, verb: str, name: str = "") -> bool:
    """Whether one of ``permissions`` allows ``verb`` on ``resource`` (and ``name``, when rules name objects)."""
    for permission in permissions:
        if permission.api_group != api_group or permission.resource != resource or verb not in permission.verbs:
            continue
        if not permission.resource_names or name in permission.resource_names:
            return True
    return False
