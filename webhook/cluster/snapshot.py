"""The indexed in-memory cluster state: one store fed by a snapshot file or by informers.

Every index is maintained incrementally in ``upsert``/``delete`` (O(changed object)), so the
admission hot path reads ready-made views and never scans the whole cluster.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from webhook.cluster.model import (
    ClusterObject,
    LimitRange,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    ResourceQuota,
    RuntimeClass,
)
from webhook.cluster.storage_state import DEVICE_KINDS, VOLUME_KINDS, DeviceStore, VolumeStore

KIND_OF: dict[type, str] = {
    PriorityClass: "PriorityClass",
    Namespace: "Namespace",
    Node: "Node",
    Pod: "Pod",
    PodDisruptionBudget: "PodDisruptionBudget",
    ResourceQuota: "ResourceQuota",
    # What the API server's admission chain reads (issue #26).
    LimitRange: "LimitRange",
    RuntimeClass: "RuntimeClass",
    **VOLUME_KINDS,
    **DEVICE_KINDS,
}


def object_key(obj: ClusterObject) -> str:
    """``namespace/name`` for namespaced kinds, ``name`` for cluster-scoped ones."""
    namespace = getattr(obj, "namespace", None)
    return f"{namespace}/{obj.name}" if namespace is not None else obj.name


def claim_keys(pod: Pod) -> Iterator[str]:
    """``PodPVCKeys``: ``namespace/claim`` of the pod's ``persistentVolumeClaim`` volumes (not its ephemeral ones)."""
    volumes = pod.volumes
    if volumes is not None:
        for claim in volumes.claims:
            if not claim.ephemeral:
                yield f"{pod.namespace}/{claim.claim_name}"


@dataclass(slots=True)
class NodeUsage:
    """Running totals of what bound, non-terminal pods request on one node."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pod_count: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    def add(self, pod: Pod, sign: int = 1) -> None:
        req = pod.requests
        self.milli_cpu += sign * req.milli_cpu
        self.memory += sign * req.memory
        self.ephemeral_storage += sign * req.ephemeral_storage
        self.pod_count += sign
        for name, value in req.scalar.items():
            total = self.scalar.get(name, 0) + sign * value
            if total:
                self.scalar[name] = total
            else:
                self.scalar.pop(name, None)  # same totals as a freshly built state


def holds_node_resources(pod: Pod) -> bool:
    """A pod is in the scheduler's NodeInfo when it is bound and not Succeeded/Failed."""
    return bool(pod.node_name) and not pod.is_terminal


# How many node-name changes ``ClusterState.nodes_changed_since`` can look back over.
NODE_LOG_LENGTH = 1 << 16

# Told of every pod change as (the pod before, the pod after): (None, pod) added, (pod, None) deleted. Relists
# arrive as the same calls (``replace_kind``), so an unchanged pod comes as (pod, equal pod).
PodListener = Callable[[Pod | None, Pod | None], None]


class ClusterState:
    """PriorityClasses, Namespaces, Nodes, Pods, PDBs and ResourceQuotas, indexed for admission."""

    def __init__(self) -> None:
        self.priority_classes: dict[str, PriorityClass] = {}
        self.namespaces: dict[str, Namespace] = {}
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.pods_by_node: dict[str, dict[str, Pod]] = {}
        self.pods_by_namespace: dict[str, dict[str, Pod]] = {}
        self.pods_by_priority_class: dict[str, dict[str, Pod]] = {}
        self.nominated_by_node: dict[str, dict[str, Pod]] = {}
        self.node_usage: dict[str, NodeUsage] = {}
        self.pdbs_by_namespace: dict[str, dict[str, PodDisruptionBudget]] = {}
        self.quotas_by_namespace: dict[str, dict[str, ResourceQuota]] = {}
        # What the API server's admission chain reads (issue #26): LimitRanges by namespace, RuntimeClasses.
        self.limit_ranges_by_namespace: dict[str, dict[str, LimitRange]] = {}
        self.runtime_classes: dict[str, RuntimeClass] = {}
        # The OPTIONAL_KINDS the source did not deliver at all (a snapshot taken without them, an API server that
        # does not serve or let us list them), so that their absence is not taken for a cluster without any
        # (``knows``). One notion for the admission chain's kinds and for storage and devices.
        self.unknown_kinds: set[str] = set()
        # Bumped on every change, so callers can cache derived views per version.
        self.version = 0
        # Finer-grained change stamps (the ``version`` of the last change), so derived per-node views survive
        # unrelated events: a node name's stamp moves when its Node object, a pod bound to it or a pod nominated
        # to it changes; ``pdbs_version`` when any PodDisruptionBudget changes.
        self.node_versions: dict[str, int] = {}
        self.pdbs_version = 0
        # ``version`` once the change that set it is fully applied: a reader on another thread that sees
        # settled_version == v has every change up to v (``version`` moves first, at the start of a write).
        self.settled_version = 0
        # (version, node name) of the latest node-name changes, newest last (see ``nodes_changed_since``).
        self._node_log: deque[tuple[int, str]] = deque(maxlen=NODE_LOG_LENGTH)
        # The live observer's hook (webhook.observe.tracker): called on the writer's thread after each pod change.
        self.pod_listener: PodListener | None = None
        # Storage and devices (issue #27): their objects and the claims bound pods use (upstream's usedPVCRefCounts,
        # VolumeRestrictions).
        self.volumes = VolumeStore()
        self.devices = DeviceStore()
        self.pvc_ref_counts: dict[str, int] = {}

    def add_pod_listener(self, listener: PodListener) -> None:
        """Tell ``listener`` of every pod change too, after the listeners added before it."""
        previous = self.pod_listener
        if previous is None:
            self.pod_listener = listener
            return

        def both(old: Pod | None, new: Pod | None) -> None:
            previous(old, new)
            listener(old, new)

        self.pod_listener = both

    # ---- writes -------------------------------------------------------------------------------
    def upsert(self, obj: ClusterObject) -> None:
        self.version += 1
        if isinstance(obj, Pod):
            key = obj.key  # a new string each time it is read: once per upsert (450,000 at a snapshot's load)
            old = self._remove_pod(key)
            self._add_pod(obj, key)
            if self.pod_listener is not None:
                self.pod_listener(old, obj)
        elif isinstance(obj, PriorityClass):
            self.priority_classes[obj.name] = obj
        elif isinstance(obj, Node):
            self.nodes[obj.name] = obj
            self._touch_node(obj.name)
        elif isinstance(obj, Namespace):
            self.namespaces[obj.name] = obj
        elif isinstance(obj, PodDisruptionBudget):
            self.pdbs_by_namespace.setdefault(obj.namespace, {})[obj.name] = obj
            self.pdbs_version = self.version
        elif isinstance(obj, ResourceQuota):
            self.quotas_by_namespace.setdefault(obj.namespace, {})[obj.name] = obj
        elif isinstance(obj, LimitRange):
            self.limit_ranges_by_namespace.setdefault(obj.namespace, {})[obj.name] = obj
        elif isinstance(obj, RuntimeClass):
            self.runtime_classes[obj.name] = obj
        elif type(obj) in VOLUME_KINDS:
            self.volumes.upsert(obj)  # type: ignore[arg-type]
        elif type(obj) in DEVICE_KINDS:
            self.devices.upsert(obj)  # type: ignore[arg-type]
        self.settled_version = self.version

    def delete(self, kind: str, key: str) -> None:
        """Remove one object by kind and ``object_key``; unknown keys are ignored."""
        self.version += 1
        if kind == "Pod":
            old = self._remove_pod(key)
            if old is not None and self.pod_listener is not None:
                self.pod_listener(old, None)
        elif kind == "PriorityClass":
            self.priority_classes.pop(key, None)
        elif kind == "Node":
            if self.nodes.pop(key, None) is not None:
                self._touch_node(key)
        elif kind == "Namespace":
            self.namespaces.pop(key, None)
        elif kind == "PodDisruptionBudget":
            _pop_nested(self.pdbs_by_namespace, key)  # type: ignore[arg-type]
            self.pdbs_version = self.version
        elif kind == "ResourceQuota":
            _pop_nested(self.quotas_by_namespace, key)  # type: ignore[arg-type]
        elif kind == "LimitRange":
            _pop_nested(self.limit_ranges_by_namespace, key)  # type: ignore[arg-type]
        elif kind == "RuntimeClass":
            self.runtime_classes.pop(key, None)
        elif kind in VOLUME_KIND_NAMES:
            self.volumes.delete(kind, key)
        elif kind in DEVICE_KIND_NAMES:
            self.devices.delete(kind, key)
        self.settled_version = self.version

    def mark_known(self, kind: str) -> None:
        """A kind was listed (an informer synced it, possibly empty): its absence now means "none"."""
        self.unknown_kinds.discard(kind)

    def forget_kind(self, kind: str) -> None:
        """An optional kind the API server does not serve or no longer lets us list: no objects, and not known."""
        self.replace_kind(kind, ())
        if kind in OPTIONAL_KINDS:
            self.unknown_kinds.add(kind)

    def replace_kind(self, kind: str, objects: Iterable[ClusterObject]) -> None:
        """Make the objects of one kind exactly ``objects`` (a relist): stale ones disappear."""
        fresh = {object_key(o): o for o in objects}
        for key in [k for k in self.keys(kind) if k not in fresh]:
            self.delete(kind, key)
        for obj in fresh.values():
            self.upsert(obj)

    def keys(self, kind: str) -> list[str]:
        return [object_key(o) for o in self.objects(kind)]

    def objects(self, kind: str) -> Iterator[ClusterObject]:
        if kind == "Pod":
            yield from self.pods.values()
        elif kind == "PriorityClass":
            yield from self.priority_classes.values()
        elif kind == "Node":
            yield from self.nodes.values()
        elif kind == "Namespace":
            yield from self.namespaces.values()
        elif kind == "PodDisruptionBudget":
            for by_name in self.pdbs_by_namespace.values():
                yield from by_name.values()
        elif kind == "ResourceQuota":
            for quotas in self.quotas_by_namespace.values():
                yield from quotas.values()
        elif kind == "LimitRange":
            for limit_ranges in self.limit_ranges_by_namespace.values():
                yield from limit_ranges.values()
        elif kind == "RuntimeClass":
            yield from self.runtime_classes.values()
        elif kind in VOLUME_KIND_NAMES:
            yield from self.volumes.objects(kind)
        elif kind in DEVICE_KIND_NAMES:
            yield from self.devices.objects(kind)

    def _touch_node(self, name: str) -> None:
        self.node_versions[name] = self.version
        self._node_log.append((self.version, name))

    def _touch_pod_nodes(self, pod: Pod) -> None:
        if pod.node_name:
            self._touch_node(pod.node_name)
        if pod.nominated_node_name:
            self._touch_node(pod.nominated_node_name)

    def _add_pod(self, pod: Pod, key: str) -> None:
        self._touch_pod_nodes(pod)
        self.pods[key] = pod
        self.pods_by_namespace.setdefault(pod.namespace, {})[key] = pod
        if pod.priority_class_name:
            self.pods_by_priority_class.setdefault(pod.priority_class_name, {})[key] = pod
        if holds_node_resources(pod):
            self.pods_by_node.setdefault(pod.node_name, {})[key] = pod
            self.node_usage.setdefault(pod.node_name, NodeUsage()).add(pod)
            if pod.volumes is not None:
                _count_claims(self.pvc_ref_counts, pod, 1)
        elif pod.nominated_node_name and not pod.node_name and not pod.is_terminal:
            self.nominated_by_node.setdefault(pod.nominated_node_name, {})[key] = pod

    def _remove_pod(self, key: str) -> Pod | None:
        pod = self.pods.pop(key, None)
        if pod is None:
            return None
        self._touch_pod_nodes(pod)
        _discard(self.pods_by_namespace, pod.namespace, key)
        _discard(self.pods_by_priority_class, pod.priority_class_name, key)
        if holds_node_resources(pod):
            _discard(self.pods_by_node, pod.node_name, key)
            usage = self.node_usage[pod.node_name]
            usage.add(pod, -1)
            if usage.pod_count == 0:
                del self.node_usage[pod.node_name]
            if pod.volumes is not None:
                _count_claims(self.pvc_ref_counts, pod, -1)
        _discard(self.nominated_by_node, pod.nominated_node_name, key)
        return pod

    # ---- reads --------------------------------------------------------------------------------
    def nodes_changed_since(self, version: int) -> set[str] | None:
        """Node names whose ``node_versions`` stamp moved after ``version``, in O(changes); None when the
        log no longer reaches back that far (then compare ``node_versions`` instead). Safe to call from
        another thread while the state is written: it may report a few names too many, never too few."""
        changes = self.node_changes_after(version)
        return None if changes is None else {name for _, name in changes}

    def node_changes_after(self, version: int) -> list[tuple[int, str]] | None:
        """The (stamp, node name) entries of the change log after ``version``, oldest first (a node once per change
        of it); None when the log no longer reaches back that far. Thread-safe as ``nodes_changed_since``."""
        log = self._node_log
        changes: list[tuple[int, str]] = []
        i = len(log)
        while i > 0:
            i -= 1
            try:
                entry = log[i]
            except IndexError:  # the log was trimmed meanwhile
                return None
            if entry[0] <= version:
                changes.reverse()
                return changes
            changes.append(entry)
        if len(log) == log.maxlen or version < 0:
            return None
        changes.reverse()
        return changes

    def global_default_classes(self) -> list[PriorityClass]:
        return [pc for pc in self.priority_classes.values() if pc.global_default]

    def pdbs_in(self, namespace: str) -> list[PodDisruptionBudget]:
        return list(self.pdbs_by_namespace.get(namespace, {}).values())

    def quotas_in(self, namespace: str) -> list[ResourceQuota]:
        return list(self.quotas_by_namespace.get(namespace, {}).values())

    def limit_ranges_in(self, namespace: str) -> list[LimitRange]:
        """The namespace's LimitRanges by name (upstream lists them in its informer's order, which no client sees)."""
        by_name = self.limit_ranges_by_namespace.get(namespace)
        return [by_name[name] for name in sorted(by_name)] if by_name else []

    def knows(self, kind: str) -> bool:
        """Whether the state holds the cluster's objects of ``kind``, even none (informers list every kind they
        may; a snapshot file that holds no object of an optional kind marks it unknown: ``unknown_kinds``)."""
        return kind not in self.unknown_kinds

    def counts(self) -> dict[str, int]:
        return {kind: sum(1 for _ in self.objects(kind)) for kind in KIND_OF.values()}


VOLUME_KIND_NAMES = frozenset(VOLUME_KINDS.values())
DEVICE_KIND_NAMES = frozenset(DEVICE_KINDS.values())
# Kinds older snapshot commands did not list and an API server may not serve or let us list: the admission
# chain's (issue #26) and the storage and device kinds (issue #27). A snapshot holding none of one was taken
# without it.
ADMISSION_CHAIN_KINDS = frozenset({"LimitRange", "RuntimeClass"})
OPTIONAL_KINDS = ADMISSION_CHAIN_KINDS | VOLUME_KIND_NAMES | DEVICE_KIND_NAMES


def _count_claims(counts: dict[str, int], pod: Pod, delta: int) -> None:
    for key in claim_keys(pod):
        value = counts.get(key, 0) + delta
        if value > 0:
            counts[key] = value
        else:
            counts.pop(key, None)


def _discard(index: dict[str, dict[str, Pod]], bucket: str, key: str) -> None:
    if not bucket:
        return
    members = index.get(bucket)
    if members is not None:
        members.pop(key, None)
        if not members:
            del index[bucket]


def _pop_nested(index: Mapping[str, dict[str, object]], key: str) -> None:
    namespace, _, name = key.partition("/")
    members = index.get(namespace)
    if members is not None:
        members.pop(name, None)
        if not members:
            del index[namespace]  # type: ignore[attr-defined]
