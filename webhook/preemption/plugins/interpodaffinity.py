"""InterPodAffinity's required terms (pkg/scheduler/framework/plugins/interpodaffinity/filtering.go): PreFilter
counts, per topology pair, the pods matching the incoming pod's affinity and anti-affinity terms and the existing
pods whose anti-affinity terms match it; AddPod/RemovePod keep the counts true during the dry run; Filter reads
them for the node's topology values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webhook.cluster.model import Node, Pod, PodAffinityTerm
from webhook.cluster.selectors import label_selector_matches
from webhook.preemption.deadline import checked
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, SKIPPED, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.plugins.helper import TopologyCountsPlugin

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "InterPodAffinity"
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

TopologyPair = tuple[str, str]
NamespaceLabels = Callable[[str], Mapping[str, str]]


def affinity_term_namespaces(term: PodAffinityTerm, owner_namespace: str) -> frozenset[str]:
    """Explicit namespaces; none and no namespaceSelector means the owning pod's namespace."""
    if not term.namespaces and term.namespace_selector is None:
        return frozenset((owner_namespace,))
    return frozenset(term.namespaces)


def affinity_term_matches(term: PodAffinityTerm, owner_namespace: str, target: Pod,
                          namespace_labels: Mapping[str, str]) -> bool:
    """``AffinityTerm.Matches``: namespace (listed or selected by labels) and then the label selector."""
    in_namespace = target.namespace in affinity_term_namespaces(term, owner_namespace) or (
        term.namespace_selector is not None and label_selector_matches(term.namespace_selector, namespace_labels))
    return in_namespace and label_selector_matches(term.label_selector, target.labels)


def _bump(counts: dict[TopologyPair, int], pair: TopologyPair, delta: int) -> None:
    value = counts.get(pair, 0) + delta
    if value:
        counts[pair] = value
    else:
        counts.pop(pair, None)


@dataclass(slots=True)
class AffinityState:
    """InterPodAffinity PreFilter state: topology-pair counts, updated by AddPod/RemovePod."""

    pod: Pod
    namespace_labels: NamespaceLabels
    affinity_counts: dict[TopologyPair, int] = field(default_factory=dict)
    anti_affinity_counts: dict[TopologyPair, int] = field(default_factory=dict)
    existing_anti_affinity_counts: dict[TopologyPair, int] = field(default_factory=dict)

    def copy(self) -> AffinityState:
        return AffinityState(self.pod, self.namespace_labels, dict(self.affinity_counts),
                             dict(self.anti_affinity_counts), dict(self.existing_anti_affinity_counts))

    def update(self, other: Pod, node: Node, delta: int) -> None:
        """AddPod (delta 1) / RemovePod (delta -1) of ``other`` on ``node``."""
        self.update_existing_anti_affinity(other, node, delta)
        self.update_incoming(other, node, delta)

    def update_existing_anti_affinity(self, other: Pod, node: Node, delta: int) -> None:
        """Count ``other``'s required anti-affinity terms that match the incoming pod."""
        if not other.pod_anti_affinity:
            return
        pod = self.pod
        labels = node.labels
        own_ns_labels = self.namespace_labels(pod.namespace)
        for term in other.pod_anti_affinity:
            if term.topology_key in labels and affinity_term_matches(term, other.namespace, pod, own_ns_labels):
                _bump(self.existing_anti_affinity_counts, (term.topology_key, labels[term.topology_key]), delta)

    def update_incoming(self, other: Pod, node: Node, delta: int) -> None:
        """Count ``other`` against the incoming pod's own affinity (all terms) and anti-affinity (per term)."""
        pod = self.pod
        if not pod.pod_affinity and not pod.pod_anti_affinity:
            return
        labels = node.labels
        other_ns_labels = self.namespace_labels(other.namespace)
        if pod.pod_affinity and all(affinity_term_matches(t, pod.namespace, other, other_ns_labels)
                                    for t in pod.pod_affinity):
            for term in pod.pod_affinity:
                if term.topology_key in labels:
                    _bump(self.affinity_counts, (term.topology_key, labels[term.topology_key]), delta)
        for term in pod.pod_anti_affinity:
            if term.topology_key in labels and affinity_term_matches(term, pod.namespace, other, other_ns_labels):
                _bump(self.anti_affinity_counts, (term.topology_key, labels[term.topology_key]), delta)

    def filter(self, node: Node) -> Status:
        labels = node.labels
        pod = self.pod
        if pod.pod_affinity and not self._satisfies_affinity(labels):
            return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_AFFINITY_RULES_NOT_MATCH,))
        if self.anti_affinity_counts:
            for term in pod.pod_anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and self.anti_affinity_counts.get((term.topology_key, value), 0) > 0:
                    return Status(UNSCHEDULABLE, (ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,))
        if self.existing_anti_affinity_counts:
            counts = self.existing_anti_affinity_counts
            for pair in labels.items():
                if counts.get(pair, 0) > 0:
                    return Status(UNSCHEDULABLE, (ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,))
        return OK

    def _satisfies_affinity(self, labels: Mapping[str, str]) -> bool:
        pods_exist = True
        for term in self.pod.pod_affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return False
            if self.affinity_counts.get((term.topology_key, value), 0) <= 0:
                pods_exist = False
        if pods_exist:
            return True
        # The first pod of a group with affinity to itself may go anywhere (upstream satisfyPodAffinity).
        pod = self.pod
        own = self.namespace_labels(pod.namespace)
        return not self.affinity_counts and all(affinity_term_matches(t, pod.namespace, pod, own)
                                                for t in pod.pod_affinity)


def _pods_in_term_namespaces(view: ClusterView, pod: Pod) -> Iterable[Pod]:
    terms = (*pod.pod_affinity, *pod.pod_anti_affinity)
    if any(t.namespace_selector is not None for t in terms):
        namespaces: set[str] = set(view.state.pods_by_namespace)
    else:
        namespaces = {ns for t in terms for ns in (t.namespaces or (pod.namespace,))}
    for namespace in sorted(namespaces):
        yield from view.bound_pods_in(namespace)


class InterPodAffinity(TopologyCountsPlugin[AffinityState]):
    name = NAME
    state_type = AffinityState

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        """The counts over the bound pods, or Skip when nothing can make the Filter fail (no term of the pod's
        own, and no pod, bound or nominated, with a required anti-affinity term)."""
        if not (pod.pod_affinity or pod.pod_anti_affinity or view.index.anti_affinity_pods or view.added):
            return SKIPPED  # the common case, answered before any state is built
        state = AffinityState(pod, view.namespace_labels)
        for other in checked(view.anti_affinity_pods(), deadline):
            state.update_existing_anti_affinity(other, view.node(other.node_name), 1)
        if pod.pod_affinity or pod.pod_anti_affinity:
            for other in checked(_pods_in_term_namespaces(view, pod), deadline):
                state.update_incoming(other, view.node(other.node_name), 1)
        elif not state.existing_anti_affinity_counts and not view.has_nominated_anti_affinity():
            return SKIPPED
        cycle.write(state)
        return OK
