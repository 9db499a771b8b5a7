"""A cheap copy-on-write view of the ClusterState for multi-replica simulation, and per-version caches.

The shared ``ClusterState`` is never mutated: evictions and bindings of simulated replicas are
recorded as per-node deltas. Derived indexes (sorted node names, taint groups, per-node
importance-ordered pods with priority-level prefix sums) are cached per ``ClusterState.version``.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from webhook.cluster.model import EMPTY_LABELS, Node, Pod, Taint
from webhook.cluster.snapshot import ClusterState, holds_node_resources
from webhook.preemption.pdb import PdbIndex
from webhook.preemption.results import PreemptionArgs, importance_key, start_key


@dataclass(slots=True)
class NodeSummary:
    """One node's bound pods, most important first, with totals per priority level.

    ``levels`` are the distinct pod priorities ascending; ``cumulative[i]`` is (cpu, memory,
    ephemeral-storage, pods) requested by the pods with priority <= ``levels[i]``.
    """

    node: Node
    pods: list[Pod]
    used: tuple[int, int, int, int]
    levels: list[int]
    cumulative: list[tuple[int, int, int, int]]
    has_scalar: bool
    # Latest start (unset = now) among the pods of each level.
    level_latest_start: list[int]
    _pdb_matches: dict[bool, list[tuple[int, ...]]] = dataclasses.field(default_factory=dict)
    _largest_first: dict[int, tuple[list[int], list[int], list[int]]] = dataclasses.field(default_factory=dict)

    @classmethod
    def build(cls, node: Node, pods: list[Pod]) -> NodeSummary:
        ordered = sorted(pods, key=importance_key)
        per_level: dict[int, list[int]] = {}
        cpu = mem = eph = 0
        has_scalar = False
        for pod in ordered:
            req = pod.requests
            cpu += req.milli_cpu
            mem += req.memory
            eph += req.ephemeral_storage
            has_scalar = has_scalar or bool(req.scalar)
            acc = per_level.setdefault(pod.effective_priority, [0, 0, 0, 0])
            acc[0] += req.milli_cpu
            acc[1] += req.memory
            acc[2] += req.ephemeral_storage
            acc[3] += 1
        levels = sorted(per_level)
        latest: dict[int, int] = {}
        for pod in ordered:
            latest[pod.effective_priority] = max(latest.get(pod.effective_priority, 0), start_key(pod))
        cumulative = []
        run = [0, 0, 0, 0]
        for level in levels:
            acc = per_level[level]
            run = [run[0] + acc[0], run[1] + acc[1], run[2] + acc[2], run[3] + acc[3]]
            cumulative.append((run[0], run[1], run[2], run[3]))
        return cls(node, ordered, (cpu, mem, eph, len(ordered)), levels, cumulative, has_scalar,
                   [latest[level] for level in levels])

    def lower_priority_count(self, priority: int) -> int:
        """How many distinct levels are strictly below ``priority``."""
        return bisect.bisect_left(self.levels, priority)

    def pdb_matches(self, pdbs: PdbIndex) -> list[tuple[int, ...]]:
        """For each pod (importance order) the PDBs that count it; cached per PDB selector semantics."""
        found = self._pdb_matches.get(pdbs.empty_matches_all)
        if found is None:
            found = [pdbs.matches(p) for p in self.pods]
            self._pdb_matches[pdbs.empty_matches_all] = found
        return found

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


NodeRecord = tuple[str, Node, int, int, int, int]
ThresholdRecord = tuple[str, int, tuple[tuple[int, int, int, int], ...], tuple[int, int, int, int], "NodeSummary"]


class StateIndex:
    """Derived views of one ClusterState version (rebuilt lazily when the version changes)."""

    def __init__(self, state: ClusterState) -> None:
        self.version = state.version
        self.state = state
        self.node_names: list[str] = sorted(state.nodes)
        self.nodes_by_taints: dict[tuple[Taint, ...], list[str]] = {}
        for name in self.node_names:
            self.nodes_by_taints.setdefault(state.nodes[name].taints, []).append(name)
        self.anti_affinity_pods: list[Pod] = [
            p for p in state.pods.values()
            if p.pod_anti_affinity and (holds_node_resources(p) or (p.nominated_node_name and not p.node_name))
        ]
        self.has_nominated = bool(state.nominated_by_node)
        self.nominated_nodes = frozenset(state.nominated_by_node)
        self._summaries: dict[str, NodeSummary] = {}
        self._pdb_indexes: dict[tuple[bool, bool], PdbIndex] = {}
        self._records: list[NodeRecord] | None = None
        self._thresholds: dict[int, list[ThresholdRecord]] = {}

    def records(self) -> list[NodeRecord]:
        """Per node in name order: (name, node, free cpu, memory, ephemeral-storage, pod slots)."""
        if self._records is None:
            records = []
            for name in self.node_names:
                node = self.state.nodes[name]
                alloc = node.allocatable
                usage = self.state.node_usage.get(name)
                used = (usage.milli_cpu, usage.memory, usage.ephemeral_storage, usage.pod_count) if usage else (
                    0, 0, 0, 0)
                records.append((name, node, alloc.milli_cpu - used[0], alloc.memory - used[1],
                                alloc.ephemeral_storage - used[2], alloc.pods - used[3]))
            self._records = records
        return self._records

    def thresholds(self, priority: int) -> list[ThresholdRecord]:
        """Per node with pods below ``priority``: (name, levels below, free resources after removing each
        level and all below it, ascending). Cached per preemptor priority."""
        found = self._thresholds.get(priority)
        if found is None:
            found = []
            for name, _node, free_cpu, free_mem, free_eph, free_pods in self.records():
                summary = self.summary(name)
                below = summary.lower_priority_count(priority)
                if below:
                    frees = tuple((free_cpu + c[0], free_mem + c[1], free_eph + c[2], free_pods + c[3])
                                  for c in summary.cumulative[:below])
                    found.append((name, below, frees, (free_cpu, free_mem, free_eph, free_pods), summary))
            self._thresholds[priority] = found
        return found

    def pdb_index(self, args: PreemptionArgs) -> PdbIndex:
        """Every PDB (namespace, name order) with cached pod matches; status may lag, as upstream's lister."""
        flags = (args.pdb_empty_selector_matches_all, args.pdb_stop_at_first_violation)
        found = self._pdb_indexes.get(flags)
        if found is None:
            pdbs = sorted((p for per_ns in self.state.pdbs_by_namespace.values() for p in per_ns.values()),
                          key=lambda p: (p.namespace, p.name))
            found = PdbIndex(pdbs, empty_matches_all=flags[0], stop_at_first=flags[1])
            self._pdb_indexes[flags] = found
        return found

    def summary(self, name: str) -> NodeSummary:
        found = self._summaries.get(name)
        if found is None:
            found = NodeSummary.build(self.state.nodes[name],
                                      list(self.state.pods_by_node.get(name, {}).values()))
            self._summaries[name] = found
        return found


_INDEXES: weakref.WeakKeyDictionary[ClusterState, StateIndex] = weakref.WeakKeyDictionary()


def state_index(state: ClusterState) -> StateIndex:
    index = _INDEXES.get(state)
    if index is None or index.version != state.version:
        index = StateIndex(state)
        _INDEXES[state] = index
    return index


class ClusterView:
    """The ClusterState plus simulated evictions and bindings (per-node deltas, never a copy)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.index = state_index(state)
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
