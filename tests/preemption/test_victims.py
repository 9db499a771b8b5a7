"""``select_victims_on_node``: upstream's answers where victim selection finds nobody to evict."""

from __future__ import annotations

from webhook.cluster.reader import pod_from_dict
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.pdb import PdbIndex
from webhook.preemption.framework.status import ERROR
from webhook.preemption.framework.types import NodeInfo
from webhook.preemption.plugins.defaultpreemption.victims import select_victims_on_node
from webhook.preemption.plugins.registry import default_framework

from .clusters import bound_item, cluster, node_item, pod_manifest


def test_a_dry_run_that_evicts_nobody_is_upstreams_error_not_a_crash() -> None:
    state = cluster(node_item("n1") + bound_item("small", "n1", cpu="100m"))
    pod = pod_from_dict({**pod_manifest(cpu="1"), "spec": {**pod_manifest(cpu="1")["spec"], "priority": 1000}})
    info = NodeInfo.build(state.nodes["n1"], state.pods_by_node["n1"].values())
    pdbs = PdbIndex([], empty_matches_all=False, stop_at_first=True)
    outcome = select_victims_on_node(default_framework(), CycleState(), pod, info, [], pdbs)
    assert outcome.candidate is None
    assert outcome.status.code == ERROR
    assert outcome.status.reasons == ('expected at least one victim pod on node "n1"',)
