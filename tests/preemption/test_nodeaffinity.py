"""plugins/nodeaffinity.py: NodeAffinity over many nodes equals ``required_node_affinity_matches`` node by node."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.cluster.model import FrozenMap, LabelSelectorRequirement, Node, NodeSelectorTerm, Pod
from webhook.preemption.framework.nodelabels import NodeLabelIndex
from webhook.preemption.plugins.helper import required_node_affinity_matches
from webhook.preemption.plugins.nodeaffinity import matching_nodes

KEYS = ["zone", "pool", "rank", "hostname"]
VALUES = ["a", "b", "", "1", "7", "+3", "x1"]
LABELS = st.dictionaries(st.sampled_from(KEYS[:3]), st.sampled_from(VALUES), max_size=3)
OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]
REQUIREMENT = st.builds(LabelSelectorRequirement, st.sampled_from(KEYS), st.sampled_from(OPERATORS),
                        st.lists(st.sampled_from(VALUES), max_size=2).map(tuple))
FIELD = st.builds(LabelSelectorRequirement, st.sampled_from(["metadata.name", "metadata.uid"]),
                  st.sampled_from(OPERATORS), st.lists(st.sampled_from(["n0", "n1", "n3", "5"]), max_size=2).map(tuple))
TERM = st.builds(NodeSelectorTerm, st.lists(REQUIREMENT, max_size=3).map(tuple),
                 st.lists(FIELD, max_size=1).map(tuple))
TERMS = st.one_of(st.none(), st.lists(TERM, max_size=3).map(tuple))


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    found = []
    for i in range(draw(st.integers(0, 8))):
        labels = draw(LABELS)
        if draw(st.booleans()):
            labels["hostname"] = f"n{i}"
        found.append(Node(f"n{i}", FrozenMap(labels)))
    return found


@settings(max_examples=400, deadline=None)
@given(nodes(), nodes(), LABELS, TERMS)
def test_matching_nodes_equal_the_node_by_node_answer(before: list[Node], after: list[Node], selector: dict[str, str],
                                                      terms: tuple[NodeSelectorTerm, ...] | None) -> None:
    pod = Pod("p", "default", node_selector=FrozenMap(selector), required_node_affinity=terms)
    index = NodeLabelIndex()
    for node in before:  # then relabelled, removed or added, as the StateIndex does per changed node
        index.add(node.name, node.labels)
    for node in before:
        index.remove(node.name, node.labels)
    for node in after:
        index.add(node.name, node.labels)
    names = {node.name for node in after}
    expected = {node.name for node in after if required_node_affinity_matches(pod, node)}
    assert matching_nodes(index, pod, names) == expected
    assert matching_nodes(index, pod, set()) == set()


def test_a_removed_node_leaves_no_empty_entries() -> None:
    index = NodeLabelIndex()
    index.add("n1", {"zone": "a"})
    index.remove("n1", {"zone": "a"})
    assert (index.by_value, index.with_key) == ({}, {})
