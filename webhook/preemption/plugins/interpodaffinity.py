"""InterPodAffinity (pkg/scheduler/framework/plugins/interpodaffinity): required terms (filtering.go): PreFilter
counts, per topology pair, the pods matching the incoming pod's affinity and anti-affinity terms and the existing
pods whose anti-affinity terms match it; AddPod/RemovePod keep the counts true during the dry run; Filter reads
them for the node's topology values. Preferred terms (scoring.go): PreScore weighs each topology pair by the
incoming pod's preferred terms the existing pods match and by the existing pods' terms the incoming pod matches;
Score sums the pairs of each node, NormalizeScore maps min..max onto 0..100.
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
from webhook.preemption.framework.types import MAX_NODE_SCORE, ScoringNodes
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

    def __init__(self, hard_pod_affinity_weight: int = 1, ignore_preferred_terms_of_existing_pods: bool = False,
                 ) -> None:
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods

    def pre_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> Status:
        state = affinity_score_state(pod, nodes.view, self.hard_pod_affinity_weight,
                                     self.ignore_preferred_terms_of_existing_pods)
        if state is None:
            return SKIPPED
        cycle.write(state)
        return OK

    def score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> list[int]:
        return score_nodes(cycle.read(AffinityScoreState), nodes)

    def normalize_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes, scores: list[int]) -> None:
        normalize_scores(cycle.read(AffinityScoreState), scores)

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


# ---- Score (pkg/scheduler/framework/plugins/interpodaffinity/scoring.go) ----------------------------------------

ScoreMap = dict[str, dict[str, int]]


def _namespace_selected(view: ClusterView, term: PodAffinityTerm, namespace: str) -> bool:
    """The incoming pod's preferred term, namespaces merged as ``mergeAffinityTermNamespacesIfNotEmpty`` merges
    them: an empty namespaceSelector matches every namespace; another one the existing namespaces it selects."""
    selector = term.namespace_selector
    if selector is None:
        return False
    if selector.is_empty():
        return True
    found = view.state.namespaces.get(namespace)
    return found is not None and label_selector_matches(selector, found.labels)


def _process_term(scores: ScoreMap, term: PodAffinityTerm, weight: int, node: Node) -> bool:
    """``scoreMap.processTerm`` once the term matched: the node's topology value gets ``weight``; True when the
    node has the term's topology key (then the plugin has something to score, even if it sums to zero)."""
    value = node.labels.get(term.topology_key)
    if value is None:
        return False
    values = scores.get(term.topology_key)
    if values is None:
        values = scores[term.topology_key] = {}
    values[value] = values.get(value, 0) + weight
    return True


@dataclass(slots=True)
class AffinityScoreState:
    """PreScore: the weight of each topology pair (``preScoreState.topologyScore``)."""

    topology_score: ScoreMap

    def copy(self) -> AffinityScoreState:
        return self


def affinity_score_state(pod: Pod, view: ClusterView, hard_pod_affinity_weight: int,
                         ignore_preferred_terms_of_existing_pods: bool) -> AffinityScoreState | None:
    """``PreScore``: for each existing pod, on a node with labels, the incoming pod's preferred terms it matches
    (+weight, anti-affinity -weight) and its own required affinity terms (``hard_pod_affinity_weight``) and
    preferred terms the incoming pod matches; None (Skip) when no term met a node with its topology key.

    Upstream walks every pod of every node when the incoming pod has preferred terms; only pods of the namespaces
    those terms select can match them, and only pods with terms of their own can add the rest, so those are read.
    """
    preferred = [(wt, 1) for wt in pod.preferred_pod_affinity] + [(wt, -1) for wt in pod.preferred_pod_anti_affinity]
    if ignore_preferred_terms_of_existing_pods and not preferred:
        return None
    scores: ScoreMap = {}
    hit = False
    nodes = view.state.nodes
    # The incoming pod's preferred terms against every existing pod of the namespaces they select.
    for weighted, sign in preferred:
        term = weighted.term
        namespaces = set(affinity_term_namespaces(term, pod.namespace))
        if term.namespace_selector is not None:
            namespaces |= {ns for ns in view.state.pods_by_namespace if _namespace_selected(view, term, ns)}
        for namespace in sorted(namespaces):
            for other in view.bound_pods_in(namespace):
                node = nodes[other.node_name]
                if node.labels and label_selector_matches(term.label_selector, other.labels):
                    hit |= _process_term(scores, term, weighted.weight * sign, node)
    # The existing pods' own terms against the incoming pod.
    own_namespace_labels = view.namespace_labels(pod.namespace)
    for other in view.affinity_pods():
        node = nodes[other.node_name]
        if not node.labels:
            continue
        if hard_pod_affinity_weight > 0:
            for term in other.pod_affinity:
                if affinity_term_matches(term, other.namespace, pod, own_namespace_labels):
                    hit |= _process_term(scores, term, hard_pod_affinity_weight, node)
        for weighted in other.preferred_pod_affinity:
            if affinity_term_matches(weighted.term, other.namespace, pod, own_namespace_labels):
                hit |= _process_term(scores, weighted.term, weighted.weight, node)
        for weighted in other.preferred_pod_anti_affinity:
            if affinity_term_matches(weighted.term, other.namespace, pod, own_namespace_labels):
                hit |= _process_term(scores, weighted.term, -weighted.weight, node)
    return AffinityScoreState(scores) if hit else None


def score_nodes(state: AffinityScoreState | None, nodes: ScoringNodes) -> list[int]:
    """Each node: the weights of the topology pairs it is in (``Score``), from the label index."""
    scores = [0] * len(nodes.names)
    if state is None:
        return scores
    labels = nodes.view.index.node_labels
    position = nodes.position()
    for key, values in state.topology_score.items():
        for value, weight in values.items():
            if not weight:
                continue
            for name in labels.with_label(key, value):
                i = position.get(name)
                if i is not None:
                    scores[i] += weight
    return scores


def normalize_scores(state: AffinityScoreState | None, scores: list[int]) -> None:
    """``NormalizeScore``: min..max onto 0..100 (floats, truncated); nothing when no pair was scored."""
    if state is None or not state.topology_score or not scores:
        return
    low, high = min(scores), max(scores)
    spread = high - low
    scores[:] = [int(MAX_NODE_SCORE * ((score - low) / spread)) if spread > 0 else 0 for score in scores]
