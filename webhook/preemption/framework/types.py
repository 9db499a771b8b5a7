"""What the framework hands its plugins about a node and a pod.

``NodeInfo``: a node with its pods and their running request totals (upstream
staging/src/k8s.io/kube-scheduler/framework/types.go (NodeInfo, Resource)); ``fit_error_message``: the text of a
FitError (pkg/scheduler/framework/types.go (FitError.Error)); ``importance_key``: which pod is more important
(pkg/scheduler/util/utils.go (MoreImportantPod, GetPodStartTime)).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from webhook.cluster.model import Node, Pod, Resources
from webhook.preemption.framework.status import Status

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
