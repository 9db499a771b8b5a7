"""The conformance tier's control plane is the product's: ``webhook.verify.controlplane`` (etcd, kube-apiserver
and kube-scheduler on loopback, no kubelet or controller manager), re-exported under the name the tests use."""

from __future__ import annotations

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
    "stop_process",
]
