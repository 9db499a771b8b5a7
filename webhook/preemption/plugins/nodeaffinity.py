"""NodeAffinity (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go): the node must match the pod's
nodeSelector and one of its required node-affinity terms; its Score sums the weights of the preferred terms the
node matches, normalised so the best node gets 100 (each term's nodes found from the label index, as the Filter's).

``filter_node`` answers for one node, as upstream; ``matching_nodes`` gives the same nodes for many at once from the
index's labels (``NodeLabelIndex``): walking 5,000 nodes one by one cost a pod with a nodeSelector 15-60 ms per
prediction, most of the time of an unschedulable pod's preview (bench/snapshot.py).
"""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING

from webhook.cluster.model import Node, Pod
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.nodelabels import NodeLabelIndex
from webhook.preemption.framework.status import OK, SKIPPED, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.types import MAX_NODE_SCORE, ScoringNodes
from webhook.preemption.plugins.helper import default_normalize_score, required_node_affinity_matches, term_matching

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "NodeAffinity"
ERR_REASON = "node(s) didn't match Pod's node affinity/selector"
# One instance for every node that fails (statuses are compared and counted by value).
NODE_AFFINITY_FAILED = Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON,))
NAME_FIELD = "metadata.name"


def selects_nodes(pod: Pod) -> bool:
    """Whether the pod has a nodeSelector or required node affinity (else every node matches)."""
    return bool(pod.node_selector) or pod.required_node_affinity is not None


class NodeAffinity:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        return OK if selects_nodes(pod) else SKIPPED  # upstream: nothing to do with the pod

    def filter_node(self, cycle: CycleState, pod: Pod, node: Node) -> Status:
        if selects_nodes(pod) and not required_node_affinity_matches(pod, node):
            return NODE_AFFINITY_FAILED
        return OK

    def pre_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> Status:
        return OK if pod.preferred_node_affinity else SKIPPED  # nothing to score the nodes by

    def score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> list[int]:
        """The weights of the preferred terms each node matches (``PreferredSchedulingTerms.Score``)."""
        scores = [0] * len(nodes.names)
        if not pod.preferred_node_affinity:
            return scores
        labels = nodes.view.index.node_labels
        candidates = set(nodes.names)
        position = nodes.position()
        for preferred in pod.preferred_node_affinity:
            for name in term_matching(labels, preferred.preference, candidates):
                scores[position[name]] += preferred.weight
        return scores

    def normalize_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes, scores: list[int]) -> None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)


def pre_filter_node_names(pod: Pod) -> set[str] | None:
    """The nodes NodeAffinity's PreFilter narrows the search to (``PreFilterResult.NodeNames``): when every
    required term names nodes by ``metadata.name In``, the union over the terms (each term's names intersected);
    None when some term does not (every node is eligible)."""
    terms = pod.required_node_affinity
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == NAME_FIELD and req.operator == "In":
                term_names = set(req.values) if term_names is None else term_names & set(req.values)
        if term_names is None:
            return None
        names |= term_names
    return names


def matching_nodes(labels: NodeLabelIndex, pod: Pod, nodes: Set[str]) -> set[str]:
    """The ``nodes`` where ``required_node_affinity_matches(pod, node)`` holds."""
    found = set(nodes)
    for key, value in pod.node_selector.items():
        found &= labels.with_label(key, value)
    terms = pod.required_node_affinity
    if terms is None or not found:
        return found
    matched: set[str] = set()
    for term in terms:
        matched |= term_matching(labels, term, found)
    return matched
