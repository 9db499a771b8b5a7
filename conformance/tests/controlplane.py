"""The conformance tier's control plane is the product's: ``webhook.verify.controlplane`` (etcd, kube-apiserver
and kube-scheduler on loopback, no kubelet or controller manager), re-exported under the name the tests use, and
one helper of the parity tests (``set_quota_status``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from webhook.verify.controlplane import (
    ADMIN,
    API_PATHS,
    BINARIES,
    NAMESPACED,
    REPO,
    Component,
    ControlPlane,
    ControlPlaneError,
    MissingBinaries,
    User,
    binary_version,
    collection_path,
    free_port,
    kube_bin_dir,
    kubernetes_version,
    log_tail,
    stop_process,
)

__all__ = [
    "ADMIN",
    "API_PATHS",
    "BINARIES",
    "NAMESPACED",
    "QUOTA_STATUS_SETTLE_SECONDS",
    "REPO",
    "Component",
    "ControlPlane",
    "ControlPlaneError",
    "MissingBinaries",
    "User",
    "binary_version",
    "collection_path",
    "free_port",
    "kube_bin_dir",
    "kubernetes_version",
    "log_tail",
    "set_quota_status",
    "stop_process",
]

# kube-apiserver's ResourceQuota admission reads the quotas from its own informer, and asks etcd only when that holds
# none for the namespace (plugin/pkg/admission/resourcequota/resource_access.go, GetQuotas): a quota whose status was
# written a moment before can still be read without it. Nothing outside shows when the informer has the write; on a
# loaded CI machine a dry run right after it was admitted under the empty usage once (the chain's
# quota-charges-the-limitrange-default, 1 run of many).
QUOTA_STATUS_SETTLE_SECONDS = 0.5


def set_quota_status(plane: ControlPlane, quota: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    """Write a ResourceQuota's usage, as the quota controller would, and give the API server's informer time to see
    it before a pod is admitted against it."""
    plane.set_status(quota, status)
    time.sleep(QUOTA_STATUS_SETTLE_SECONDS)
