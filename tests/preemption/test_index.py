"""index.py: the incrementally synced index equals a fresh build, and the bulk (set algebra) paths equal the
reference after informer-like changes.

The random clusters of support.scenarios are small, so the predictor would handle them with its one-by-one scan;
here the scan is switched off or cut to its first node or two (every node, or every node past them, goes through
the capacity orderings) and the victim-count orderings are cut short, so every branch of the fast path meets the
reference. Between two predictions the state changes like an informer would change it (pods modified, moved,
deleted, nodes and PDBs replaced), so the per-node refresh of the cached index is checked against a fresh build
too.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cluster.model import Pod
from webhook.cluster.snapshot import ClusterState
from webhook.preemption import schedule_one
from webhook.preemption.framework.index import (
    StateIndex,
    free_order,
    index_sync_is_cheap,
    intersect_at_least,
    preview_index,
    state_index,
    sync_if_cheap,
)
from webhook.preemption.framework.summary import CPU, MEMORY, PODS
from webhook.preemption.plugins.defaultpreemption import bounded_dry_run
from webhook.preemption.simulate import simulate_pods

from .reference import reference_predict
from .support import apply_events, args_of, as_dict, changes, ladder_cluster, scenarios


def assert_index_matches_fresh(state: ClusterState, *, sync: bool = True) -> None:
    """The incrementally synced index holds what a build from scratch holds (``sync``: after a sync of its own;
    else as it is, which must be current)."""
    cached = state_index(state)
    if sync:
        with cached.lock:
            cached.sync()
    assert cached.version == state.settled_version
    fresh = StateIndex(state)
    fresh.sync()
    assert cached.node_names == fresh.node_names == sorted(state.nodes)
    assert cached.summaries.keys() == fresh.summaries.keys()
    for name, summary in fresh.summaries.items():
        mine = cached.summaries[name]
        assert ([p.key for p in mine.pods], mine.free, mine.levels, mine.cumulative, mine.level_latest_start,
                mine.used, mine.non_zero_used, mine.has_scalar) == (
            [p.key for p in summary.pods], summary.free, summary.levels, summary.cumulative,
            summary.level_latest_start, summary.used, summary.non_zero_used, summary.has_scalar)
        # The state's current pod objects, not ones an update replaced (their labels are what PDBs match).
        assert all(a is b for a, b in zip(mine.pods, summary.pods, strict=True))
    assert cached.static_groups == fresh.static_groups
    assert cached.node_labels.by_value == fresh.node_labels.by_value
    assert cached.node_labels.with_key == fresh.node_labels.with_key
    assert +cached.level_nodes == +fresh.level_nodes
    assert sorted(p.key for p in cached.anti_affinity_pods) == sorted(p.key for p in fresh.anti_affinity_pods)
    assert cached.nominated_nodes == fresh.nominated_nodes
    for key, order in list(cached._orders.items()):
        rebuilt = fresh.order(key)
        kept = list(zip(order.values, order.names, strict=True))
        assert kept == sorted(kept), key  # still in (value, name) order after every refresh
        assert sorted(kept) == sorted(zip(rebuilt.values, rebuilt.names, strict=True)), key


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_bulk_paths_equal_reference_across_informer_events(data: st.DataObject) -> None:
    # Roomy clusters too: pods that fit on several nodes, where the scan and the bulk pass collect what is scored.
    state, pods, options = data.draw(scenarios(roomy=data.draw(st.booleans())))
    args = args_of(options)
    max_count = data.draw(st.sampled_from([1, 2, bounded_dry_run.MAX_COUNT_ORDER]))
    # 0: no one-by-one scan; 1 or 2: the scan goes on past its first nodes only when one of them fits, else the
    # bulk pass answers (and, for a pod that fits further on, collects every node it fits on).
    quick_scan = data.draw(st.sampled_from([0, 1, 2]))
    with mock.patch.object(schedule_one, "QUICK_SCAN_NODES", quick_scan), mock.patch.object(
            bounded_dry_run, "MAX_COUNT_ORDER", max_count):
        for _ in range(data.draw(st.integers(1, 3))):
            fast = [as_dict(r) for r in simulate_pods(state, pods, args)]
            assert fast == reference_predict(state, pods, **options)
            apply_events(state, data.draw(changes(state)))
            assert_index_matches_fresh(state)
        fast = [as_dict(r) for r in simulate_pods(state, pods, args)]
        assert fast == reference_predict(state, pods, **options)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_index_synced_in_slices_of_the_oldest_changes_equals_a_fresh_build(data: st.DataObject) -> None:
    """``sync_oldest`` (the server's refresh between admissions) with more events arriving between slices: once it
    says current, the index is what a build from scratch holds, with no sync of its own to mend a skipped node."""
    state, pods, options = data.draw(scenarios())
    simulate_pods(state, pods, args_of(options))  # builds the index
    index = state_index(state)
    slice_nodes = data.draw(st.integers(1, 3))
    for _ in range(data.draw(st.integers(1, 4))):
        apply_events(state, data.draw(changes(state)))
        if data.draw(st.booleans()):
            index.sync_oldest(slice_nodes)  # a slice; more events may follow before the next
    backlog = state.node_changes_after(index.version)
    assert backlog is not None
    slices = 1  # each takes one change at least
    while not index.sync_oldest(slice_nodes):
        slices += 1
        assert slices <= len(backlog) + 1, "the slices never catch up"
    assert_index_matches_fresh(state, sync=False)


def test_sync_oldest_takes_whole_changes_oldest_first_and_stops_the_version_before_the_rest() -> None:
    state = ladder_cluster(8)
    index = state_index(state)
    index.sync()
    start = state.settled_version
    for i in (1, 2, 3):
        state.upsert(dataclasses.replace(state.pods[f"default/low{i}"], priority=5))
    moved = dataclasses.replace(state.pods["default/low5"], node_name="n006")
    state.upsert(moved)  # one change of two nodes: leaves n005, lands on n006
    assert not index.sync_oldest(2)
    assert index.version == state.node_versions["n002"] > start
    assert [p.priority for p in index.summaries["n002"].pods] == [5]
    assert [p.priority for p in index.summaries["n003"].pods] == [0]  # not yet
    assert not index.sync_oldest(1)  # n003's change alone
    assert index.version == state.node_versions["n003"]
    assert index.sync_oldest(1)  # the move: both of its nodes, though the slice is one node
    assert index.version == state.settled_version
    assert not index.summaries["n005"].pods and len(index.summaries["n006"].pods) == 2
    assert_index_matches_fresh(state, sync=False)


def test_state_reports_the_node_names_changed_since_a_version() -> None:
    state = ladder_cluster(3)
    mark = state.settled_version
    assert state.nodes_changed_since(mark) == set()
    moved = dataclasses.replace(state.pods["default/low0"], node_name="n002")
    state.upsert(moved)  # leaves n000, lands on n002
    state.upsert(Pod("pending", "default", nominated_node_name="n001"))
    assert state.nodes_changed_since(mark) == {"n000", "n001", "n002"}
    assert state.settled_version == state.version
    later = state.settled_version
    state.delete("Node", "n001")
    assert state.nodes_changed_since(later) == {"n001"}
    assert state.node_versions["n001"] == state.version


def test_index_sync_is_cheap_only_for_a_built_index_and_few_changed_nodes() -> None:
    state = ladder_cluster(100)
    assert not index_sync_is_cheap(state)  # never built: the first sync is a rebuild
    simulate_pods(state, [Pod("new", "default", priority=10)])
    assert index_sync_is_cheap(state)
    state.upsert(dataclasses.replace(state.pods["default/low1"], priority=1))
    assert index_sync_is_cheap(state)
    for i in range(70):
        state.upsert(dataclasses.replace(state.pods[f"default/low{i}"], priority=2))
    assert not index_sync_is_cheap(state)
    assert not index_sync_is_cheap(state, max_nodes=69) and index_sync_is_cheap(state, max_nodes=70)


def test_sync_if_cheap_refreshes_the_admission_index_between_predictions_in_slices_and_never_waits() -> None:
    state = ladder_cluster(100)
    assert sync_if_cheap(state) and state_index(state).version < 0  # nothing built: nothing to refresh
    simulate_pods(state, [Pod("new", "default", priority=10)])
    index, preview = state_index(state), preview_index(state)
    preview.sync()
    state.upsert(dataclasses.replace(state.pods["default/low1"], priority=1))
    assert index.version < state.settled_version and preview.version < state.settled_version
    assert sync_if_cheap(state)
    assert index.version == state.settled_version
    assert preview.version < state.settled_version  # the previews refresh their own index
    assert_index_matches_fresh(state)
    state.upsert(dataclasses.replace(state.pods["default/low2"], priority=1))
    with index.lock:  # a prediction holds the admission index (another thread in the server): it is left alone
        done = ThreadPoolExecutor(1).submit(sync_if_cheap, state).result(timeout=10)
    assert not done and index.version < state.settled_version
    for i in range(70):  # more changed nodes than one slice refreshes: the oldest 64 now, the rest at the next
        state.upsert(dataclasses.replace(state.pods[f"default/low{i}"], priority=2))
    assert not sync_if_cheap(state) and index.version == state.node_versions["n063"] < state.settled_version
    assert sync_if_cheap(state) and index.version == state.settled_version
    assert_index_matches_fresh(state, sync=False)


def test_intersect_at_least_equals_the_intersection_of_the_orderings_slices() -> None:
    # ladder_cluster: node i has 100 + i millicpu free, 900 memory free and 9 pod slots.
    index = StateIndex(ladder_cluster(20))
    index.sync()
    nodes = set(index.summaries)
    some = {f"n{i:03d}" for i in range(0, 20, 3)}
    cases = [
        [(free_order(CPU), 110)],                               # leaves out n000..n009
        [(free_order(CPU), 110), (free_order(MEMORY), 900)],    # the memory bound holds on every node
        [(free_order(MEMORY), 900), (free_order(PODS), 9)],     # every bound holds on every node
        [(free_order(CPU), 110), (free_order(CPU), 115)],
        [(free_order(CPU), 200)],                               # no node
        [(free_order(MEMORY), 901)],                            # no node
    ]
    for universe in (nodes, some):
        for bounds in cases:
            expected = set(universe)
            for key, value in bounds:
                expected &= set(index.order(key).at_least(value))
            assert intersect_at_least(index, universe, bounds) == expected, bounds
            assert sum(index.order(key).count_at_least(value) for key, value in bounds) == sum(
                len(index.order(key).at_least(value)) for key, value in bounds)
    assert index.order(free_order(CPU)).count_below(110) == len(index.order(free_order(CPU)).below(110)) == 10

