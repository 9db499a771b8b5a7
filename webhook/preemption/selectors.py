"""Label selectors, node selectors and tolerations as small pure functions (upstream semantics).

Upstream: apimachinery ``labels.Selector``, component-helpers ``nodeaffinity``, core/v1 helper
``ToleratesTaint`` / ``FindMatchingUntoleratedTaint``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.cluster.model import (
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
)
from webhook.cluster.selectors import label_selector_error, label_selector_matches, requirement_matches

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
# TaintToleration's Filter only looks at these effects (PreferNoSchedule is a scoring concern).
DO_NOT_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def pdb_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str], *,
                         empty_matches_all: bool) -> bool:
    """Whether a PDB selects a pod during preemption (docs/preemption.md §8).

    Released behaviour: unlabeled pods and nil/empty selectors never match. Newest master
    (#141785): an empty selector matches every pod in the namespace; nil still matches nothing.
    A selector that ``LabelSelectorAsSelector`` refuses matches nothing: upstream skips that PDB.
    """
    if selector is None or label_selector_error(selector) is not None:
        return False
    return valid_pdb_selector_matches(selector, labels, empty_matches_all=empty_matches_all)


def valid_pdb_selector_matches(selector: LabelSelector, labels: Mapping[str, str], *, empty_matches_all: bool) -> bool:
    """``pdb_selector_matches`` for a selector already known to convert (the PDB index checks once)."""
    if selector.is_empty():
        return empty_matches_all
    if not labels and not empty_matches_all:
        return False
    return label_selector_matches(selector, labels)


def node_selector_term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """A term ANDs its requirements; a term with none matches nothing. Fields: only metadata.name."""
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(requirement_matches(req, node.labels) for req in term.match_expressions):
        return False
    fields = {"metadata.name": node.name}
    return all(req.key == "metadata.name" and requirement_matches(req, fields) for req in term.match_fields)


def required_node_affinity_matches(pod: Pod, node: Node) -> bool:
    """nodeSelector AND (any required node-affinity term), as ``nodeaffinity.GetRequiredNodeAffinity``."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    terms = pod.required_node_affinity
    if terms is None:
        return True
    return any(node_selector_term_matches(term, node) for term in terms)


def tolerates_taint(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates_taint(t, taint) for t in tolerations)


def first_untolerated_taint(taints: Iterable[Taint], tolerations: tuple[Toleration, ...]) -> Taint | None:
    """The first NoSchedule/NoExecute taint the pod does not tolerate (``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint.effect in DO_NOT_SCHEDULE_EFFECTS and not tolerates(tolerations, taint):
            return taint
    return None


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
