"""The bulk Filter pass and the bounded dry run answer every node by sets: what they record (statuses per set of
nodes, counts per status, the nodes where preemption might help) equals each node's own answer.

The reference tests compare the predictions' outcome and PostFilter message; these compare the Filter pass's
diagnosis itself (upstream's NodeToStatus, the "0/N nodes are available: ..." histogram) node by node, for random
small clusters where the one-by-one scan is switched off.
"""

from __future__ import annotations

from collections import Counter
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cluster.model import Node, Pod, Resources
from webhook.cluster.snapshot import ClusterState
from webhook.preemption import schedule_one
from webhook.preemption.framework.status import OK, UNSCHEDULABLE, NodeStatuses, Status
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.plugins.registry import default_preemption
from webhook.preemption.results import PreemptionArgs
from webhook.preemption.schedule_one import find_nodes_that_fit_pod, new_context, node_fit_status

CPU_SHORT = Status(UNSCHEDULABLE, ("Insufficient cpu",))


@st.composite
def full_clusters(draw: st.DrawFn) -> tuple[ClusterState, Pod]:
    """Nodes mostly full of pods of a few priorities, some with a nominated pod, and a pod of requests alone (the
    bulk path's) that fits on few of them or none: the cases where the Filter pass and the dry run answer by sets."""
    state = ClusterState()
    for i in range(draw(st.integers(2, 10))):
        name = f"n{i}"
        state.upsert(Node(name, allocatable=Resources(milli_cpu=draw(st.sampled_from([1000, 2000])),
                                                      memory=draw(st.sampled_from([1000, 2000])),
                                                      pods=draw(st.integers(2, 5)))))
        for j in range(draw(st.integers(0, 3))):
            state.upsert(Pod(f"p{i}-{j}", "default", node_name=name, priority=draw(st.sampled_from([0, 100, 1000])),
                             requests=Resources(milli_cpu=draw(st.sampled_from([200, 500, 900])),
                                                memory=draw(st.sampled_from([100, 500, 900])))))
        if draw(st.integers(0, 5)) == 0:
            state.upsert(Pod(f"nom{i}", "default", nominated_node_name=name, priority=1000,
                             requests=Resources(milli_cpu=500, memory=100)))
    pod = Pod("new", "default", priority=draw(st.sampled_from([0, 100, 1000, 2000])),
              requests=Resources(milli_cpu=draw(st.sampled_from([300, 900, 1500, 2500])),
                                 memory=draw(st.sampled_from([0, 900, 1500]))))
    return state, pod


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(full_clusters(), st.booleans(), st.booleans())
def test_bulk_filter_pass_records_each_nodes_own_status(cluster: tuple[ClusterState, Pod], empty_matches_all: bool,
                                                         stop_at_first: bool) -> None:
    state, pod = cluster
    args = PreemptionArgs(pdb_empty_selector_matches_all=empty_matches_all, pdb_stop_at_first_violation=stop_at_first)
    ctx = new_context(ClusterView(state), pod, args)
    assert ctx.resource_only
    with mock.patch.object(schedule_one, "QUICK_SCAN_NODES", 0):
        bulk = find_nodes_that_fit_pod(ctx, 1)
    own = {name: node_fit_status(ctx, name) for name in ctx.view.node_names}
    if any(status.ok for status in own.values()):
        assert bulk.fit_node is not None and own[bulk.fit_node].ok
        return
    assert bulk.fit_node is None
    assert dict(bulk.statuses) == own
    assert len(bulk.statuses) == len(own)
    assert bulk.counts == Counter(own.values())
    potential = {name for name, status in own.items() if status.code == UNSCHEDULABLE}
    assert set(bulk.potential or ()) == potential
    # The dry run: the bounded one counts the nodes where no candidate is found as the node-by-node one lists them.
    evaluator = default_preemption(args).evaluator
    exhaustive = evaluator.dry_run_preemption(ctx, sorted(potential), exhaustive=True)
    bounded = evaluator.dry_run_preemption(ctx, bulk.potential or set())
    assert (bounded.best is None) == (exhaustive.best is None)
    if exhaustive.best is None:
        counted = bounded.counts if bounded.counts is not None else Counter(bounded.statuses.values())
        assert +counted == Counter(exhaustive.statuses.values())
        assert evaluator.preempt(ctx, bulk.statuses, potential=bulk.potential).message == evaluator.preempt(
            ctx, own).message


def test_node_statuses_read_per_node_entries_then_the_sets() -> None:
    statuses = NodeStatuses({"a": CPU_SHORT, "b": OK}, [({"b", "c"}, OK), ({"d"}, CPU_SHORT)])
    assert statuses["a"] == CPU_SHORT and statuses["b"] == OK and statuses["c"] == OK and statuses["d"] == CPU_SHORT
    assert statuses.get("e") is None and "e" not in statuses and "c" in statuses
    assert sorted(statuses) == ["a", "b", "c", "d"]  # a node in both is listed once
    assert len(statuses) == 4
    assert dict(statuses) == {"a": CPU_SHORT, "b": OK, "c": OK, "d": CPU_SHORT}
