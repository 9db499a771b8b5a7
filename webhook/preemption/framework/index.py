"""Incremental indexes of one ClusterState for the predictor: per-node summaries and capacity orderings.

Derived indexes (sorted node names, static node groups, per-node importance-ordered pods with priority-level
prefix sums, nodes ordered by free capacity) live in one ``StateIndex`` per ClusterState and are refreshed per
node from ``ClusterState.nodes_changed_since``: an informer event on one pod costs O(pods on its node) at the
next prediction, not a rebuild.
"""

from __future__ import annotations

import bisect
import functools
import threading
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from webhook.cluster.model import Node, NodeImage, Pod, Taint
from webhook.cluster.snapshot import ClusterState, holds_node_resources
from webhook.preemption.framework.nodelabels import NodeLabelIndex
from webhook.preemption.framework.pdb import PdbIndex
from webhook.preemption.framework.summary import NO_PODS_LEVEL, NodeSummary
from webhook.preemption.results import PreemptionArgs


class SortedNames:
    """Node names ordered by (integer value, name), so "value >= x" is a slice (bisect, no Python loop per node).

    Kept in blocks of at most ``2 * BLOCK`` entries, as sortedcontainers' SortedList keeps its values (not used
    itself: the slices here must stay C-speed copies of name lists, not Python walks over (value, name) pairs). A
    node whose value moves is taken out of one block and put in another: in one flat list of 15,000 names each move
    shifted half the list twice (values and names), ~12 moves per watch event under churn, a third of the event's
    index refresh (cProfile, 15,000 nodes).
    """

    __slots__ = ("_bound_names", "_bound_values", "_names", "_size", "_values")

    # Block b holds entries <= its bound (value, name), and block b + 1 only entries above it: the bound is the
    # block's last entry when it was made, and stays when that entry leaves (still a bound; reads bisect the bounds).

    BLOCK = 512

    def __init__(self, pairs: Iterable[tuple[int, str]]) -> None:
        ordered = sorted(pairs)
        block = self.BLOCK
        self._values = [[v for v, _ in ordered[i:i + block]] for i in range(0, len(ordered), block)]
        self._names = [[n for _, n in ordered[i:i + block]] for i in range(0, len(ordered), block)]
        self._bound_values = [values[-1] for values in self._values]
        self._bound_names = [names[-1] for names in self._names]
        self._size = len(ordered)

    def __len__(self) -> int:
        return self._size

    @property
    def values(self) -> list[int]:
        """Every value, ascending (a copy)."""
        return [v for values in self._values for v in values]

    @property
    def names(self) -> list[str]:
        """Every name in the ordering's order (a copy)."""
        return [n for names in self._names for n in names]

    def _block_of(self, value: int, name: str) -> int:
        """The first block whose bound is not below (value, name) (== the block count when none)."""
        bound_values = self._bound_values
        lo = bisect.bisect_left(bound_values, value)
        return bisect.bisect_left(self._bound_names, name, lo, bisect.bisect_right(bound_values, value, lo))

    @staticmethod
    def _index_in(values: list[int], names: list[str], value: int, name: str) -> int:
        """Where (value, name) is, or goes, in one block."""
        lo = bisect.bisect_left(values, value)
        return bisect.bisect_left(names, name, lo, bisect.bisect_right(values, value, lo))

    def add(self, value: int, name: str) -> None:
        b = self._block_of(value, name)
        if b == len(self._values):  # past every bound: at the end of the last block, whose bound it becomes
            if b == 0:
                self._values.append([])
                self._names.append([])
                self._bound_values.append(value)
                self._bound_names.append(name)
            else:
                b -= 1
                self._bound_values[b], self._bound_names[b] = value, name
        values, names = self._values[b], self._names[b]
        i = self._index_in(values, names, value, name)
        values.insert(i, value)
        names.insert(i, name)
        self._size += 1
        if len(values) > 2 * self.BLOCK:
            half = len(values) // 2
            self._values[b + 1:b + 1] = [values[half:]]
            self._names[b + 1:b + 1] = [names[half:]]
            del values[half:], names[half:]
            self._bound_values.insert(b, values[-1])
            self._bound_names.insert(b, names[-1])

    def discard(self, value: int, name: str) -> None:
        b = self._block_of(value, name)
        if b == len(self._values):
            return
        values, names = self._values[b], self._names[b]
        i = self._index_in(values, names, value, name)
        if i == len(values) or names[i] != name or values[i] != value:
            return
        del values[i], names[i]
        self._size -= 1
        if not values:
            del self._values[b], self._names[b], self._bound_values[b], self._bound_names[b]

    def _split(self, value: int) -> tuple[int, int]:
        """Where "value >= x" starts: (block, index in it, maybe its end); (block count, 0) when no bound is that
        large."""
        b = bisect.bisect_left(self._bound_values, value)
        return (b, bisect.bisect_left(self._values[b], value)) if b < len(self._values) else (b, 0)

    def at_least(self, value: int) -> list[str]:
        b, i = self._split(value)
        if b == len(self._names):
            return []
        found = self._names[b][i:]
        for names in self._names[b + 1:]:
            found += names
        return found

    def count_at_least(self, value: int) -> int:
        """``len(self.at_least(value))`` without copying the slice."""
        return self._size - self.count_below(value)

    def count_below(self, value: int) -> int:
        """``len(self.below(value))`` without copying the slice."""
        b, i = self._split(value)
        return sum(map(len, self._values[:b])) + i

    def below(self, value: int) -> list[str]:
        b, i = self._split(value)
        found: list[str] = []
        for names in self._names[:b]:
            found += names
        if b < len(self._names):
            found += self._names[b][:i]
        return found

    def descending(self) -> Iterator[tuple[int, str]]:
        """(value, name) pairs from the largest down."""
        for values, names in zip(reversed(self._values), reversed(self._names), strict=True):
            yield from zip(reversed(values), reversed(names), strict=True)


class OrderKey(NamedTuple):
    """Which value a capacity ordering sorts the nodes by.

    ``kind`` is one of:
      "free"    what is free now in ``dim``
      "level"   what is free in ``dim`` once every pod with priority <= ``priority`` is gone
      "top"     what is free in ``dim`` once the ``victims`` pods with priority <= ``priority`` largest in it are gone
      "latest"  the latest start among the node's pods of priority exactly ``priority`` (-1 without any); with
                ``victims`` k > 1, the k-th latest (the latest when they are fewer)
      "started" the latest start among the node's pods of priority exactly ``priority`` that have started (-1
                without any)
      "unstarted" what is free in ``dim`` once the pod of priority exactly ``priority`` not started yet and largest
                in ``dim`` is gone (``NO_UNSTARTED`` without any such pod)
      "alloc"   allocatable in ``dim``
      "min"     the node's lowest pod priority
    """

    kind: str
    priority: int = 0
    dim: int = 0
    victims: int = 0


@functools.lru_cache(maxsize=4096)
def order_key(kind: str, priority: int = 0, dim: int = 0, victims: int = 0) -> OrderKey:
    """``OrderKey(...)``, cached: every prediction asks for the same few keys (a NamedTuple's __new__ is slow)."""
    return OrderKey(kind, priority, dim, victims)


MIN_PRIORITY_ORDER = OrderKey("min")
# Orderings that depend on a pod priority: dropped when no pod has that priority any more.
PRIORITY_ORDERS = ("level", "top", "latest", "started", "unstarted")
# The "unstarted" value of a node without a pod of that priority not started yet: below any want.
NO_UNSTARTED = -(2**63)


def free_order(dim: int, level: int | None = None) -> OrderKey:
    """The ordering by what is free in ``dim`` now (``level`` None) or once every pod <= ``level`` is gone."""
    return order_key("free", 0, dim) if level is None else order_key("level", level, dim)


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
        if at < len(summary.levels) and summary.levels[at] == level:
            return summary.level_latest_start[at] if k <= 1 else summary.latest_start(at, k)
        return -1
    if kind == "started" or kind == "unstarted":
        at = bisect.bisect_left(summary.levels, level)
        if at < len(summary.levels) and summary.levels[at] == level:
            if kind == "started":
                return summary.latest_started(at)
            largest = summary.largest_unstarted(at, dim)
            if largest is not None:
                return summary.free[dim] + largest
        return -1 if kind == "started" else NO_UNSTARTED
    if kind == "alloc":
        alloc = summary.node.allocatable
        return (alloc.milli_cpu, alloc.memory, alloc.ephemeral_storage, alloc.pods)[dim]
    return summary.levels[0] if summary.levels else NO_PODS_LEVEL


# "top" orderings (victim counts) built together per priority and resource.
TOP_ORDERS = 4

# Above this share of changed nodes a sync rebuilds everything instead of patching per node.
REBUILD_FRACTION = 4

StaticGroupKey = tuple[bool, tuple[Taint, ...]]  # (unschedulable, taints): what the node-only filters read


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
        self.static_groups: dict[StaticGroupKey, set[str]] = {}
        # Node names by label, for NodeAffinity over every node at once (plugins/nodeaffinity.py).
        self.node_labels = NodeLabelIndex()
        self.level_nodes: Counter[int] = Counter()
        self._orders: dict[OrderKey, SortedNames] = {}
        self._anti_by_name: dict[str, list[Pod]] = {}
        self._anti_flat: list[Pod] | None = []
        # Scoring (issue #28): the nodes holding each image of a ``status.images`` entry, and the entries by
        # image name (ImageLocality); the bound pods with any pod (anti-)affinity term, by node (InterPodAffinity
        # scores the pod against their terms, upstream ``HavePodsWithAffinityList``).
        self.image_nodes: dict[NodeImage, set[str]] = {}
        self.images_by_name: dict[str, list[NodeImage]] = {}
        self.affinity_pods_by_node: dict[str, list[Pod]] = {}
        self.has_nominated = False
        self.nominated_nodes: frozenset[str] = frozenset()
        self._pdbs_version = -1
        self._pdb_indexes: dict[tuple[bool, bool], PdbIndex] = {}

    def __getstate__(self) -> dict[str, object]:
        """Pickled (the snapshot cache, snapshot_cache.py) without its lock and the PDB indexes of past predictions
        (rebuilt on first use)."""
        kept = dict(vars(self))
        del kept["lock"]
        kept["_pdb_indexes"] = {}
        return kept

    def __setstate__(self, kept: dict[str, object]) -> None:
        vars(self).update(kept)
        self.lock = threading.RLock()

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
        self._sync_node_independent()
        self.version = version

    def sync_oldest(self, max_nodes: int) -> bool:
        """Part of ``sync`` for a built index: refresh the nodes of the oldest changes, at most ``max_nodes`` (all
        the nodes of one change, however many), and move the version past exactly those changes; whether the
        index is current after. False, with nothing done, when the change log no longer reaches back (``sync``
        rebuilds then). In slices, between admissions on the event loop: the whole backlog at once held the loop
        ~1.5 ms at 15,000 nodes under 500 pod writes/s (~125 us a node)."""
        state = self.state
        version = state.settled_version
        if version == self.version:
            return True
        changes = state.node_changes_after(self.version) if self.version >= 0 else None
        if changes is None:
            return False
        picked: set[str] = set()
        upto = version
        for i, (stamp, name) in enumerate(changes):
            if stamp > version:  # a write in progress (another thread): the next slice takes it
                upto = stamp - 1
                break
            if name not in picked and len(picked) >= max_nodes and stamp != changes[i - 1][0]:
                upto = stamp - 1  # every change up to here is taken whole; the version stops before this one
                break
            picked.add(name)
        for name in picked:
            self._refresh(name)
        self._sync_node_independent()
        self.version = upto
        return upto == version

    def _sync_node_independent(self) -> None:
        """What a sync reads of the state besides the changed nodes: the nominated nodes, the PDBs' version."""
        state = self.state
        nominated = frozenset(state.nominated_by_node)
        self.nominated_nodes = nominated
        self.has_nominated = bool(nominated)
        if state.pdbs_version != self._pdbs_version:
            self._pdbs_version = state.pdbs_version
            self._pdb_indexes.clear()

    def _node_pods(self, name: str) -> list[Pod]:
        return list(self.state.pods_by_node.get(name, {}).values())

    def _build_summary(self, name: str, node: Node) -> NodeSummary:
        return NodeSummary.build(node, self._node_pods(name))

    def _rebuild(self) -> None:
        state = self.state
        self._orders.clear()
        self.summaries = {}
        self.static_groups = {}
        self.node_labels = NodeLabelIndex()
        self.image_nodes = {}
        self.images_by_name = {}
        self.level_nodes = Counter()
        for name in list(state.nodes):
            node = state.nodes.get(name)
            if node is not None:
                self._add_summary(name, self._build_summary(name, node))
        self.node_names = sorted(self.summaries)
        self._anti_by_name = {}
        self.affinity_pods_by_node = {}
        for name in set(state.pods_by_node) | set(state.nominated_by_node):
            self._refresh_affinity_pods(name)
        self._anti_flat = None

    def _refresh(self, name: str) -> None:
        old = self.summaries.get(name)
        node = self.state.nodes.get(name)
        if node is None:
            if old is not None:
                self._remove_summary(name, old)
                del self.node_names[bisect.bisect_left(self.node_names, name)]
        elif old is None:
            self._add_summary(name, self._build_summary(name, node))
            bisect.insort(self.node_names, name)
        else:
            pods = self._node_pods(name)  # listed once: a refresh is on the path of every watch event
            new = old.patched(node, pods) or NodeSummary.build(node, pods)
            if new.cumulative is old.cumulative:  # the pod objects swapped only: no ordering, level or group moved
                self.summaries[name] = new
            else:
                self._replace_summary(name, old, new)
        self._refresh_affinity_pods(name)

    def _add_summary(self, name: str, summary: NodeSummary) -> None:
        self.summaries[name] = summary
        node = summary.node
        self.static_groups.setdefault((node.unschedulable, node.taints), set()).add(name)
        self.node_labels.add(name, node.labels)
        self._add_images(name, node.images)
        self.level_nodes.update(summary.levels)
        for key, order in self._orders.items():
            order.add(order_value(key, summary), name)

    def _remove_summary(self, name: str, summary: NodeSummary) -> None:
        del self.summaries[name]
        self._forget_static_and_levels(name, summary)
        self.node_labels.remove(name, summary.node.labels)
        self._remove_images(name, summary.node.images)
        for key, order in self._orders.items():
            order.discard(order_value(key, summary), name)

    def _replace_summary(self, name: str, old: NodeSummary, new: NodeSummary) -> None:
        """A changed node: only the orderings whose value for it moved are touched."""
        self.summaries[name] = new
        self.level_nodes.update(new.levels)  # first: a level the node keeps never drops to zero on the way
        self._forget_static_and_levels(name, old)
        node = new.node
        self.static_groups.setdefault((node.unschedulable, node.taints), set()).add(name)
        if node.labels is not old.node.labels:
            self.node_labels.remove(name, old.node.labels)
            self.node_labels.add(name, node.labels)
        if node.images is not old.node.images:
            self._remove_images(name, old.node.images)
            self._add_images(name, node.images)
        for key, order in self._orders.items():
            before, after = order_value(key, old), order_value(key, new)
            if before != after:
                order.discard(before, name)
                order.add(after, name)

    def _forget_static_and_levels(self, name: str, summary: NodeSummary) -> None:
        group_key = (summary.node.unschedulable, summary.node.taints)
        group = self.static_groups[group_key]
        group.discard(name)
        if not group:
            del self.static_groups[group_key]
        self.level_nodes.subtract(summary.levels)
        for level in summary.levels:
            if self.level_nodes[level] <= 0:
                del self.level_nodes[level]
                # Orderings of a priority no pod has any more: dropped (rebuilt if it comes back).
                for key in [k for k in self._orders if k.kind in PRIORITY_ORDERS and k.priority == level]:
                    del self._orders[key]

    def _add_images(self, name: str, images: tuple[NodeImage, ...]) -> None:
        for image in images:
            nodes = self.image_nodes.get(image)
            if nodes is None:
                nodes = self.image_nodes[image] = set()
                for image_name in image.names:
                    self.images_by_name.setdefault(image_name, []).append(image)
            nodes.add(name)

    def _remove_images(self, name: str, images: tuple[NodeImage, ...]) -> None:
        for image in images:
            nodes = self.image_nodes.get(image)
            if nodes is None:
                continue
            nodes.discard(name)
            if not nodes:
                del self.image_nodes[image]
                for image_name in image.names:
                    entries = self.images_by_name.get(image_name)
                    if entries is not None and image in entries:
                        entries.remove(image)
                        if not entries:
                            del self.images_by_name[image_name]

    def _refresh_affinity_pods(self, name: str) -> None:
        state = self.state
        bound = state.pods_by_node.get(name, {}).values()
        with_affinity = [p for p in bound if p.has_pod_affinity]
        if with_affinity:
            self.affinity_pods_by_node[name] = with_affinity
        else:
            self.affinity_pods_by_node.pop(name, None)
        found = [p for p in with_affinity if p.pod_anti_affinity]
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
            counts = range(1, TOP_ORDERS + 1) if key.kind == "top" and key.victims <= TOP_ORDERS else (key.victims,)
            for count in counts:
                sibling = key._replace(victims=count)
                self._orders[sibling] = SortedNames((order_value(sibling, s), name)
                                                    for name, s in self.summaries.items())
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

    def image_state(self, image_name: str) -> tuple[int, set[str]]:
        """ImageLocality's ``ImageStateSummary`` of one image name: its size (the first entry's, as the scheduler's
        cache keeps the size it saw first) and the nodes that hold it (empty when none)."""
        entries = self.images_by_name.get(image_name)
        if not entries:
            return 0, set()
        if len(entries) == 1:
            return entries[0].size_bytes, self.image_nodes[entries[0]]
        nodes: set[str] = set()
        for entry in entries:
            nodes |= self.image_nodes[entry]
        return entries[0].size_bytes, nodes


def subset(index: StateIndex, nodes: set[str], members: list[str]) -> set[str]:
    """``nodes`` ∩ ``members`` as a new set (no hashing when ``members`` lists every node)."""
    return set(nodes) if len(members) >= len(index.summaries) else nodes.intersection(members)


def intersect(index: StateIndex, nodes: set[str], slices: list[list[str]]) -> set[str]:
    """``nodes`` ∩ every slice (of capacity orderings), as a new set; the smallest slice first, slices of every
    node skipped."""
    slices = sorted((s for s in slices if len(s) < len(index.summaries)), key=len)
    if not slices:
        return set(nodes)
    found = nodes.intersection(slices[0])
    for more in slices[1:]:
        if not found:
            break
        found.intersection_update(more)
    return found


# A set operation with a slice of an ordering touches each of its names at C speed; checking one node reads its
# summary in Python (``order_value``), about this many times dearer. When the nodes to check number fewer than the
# slice over this factor, they are checked one by one: the work follows them, not the cluster.
PER_NODE_COST = 16

Bounds = list[tuple[OrderKey, int]]


def holds(summary: NodeSummary, bounds: Bounds) -> bool:
    """Whether every ``index.order(key).at_least(value)`` bound holds on the node of ``summary``."""
    for key, value in bounds:  # noqa: SIM110 - a loop, not all() over a generator: it runs per node on hot paths
        if order_value(key, summary) < value:
            return False
    return True


def holding(index: StateIndex, nodes: Iterable[str], bounds: Bounds) -> set[str]:
    """The ``nodes`` where every bound holds, node by node (a node the index does not hold is in no ordering)."""
    summaries = index.summaries
    found = set()
    for name in nodes:
        summary = summaries.get(name)
        if summary is not None and holds(summary, bounds):
            found.add(name)
    return found


def cutting_bounds(index: StateIndex, bounds: Iterable[tuple[OrderKey, int]]) -> list[tuple[int, OrderKey, int]] | None:
    """The bounds that leave out some node, each with how many nodes it keeps, fewest first (read off the orderings,
    nothing copied); None when one keeps no node."""
    total = len(index.summaries)
    sized = []
    for key, value in bounds:
        count = index.order(key).count_at_least(value)
        if count == 0:
            return None
        if count < total:
            sized.append((count, key, value))
    sized.sort(key=lambda entry: entry[0])
    return sized


def intersect_at_least(index: StateIndex, nodes: set[str], bounds: Iterable[tuple[OrderKey, int]]) -> set[str]:
    """``nodes`` ∩ ``index.order(key).at_least(value)`` for every bound: a new set, or ``nodes`` itself when every
    bound holds on every node (callers only read it). Only the slices that leave out some node are read (their
    sizes are read off the orderings first): at 15,000 nodes most bounds hold on every node, and a slice or a set
    copied for nothing costs as much as an intersection. Where the nodes left are few beside a slice, they are
    checked one by one instead (``PER_NODE_COST``)."""
    sized = cutting_bounds(index, bounds)
    if sized is None:
        return set()
    found = nodes
    for i, (count, key, value) in enumerate(sized):
        if len(found) * PER_NODE_COST < count:
            return holding(index, found, [(k, v) for _, k, v in sized[i:]])
        members = index.order(key).at_least(value)
        if found is nodes:
            found = nodes.intersection(members)  # a new set: ``nodes`` may be one the caller keeps
        else:
            found.intersection_update(members)
        if not found:
            break
    return found


_INDEXES: weakref.WeakKeyDictionary[ClusterState, StateIndex] = weakref.WeakKeyDictionary()
_PREVIEW_INDEXES: weakref.WeakKeyDictionary[ClusterState, StateIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def _index_in(indexes: weakref.WeakKeyDictionary[ClusterState, StateIndex], state: ClusterState) -> StateIndex:
    index = indexes.get(state)
    if index is None:
        with _INDEXES_LOCK:
            index = indexes.get(state)
            if index is None:
                index = StateIndex(state)
                indexes[state] = index
    return index


def state_index(state: ClusterState) -> StateIndex:
    """The state's index (one per ClusterState, created on first use); call ``sync`` under its lock."""
    return _index_in(_INDEXES, state)


def preview_index(state: ClusterState) -> StateIndex:
    """A second index of the state, for /preview: a preview simulates up to thousands of replicas under its
    index's lock, so it gets an index and a lock of its own and admission predictions never wait behind one.
    Built on the first preview, then kept up to date per changed node like the first."""
    return _index_in(_PREVIEW_INDEXES, state)


def adopt_index(index: StateIndex) -> None:
    """Make ``index`` (restored by the snapshot cache) the index of its state."""
    with _INDEXES_LOCK:
        _INDEXES[index.state] = index


def lowest_priority_level(state: ClusterState) -> int | None:
    """The lowest priority of a pod bound to a node, as of the state's index (admission's, kept current by every
    admission prediction), ``NO_PODS_LEVEL`` when no pod is bound; None when there is no index yet or it is
    being rewritten this instant (unknown: the caller assumes the worst). Before the index exists (it is built
    at start-up) the state's pods are read instead."""
    index = _INDEXES.get(state)
    try:
        if index is not None and index.version >= 0:
            return min(index.level_nodes, default=NO_PODS_LEVEL)
        return min((p.effective_priority for p in list(state.pods.values())
                     if holds_node_resources(p) and p.node_name in state.nodes), default=NO_PODS_LEVEL)
    except RuntimeError:  # resized by a write in another thread
        return None


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


def sync_if_cheap(state: ClusterState, max_nodes: int = 64) -> bool:
    """Catch the state's admission index up with it, if it is built, by at most ``max_nodes`` nodes of the oldest
    changes (``StateIndex.sync_oldest``) and only when no prediction holds its lock; whether it is current after.

    Under a stream of watch events the refresh of the changed nodes (~60 µs each at 30 pods a node) is otherwise
    paid by the next prediction: 50 events between two admissions made a fitting pod's prediction 2.6x slower
    and a preempting pod's 19x (bench/predict.py --live-events 50, 5,000 nodes). The server calls this between
    admissions instead (``keep_index_fresh``), on the event loop, so it never waits for a lock or rebuilds.
    The preview index is left to the previews: kept fresh too, it doubled this work (a sixth of serve's samples
    under 345 pod writes/s at 15,000 nodes) for requests far rarer than admissions.
    """
    index = _INDEXES.get(state)
    if index is None or index.version < 0 or state.settled_version == index.version:
        return True
    if not index.lock.acquire(blocking=False):
        return False
    try:
        return index.sync_oldest(max_nodes)
    finally:
        index.lock.release()
