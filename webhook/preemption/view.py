"""A cheap copy-on-write view of the ClusterState for multi-replica simulation, and incremental indexes.

The shared ``ClusterState`` is never mutated: evictions and bindings of simulated replicas are
recorded as per-node deltas. Derived indexes (sorted node names, static node groups, per-node
importance-ordered pods with priority-level prefix sums, nodes ordered by free capacity) live in one
``StateIndex`` per ClusterState and are refreshed per node from ``ClusterState.nodes_changed_since``: an
informer event on one pod costs O(pods on its node) at the next prediction, not a rebuild.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import threading
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from webhook.cluster.model import EMPTY_LABELS, Node, Pod, Taint
from webhook.cluster.snapshot import ClusterState, holds_node_resources
from webhook.preemption.pdb import PdbIndex
from webhook.preemption.results import PreemptionArgs, importance_key, start_key

# Resource dimensions of the capacity orderings: cpu, memory, ephemeral-storage, pod slots.
CPU, MEMORY, EPHEMERAL, PODS = 0, 1, 2, 3
NO_PODS_LEVEL = 2**63  # the lowest priority of a node without pods: nothing is below any preemptor
ZERO4 = (0, 0, 0, 0)


@dataclass(slots=True)
class NodeSummary:
    """One node's bound pods, most important first, with totals per priority level.

    ``levels`` are the distinct pod priorities ascending; ``cumulative[i]`` is (cpu, memory,
    ephemeral-storage, pods) requested by the pods with priority <= ``levels[i]``; ``free`` is the
    node's allocatable minus what its pods request.
    """

    node: Node
    pods: list[Pod]
    used: tuple[int, int, int, int]
    levels: list[int]
    cumulative: list[tuple[int, int, int, int]]
    has_scalar: bool
    # Latest start (unset = now) among the pods of each level.
    level_latest_start: list[int]
    free: tuple[int, int, int, int] = ZERO4
    _pdb_matches: tuple[PdbIndex, list[tuple[int, ...]]] | None = None
    _largest_first: dict[int, tuple[list[int], list[int], list[int]]] = dataclasses.field(default_factory=dict)

    @classmethod
    def build(cls, node: Node, pods: list[Pod]) -> NodeSummary:
        ordered = sorted(pods, key=importance_key)
        per_level: dict[int, list[int]] = {}
        latest: dict[int, int] = {}
        cpu = mem = eph = 0
        has_scalar = False
        for pod in ordered:
            req = pod.requests
            cpu += req.milli_cpu
            mem += req.memory
            eph += req.ephemeral_storage
            has_scalar = has_scalar or bool(req.scalar)
            priority = pod.effective_priority
            acc = per_level.get(priority)
            if acc is None:
                acc = per_level[priority] = [0, 0, 0, 0]
            acc[0] += req.milli_cpu
            acc[1] += req.memory
            acc[2] += req.ephemeral_storage
            acc[3] += 1
            started = start_key(pod)
            if started > latest.get(priority, 0):
                latest[priority] = started
        levels = sorted(per_level)
        cumulative = []
        run = [0, 0, 0, 0]
        for level in levels:
            acc = per_level[level]
            run = [run[0] + acc[0], run[1] + acc[1], run[2] + acc[2], run[3] + acc[3]]
            cumulative.append((run[0], run[1], run[2], run[3]))
        alloc = node.allocatable
        used = (cpu, mem, eph, len(ordered))
        free = (alloc.milli_cpu - cpu, alloc.memory - mem, alloc.ephemeral_storage - eph, alloc.pods - len(ordered))
        return cls(node, ordered, used, levels, cumulative, has_scalar,
                   [latest.get(level, 0) for level in levels], free)

    def lower_priority_count(self, priority: int) -> int:
        """How many distinct levels are strictly below ``priority``."""
        return bisect.bisect_left(self.levels, priority)

    def freed_at_or_below(self, priority: int) -> tuple[int, int, int, int]:
        """What removing every pod with priority <= ``priority`` frees."""
        i = bisect.bisect_right(self.levels, priority)
        return self.cumulative[i - 1] if i else ZERO4

    def pdb_matches(self, pdbs: PdbIndex) -> list[tuple[int, ...]]:
        """For each pod (importance order) the PDBs that count it; cached per PDB index."""
        found = self._pdb_matches
        if found is None or found[0] is not pdbs:
            found = (pdbs, [pdbs.matches(p) for p in self.pods])
            self._pdb_matches = found
        return found[1]

    def largest_first(self, level_index: int) -> tuple[list[int], list[int], list[int]]:
        """Running sums of cpu, memory, ephemeral-storage of the pods at or below a level, largest first."""
        found = self._largest_first.get(level_index)
        if found is None:
            count = self.cumulative[level_index][3]
            pods = self.pods[len(self.pods) - count:]
            found = (list(itertools.accumulate(sorted((p.requests.milli_cpu for p in pods), reverse=True))),
                     list(itertools.accumulate(sorted((p.requests.memory for p in pods), reverse=True))),
                     list(itertools.accumulate(sorted((p.requests.ephemeral_storage for p in pods), reverse=True))))
            self._largest_first[level_index] = found
        return found


class SortedNames:
    """Node names ordered by (integer value, name), so "value >= x" is one slice (bisect, no Python loop)."""

    __slots__ = ("names", "values")

    def __init__(self, pairs: Iterable[tuple[int, str]]) -> None:
        ordered = sorted(pairs)
        self.values = [v for v, _ in ordered]
        self.names = [n for _, n in ordered]

    def _position(self, value: int, name: str) -> int:
        values = self.values
        return bisect.bisect_left(self.names, name, bisect.bisect_left(values, value),
                                  bisect.bisect_right(values, value))

    def add(self, value: int, name: str) -> None:
        i = self._position(value, name)
        self.values.insert(i, value)
        self.names.insert(i, name)

    def discard(self, value: int, name: str) -> None:
        i = self._position(value, name)
        if i < len(self.names) and self.names[i] == name and self.values[i] == value:
            del self.values[i]
            del self.names[i]

    def at_least(self, value: int) -> list[str]:
        return self.names[bisect.bisect_left(self.values, value):]

    def below(self, value: int) -> list[str]:
        return self.names[:bisect.bisect_left(self.values, value)]


# Keys of the capacity orderings (kind, priority, dimension, k):
#   ("free", 0, dim, 0)    what is free now
#   ("level", p, dim, 0)   what is free once every pod with priority <= p is gone
#   ("top", p, dim, k)     what is free once the k pods with priority <= p largest in ``dim`` are gone
#   ("latest", p, 0, 0)    the latest start among the node's pods of priority exactly p (-1 without any)
#   ("alloc", 0, dim, 0)   allocatable
#   ("min", 0, 0, 0)       the node's lowest pod priority
OrderKey = tuple[str, int, int, int]
MIN_PRIORITY_ORDER: OrderKey = ("min", 0, 0, 0)


def free_order(dim: int, level: int | None = None) -> OrderKey:
    return ("free", 0, dim, 0) if level is None else ("level", level, dim, 0)


def order_value(key: OrderKey, summary: NodeSummary) -> int:
    kind, level, dim, k = key
    if kind == "free":
        return summary.free[dim]
    if kind == "level":
        return summary.free[dim] + summary.freed_at_or_below(level)[dim]
    if kind == "top":
        at = bisect.bisect_right(summary.levels, level) - 1
        if at < 0:
            return summary.free[dim]
        sums = summary.largest_first(at)[dim]
        return summary.free[dim] + sums[min(k, len(sums)) - 1]
    if kind == "latest":
        at = bisect.bisect_left(summary.levels, level)
        return summary.level_latest_start[at] if at < len(summary.levels) and summary.levels[at] == level else -1
    if kind == "alloc":
        alloc = summary.node.allocatable
        return (alloc.milli_cpu, alloc.memory, alloc.ephemeral_storage, alloc.pods)[dim]
    return summary.levels[0] if summary.levels else NO_PODS_LEVEL


# "top" orderings (victim counts) built together per priority and resource.
TOP_ORDERS = 4

# Above this share of changed nodes a sync rebuilds everything instead of patching per node.
REBUILD_FRACTION = 4


class StateIndex:
    """Derived views of one ClusterState, refreshed per changed node (``ClusterState.nodes_changed_since``).

    Use it under ``lock``: predictions in worker threads share it (``ClusterView`` takes the lock).
    """

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.lock = threading.RLock()
        self.version = -1
        self.node_names: list[str] = []
        self.summaries: dict[str, NodeSummary] = {}
        # Nodes grouped by what the static (pod-independent) filters look at when the pod has no node constraints.
        self.static_groups: dict[tuple[bool, tuple[Taint, ...]], set[str]] = {}
        self.level_nodes: Counter[int] = Counter()
        self._orders: dict[OrderKey, SortedNames] = {}
        self._anti_by_name: dict[str, list[Pod]] = {}
        self._anti_flat: list[Pod] | None = []
        self.has_nominated = False
        self.nominated_nodes: frozenset[str] = frozenset()
        self._pdbs_version = -1
        self._pdb_indexes: dict[tuple[bool, bool], PdbIndex] = {}

    # ---- synchronisation ------------------------------------------------------------------------
    def sync(self) -> None:
        """Bring the index up to the state's current version (O(pods on the changed nodes))."""
        state = self.state
        # Changes up to settled_version are complete; a write in progress (stamped later) may be seen half
        # done now, and is refreshed again at the next sync, since the log is read from self.version on.
        version = state.settled_version
        if version == self.version:
            return
        changed = state.nodes_changed_since(self.version) if self.version >= 0 else None
        if changed is None or len(changed) * REBUILD_FRACTION > max(64, len(self.summaries)):
            self._rebuild()
        else:
            for name in changed:
                self._refresh(name)
        nominated = frozenset(state.nominated_by_node)
        self.nominated_nodes = nominated
        self.has_nominated = bool(nominated)
        if state.pdbs_version != self._pdbs_version:
            self._pdbs_version = state.pdbs_version
            self._pdb_indexes.clear()
        self.version = version

    def _rebuild(self) -> None:
        state = self.state
        self._orders.clear()
        self.summaries = {}
        self.static_groups = {}
        self.level_nodes = Counter()
        for name in list(state.nodes):
            node = state.nodes.get(name)
            if node is not None:
                self._add_summary(name, NodeSummary.build(node, list(state.pods_by_node.get(name, {}).values())))
        self.node_names = sorted(self.summaries)
        self._anti_by_name = {}
        for name in set(state.pods_by_node) | set(state.nominated_by_node):
            self._refresh_anti_affinity(name)
        self._anti_flat = None

    def _refresh(self, name: str) -> None:
        state = self.state
        old = self.summaries.get(name)
        node = state.nodes.get(name)
        if node is None:
            if old is not None:
                self._remove_summary(name, old)
                del self.node_names[bisect.bisect_left(self.node_names, name)]
        elif old is None:
            self._add_summary(name, NodeSummary.build(node, list(state.pods_by_node.get(name, {}).values())))
            bisect.insort(self.node_names, name)
        else:
            self._replace_summary(name, old, NodeSummary.build(node, list(state.pods_by_node.get(name, {}).values())))
        self._refresh_anti_affinity(name)

    def _add_summary(self, name: str, summary: NodeSummary) -> None:
        self.summaries[name] = summary
        node = summary.node
        self.static_groups.setdefault((node.unschedulable, node.taints), set()).add(name)
        self.level_nodes.update(summary.levels)
        for key, order in self._orders.items():
            order.add(order_value(key, summary), name)

    def _remove_summary(self, name: str, summary: NodeSummary) -> None:
        del self.summaries[name]
        self._forget_static_and_levels(name, summary)
        for key, order in self._orders.items():
            order.discard(order_value(key, summary), name)

    def _replace_summary(self, name: str, old: NodeSummary, new: NodeSummary) -> None:
        """A changed node: only the orderings whose value for it moved are touched."""
        self.summaries[name] = new
        self.level_nodes.update(new.levels)  # first: a level the node keeps never drops to zero on the way
        self._forget_static_and_levels(name, old)
        node = new.node
        self.static_groups.setdefault((node.unschedulable, node.taints), set()).add(name)
        for key, order in self._orders.items():
            before, after = order_value(key, old), order_value(key, new)
            if before != after:
                order.discard(before, name)
                order.add(after, name)

    def _forget_static_and_levels(self, name: str, summary: NodeSummary) -> None:
        sig = (summary.node.unschedulable, summary.node.taints)
        group = self.static_groups[sig]
        group.discard(name)
        if not group:
            del self.static_groups[sig]
        self.level_nodes.subtract(summary.levels)
        for level in summary.levels:
            if self.level_nodes[level] <= 0:
                del self.level_nodes[level]
                # Orderings of a priority no pod has any more: dropped (rebuilt if it comes back).
                for key in [k for k in self._orders if k[0] in ("level", "top", "latest") and k[1] == level]:
                    del self._orders[key]

    def _refresh_anti_affinity(self, name: str) -> None:
        state = self.state
        found = [p for p in state.pods_by_node.get(name, {}).values() if p.pod_anti_affinity]
        found += [p for p in state.nominated_by_node.get(name, {}).values() if p.pod_anti_affinity]
        if found or name in self._anti_by_name:
            if found:
                self._anti_by_name[name] = found
            else:
                del self._anti_by_name[name]
            self._anti_flat = None

    # ---- reads ----------------------------------------------------------------------------------
    @property
    def anti_affinity_pods(self) -> list[Pod]:
        """Bound and nominated pods with required anti-affinity terms."""
        if self._anti_flat is None:
            self._anti_flat = [p for pods in self._anti_by_name.values() for p in pods]
        return self._anti_flat

    def order(self, key: OrderKey) -> SortedNames:
        """Node names ordered by one value (built on first use, then kept up to date per changed node).

        The "top" orderings of one priority and resource are built together for k = 1..TOP_ORDERS, so a
        pod needing a larger victim count later does not pay a build in its prediction.
        """
        found = self._orders.get(key)
        if found is None:
            kind, level, dim, k = key
            for other in range(1, TOP_ORDERS + 1) if kind == "top" and k <= TOP_ORDERS else (k,):
                built = SortedNames((order_value((kind, level, dim, other), s), name)
                                    for name, s in self.summaries.items())
                self._orders[(kind, level, dim, other)] = built
            found = self._orders[key]
        return found

    def levels_below(self, priority: int) -> list[int]:
        """Distinct priorities of bound pods lower than ``priority``, ascending."""
        return sorted(level for level in self.level_nodes if level < priority)

    def pdb_index(self, args: PreemptionArgs) -> PdbIndex:
        """Every PDB (namespace, name order) with cached pod matches; status may lag, as upstream's lister."""
        flags = (args.pdb_empty_selector_matches_all, args.pdb_stop_at_first_violation)
        found = self._pdb_indexes.get(flags)
        if found is None:
            pdbs = sorted((p for per_ns in list(self.state.pdbs_by_namespace.values()) for p in list(per_ns.values())),
                          key=lambda p: (p.namespace, p.name))
            found = PdbIndex(pdbs, empty_matches_all=flags[0], stop_at_first=flags[1])
            self._pdb_indexes[flags] = found
        return found

    def summary(self, name: str) -> NodeSummary:
        return self.summaries[name]


_INDEXES: weakref.WeakKeyDictionary[ClusterState, StateIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def state_index(state: ClusterState) -> StateIndex:
    """The state's index (one per ClusterState, created on first use); call ``sync`` under its lock."""
    index = _INDEXES.get(state)
    if index is None:
        with _INDEXES_LOCK:
            index = _INDEXES.get(state)
            if index is None:
                index = StateIndex(state)
                _INDEXES[state] = index
    return index


def index_sync_is_cheap(state: ClusterState, max_nodes: int = 64) -> bool:
    """Whether the state's index exists and catching up refreshes at most ``max_nodes`` nodes (no rebuild).

    The server runs a prediction on its event loop only then: a rebuild (first use, or after a relist)
    takes hundreds of milliseconds at 5,000 nodes and must happen in a worker thread.
    """
    index = _INDEXES.get(state)
    if index is None or index.version < 0:
        return False
    if state.settled_version == index.version:
        return True
    changed = state.nodes_changed_since(index.version)
    return changed is not None and len(changed) <= max_nodes


class ClusterView:
    """The ClusterState plus simulated evictions and bindings (per-node deltas, never a copy).

    Creating a view syncs the index; keep using it under ``index.lock`` (``simulate_pods`` does).
    """

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.index = state_index(state)
        with self.index.lock:
            self.index.sync()
        self.removed: set[str] = set()
        self.added: dict[str, dict[str, Pod]] = {}
        self.touched: set[str] = set()

    @property
    def node_names(self) -> list[str]:
        return self.index.node_names

    def node(self, name: str) -> Node:
        return self.state.nodes[name]

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        found = self.state.namespaces.get(namespace)
        return found.labels if found is not None else EMPTY_LABELS

    def pods_on(self, name: str) -> list[Pod]:
        base = self.state.pods_by_node.get(name, {})
        if name not in self.touched:
            return list(base.values())
        pods = [p for k, p in base.items() if k not in self.removed]
        pods.extend(self.added.get(name, {}).values())
        return pods

    def summary(self, name: str) -> NodeSummary:
        if name not in self.touched:
            return self.index.summary(name)
        return NodeSummary.build(self.state.nodes[name], self.pods_on(name))

    def nominated_on(self, name: str) -> list[Pod]:
        nominated = self.state.nominated_by_node.get(name)
        if not nominated:
            return []
        return [p for k, p in nominated.items() if k not in self.removed]

    def bound_pods_in(self, namespace: str) -> Iterator[Pod]:
        for key, pod in self.state.pods_by_namespace.get(namespace, {}).items():
            if holds_node_resources(pod) and key not in self.removed and pod.node_name in self.state.nodes:
                yield pod
        for added in self.added.values():
            for pod in added.values():
                if pod.namespace == namespace:
                    yield pod

    def anti_affinity_pods(self) -> Iterator[Pod]:
        """Bound pods with required anti-affinity terms (nominated ones count only on their node, pass 1)."""
        for pod in self.index.anti_affinity_pods:
            if pod.node_name and pod.key not in self.removed and pod.node_name in self.state.nodes:
                yield pod
        for added in self.added.values():
            for pod in added.values():
                if pod.pod_anti_affinity:
                    yield pod

    def has_nominated_anti_affinity(self) -> bool:
        return any(not p.node_name for p in self.index.anti_affinity_pods)

    # ---- simulated changes -----------------------------------------------------------------
    def evict(self, pod: Pod) -> None:
        self.touched.add(pod.node_name)
        added = self.added.get(pod.node_name)
        if added is not None and pod.key in added:
            del added[pod.key]
        else:
            self.removed.add(pod.key)

    def bind(self, pod: Pod, node: str) -> Pod:
        bound = dataclasses.replace(pod, node_name=node, nominated_node_name="")
        self.touched.add(node)
        self.added.setdefault(node, {})[bound.key] = bound
        return bound
