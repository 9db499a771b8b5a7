"""``pick_one_node_for_preemption``: pickOneNodeForPreemption over candidates."""

from __future__ import annotations

from webhook.cluster.reader import pod_from_dict
from webhook.preemption.framework.preemption import Candidate, pick_one_node_for_preemption


def test_node_selection_never_indexes_an_empty_victim_list() -> None:
    victim = pod_from_dict({"metadata": {"name": "v", "namespace": "batch"}, "spec": {"priority": 5, "containers": []}})
    empty = Candidate("a-node", (), frozenset(), 0)
    real = Candidate("b-node", (victim,), frozenset(), 0)
    picked = pick_one_node_for_preemption([empty, real])
    assert picked is not None and picked[0].node == "b-node" and picked[1] == ("b-node",)
    assert pick_one_node_for_preemption([empty]) is None
