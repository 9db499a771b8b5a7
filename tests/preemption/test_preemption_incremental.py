"""The incremental index and the bulk (set algebra) paths: equal to the reference after informer-like changes.

The random clusters of test_preemption_properties are small, so the predictor would handle them with its
one-by-one scan; here the scan is switched off (every node goes through the capacity orderings) and the
victim-count orderings are cut short, so every branch of the fast path meets the reference. Between two
predictions the state changes like an informer would change it (pods modified, moved, deleted, nodes and
PDBs replaced), so the per-node refresh of the cached index is checked against a fresh build too.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cluster.model import EMPTY_LABELS, Node, Pod, PodDisruptionBudget, Resources
from webhook.cluster.reader import pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.errors import PreemptGuardError
from webhook.preemption import predictor
from webhook.preemption.predictor import predict_pods, simulate_pods
from webhook.preemption.preview import preview_object
from webhook.preemption.results import PredictionTimeout, PreemptionArgs
from webhook.preemption.view import StateIndex, state_index

from .reference import reference_predict
from .test_preemption_properties import as_dict, pod_dicts, scenarios


@st.composite
def changes(draw: st.DrawFn, state: ClusterState) -> list[tuple[str, Any]]:
    """A few informer events on the state: ("upsert", object) or ("delete", kind, key)."""
    nodes = sorted(state.nodes)
    events: list[tuple[str, Any]] = []
    for i in range(draw(st.integers(1, 6))):
        what = draw(st.sampled_from(["pod", "pod", "pod", "delete-pod", "node", "delete-node", "pdb", "nominated"]))
        pods = sorted(state.pods)
        if what == "pod" and nodes:
            events.append(("upsert", pod_from_dict(draw(pod_dicts(f"c{i}", nodes, bound=True)))))
        elif what == "pod" and pods:
            events.append(("upsert", dataclasses.replace(state.pods[draw(st.sampled_from(pods))], labels=EMPTY_LABELS)))
        elif what == "delete-pod" and pods:
            events.append(("delete", "Pod", draw(st.sampled_from(pods))))
        elif what == "node" and nodes:
            node = state.nodes[draw(st.sampled_from(nodes))]
            alloc = node.allocatable
            cpu = draw(st.sampled_from([500, 1000, 3000]))
            events.append(("upsert", dataclasses.replace(
                node, allocatable=Resources(milli_cpu=cpu, memory=alloc.memory, pods=alloc.pods),
                unschedulable=draw(st.booleans()) and not node.unschedulable)))
        elif what == "delete-node" and len(nodes) > 1:
            events.append(("delete", "Node", draw(st.sampled_from(nodes))))
        elif what == "pdb":
            pdbs = [p for per_ns in state.pdbs_by_namespace.values() for p in per_ns.values()]
            if pdbs:
                pdb = draw(st.sampled_from(pdbs))
                events.append(("upsert", dataclasses.replace(pdb, disruptions_allowed=draw(st.integers(0, 2)))))
        elif what == "nominated" and nodes:
            events.append(("upsert", pod_from_dict(draw(pod_dicts(f"m{i}", nodes, bound=False)))))
    return events


def apply(state: ClusterState, events: list[tuple[str, Any]]) -> None:
    for event in events:
        if event[0] == "upsert":
            state.upsert(event[1])
        else:
            state.delete(event[1], event[2])


def assert_index_matches_fresh(state: ClusterState) -> None:
    """The incrementally synced index holds what a build from scratch holds."""
    cached = state_index(state)
    with cached.lock:
        cached.sync()
    fresh = StateIndex(state)
    fresh.sync()
    assert cached.node_names == fresh.node_names == sorted(state.nodes)
    assert cached.summaries.keys() == fresh.summaries.keys()
    for name, summary in fresh.summaries.items():
        mine = cached.summaries[name]
        assert ([p.key for p in mine.pods], mine.free, mine.levels, mine.cumulative, mine.level_latest_start) == (
            [p.key for p in summary.pods], summary.free, summary.levels, summary.cumulative,
            summary.level_latest_start)
    assert cached.static_groups == fresh.static_groups
    assert +cached.level_nodes == +fresh.level_nodes
    assert sorted(p.key for p in cached.anti_affinity_pods) == sorted(p.key for p in fresh.anti_affinity_pods)
    assert cached.nominated_nodes == fresh.nominated_nodes
    for key, order in list(cached._orders.items()):
        rebuilt = fresh.order(key)
        assert sorted(zip(order.values, order.names, strict=True)) == sorted(
            zip(rebuilt.values, rebuilt.names, strict=True)), key


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_bulk_paths_equal_reference_across_informer_events(data: st.DataObject) -> None:
    state, pods, options = data.draw(scenarios())
    args = PreemptionArgs(pdb_empty_selector_matches_all=options["empty_selector_matches_all"],
                          pdb_stop_at_first_violation=options["stop_at_first"])
    max_count = data.draw(st.sampled_from([1, 2, predictor.MAX_COUNT_ORDER]))
    with mock.patch.object(predictor, "QUICK_SCAN_NODES", 0), mock.patch.object(predictor, "MAX_COUNT_ORDER",
                                                                                max_count):
        for _ in range(data.draw(st.integers(1, 3))):
            fast = [as_dict(r) for r in simulate_pods(state, pods, args)]
            assert fast == reference_predict(state, pods, **options)
            apply(state, data.draw(changes(state)))
            assert_index_matches_fresh(state)
        fast = [as_dict(r) for r in simulate_pods(state, pods, args)]
        assert fast == reference_predict(state, pods, **options)


def _cluster(nodes: int) -> ClusterState:
    state = ClusterState()
    for i in range(nodes):
        state.upsert(Node(f"n{i:03d}", allocatable=Resources(milli_cpu=1000, memory=1000, pods=10)))
        state.upsert(Pod(f"low{i}", "default", node_name=f"n{i:03d}", priority=0,
                         requests=Resources(milli_cpu=900 - i, memory=100)))
    return state


def test_preempting_pod_on_a_bigger_cluster_equals_reference_and_survives_events() -> None:
    state = _cluster(80)
    pod = Pod("new", "default", priority=10, requests=Resources(milli_cpu=500, memory=100))
    for step in range(3):
        fast = [as_dict(r) for r in simulate_pods(state, [pod, dataclasses.replace(pod, name="new2")])]
        assert fast == reference_predict(state, [pod, dataclasses.replace(pod, name="new2")])
        assert fast[0]["outcome"] == ("Preempts" if step == 0 else "Fits")
        # The pod on the chosen node shrinks: the next prediction must see it (the node's entry is refreshed).
        victim = state.pods[f"default/low{20 + step}"]
        state.upsert(dataclasses.replace(victim, requests=Resources(milli_cpu=100 + step, memory=100)))
        state.upsert(PodDisruptionBudget(f"pdb{step}", "default", None))
        assert_index_matches_fresh(state)


def test_a_deadline_in_the_past_raises_prediction_timeout() -> None:
    state = _cluster(40)
    pod = Pod("new", "default", priority=10, requests=Resources(milli_cpu=500, memory=100))
    with pytest.raises(PredictionTimeout):
        simulate_pods(state, [pod], deadline=time.monotonic() - 1)
    with pytest.raises(PredictionTimeout):
        predict_pods(state, [dataclasses.replace(pod, priority=None)], deadline=time.monotonic() - 1)
    assert issubclass(PredictionTimeout, PreemptGuardError)
    # A generous deadline changes nothing, and the index lock was released by the failed calls.
    assert simulate_pods(state, [pod], deadline=time.monotonic() + 60) == simulate_pods(state, [pod])
    assert simulate_pods(state, [pod])[0].outcome == "Preempts"


def test_a_deadline_passing_during_a_multi_replica_prediction_raises() -> None:
    state = _cluster(600)
    pod = Pod("new", "default", priority=10, requests=Resources(milli_cpu=500, memory=100))
    simulate_pods(state, [pod])  # build the index first
    checks = 0
    real = time.monotonic

    def clock() -> float:
        nonlocal checks
        checks += 1
        return real() + (3600 if checks > 3 else 0)  # time "passes" after a few deadline checks

    with mock.patch.object(predictor.time, "monotonic", clock), pytest.raises(PredictionTimeout):
        simulate_pods(state, [dataclasses.replace(pod, name=f"new{i}") for i in range(3)], deadline=real() + 60)


def test_state_reports_the_node_names_changed_since_a_version() -> None:
    state = _cluster(3)
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


def test_preview_object_honours_the_deadline() -> None:
    state = _cluster(5)
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    with pytest.raises(PredictionTimeout):
        preview_object(state, pod, deadline=time.monotonic() - 1)
    assert preview_object(state, pod, deadline=time.monotonic() + 60)["summary"]["fits"] == 1
