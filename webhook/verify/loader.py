"""A snapshot's objects into a fresh control plane, as they were stored; the cluster read back; the cluster emptied.

A snapshot is what a cluster stored, and a cluster that has lived for a while stores what its API server would
no longer accept on create: pods whose ``spec.priority`` predates today's ``globalDefault`` class, two
``globalDefault`` classes, pods of a RuntimeClass whose overhead changed or that is gone, a terminating
namespace. So the snapshot is not created through the API server: ``plan_load`` turns it into the objects as
kube-apiserver keeps them and ``load_cluster`` writes them straight into etcd (``webhook.verify.storage``), past
every admission plugin, as a restore from a backup would; the pods under test then go through the API server
with every admission plugin on (docs/verify.md). Without a kubelet or controllers nothing changes what is
loaded, except what this module adds on purpose:

- a pending pod keeps its place: kube-scheduler never binds it and it never preempts, while its
  ``nominatedNodeName`` still reserves room (``_held_pod``);
- stand-ins for what the snapshot refers to but does not hold, each named in the ``fidelity`` notes: a
  namespace that holds objects, and a RuntimeClass that pods name (its overhead and scheduling inferred from
  those pods), so pods under test meet what the real cluster would have;
- an object kube-apiserver cannot read back is removed again, with a note; nothing else is changed.

Reading the cluster back strips the hold gate, so PreemptGuard sees the objects as the snapshot had them.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.errors import PreemptGuardError, SnapshotError
from webhook.verify.controlplane import ControlPlane, PlaneApi, collection_path
from webhook.verify.storage import RESOURCES, object_key, prefix_of, stored_form

__all__ = [
    "HOLD",
    "KINDS",
    "PROBE_PREFIX",
    "LoadError",
    "LoadPlan",
    "SnapshotError",
    "empty_cluster",
    "force_delete_pod",
    "load_cluster",
    "plan_load",
    "read_back",
    "read_objects",
    "restore_cluster",
    "wait_for_scheduler",
]

HOLD = "preemptguard.io/verify-hold"
HOLD_POLICY = "preemptguard.io/verify-hold-preemption-policy"  # a held pod's own preemptionPolicy ("" for none)
PROBE_PREFIX = "preemptguard-verify-probe-"
PROBE_NAMESPACE = "kube-public"
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# The classes kube-apiserver creates itself at start (its scheduling post-start hook); never overwritten.
SYSTEM_CLASSES = ("system-node-critical", "system-cluster-critical")
# What verify loads, in the order of docs/interfaces.md §1's snapshot command; everything else is ignored.
STORAGE_AND_DEVICE_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode", "VolumeAttachment",
                            "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
KINDS = ("Namespace", "PriorityClass", "RuntimeClass", "Node", "Pod", "PodDisruptionBudget", "ResourceQuota",
         "LimitRange", *STORAGE_AND_DEVICE_KINDS)
# The controllers verify creates as owners of a workload's replicas (observe.py), never loaded from a snapshot.
OWNER_KINDS = ("ReplicaSet", "StatefulSet")
LIST_PATHS = {
    "Namespace": ("v1", "/api/v1/namespaces"),
    "PriorityClass": ("scheduling.k8s.io/v1", "/apis/scheduling.k8s.io/v1/priorityclasses"),
    "RuntimeClass": ("node.k8s.io/v1", "/apis/node.k8s.io/v1/runtimeclasses"),
    "PodDisruptionBudget": ("policy/v1", "/apis/policy/v1/poddisruptionbudgets"),
    "Node": ("v1", "/api/v1/nodes"),
    "Pod": ("v1", "/api/v1/pods"),
    "ResourceQuota": ("v1", "/api/v1/resourcequotas"),
    "LimitRange": ("v1", "/api/v1/limitranges"),
    "PersistentVolume": ("v1", "/api/v1/persistentvolumes"),
    "PersistentVolumeClaim": ("v1", "/api/v1/persistentvolumeclaims"),
    "StorageClass": ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/storageclasses"),
    "CSINode": ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csinodes"),
    "VolumeAttachment": ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/volumeattachments"),
    "DeviceClass": ("resource.k8s.io/v1", "/apis/resource.k8s.io/v1/deviceclasses"),
    "ResourceSlice": ("resource.k8s.io/v1", "/apis/resource.k8s.io/v1/resourceslices"),
    "ResourceClaim": ("resource.k8s.io/v1", "/apis/resource.k8s.io/v1/resourceclaims"),
    "ResourceClaimTemplate": ("resource.k8s.io/v1", "/apis/resource.k8s.io/v1/resourceclaimtemplates"),
}
NODES_SEEN = re.compile(r"^0/(\d+) nodes are available")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
STAND_IN_HANDLER = "preemptguard-stand-in"


class LoadError(PreemptGuardError):
    """The control plane did not take the snapshot, or the scheduler did not catch up in time."""


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
    """Every object of a YAML or JSON file, plain or gzip (``List`` kinds flattened), as raw API dicts."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            import gzip

            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
        documents = [json.loads(text)] if text.lstrip().startswith("{") else list(yaml.load_all(text, Loader=_Loader))
    except (OSError, EOFError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise SnapshotError(f"{path}: cannot read: {' '.join(str(exc).split())}") from exc
    return [obj for document in documents for obj in _flatten(document)]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name"))


def _namespace_of(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("namespace") or "default")


def _by_kind(objects: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {kind: [] for kind in KINDS}
    for obj in objects:
        if obj.get("kind") in grouped and _meta(obj).get("name"):
            grouped[str(obj["kind"])].append(obj)
    return grouped


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- the plan: what is stored, and what could not be reproduced ------------------------------------------------

@dataclass
class LoadPlan:
    """The objects to store, in order, and the ``fidelity`` notes: what of the snapshot is not reproduced as it
    was, and why."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def counts(self) -> Counter[str]:
        return Counter(str(o["kind"]) for o in self.objects)


def _stored_namespace(ns: Mapping[str, Any], now: str) -> dict[str, Any]:
    """A Namespace as kube-apiserver keeps it: the ``kubernetes.io/metadata.name`` label its strategy sets on
    every write, the ``kubernetes`` finalizer and a phase; a terminating one stays ``Terminating`` (no namespace
    controller runs here to finish it)."""
    stored = stored_form(ns, now=now)
    meta = stored["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
    stored["spec"] = {"finalizers": ["kubernetes"], **(stored.get("spec") or {})}
    status = dict(stored.get("status") or {})
    if meta.get("deletionTimestamp") or status.get("phase") == "Terminating":
        meta.setdefault("deletionTimestamp", now)
        status["phase"] = "Terminating"
    status.setdefault("phase", "Active")
    stored["status"] = status
    return stored


def _held_pod(pod: Mapping[str, Any], now: str) -> dict[str, Any]:
    """A pending pod held where it is: the scheduler must neither bind it nor let it preempt, while its
    nomination still reserves room on its node.

    A nominated pod is held by a node selector no node has, and ``preemptionPolicy: Never`` (its own is kept in an
    annotation): the scheduler still queues it, so the nominator records its ``nominatedNodeName`` in every release,
    and a pod that may not preempt keeps its nomination when it fails (PostFilter returns no result). A scheduling
    gate would do only from v1.37: before, the queue records the nominations of ungated pods only
    (pkg/scheduler/backend/queue/scheduling_queue.go, ``moveToActiveQ`` v1.34 and ``addPod`` v1.37). A pending pod
    without a nomination reserves nothing, and is held by the scheduling gate."""
    stored = stored_form(pod, now=now)
    spec = dict(stored.get("spec") or {})
    status = stored.get("status") or {}
    if not spec.get("nodeName") and status.get("phase") not in ("Succeeded", "Failed"):
        if status.get("nominatedNodeName"):
            meta = stored["metadata"]
            meta["annotations"] = {**(meta.get("annotations") or {}), HOLD_POLICY: spec.get("preemptionPolicy") or ""}
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), HOLD: "nominated"}
            spec["preemptionPolicy"] = "Never"
        else:
            spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": HOLD}]
    stored["spec"] = spec
    return stored


def _release_hold(pod: dict[str, Any]) -> None:
    """The pod as the snapshot had it: ``_held_pod``'s stand-ins removed."""
    meta = pod["metadata"]
    spec = pod.setdefault("spec", {})
    if any(g.get("name") == HOLD for g in spec.get("schedulingGates") or []):
        spec["schedulingGates"] = [g for g in spec["schedulingGates"] if g.get("name") != HOLD] or None
    annotations = meta.get("annotations") or {}
    if HOLD_POLICY in annotations:
        policy = annotations.pop(HOLD_POLICY)
        meta["annotations"] = annotations or None
        if policy:
            spec["preemptionPolicy"] = policy
        else:
            spec.pop("preemptionPolicy", None)
        selector = {k: v for k, v in (spec.get("nodeSelector") or {}).items() if k != HOLD}
        spec["nodeSelector"] = selector or None


def _common_items(dicts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The key/value pairs every mapping has."""
    if not dicts:
        return {}
    first = dict(dicts[0])
    return {k: v for k, v in first.items() if all(d.get(k) == v for d in dicts[1:])}


def stand_in_runtime_class(name: str, pods: Sequence[Mapping[str, Any]], now: str) -> tuple[dict[str, Any], str]:
    """A RuntimeClass for pods that name one the snapshot lacks, and its fidelity note.

    RuntimeClass admission copied the class's ``overhead.podFixed`` into each pod's ``spec.overhead`` and merged
    its ``scheduling`` into the pod's node selector and tolerations (plugin/pkg/admission/runtimeclass): so the
    stand-in takes the overhead most of its pods carry, and the node-selector terms and tolerations all of them
    carry. Pods created under test then get what those pods got."""
    overheads = Counter(json.dumps((p.get("spec") or {}).get("overhead"), sort_keys=True) for p in pods)
    overhead_text, _ = overheads.most_common(1)[0]
    overhead = json.loads(overhead_text)
    specs = [p.get("spec") or {} for p in pods]
    selector = _common_items([s.get("nodeSelector") or {} for s in specs])
    tolerations = [t for t in (specs[0].get("tolerations") or []) if all(t in (s.get("tolerations") or [])
                                                                        for s in specs[1:])]
    # Tolerations every pod gets from DefaultTolerationSeconds are the API server's, not the class's.
    tolerations = [t for t in tolerations if t.get("key") not in ("node.kubernetes.io/not-ready",
                                                                  "node.kubernetes.io/unreachable")]
    handler = name if DNS_LABEL.match(name) else STAND_IN_HANDLER
    runtime_class: dict[str, Any] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                     "metadata": {"name": name}, "handler": handler}
    if overhead:
        runtime_class["overhead"] = {"podFixed": overhead}
    if selector or tolerations:
        runtime_class["scheduling"] = {k: v for k, v in (("nodeSelector", selector), ("tolerations", tolerations))
                                       if v}
    what = [f"overhead {json.dumps(overhead, sort_keys=True)}" if overhead else "no overhead"]
    if len(overheads) > 1:
        what[0] += f" (the most common of {len(overheads)} among its pods)"
    if selector:
        what.append(f"node selector {json.dumps(selector, sort_keys=True)}")
    if tolerations:
        what.append(f"{len(tolerations)} toleration(s)")
    note = (f"RuntimeClass {name} is not in the snapshot ({len(pods)} pod(s) name it): stood in with "
            f"{', '.join(what)}, inferred from those pods; its handler and anything its pods do not show are unknown")
    return stored_form(runtime_class, now=now), note


def plan_load(objects: Sequence[Mapping[str, Any]], *, pods_under_test: Sequence[Mapping[str, Any]] = (),
              now: str | None = None) -> LoadPlan:
    """What ``load_cluster`` stores for ``objects`` (a snapshot's), and the notes on what it could not reproduce.

    ``pods_under_test`` matter only for a snapshot without any Namespace (one taken with an older command): their
    namespaces are created too, since the real cluster obviously has them."""
    now = now or _utc_now()
    grouped = _by_kind(objects)
    plan = LoadPlan()
    ignored = Counter(str(o.get("kind")) for o in objects if o.get("kind") not in grouped)
    if ignored:
        plan.notes.append("not loaded (verify restores only the kinds of the documented snapshot command): "
                          + ", ".join(f"{n} {kind}" for kind, n in sorted(ignored.items())))
    # Namespaces: the snapshot's, then stand-ins for those its objects use.
    have = {str(_meta(ns)["name"]) for ns in grouped["Namespace"]}
    used = {_namespace_of(o) for kind, objs in grouped.items() if RESOURCES[kind][2] for o in objs}
    if not grouped["Namespace"]:
        used |= {_namespace_of(p) for p in pods_under_test}
    for ns in grouped["Namespace"]:
        plan.objects.append(_stored_namespace(ns, now))
    missing = sorted(used - have - set(BUILTIN_NAMESPACES))
    for name in missing:
        plan.objects.append(_stored_namespace({"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": name}}, now))
    if missing and grouped["Namespace"]:
        plan.notes.append(f"namespace(s) {', '.join(missing)} hold objects of the snapshot but are not in it: created"
                          " without labels or annotations")
    elif missing:
        plan.notes.append("the snapshot holds no Namespace (taken without `namespaces`): the namespaces its objects "
                          f"and the pods under test use were created without labels ({', '.join(missing)})")
    for pc in grouped["PriorityClass"]:
        if _meta(pc)["name"] not in SYSTEM_CLASSES:
            plan.objects.append(stored_form(pc, now=now))
    runtime_classes = {str(_meta(rc)["name"]) for rc in grouped["RuntimeClass"]}
    plan.objects.extend(stored_form(rc, now=now) for rc in grouped["RuntimeClass"])
    by_runtime_class: dict[str, list[Mapping[str, Any]]] = {}
    for pod in grouped["Pod"]:
        class_name = (pod.get("spec") or {}).get("runtimeClassName")
        if class_name and class_name not in runtime_classes:
            by_runtime_class.setdefault(str(class_name), []).append(pod)
    for class_name, pods in sorted(by_runtime_class.items()):
        stand_in, note = stand_in_runtime_class(class_name, pods, now)
        plan.objects.append(stand_in)
        plan.notes.append(note)
    plan.objects.extend(stored_form(node, now=now) for node in grouped["Node"])
    for kind in ("PodDisruptionBudget", "ResourceQuota", "LimitRange"):
        plan.objects.extend(stored_form(obj, now=now) for obj in grouped[kind])
    # Volumes and devices as stored, status included (a bound PV/PVC pair, an allocated claim): no controller runs
    # here to bind or allocate them again, and the scheduler reads them from its informers as a cluster's.
    for kind in STORAGE_AND_DEVICE_KINDS:
        plan.objects.extend(stored_form(obj, now=now) for obj in grouped[kind])
    plan.objects.extend(_held_pod(pod, now) for pod in grouped["Pod"])
    return plan


# ---- into the control plane ----------------------------------------------------------------------------------------

def _check(code: int, body: Any, what: str) -> Any:
    if code not in (200, 201):
        message = body.get("message") if isinstance(body, Mapping) else body
        raise LoadError(f"{what}: the API server answered {code}: {message}")
    return body


def _api_path(obj: Mapping[str, Any]) -> str:
    return f"{collection_path(obj)}/{_meta(obj)['name']}"


def _unreadable(plane: ControlPlane, plan: LoadPlan) -> list[tuple[dict[str, Any], str]]:
    """The stored objects kube-apiserver cannot list back, with its words (none when every kind lists)."""
    bad: list[tuple[dict[str, Any], str]] = []
    for kind in KINDS:
        code, body = plane.request("GET", LIST_PATHS[kind][1], query={"limit": "1"})
        if code == 200:
            continue
        for obj in plan.objects:
            if obj["kind"] == kind:
                code, body = plane.request("GET", _api_path(obj))
                if code != 200:
                    bad.append((obj, str(body.get("message") if isinstance(body, Mapping) else body)))
    return bad


def store(plane: ControlPlane, plan: LoadPlan) -> None:
    """Write the plan's objects into etcd; drop (with a note) any kube-apiserver cannot read back."""
    plane.etcd.put_all((object_key(obj), obj) for obj in plan.objects)
    for obj, why in _unreadable(plane, plan):
        plane.etcd.delete_all([object_key(obj)])
        plan.objects.remove(obj)
        plan.notes.append(f"{obj['kind']} {_key(obj)} not loaded: kube-apiserver cannot read it as stored ({why})")


def _wait_listed(plane: ControlPlane, counts: Mapping[str, int], *, timeout: float) -> None:
    """Until the API server lists at least ``counts`` objects of each kind (its watch cache has the writes)."""
    deadline = time.monotonic() + timeout
    for kind, want in counts.items():
        while len(_items(plane, kind)) < want:
            if time.monotonic() > deadline:
                raise LoadError(f"kube-apiserver did not list the {want} stored {kind} object(s) within {timeout:g}s")
            time.sleep(0.05)


def load_cluster(plane: ControlPlane, objects: Sequence[Mapping[str, Any]], *, timeout: float = 30.0,
                 pods_under_test: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    """Restore ``objects`` (a snapshot's) into ``plane`` as stored (``plan_load``); wait until the API server and
    the scheduler have them. Returns the fidelity notes."""
    plan = plan_load(objects, pods_under_test=pods_under_test)
    store(plane, plan)
    counts = plan.counts()
    counts["Namespace"] = len({_key(o) for o in plan.objects if o["kind"] == "Namespace"} | set(BUILTIN_NAMESPACES))
    _wait_listed(plane, counts, timeout=timeout)
    wait_for_scheduler(plane, counts.get("Node", 0), timeout=timeout)
    _keep_nominations(plane, plan, timeout=timeout)
    return plan.notes


def _keep_nominations(plane: ControlPlane, plan: LoadPlan, *, timeout: float) -> None:
    """Store again the nominated pods whose nomination is gone once the scheduler caught up.

    A scheduling attempt of a same-named pod of the previous scenario can end after that pod was removed and this
    one stored: its status patch (by name) then clears this pod's ``nominatedNodeName`` (upstream clears it when no
    node is left: ``ErrNoNodesAvailable`` in schedule_one.go). Nothing of the previous scenario is in flight any
    more once the scheduler has seen this one, so storing them again is final."""
    nominated = {_key(o): o for o in plan.objects
                 if o["kind"] == "Pod" and (o.get("status") or {}).get("nominatedNodeName")}
    if not nominated:
        return
    live = {_key(p): (p.get("status") or {}).get("nominatedNodeName") for p in _items(plane, "Pod")}
    lost = [pod for key, pod in nominated.items() if live.get(key) != pod["status"]["nominatedNodeName"]]
    if lost:
        plane.etcd.put_all((object_key(pod), pod) for pod in lost)
        wait_for_scheduler(plane, plan.counts().get("Node", 0), timeout=timeout)


def wait_for_scheduler(plane: ControlPlane, nodes: int, *, timeout: float = 30.0) -> None:
    """Until kube-scheduler has seen the cluster: a probe pod that fits nowhere (a node selector no node has)
    is created after everything else; the scheduler's pod events arrive in order, so once it reports the probe
    unschedulable on all ``nodes`` nodes, it holds every pod and node written before."""
    probe = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"generateName": PROBE_PREFIX, "namespace": PROBE_NAMESPACE},
             "spec": {"nodeSelector": {HOLD: "probe"}, "terminationGracePeriodSeconds": 0,
                      "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]}}
    deadline = time.monotonic() + timeout
    while True:
        code, created = plane.request("POST", collection_path(probe), probe)
        message = created.get("message", "") if isinstance(created, Mapping) else ""
        # The Priority plugin's informer may not have the stored classes yet (a globalDefault one applies here).
        if code == 403 and "no PriorityClass" in message and time.monotonic() < deadline:
            time.sleep(0.1)
            continue
        _check(code, created, "the scheduler probe pod")
        break
    path = f"/api/v1/namespaces/{PROBE_NAMESPACE}/pods/{created['metadata']['name']}"
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


def _items(plane: PlaneApi, kind: str) -> list[dict[str, Any]]:
    api_version, path = LIST_PATHS[kind]
    code, body = plane.request("GET", path)
    items: list[dict[str, Any]] = _check(code, body, f"list {kind}")["items"]
    for item in items:
        item["apiVersion"], item["kind"] = api_version, kind
    return items


def read_back(plane: PlaneApi) -> list[dict[str, Any]]:
    """The cluster as it is now, without this module's stand-ins for the scheduler (hold gate, probe pods)."""
    objects: list[dict[str, Any]] = []
    for kind in KINDS:
        for obj in _items(plane, kind):
            meta = obj["metadata"]
            if kind == "Pod" and str(meta.get("name", "")).startswith(PROBE_PREFIX):
                continue
            if kind == "Pod":
                _release_hold(obj)
            objects.append(obj)
    return objects


def force_delete_pod(plane: PlaneApi, namespace: str, name: str) -> None:
    """Gone at once, as a kubelet confirms a termination: its finalizers removed, then grace 0."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    plane.request("PATCH", path, {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")
    plane.request("DELETE", path, query={"gracePeriodSeconds": "0"})


def _pod_state(pod: Mapping[str, Any]) -> tuple[str, str, bool, bool]:
    """What the scheduler and the pods under test may change about a loaded pod."""
    status = pod.get("status") or {}
    preempted = any(c.get("type") == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler"
                    for c in status.get("conditions") or [])
    return ((pod.get("spec") or {}).get("nodeName") or "", status.get("nominatedNodeName") or "",
            bool(_meta(pod).get("deletionTimestamp")), preempted)


def _wait_pods_gone(plane: ControlPlane, keys: Iterable[str], *, timeout: float) -> None:
    gone = set(keys)
    deadline = time.monotonic() + timeout
    while gone & {_key(p) for p in _items(plane, "Pod")}:
        if time.monotonic() > deadline:
            raise LoadError(f"pods were not removed within {timeout:g}s")
        time.sleep(0.05)


def restore_cluster(plane: ControlPlane, objects: Sequence[Mapping[str, Any]], *, timeout: float = 30.0,
                    pods_under_test: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    """Back to what ``load_cluster(objects)`` left, after pods ran on it: quicker than emptying and loading again
    for the next scenario on the same snapshot. Pods, quota usage, volumes and claims change here (the scheduler
    binds and allocates, verify's controller stand-ins make claims and volumes): pods the scenario created go, pods
    it preempted or whose nomination the scheduler cleared are stored again, the quotas get the snapshot's status
    back, and the volumes, claims and devices are the snapshot's again. Returns the fidelity notes."""
    plan = plan_load(objects, pods_under_test=pods_under_test)
    snapshot_pods = {_key(o): o for o in plan.objects if o["kind"] == "Pod"}
    reload = dict(snapshot_pods)
    gone = []
    for live in _items(plane, "Pod"):
        key = _key(live)
        want = reload.get(key)
        if want is not None and _pod_state(live) == _pod_state(want):
            del reload[key]
        else:
            gone.append(object_key(live))
    plane.etcd.delete_all(gone)
    _wait_pods_gone(plane, [k.split("/", 3)[3] for k in gone if k not in {object_key(p) for p in reload.values()}],
                    timeout=timeout)
    # Volumes and devices back as stored: the scheduler's bindings and allocations, the claims and volumes the
    # controllers' stand-ins made (controllers.py) go.
    stored = [o for o in plan.objects if o["kind"] in STORAGE_AND_DEVICE_KINDS]
    wanted = {object_key(o) for o in stored}
    plane.etcd.delete_all([key for kind in STORAGE_AND_DEVICE_KINDS for key in plane.etcd.keys(prefix_of(kind))
                           if key not in wanted])
    plane.etcd.put_all([(object_key(p), p) for p in reload.values()]
                       + [(object_key(q), q) for q in plan.objects if q["kind"] == "ResourceQuota"]
                       + [(object_key(o), o) for o in stored])
    _wait_listed(plane, {"Pod": len(snapshot_pods)}, timeout=timeout)
    wait_for_scheduler(plane, plan.counts().get("Node", 0), timeout=timeout)
    _keep_nominations(plane, plan, timeout=timeout)
    return plan.notes


def empty_cluster(plane: ControlPlane, *, timeout: float = 60.0) -> None:
    """Remove everything ``load_cluster`` and the pods under test put there, straight from etcd (the built-in
    namespaces and system classes stay, reset to what a fresh control plane has)."""
    keep = {f"{prefix_of('PriorityClass')}{name}" for name in SYSTEM_CLASSES}
    keep |= {f"{prefix_of('Namespace')}{name}" for name in BUILTIN_NAMESPACES}
    # Pods first, and gone from the API, before the nodes: a pending pod whose nodes vanish under it is retried
    # at once, and the scheduler's answer to that may land on a same-named pod of the next scenario.
    plane.etcd.delete_all(plane.etcd.keys(prefix_of("Pod")))
    deadline = time.monotonic() + timeout
    while _items(plane, "Pod"):
        if time.monotonic() > deadline:
            raise LoadError(f"the pods were not removed within {timeout:g}s")
        time.sleep(0.05)
    doomed = [key for kind in (*KINDS, *OWNER_KINDS) for key in plane.etcd.keys(prefix_of(kind)) if key not in keep]
    plane.etcd.delete_all(doomed)
    now = _utc_now()
    plane.etcd.put_all((object_key(ns), ns) for ns in (
        _stored_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, now)
        for name in BUILTIN_NAMESPACES))
    deadline = time.monotonic() + timeout
    while any(_items(plane, kind) for kind in ("Pod", "Node", "RuntimeClass", "LimitRange")) or any(
            ns["metadata"]["name"] not in BUILTIN_NAMESPACES for ns in _items(plane, "Namespace")):
        if time.monotonic() > deadline:
            raise LoadError(f"the control plane did not empty within {timeout:g}s")
        time.sleep(0.05)

