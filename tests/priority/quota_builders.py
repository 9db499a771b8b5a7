"""Pods, ResourceQuotas and quota configurations for the quota tests (shared by test_resource_quota.py and
test_class_access.py)."""

from __future__ import annotations

from typing import Any

from webhook.cluster.model import Pod, ResourceQuota
from webhook.cluster.quantity import Quantity, format_quantity
from webhook.cluster.reader import pod_from_dict, resource_quota_from_dict
from webhook.config import QuotaConfig, parse_config
from webhook.priority.quota import QuotaDenial, admit_pod_quota


def ctr(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
        **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "x", "resources": resources, **extra}


def pod_dict(*containers: dict[str, Any], name: str = "p", class_name: str = "", priority: int = 0,
             **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if class_name:
        body["priorityClassName"] = class_name
    body["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": body}


def resource_quota(name: str = "q", hard: dict[str, str] | None = None, used: dict[str, str] | None = None,
                   scopes: list[str] | None = None, selector: list[dict[str, Any]] | None = None) -> ResourceQuota:
    spec: dict[str, Any] = {}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    status: dict[str, Any] = {}
    if hard is not None:
        status["hard"] = hard
    if used is not None:
        status["used"] = used
    return resource_quota_from_dict({"kind": "ResourceQuota", "metadata": {"name": name, "namespace": "ns"},
                                     "spec": spec, "status": status})


def quota_config(data: dict[str, Any]) -> QuotaConfig:
    return parse_config({"quota": data}, "test").quota


def limited(*scopes: dict[str, Any], resource: str = "pods", contains: list[str] | None = None) -> QuotaConfig:
    entry: dict[str, Any] = {"resource": resource, "matchScopes": list(scopes)}
    if contains:
        entry["matchContains"] = contains
    return quota_config({"limitedResources": [entry]})


def typed(raw: dict[str, Any]) -> Pod:
    """The pod as admission hands it to the quota: read once into the model."""
    return pod_from_dict(raw)


def check(raw: dict[str, Any], quotas: list[ResourceQuota], config: QuotaConfig | None = None,
          labels: dict[str, str] | None = None, namespace: str = "ns", operation: str = "CREATE") -> Any:
    denial: QuotaDenial | None = admit_pod_quota(
        typed(raw), namespace=namespace, namespace_labels=labels or {}, operation=operation, quotas=quotas,
        config=config or QuotaConfig())
    return denial


def printed(usage: dict[str, Quantity]) -> dict[str, str]:
    return {name: format_quantity(qty) for name, qty in usage.items()}


