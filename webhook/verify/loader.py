"""A snapshot's objects into a fresh control plane, as they were; the cluster read back; the cluster emptied.

Without a kubelet or controllers nothing changes what is loaded, so each object is written as the snapshot
has it, in an order the API server accepts: namespaces, PriorityClasses, PDBs (with their status), nodes
(taints and status written back after the TaintNodesByCondition plugin), pods, quotas (after the pods, so
their ``status.used`` is the snapshot's and not recounted on create). For pods, what the API server does not
take on create is restored the way it allows:

- ``status`` (phase, conditions, ``startTime``, ``nominatedNodeName`` of unbound pods) through the status
  subresource;
- a pending pod keeps its place as it was: it is held with the scheduling gate ``preemptguard.io/verify-hold``,
  so kube-scheduler never tries to place it, while its ``nominatedNodeName`` still reserves room (upstream
  records the nominations of gated pods too);
- a terminating pod is deleted with its grace period after a finalizer ``preemptguard.io/verify-hold`` is set,
  so it stays with a ``deletionTimestamp`` (set by the API server to now plus the grace period) as a pod whose
  kubelet has not finished;
- the snapshot's own finalizers are dropped (no controller here would ever remove them).

Reading the cluster back strips these stand-ins, so PreemptGuard sees the objects as the snapshot had them.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from webhook.errors import PreemptGuardError, SnapshotError
from webhook.verify.controlplane import API_PATHS, NAMESPACED, ControlPlane, collection_path, object_path

HOLD = "preemptguard.io/verify-hold"
PROBE_PREFIX = "preemptguard-verify-probe-"
PROBE_NAMESPACE = "kube-public"
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_CLASSES = ("system-node-critical", "system-cluster-critical")
KINDS = ("Namespace", "PriorityClass", "PodDisruptionBudget", "Node", "Pod", "ResourceQuota")
LIST_PATHS = {
    "Namespace": ("v1", "/api/v1/namespaces"),
    "PriorityClass": ("scheduling.k8s.io/v1", "/apis/scheduling.k8s.io/v1/priorityclasses"),
    "PodDisruptionBudget": ("policy/v1", "/apis/policy/v1/poddisruptionbudgets"),
    "Node": ("v1", "/api/v1/nodes"),
    "Pod": ("v1", "/api/v1/pods"),
    "ResourceQuota": ("v1", "/api/v1/resourcequotas"),
}
# Metadata the API server sets itself, or that a fresh control plane cannot carry over.
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink", "generation",
                   "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers")
NODES_SEEN = re.compile(r"^0/(\d+) nodes are available")


class LoadError(PreemptGuardError):
    """The API server refused an object of the snapshot, or the scheduler did not catch up in time."""


class _Loader(yaml.SafeLoader):
    """Safe YAML without timestamp resolution: an unquoted time stays a string, as kubectl would send it."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _flatten(document: object) -> Iterator[dict[str, Any]]:
    if not isinstance(document, Mapping):
        return
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
        for item in document["items"]:
            yield from _flatten(item)
    else:
        yield dict(document)


def read_objects(path: Path) -> list[dict[str, Any]]:
    """Every object of a YAML or JSON file (``List`` kinds flattened), as raw API dicts."""
    try:
        text = path.read_text(encoding="utf-8")
        documents = [json.loads(text)] if text.lstrip().startswith("{") else list(yaml.load_all(text, Loader=_Loader))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise SnapshotError(f"{path}: cannot read: {' '.join(str(exc).split())}") from exc
    return [obj for document in documents for obj in _flatten(document)]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name"))


def _clean(obj: Mapping[str, Any], *, keep_status: bool = False) -> dict[str, Any]:
    """The object as it can be created: server-set metadata and (unless kept) status dropped."""
    clean = copy.deepcopy(dict(obj))
    meta = clean.setdefault("metadata", {})
    for field in SERVER_METADATA:
        meta.pop(field, None)
    if not keep_status:
        clean.pop("status", None)
    return clean


def _check(code: int, body: Any, what: str) -> Any:
    if code not in (200, 201):
        message = body.get("message") if isinstance(body, Mapping) else body
        raise LoadError(f"{what}: the API server answered {code}: {message}")
    return body


def _create(plane: ControlPlane, obj: Mapping[str, Any], what: str, retry_seconds: float = 5.0) -> Any:
    """POST ``obj``; a PriorityClass the Priority plugin has not seen yet is retried for a few seconds."""
    deadline = time.monotonic() + retry_seconds
    while True:
        code, body = plane.request("POST", collection_path(obj), obj)
        message = body.get("message", "") if isinstance(body, Mapping) else ""
        if code == 403 and "no PriorityClass with name" in message and time.monotonic() < deadline:
            time.sleep(0.1)
            continue
        return _check(code, body, what)


def _status(plane: ControlPlane, obj: Mapping[str, Any], status: Mapping[str, Any], what: str) -> None:
    if status:
        code, body = plane.request("PATCH", f"{object_path(obj)}/status", {"status": dict(status)},
                                   content_type="application/merge-patch+json")
        _check(code, body, f"status of {what}")


def _by_kind(objects: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {kind: [] for kind in KINDS}
    for obj in objects:
        if obj.get("kind") in grouped:
            grouped[str(obj["kind"])].append(obj)
    return grouped


def load_cluster(plane: ControlPlane, objects: Sequence[Mapping[str, Any]], *, timeout: float = 30.0) -> None:
    """Write every supported object (the kinds of docs/interfaces.md §1) into ``plane``; wait until the scheduler
    has them."""
    grouped = _by_kind(objects)
    namespaces = {str((o.get("metadata") or {}).get("namespace") or "default")
                  for kind in ("Pod", "PodDisruptionBudget", "ResourceQuota") for o in grouped[kind]}
    for ns in grouped["Namespace"]:
        _load_namespace(plane, ns)
        namespaces.discard(str(ns["metadata"]["name"]))
    for name in sorted(namespaces - set(BUILTIN_NAMESPACES)):
        _create(plane, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, f"Namespace {name}")
    for pc in grouped["PriorityClass"]:
        if pc["metadata"]["name"] not in SYSTEM_CLASSES:
            _create(plane, _clean(pc), f"PriorityClass {_key(pc)}")
    for pdb in grouped["PodDisruptionBudget"]:
        _create(plane, _clean(pdb), f"PodDisruptionBudget {_key(pdb)}")
        _status(plane, pdb, pdb.get("status") or {}, f"PodDisruptionBudget {_key(pdb)}")
    for node in grouped["Node"]:
        _load_node(plane, node)
    for pod in grouped["Pod"]:
        _load_pod(plane, pod)
    for quota in grouped["ResourceQuota"]:
        _create(plane, _clean(quota), f"ResourceQuota {_key(quota)}")
        _status(plane, quota, quota.get("status") or {}, f"ResourceQuota {_key(quota)}")
    wait_for_scheduler(plane, len(grouped["Node"]), timeout=timeout)


def _load_namespace(plane: ControlPlane, ns: Mapping[str, Any]) -> None:
    name = str(ns["metadata"]["name"])
    labels = dict((ns.get("metadata") or {}).get("labels") or {})
    if name in BUILTIN_NAMESPACES:
        labels.setdefault("kubernetes.io/metadata.name", name)
        code, body = plane.request("PATCH", f"/api/v1/namespaces/{name}",
                                   [{"op": "replace", "path": "/metadata/labels", "value": labels}],
                                   content_type="application/json-patch+json")
        _check(code, body, f"Namespace {name}")
        return
    clean = _clean(ns)
    clean.pop("spec", None)
    _create(plane, clean, f"Namespace {name}")


def _load_node(plane: ControlPlane, node: Mapping[str, Any]) -> None:
    name = _key(node)
    _create(plane, _clean(node), f"Node {name}")
    # TaintNodesByCondition added node.kubernetes.io/not-ready on create; a kubelet would have cleared it.
    taints = (node.get("spec") or {}).get("taints") or None
    code, body = plane.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": taints}},
                               content_type="application/merge-patch+json")
    _check(code, body, f"taints of Node {name}")
    _status(plane, node, node.get("status") or {}, f"Node {name}")


def _load_pod(plane: ControlPlane, pod: Mapping[str, Any]) -> None:
    what = f"Pod {_key(pod)}"
    meta = pod.get("metadata") or {}
    status = dict(pod.get("status") or {})
    clean = _clean(pod)
    spec = clean.setdefault("spec", {})
    bound = bool(spec.get("nodeName"))
    terminating = bool(meta.get("deletionTimestamp"))
    if not bound:
        spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": HOLD}]
    else:
        status.pop("nominatedNodeName", None)  # forbidden on bound pods; the scheduler clears it at binding
    if terminating:
        clean["metadata"]["finalizers"] = [HOLD]
    _create(plane, clean, what)
    try:
        _status(plane, pod, status, what)
    except LoadError:
        # A status an older or newer API server validates differently: keep what scheduling reads.
        essential = {k: status[k] for k in ("phase", "conditions", "startTime", "nominatedNodeName") if k in status}
        _status(plane, pod, essential, what)
    if terminating:
        grace = meta.get("deletionGracePeriodSeconds") or spec.get("terminationGracePeriodSeconds") or 30
        code, body = plane.request("DELETE", object_path(clean), {"kind": "DeleteOptions", "apiVersion": "v1",
                                                                  "gracePeriodSeconds": max(1, int(grace))})
        _check(code, body, f"deletion of {what}")


def wait_for_scheduler(plane: ControlPlane, nodes: int, *, timeout: float = 30.0) -> None:
    """Until kube-scheduler has seen the cluster: a probe pod that fits nowhere (a node selector no node has)
    is created after everything else; the scheduler's pod events arrive in order, so once it reports the probe
    unschedulable on all ``nodes`` nodes, it holds every pod and node written before."""
    probe = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"generateName": PROBE_PREFIX, "namespace": PROBE_NAMESPACE},
             "spec": {"nodeSelector": {HOLD: "probe"}, "terminationGracePeriodSeconds": 0,
                      "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]}}
    created = _create(plane, probe, "the scheduler probe pod")
    path = object_path({**probe, "metadata": created["metadata"]})
    deadline = time.monotonic() + timeout
    seen = None
    try:
        while time.monotonic() < deadline:
            _, current = plane.request("GET", path)
            for condition in ((current or {}).get("status") or {}).get("conditions") or []:
                if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                    match = NODES_SEEN.match(condition.get("message") or "")
                    seen = int(match.group(1)) if match else (0 if "no nodes available" in
                                                              (condition.get("message") or "") else None)
            if seen == nodes:
                return
            time.sleep(0.05)
        raise LoadError(f"kube-scheduler did not see the {nodes} loaded node(s) within {timeout:g}s "
                        f"(it last reported {seen}); see {plane.scheduler_log}")
    finally:
        plane.request("DELETE", path, query={"gracePeriodSeconds": "0"})


def _items(plane: ControlPlane, kind: str) -> list[dict[str, Any]]:
    api_version, path = LIST_PATHS[kind]
    code, body = plane.request("GET", path)
    items: list[dict[str, Any]] = _check(code, body, f"list {kind}")["items"]
    for item in items:
        item["apiVersion"], item["kind"] = api_version, kind
    return items


def read_back(plane: ControlPlane) -> list[dict[str, Any]]:
    """The cluster as it is now, without this module's stand-ins (hold gate and finalizer, probe pods)."""
    objects: list[dict[str, Any]] = []
    for kind in KINDS:
        for obj in _items(plane, kind):
            meta = obj["metadata"]
            if kind == "Pod" and str(meta.get("name", "")).startswith(PROBE_PREFIX):
                continue
            if HOLD in (meta.get("finalizers") or []):
                meta["finalizers"] = [f for f in meta["finalizers"] if f != HOLD] or None
            spec = obj.get("spec") or {}
            if any(g.get("name") == HOLD for g in spec.get("schedulingGates") or []):
                spec["schedulingGates"] = [g for g in spec["schedulingGates"] if g.get("name") != HOLD] or None
            objects.append(obj)
    return objects


def force_delete_pod(plane: ControlPlane, namespace: str, name: str) -> None:
    """Gone at once, as a kubelet confirms a termination: the hold finalizer removed, then grace 0."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    plane.request("PATCH", path, {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")
    plane.request("DELETE", path, query={"gracePeriodSeconds": "0"})


def _pod_state(pod: Mapping[str, Any]) -> tuple[str, str, bool, bool]:
    """What the scheduler and the pods under test may change about a loaded pod."""
    status = pod.get("status") or {}
    preempted = any(c.get("type") == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler"
                    for c in status.get("conditions") or [])
    return ((pod.get("spec") or {}).get("nodeName") or "", status.get("nominatedNodeName") or "",
            bool((pod.get("metadata") or {}).get("deletionTimestamp")), preempted)


def restore_cluster(plane: ControlPlane, objects: Sequence[Mapping[str, Any]], *, timeout: float = 30.0) -> None:
    """Back to what ``load_cluster(objects)`` left, after pods ran on it: quicker than emptying and loading again
    for the next scenario on the same snapshot. Only pods and quota usage change here (no controller runs): pods
    the scenario created go, pods it preempted or whose nomination the scheduler cleared are loaded again, and
    the quotas get the snapshot's status back."""
    grouped = _by_kind(objects)
    reload = {_key(p): p for p in grouped["Pod"]}
    gone = []
    for live in _items(plane, "Pod"):
        key = _key(live)
        want = reload.get(key)
        if want is not None and _pod_state(live) == _pod_state(want):
            del reload[key]
        else:
            force_delete_pod(plane, live["metadata"]["namespace"], live["metadata"]["name"])
            gone.append(key)
    deadline = time.monotonic() + timeout
    while set(gone) & {_key(p) for p in _items(plane, "Pod")}:
        if time.monotonic() > deadline:
            raise LoadError(f"pods were not removed within {timeout:g}s")
        time.sleep(0.05)
    for pod in reload.values():
        _load_pod(plane, pod)
    for quota in grouped["ResourceQuota"]:  # the ResourceQuota plugin charged the pods created meanwhile
        code, body = plane.request("PATCH", f"{object_path(quota)}/status",
                                   [{"op": "replace", "path": "/status", "value": quota.get("status") or {}}],
                                   content_type="application/json-patch+json")
        _check(code, body, f"status of ResourceQuota {_key(quota)}")
    wait_for_scheduler(plane, len(grouped["Node"]), timeout=timeout)


def empty_cluster(plane: ControlPlane, *, timeout: float = 60.0) -> None:
    """Remove everything ``load_cluster`` and the pods under test put there (the built-ins stay)."""
    for pod in _items(plane, "Pod"):
        if pod["metadata"].get("finalizers"):
            force_delete_pod(plane, pod["metadata"]["namespace"], pod["metadata"]["name"])
    namespaces = [ns["metadata"]["name"] for ns in _items(plane, "Namespace")]
    for ns in namespaces:
        for kind in ("Pod", "PodDisruptionBudget", "ResourceQuota"):
            plane.request("DELETE", NAMESPACED[kind].format(ns=ns), query={"gracePeriodSeconds": "0"})
    plane.request("DELETE", API_PATHS["Node"])
    for pc in _items(plane, "PriorityClass"):
        if pc["metadata"]["name"] not in SYSTEM_CLASSES:
            plane.request("DELETE", f"{API_PATHS['PriorityClass']}/{pc['metadata']['name']}")
    for ns in namespaces:
        if ns in BUILTIN_NAMESPACES:
            _load_namespace(plane, {"metadata": {"name": ns}})
            continue
        # No namespace controller runs here: finalize the namespace ourselves once its content is gone.
        plane.request("DELETE", f"/api/v1/namespaces/{ns}")
        plane.request("PUT", f"/api/v1/namespaces/{ns}/finalize",
                      {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "spec": {"finalizers": []}})
    deadline = time.monotonic() + timeout
    while any(_items(plane, kind) for kind in ("Pod", "Node")) or any(
            ns["metadata"]["name"] not in BUILTIN_NAMESPACES for ns in _items(plane, "Namespace")):
        if time.monotonic() > deadline:
            raise LoadError(f"the control plane did not empty within {timeout:g}s")
        time.sleep(0.05)
