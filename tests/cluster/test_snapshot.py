"""ClusterState: incremental indexes equal a fresh build, whatever the sequence of changes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.cluster.model import (
    ClusterObject,
    FrozenMap,
    LabelSelector,
    LimitRange,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    ResourceQuota,
    Resources,
    RuntimeClass,
)
from webhook.cluster.snapshot import KIND_OF, ClusterState, object_key


def make_pod(name: str, node: str = "", *, ns: str = "ns", cpu: int = 100, memory: int = 1000, phase: str = "Running",
             nominated: str = "", pc: str = "", gpu: int = 0) -> Pod:
    scalar = FrozenMap({"nvidia.com/gpu": gpu}) if gpu else FrozenMap()
    return Pod(name=name, namespace=ns, node_name=node, phase=phase, nominated_node_name=nominated,
               priority_class_name=pc, requests=Resources(milli_cpu=cpu, memory=memory, scalar=scalar))


def build(objects: list[ClusterObject]) -> ClusterState:
    state = ClusterState()
    for obj in objects:
        state.upsert(obj)
    return state


def test_bound_pod_is_indexed_everywhere() -> None:
    state = build([make_pod("a", "n1", pc="high", cpu=250, memory=2**30, gpu=1)])
    assert set(state.pods_by_node["n1"]) == {"ns/a"}
    assert set(state.pods_by_namespace["ns"]) == {"ns/a"}
    assert set(state.pods_by_priority_class["high"]) == {"ns/a"}
    usage = state.node_usage["n1"]
    assert (usage.milli_cpu, usage.memory, usage.pod_count, usage.scalar) == (250, 2**30, 1, {"nvidia.com/gpu": 1})
    assert state.nominated_by_node == {}


def test_terminal_pods_hold_no_node_resources() -> None:
    state = build([make_pod("done", "n1", phase="Succeeded"), make_pod("failed", "n1", phase="Failed"),
                   make_pod("run", "n1", cpu=300)])
    assert set(state.pods_by_node["n1"]) == {"ns/run"}
    assert state.node_usage["n1"].milli_cpu == 300
    assert state.node_usage["n1"].pod_count == 1
    assert len(state.pods) == 3  # still known, e.g. for quota counting


def test_deleting_pods_still_hold_resources() -> None:
    state = build([replace(make_pod("victim", "n1", cpu=700), deleting=True)])
    assert state.node_usage["n1"].milli_cpu == 700


def test_usage_is_incremental_on_modify_and_delete() -> None:
    state = build([make_pod("a", "n1", cpu=100), make_pod("b", "n1", cpu=200)])
    version = state.version
    state.upsert(make_pod("a", "n1", cpu=1000))  # resize
    assert state.node_usage["n1"].milli_cpu == 1200
    state.upsert(make_pod("b", "n2", cpu=200))  # moved (a re-created pod)
    assert state.node_usage["n1"].milli_cpu == 1000
    assert state.node_usage["n2"].milli_cpu == 200
    state.upsert(make_pod("a", "n1", cpu=1000, phase="Succeeded"))  # finished
    assert "n1" not in state.node_usage and "n1" not in state.pods_by_node
    state.delete("Pod", "ns/b")
    assert state.node_usage == {} and state.pods_by_node == {}
    assert set(state.pods) == {"ns/a"}
    assert state.version > version


def test_nominated_index_follows_the_pod() -> None:
    state = build([make_pod("p", nominated="n3", cpu=8000)])
    assert set(state.nominated_by_node["n3"]) == {"ns/p"}
    assert "n3" not in state.node_usage
    state.upsert(make_pod("p", "n3", nominated="n3", cpu=8000))  # bound: no longer a nomination
    assert state.nominated_by_node == {}
    assert state.node_usage["n3"].milli_cpu == 8000
    state.upsert(make_pod("q", nominated="n1", phase="Failed"))
    assert state.nominated_by_node == {}


def test_priority_class_index_moves_and_empties() -> None:
    state = build([make_pod("a", pc="low")])
    state.upsert(make_pod("a", pc="high"))
    assert set(state.pods_by_priority_class) == {"high"}
    state.delete("Pod", "ns/a")
    assert state.pods_by_priority_class == {} and state.pods_by_namespace == {}


def test_other_kinds_upsert_and_delete() -> None:
    pdb = PodDisruptionBudget("web", "team-a", LabelSelector(FrozenMap({"app": "web"})), 1)
    quota = ResourceQuota("q", "team-a")
    limit_range, runtime_class = LimitRange("limits", "team-a"), RuntimeClass("kata", "kata")
    state = build([PriorityClass("high", 1000), Namespace("team-a"), Node("n1"), pdb, quota, limit_range,
                   runtime_class])
    assert state.pdbs_in("team-a") == [pdb] and state.quotas_in("team-a") == [quota]
    assert state.limit_ranges_in("team-a") == [limit_range] and state.runtime_classes == {"kata": runtime_class}
    assert state.counts() == {**dict.fromkeys(KIND_OF.values(), 0), "PriorityClass": 1, "Namespace": 1, "Node": 1,
                              "PodDisruptionBudget": 1, "ResourceQuota": 1, "LimitRange": 1, "RuntimeClass": 1}
    state.upsert(replace(pdb, disruptions_allowed=0))
    assert state.pdbs_in("team-a")[0].disruptions_allowed == 0
    for kind, key in (("PodDisruptionBudget", "team-a/web"), ("ResourceQuota", "team-a/q"),
                      ("LimitRange", "team-a/limits"), ("RuntimeClass", "kata"),
                      ("PriorityClass", "high"), ("Namespace", "team-a"), ("Node", "n1")):
        state.delete(kind, key)
    assert sum(state.counts().values()) == 0
    assert state.pdbs_by_namespace == {} and state.quotas_by_namespace == {}
    assert state.limit_ranges_by_namespace == {} and state.runtime_classes == {}
    state.delete("Pod", "ns/missing")  # unknown keys are ignored


def test_the_pod_listener_hears_every_pod_change_with_the_pod_before_and_after() -> None:
    state = build([make_pod("a", "n1"), make_pod("b", "n1")])
    heard: list[tuple[str | None, str | None]] = []
    state.pod_listener = lambda old, new: heard.append((old and old.node_name, new and new.node_name))
    state.upsert(make_pod("c"))
    state.upsert(make_pod("c", "n2"))
    state.delete("Pod", "ns/a")
    state.delete("Pod", "ns/missing")  # nothing was there: nothing to hear
    state.upsert(Node("n3"))
    # A relist: the unchanged pod b comes again, c is gone.
    state.replace_kind("Pod", [make_pod("b", "n1")])
    assert heard == [(None, ""), ("", "n2"), ("n1", None), ("n2", None), ("n1", "n1")]


def test_global_default_classes() -> None:
    state = build([PriorityClass("a", 1, global_default=True), PriorityClass("b", 2)])
    assert [pc.name for pc in state.global_default_classes()] == ["a"]


def test_replace_kind_removes_stale_objects() -> None:
    state = build([make_pod("a", "n1"), make_pod("b", "n1"), Node("n1"), Node("n2")])
    state.replace_kind("Pod", [make_pod("b", "n1", cpu=500), make_pod("c", "n2")])
    assert set(state.pods) == {"ns/b", "ns/c"}
    assert state.node_usage["n1"].milli_cpu == 500
    assert set(state.nodes) == {"n1", "n2"}  # other kinds untouched
    state.replace_kind("Node", [])
    assert state.nodes == {}


# ---- property: incremental == fresh -------------------------------------------------------------

def _canonical(state: ClusterState) -> dict[str, Any]:
    def nested(index: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {bucket: dict(members) for bucket, members in index.items()}

    return {
        "objects": {kind: {object_key(o): o for o in state.objects(kind)} for kind in KIND_OF.values()},
        "pods_by_node": nested(state.pods_by_node),
        "pods_by_namespace": nested(state.pods_by_namespace),
        "pods_by_priority_class": nested(state.pods_by_priority_class),
        "nominated_by_node": nested(state.nominated_by_node),
        "node_usage": {n: (u.milli_cpu, u.memory, u.ephemeral_storage, u.pod_count, dict(u.scalar))
                       for n, u in state.node_usage.items()},
        "pdbs": nested(state.pdbs_by_namespace),
        "quotas": nested(state.quotas_by_namespace),
    }


_names = st.sampled_from(["a", "b", "c", "d"])
_namespaces = st.sampled_from(["ns1", "ns2"])
_pods = st.builds(
    make_pod, _names,
    st.sampled_from(["", "n1", "n2"]),
    ns=_namespaces,
    cpu=st.integers(0, 4000),
    memory=st.integers(0, 2**34),
    phase=st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]),
    nominated=st.sampled_from(["", "n1", "n3"]),
    pc=st.sampled_from(["", "high", "low"]),
    gpu=st.integers(0, 2),
)
_objects = st.one_of(
    _pods,
    st.builds(PriorityClass, _names, st.integers(-10, 10)),
    st.builds(Node, st.sampled_from(["n1", "n2", "n3"])),
    st.builds(Namespace, _namespaces),
    st.builds(PodDisruptionBudget, _names, _namespaces, st.none(), st.integers(0, 3)),
    st.builds(ResourceQuota, _names, _namespaces),
)
_operations = st.lists(
    st.one_of(st.tuples(st.just("upsert"), _objects),
              st.tuples(st.just("delete"), _objects),
              st.tuples(st.just("replace"), st.lists(_objects, max_size=4))),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_operations)
def test_random_changes_give_the_same_indexes_as_a_fresh_build(operations: list[tuple[str, Any]]) -> None:
    state = ClusterState()
    final: dict[tuple[str, str], ClusterObject] = {}
    for op, payload in operations:
        if op == "upsert":
            state.upsert(payload)
            final[(KIND_OF[type(payload)], object_key(payload))] = payload
        elif op == "delete":
            kind = KIND_OF[type(payload)]
            state.delete(kind, object_key(payload))
            final.pop((kind, object_key(payload)), None)
        else:
            objects = [o for o in payload if isinstance(o, Pod)]
            state.replace_kind("Pod", objects)
            final = {k: v for k, v in final.items() if k[0] != "Pod"}
            for obj in objects:
                final[("Pod", object_key(obj))] = obj
    fresh = build(list(final.values()))
    assert _canonical(state) == _canonical(fresh)
    # usage totals equal a plain sum over the bound, non-terminal pods
    for node, usage in state.node_usage.items():
        members = [p for p in final.values() if isinstance(p, Pod) and p.node_name == node and not p.is_terminal]
        assert usage.milli_cpu == sum(p.requests.milli_cpu for p in members)
        assert usage.pod_count == len(members)
