"""What the framework hands its plugins about a node and a pod.

``NodeInfo``: a node with its pods and their running request totals (upstream
staging/src/k8s.io/kube-scheduler/framework/types.go (NodeInfo, Resource)); ``fit_error_message``: the text of a
FitError (pkg/scheduler/framework/types.go (FitError.Error)); ``importance_key``: which pod is more important
(pkg/scheduler/util/utils.go (MoreImportantPod, GetPodStartTime)).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webhook.cluster.model import Node, Pod, Resources
from webhook.preemption.framework.status import Status

if TYPE_CHECKING:
    from webhook.preemption.framework.summary import NodeSummary
    from webhook.preemption.framework.view import ClusterView

# A normalised score is in 0..MAX_NODE_SCORE (staging/src/k8s.io/kube-scheduler/framework/interface.go: MaxNodeScore).
MAX_NODE_SCORE = 100

# A pod with no status.startTime counts as started "now": later than every started pod.
START_NOW_NS = 2**63


def start_key(pod: Pod) -> int:
    return pod.start_time_ns if pod.start_time_ns is not None else START_NOW_NS


def importance_key(pod: Pod) -> tuple[int, int, str, str, str]:
    """Sort key, most important first: priority descending, then earlier start, then a stable tie-break."""
    return (-pod.effective_priority, start_key(pod), pod.uid, pod.namespace, pod.name)


@dataclass(slots=True)
class Requested:
    """What the pods of a NodeInfo request (mutable running totals)."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pod_count: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    def add(self, requests: Resources, sign: int = 1) -> None:
        self.milli_cpu += sign * requests.milli_cpu
        self.memory += sign * requests.memory
        self.ephemeral_storage += sign * requests.ephemeral_storage
        self.pod_count += sign
        for name, value in requests.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * value

    def copy(self) -> Requested:
        return Requested(self.milli_cpu, self.memory, self.ephemeral_storage, self.pod_count, dict(self.scalar))


@dataclass(slots=True)
class NodeInfo:
    """A node with the pods it holds and their running request totals (scheduler NodeInfo)."""

    node: Node
    pods: dict[str, Pod]
    requested: Requested

    @classmethod
    def build(cls, node: Node, pods: Iterable[Pod]) -> NodeInfo:
        info = cls(node, {}, Requested())
        for pod in pods:
            info.add(pod)
        return info

    def add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        self.requested.add(pod.requests)

    def remove(self, pod: Pod) -> None:
        if self.pods.pop(pod.key, None) is not None:
            self.requested.add(pod.requests, -1)

    def copy(self) -> NodeInfo:
        return NodeInfo(self.node, dict(self.pods), self.requested.copy())


def fit_error_message(num_all_nodes: int, node_statuses: Mapping[Status, int]) -> str:
    """FitError text, given how many nodes have each status: ``0/N nodes are available: <count reason, ...>.``
    (reasons sorted as strings)."""
    counts: Counter[str] = Counter()
    for status, n in node_statuses.items():
        for reason in status.reasons:
            counts[reason] += n
    histogram = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items() if n))
    head = f"0/{num_all_nodes} nodes are available"
    return f"{head}: {histogram}." if histogram else f"{head}."


@dataclass(slots=True)
class ScoringNodes:
    """The feasible nodes a cycle scores (upstream's ``nodes []fwk.NodeInfo`` of PreScore and Score), in order,
    and the cluster they are read from. ``num_all_nodes``: every node of the snapshot (ImageLocality's spread)."""

    names: list[str]
    view: ClusterView
    _position: dict[str, int] | None = None
    _summaries: list[NodeSummary] | None = None

    @property
    def num_all_nodes(self) -> int:
        return len(self.view.node_names)

    def position(self) -> dict[str, int]:
        """Each name's index in ``names`` (built once, for plugins that fill a few nodes' scores)."""
        if self._position is None:
            self._position = {name: i for i, name in enumerate(self.names)}
        return self._position

    def summaries(self) -> list[NodeSummary]:
        """Each scored node's sums, in order (built once: Fit and BalancedAllocation both read them)."""
        if self._summaries is None:
            view = self.view
            if view.touched:
                self._summaries = [view.summary(name) for name in self.names]
            else:
                summaries = view.index.summaries
                self._summaries = [summaries[name] for name in self.names]
        return self._summaries


@dataclass(slots=True)
class NodeScores:
    """What the Score plugins gave each scored node (upstream ``NodePluginScores``): per plugin, in the profile's
    order, the normalised score times the plugin's weight; and each node's total."""

    names: list[str]
    plugins: tuple[str, ...]
    weighted: list[list[int]]
    totals: list[int]

    def best(self) -> list[str]:
        """The nodes with the highest total, by name: the scheduler takes one of them (its heap pops one of equal
        score in an order the parallel Filter pass left them in, so any may be chosen)."""
        if not self.totals:
            return []
        top = max(self.totals)
        return sorted(name for name, total in zip(self.names, self.totals, strict=True) if total == top)

    def ranked(self, limit: int) -> list[int]:
        """The indexes of the ``limit`` nodes of highest total (ties by name)."""
        names = self.names
        totals = self.totals
        if limit <= 0 or not totals:
            return []
        # Only the nodes scoring at least the limit-th highest total can rank; a key per node of 750 cost 0.1 ms.
        floor = heapq.nlargest(limit, totals)[-1]
        contenders = [i for i, total in enumerate(totals) if total >= floor]
        contenders.sort(key=lambda i: (-totals[i], names[i]))
        return contenders[:limit]
