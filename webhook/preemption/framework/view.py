"""A cheap copy-on-write view of the ClusterState for multi-replica simulation.

The shared ``ClusterState`` is never mutated: evictions and bindings of simulated replicas are recorded as
per-node deltas over it and over its ``StateIndex`` (index.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from webhook.cluster.copying import replace_fields
from webhook.cluster.model import EMPTY_LABELS, Node, Pod
from webhook.cluster.snapshot import ClusterState, holds_node_resources
from webhook.preemption.framework.index import StateIndex, state_index
from webhook.preemption.framework.storage_view import StorageView
from webhook.preemption.framework.summary import NodeSummary
from webhook.preemption.framework.types import NodeInfo


class ClusterView(StorageView):
    """The ClusterState plus simulated evictions and bindings (per-node deltas, never a copy).

    Creating a view syncs the index; keep using it under ``index.lock`` (``simulate_pods`` does).
    """

    def __init__(self, state: ClusterState, index: StateIndex | None = None) -> None:
        self.state = state
        self.index = index if index is not None else state_index(state)
        with self.index.lock:
            self.index.sync()
        self.removed: set[str] = set()
        self.added: dict[str, dict[str, Pod]] = {}
        self.touched: set[str] = set()
        self._init_storage()

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

    def node_info(self, name: str) -> NodeInfo:
        return NodeInfo.build(self.state.nodes[name], self.pods_on(name))

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

    def affinity_pods(self) -> Iterator[Pod]:
        """Bound pods with any pod (anti-)affinity term, required or preferred (what InterPodAffinity's PreScore reads
        of the existing pods when the pod has no preferred term of its own)."""
        nodes = self.state.nodes
        for name, pods in self.index.affinity_pods_by_node.items():
            if name in nodes:
                for pod in pods:
                    if pod.key not in self.removed:
                        yield pod
        for added in self.added.values():
            for pod in added.values():
                if pod.has_pod_affinity:
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
        bound = replace_fields(pod, node_name=node, nominated_node_name="")
        self.touched.add(node)
        self.added.setdefault(node, {})[bound.key] = bound
        return bound
