"""PreFilter states of the plugins that look at other pods, and a node's full Filter status.

InterPodAffinity and PodTopologySpread count matching pods per topology pair once per pod (PreFilter), then
update the counts as pods are added or removed during preemption (AddPod/RemovePod), like upstream's
``CycleState``. Upstream: pkg/scheduler/framework/plugins/interpodaffinity/filtering.go and
pkg/scheduler/framework/plugins/podtopologyspread/filtering.go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from webhook.cluster.model import LabelSelector, LabelSelectorRequirement, Node, Pod, TopologySpreadConstraint
from webhook.preemption.filters import (
    DO_NOT_SCHEDULE,
    ERR_EXISTING_ANTI_AFFINITY,
    ERR_NODE_PORTS,
    ERR_POD_AFFINITY,
    ERR_POD_ANTI_AFFINITY,
    ERR_SPREAD,
    ERR_SPREAD_MISSING_LABEL,
    HONOR,
    OK,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    NodeInfo,
    Status,
    host_ports_conflict,
    resource_fit_status,
)
from webhook.preemption.selectors import (
    affinity_term_matches,
    first_untolerated_taint,
    label_selector_matches,
    required_node_affinity_matches,
)

# ---- InterPodAffinity pre-filter state ---------------------------------------------------------------

TopologyPair = tuple[str, str]
NamespaceLabels = Callable[[str], Mapping[str, str]]


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
            return Status(UNRESOLVABLE, (ERR_POD_AFFINITY,))
        if self.anti_affinity_counts:
            for term in pod.pod_anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and self.anti_affinity_counts.get((term.topology_key, value), 0) > 0:
                    return Status(UNSCHEDULABLE, (ERR_POD_ANTI_AFFINITY,))
        if self.existing_anti_affinity_counts:
            counts = self.existing_anti_affinity_counts
            for pair in labels.items():
                if counts.get(pair, 0) > 0:
                    return Status(UNSCHEDULABLE, (ERR_EXISTING_ANTI_AFFINITY,))
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


# ---- PodTopologySpread pre-filter state ---------------------------------------------------------------

def spread_selector(constraint: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    """The constraint's selector with ``matchLabelKeys`` merged in as ``key In (pod's value)``."""
    selector = constraint.label_selector
    keys = [k for k in constraint.match_label_keys if k in pod.labels]
    if selector is None or not keys:
        return selector
    extra = tuple(LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in keys)
    return LabelSelector(selector.match_labels, selector.match_expressions + extra)


def hard_spread_constraints(pod: Pod) -> tuple[TopologySpreadConstraint, ...]:
    return tuple(c for c in pod.topology_spread if c.when_unsatisfiable == DO_NOT_SCHEDULE)


@dataclass(slots=True)
class SpreadState:
    """PodTopologySpread PreFilter state: matching-pod counts per topology value, per DoNotSchedule constraint."""

    pod: Pod
    constraints: tuple[TopologySpreadConstraint, ...]
    selectors: tuple[LabelSelector | None, ...]
    counts: list[dict[str, int]]

    def copy(self) -> SpreadState:
        return SpreadState(self.pod, self.constraints, self.selectors, [dict(c) for c in self.counts])

    def node_has_all_keys(self, node: Node) -> bool:
        return all(c.topology_key in node.labels for c in self.constraints)

    def node_included(self, constraint: TopologySpreadConstraint, node: Node) -> bool:
        """``matchNodeInclusionPolicies``: nodeAffinityPolicy (default Honor), nodeTaintsPolicy (default Ignore)."""
        if constraint.node_affinity_policy == HONOR and not required_node_affinity_matches(self.pod, node):
            return False
        return not (constraint.node_taints_policy == HONOR
                    and first_untolerated_taint(node.taints, self.pod.tolerations) is not None)

    def update(self, other: Pod, node: Node, delta: int) -> None:
        """Upstream ``updateWithPod`` (AddPod/RemovePod during preemption); no terminating-pod check here."""
        if other.namespace != self.pod.namespace or not self.node_has_all_keys(node):
            return
        for i, constraint in enumerate(self.constraints):
            if not label_selector_matches(self.selectors[i], other.labels):
                continue
            if not self.node_included(constraint, node):
                continue
            value = node.labels[constraint.topology_key]
            self.counts[i][value] = self.counts[i].get(value, 0) + delta

    def filter(self, node: Node) -> Status:
        for i, constraint in enumerate(self.constraints):
            value = node.labels.get(constraint.topology_key)
            if value is None:
                return Status(UNRESOLVABLE, (ERR_SPREAD_MISSING_LABEL,))
            counts = self.counts[i]
            min_match = min(counts.values()) if counts else 2**31 - 1
            if constraint.min_domains is not None and len(counts) < constraint.min_domains:
                min_match = 0
            self_match = 1 if label_selector_matches(self.selectors[i], self.pod.labels) else 0
            if counts.get(value, 0) + self_match - min_match > constraint.max_skew:
                return Status(UNSCHEDULABLE, (ERR_SPREAD,))
        return OK


def new_spread_state(pod: Pod, nodes: Iterable[Node], pods_on: Callable[[str], Iterable[Pod]]) -> SpreadState | None:
    """PreFilter: count matching pods in the pod's namespace per domain over the eligible nodes."""
    constraints = hard_spread_constraints(pod)
    if not constraints:
        return None
    selectors = tuple(spread_selector(c, pod) for c in constraints)
    state = SpreadState(pod, constraints, selectors, [{} for _ in constraints])
    for node in nodes:
        if not state.node_has_all_keys(node):
            continue
        pods = None
        for i, constraint in enumerate(constraints):
            if not state.node_included(constraint, node):
                continue
            value = node.labels[constraint.topology_key]
            count = 0
            selector = selectors[i]
            # countPodsMatchSelector: an empty selector counts nothing; terminating pods are skipped (#87621).
            if selector is not None and not selector.is_empty():
                if pods is None:
                    pods = [p for p in pods_on(node.name) if p.namespace == pod.namespace and not p.deleting]
                count = sum(1 for p in pods if label_selector_matches(selector, p.labels))
            state.counts[i][value] = state.counts[i].get(value, 0) + count
    return state


# ---- the cycle state and the dynamic filters -------------------------------------------------------------

@dataclass(slots=True)
class CycleState:
    """The PreFilter states that depend on other pods; copied per dry-run node like upstream."""

    affinity: AffinityState | None = None
    spread: SpreadState | None = None

    def copy(self) -> CycleState:
        return CycleState(self.affinity.copy() if self.affinity else None,
                          self.spread.copy() if self.spread else None)

    def add_pod(self, other: Pod, node: Node) -> None:
        if self.affinity is not None:
            self.affinity.update(other, node, 1)
        if self.spread is not None:
            self.spread.update(other, node, 1)

    def remove_pod(self, other: Pod, node: Node) -> None:
        if self.affinity is not None:
            self.affinity.update(other, node, -1)
        if self.spread is not None:
            self.spread.update(other, node, -1)


def dynamic_node_status(pod: Pod, info: NodeInfo, cycle: CycleState) -> Status:
    """NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity on one NodeInfo."""
    if pod.host_ports and host_ports_conflict(pod.host_ports, (hp for p in info.pods.values() for hp in p.host_ports)):
        return Status(UNSCHEDULABLE, (ERR_NODE_PORTS,))
    used = info.requested
    status = resource_fit_status(pod.requests, info.node.allocatable, used.milli_cpu, used.memory,
                                 used.ephemeral_storage, used.pod_count, used.scalar)
    if not status.ok:
        return status
    if cycle.spread is not None:
        status = cycle.spread.filter(info.node)
        if not status.ok:
            return status
    if cycle.affinity is not None:
        return cycle.affinity.filter(info.node)
    return OK


def status_with_nominated(pod: Pod, info: NodeInfo, cycle: CycleState, nominated: list[Pod]) -> Status:
    """Two-pass rule (docs/preemption.md §6): with the equal-or-higher-priority nominated pods, then without them."""
    if not nominated:
        return dynamic_node_status(pod, info, cycle)
    with_nominated = info.copy()
    cycle_with = cycle.copy()
    for other in nominated:
        with_nominated.add(other)
        cycle_with.add_pod(other, info.node)
    status = dynamic_node_status(pod, with_nominated, cycle_with)
    if not status.ok:
        return status
    return dynamic_node_status(pod, info, cycle)
