"""NodeAffinity's Filter for every node at once: the nodes matching a pod's nodeSelector and required node
affinity, as set algebra over an index of node names by label.

``required_node_affinity_matches`` (selectors.py) answers for one node, as upstream
(staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go
(GetRequiredNodeAffinity, Match)); walking 5,000 nodes with it cost a pod with a nodeSelector 15-60 ms per
prediction, most of the time of an unschedulable pod's preview (bench/snapshot.py). ``NodeLabelIndex.matching``
gives the same nodes from the label index the ``StateIndex`` keeps per changed node: ``In`` and ``NotIn`` are
lookups by value, ``Exists``/``DoesNotExist`` the nodes holding the key, and other operators test each distinct
value of the key once with ``requirement_matches`` itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set

from webhook.cluster.model import LabelSelectorRequirement, NodeSelectorTerm, Pod
from webhook.cluster.selectors import requirement_matches

NAME_FIELD = "metadata.name"


class NodeLabelIndex:
    """Node names by label key and value."""

    __slots__ = ("by_value", "with_key")

    def __init__(self) -> None:
        self.by_value: dict[str, dict[str, set[str]]] = {}
        self.with_key: dict[str, set[str]] = {}

    def add(self, name: str, labels: Mapping[str, str]) -> None:
        for key, value in labels.items():
            self.by_value.setdefault(key, {}).setdefault(value, set()).add(name)
            self.with_key.setdefault(key, set()).add(name)

    def remove(self, name: str, labels: Mapping[str, str]) -> None:
        for key, value in labels.items():
            values = self.by_value.get(key)
            if values is not None:
                _discard(values, value, name)
                if not values:
                    del self.by_value[key]
            _discard(self.with_key, key, name)

    def matching(self, pod: Pod, nodes: Set[str]) -> set[str]:
        """The ``nodes`` where ``required_node_affinity_matches(pod, node)`` holds."""
        found = set(nodes)
        for key, value in pod.node_selector.items():
            found &= self.by_value.get(key, {}).get(value, set())
        terms = pod.required_node_affinity
        if terms is None or not found:
            return found
        matched: set[str] = set()
        for term in terms:
            matched |= self._term(term, found)
        return matched

    def _term(self, term: NodeSelectorTerm, nodes: set[str]) -> set[str]:
        """A term ANDs its requirements; a term with none matches nothing (``node_selector_term_matches``)."""
        if not term.match_expressions and not term.match_fields:
            return set()
        found = set(nodes)
        for req in term.match_expressions:
            if not found:
                break
            found = self._requirement(req, found)
        for req in term.match_fields:
            if not found:
                break
            found = _name_requirement(req, found)
        return found

    def _requirement(self, req: LabelSelectorRequirement, nodes: set[str]) -> set[str]:
        """The ``nodes`` whose labels meet ``req`` (``requirement_matches``)."""
        key, op = req.key, req.operator
        by_value = self.by_value.get(key, {})
        if op in ("In", "NotIn"):
            listed = _union(by_value.get(value) for value in set(req.values))
            return nodes & listed if op == "In" else nodes - listed
        holding = self.with_key.get(key, set())
        if op == "Exists":
            return nodes & holding
        if op == "DoesNotExist":
            return nodes - holding
        # Gt, Lt or an unknown operator: never met without the label, so each value of the key is asked.
        return nodes & _union(names for value, names in by_value.items() if requirement_matches(req, {key: value}))


def _name_requirement(req: LabelSelectorRequirement, nodes: set[str]) -> set[str]:
    """Fields: only ``metadata.name``, the node's name (``node_selector_term_matches``)."""
    if req.key != NAME_FIELD:
        return set()
    if req.operator == "In":
        return nodes.intersection(req.values)
    if req.operator == "NotIn":
        return nodes.difference(req.values)
    return {name for name in nodes if requirement_matches(req, {NAME_FIELD: name})}


def _union(sets: Iterable[set[str] | None]) -> set[str]:
    found: set[str] = set()
    for members in sets:
        if members:
            found |= members
    return found


def _discard(index: dict[str, set[str]], key: str, name: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(name)
        if not members:
            del index[key]
