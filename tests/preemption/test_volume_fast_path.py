"""Pods with volumes on the resource-only paths (#27): the prediction equals the slow reference, and the
plugin-by-plugin path, on random clusters drawn where the storage filters decide: zonal volumes (by label, by node
affinity, pinned to one node), CSI attach limits at or near full, ReadWriteOncePod claims held by lower- and
higher-priority pods, claims shared between pods, nominated pods with volumes, several replicas."""

from __future__ import annotations

import dataclasses
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from webhook.cluster.model import Namespace, Pod
from webhook.cluster.reader import object_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.cluster.volumes import CSIDriverLimit, CSINode, StorageClass, VolumeAttachment
from webhook.preemption import schedule_one
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.plugins.nodevolumelimits import AttachIndex
from webhook.preemption.results import Outcome, PreemptionArgs, ScoringArgs
from webhook.preemption.schedule_one import new_context
from webhook.preemption.simulate import simulate_pods

from .reference import reference_predict
from .support import as_dict

ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
DRIVER = "pd.csi.example.com"
OTHER_DRIVER = "other.csi.example.com"
ZONES = ("z1", "z2", "z3")
RWOP = "ReadWriteOncePod"


def claim_objects(name: str, placement: tuple[str, str], access: str, driver: str = DRIVER) -> list[dict[str, Any]]:
    """A claim in ``default`` bound to a CSI volume; ``placement``: how the volume is pinned ("label" zone label,
    "beta" its beta name, "affinity" node affinity on the zone, "both", "node" node affinity on one node's name,
    "none") and to what."""
    how, where = placement
    pv: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{name}"},
                          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": [access],
                                   "csi": {"driver": driver, "volumeHandle": f"vol-{name}"},
                                   "claimRef": {"namespace": "default", "name": name}},
                          "status": {"phase": "Bound"}}
    if how in ("label", "both"):
        pv["metadata"]["labels"] = {ZONE: where}
    if how == "beta":
        pv["metadata"]["labels"] = {BETA_ZONE: where}
    if how in ("affinity", "both"):
        pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": where.split("__")}]}]}}
    if how == "node":
        pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [where]}]}]}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": name, "namespace": "default",
                        "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
           "spec": {"accessModes": [access], "volumeName": f"pv-{name}", "resources": {"requests": {"storage": "1Gi"}}},
           "status": {"phase": "Bound"}}
    return [pv, pvc]


def pod_dict(name: str, priority: int, cpu: int, claims: list[str], node: str = "", nominated: str = "",
             ) -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": f"{cpu}m", "memory": "100"}}}]}
    if claims:
        spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if node:
        spec["nodeName"] = node
        status["startTime"] = f"2024-01-01T00:00:{len(name) % 60:02d}Z"
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec,
            "status": status}


@st.composite
def placements(draw: st.DrawFn, nodes: list[str], zone: str | None = None) -> tuple[str, str]:
    how = draw(st.sampled_from(["label", "affinity", "both", "label", "beta", "node", "none"]))
    if how == "node":
        return how, draw(st.sampled_from(nodes))
    if zone is not None and draw(st.integers(0, 3)):
        return how, zone
    return how, draw(st.sampled_from([*ZONES, "z1__z2"] if how in ("label", "beta") else ZONES))


# WaitForFirstConsumer classes: provisioned anywhere, only in z1 or z2 (allowedTopologies), by nobody (no
# provisioner), and one with a static volume to match.
CLASSES = {
    "anywhere": ("pd.csi.example.com", []),
    "zonal": ("pd.csi.example.com", [{"matchLabelExpressions": [{"key": ZONE, "values": ["z1", "z2"]}]}]),
    "static": ("kubernetes.io/no-provisioner", []),
    "with-pvs": ("pd.csi.example.com", []),
}


def class_objects() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name}, "provisioner": driver,
         "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": topologies}
        for name, (driver, topologies) in CLASSES.items()]
    found.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-static"},
                  "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName":
                           "with-pvs", "csi": {"driver": DRIVER, "volumeHandle": "vol-static"}},
                  "status": {"phase": "Available"}})
    return found


def unbound_claim(name: str, storage_class: str, selected_node: str | None) -> dict[str, Any]:
    """A claim of a WaitForFirstConsumer class not bound yet (``selected_node``: a node already chosen for it)."""
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if selected_node is not None:
        meta["annotations"] = {"volume.kubernetes.io/selected-node": selected_node}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Pending"}}


@st.composite
def volume_scenarios(draw: st.DrawFn, unbound: bool = False) -> tuple[ClusterState, list[Pod]]:
    """A small, tight cluster whose pods often mount claims; the pod to predict (or 2 replicas) mounts 0-2 claims,
    fresh zonal ones or those of bound pods; with ``unbound``, also claims of WaitForFirstConsumer classes not bound
    yet (what the reference does not model)."""
    state = ClusterState()
    state.upsert(Namespace("default", {}))
    objects: list[dict[str, Any]] = class_objects() if unbound else []
    nodes = [f"n{i}" for i in range(draw(st.sampled_from([1, 2, 3, 4, 6, 8])))]
    zone_of: dict[str, str | None] = {}
    for name in nodes:
        labels = {"kubernetes.io/hostname": name}
        zone_of[name] = None
        if draw(st.integers(0, 5)):
            # Mostly the GA label; some nodes carry the beta one instead, or both.
            zone_of[name] = draw(st.sampled_from(ZONES))
            for key in draw(st.sampled_from([(ZONE,), (ZONE,), (ZONE,), (BETA_ZONE,), (ZONE, BETA_ZONE)])):
                labels[key] = zone_of[name]
        objects.append({"kind": "Node", "metadata": {"name": name, "labels": labels}, "status": {"allocatable": {
            "cpu": f"{draw(st.sampled_from([1000, 2000]))}m", "memory": "2000", "pods": str(draw(st.integers(3, 6)))}}})
        if draw(st.integers(0, 4)):
            limit = draw(st.sampled_from([1, 2, 2, 3, 64]))
            drivers = [{"name": DRIVER, "nodeID": name, "allocatable": {"count": limit}}]
            if draw(st.integers(0, 3)) == 0:
                drivers.append({"name": OTHER_DRIVER, "nodeID": name})  # no count: no limit
            objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
                            "spec": {"drivers": drivers}})
    claims: list[str] = []
    for i in range(draw(st.integers(2, 4 * len(nodes)))):
        node = draw(st.sampled_from(nodes))
        mounted: list[str] = []
        for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
            if claims and draw(st.integers(0, 4)) == 0:
                mounted.append(draw(st.sampled_from(claims)))  # a claim another pod mounts too
                continue
            claim = f"c{len(claims)}"
            claims.append(claim)
            access = RWOP if draw(st.integers(0, 2)) == 0 else "ReadWriteOnce"
            driver = OTHER_DRIVER if draw(st.integers(0, 7)) == 0 else DRIVER
            objects += claim_objects(claim, draw(placements(nodes, zone_of[node])), access, driver)
            mounted.append(claim)
        objects.append(pod_dict(f"p{i}", draw(st.sampled_from([0, 100, 500, 1000])),
                                draw(st.sampled_from([300, 500, 700])), sorted(set(mounted)), node=node))
    for i in range(draw(st.sampled_from([0, 0, 0, 1]))):
        mounted = [draw(st.sampled_from(claims))] if claims and draw(st.booleans()) else []
        objects.append(pod_dict(f"nom{i}", draw(st.sampled_from([500, 2000])), 300, mounted,
                                nominated=draw(st.sampled_from(nodes))))
    mounted = []
    for i in range(draw(st.sampled_from([0, 1, 1, 1, 2]))):
        if claims and draw(st.integers(0, 2)) == 0:
            mounted.append(draw(st.sampled_from(claims)))  # often a ReadWriteOncePod claim a bound pod holds
            continue
        claim = f"new{i}"
        if unbound and draw(st.booleans()):
            selected = draw(st.sampled_from(nodes)) if draw(st.integers(0, 3)) == 0 else None
            objects.append(unbound_claim(claim, draw(st.sampled_from(sorted(CLASSES))), selected))
            mounted.append(claim)
            continue
        access = RWOP if draw(st.integers(0, 3)) == 0 else "ReadWriteOnce"
        objects += claim_objects(claim, draw(placements(nodes)), access)
        mounted.append(claim)
    for raw in objects:
        obj = object_from_dict(raw)
        assert obj is not None, raw
        state.upsert(obj)
    pod = pod_from_dict(pod_dict("new", draw(st.sampled_from([100, 500, 1000, 2000])),
                                 draw(st.sampled_from([300, 700, 1500])), sorted(set(mounted))))
    replicas = draw(st.sampled_from([1, 2, 3] if unbound else [1, 1, 2]))
    pods = [pod] if replicas == 1 else [pod_from_dict(pod_dict(f"new-{i}", pod.priority or 0, pod.requests.milli_cpu,
                                                               sorted(set(mounted)))) for i in range(replicas)]
    return state, pods


# A profile that scores nothing looks for one feasible node: with no quick scan, the Filter pass is the bulk one.
BULK_ARGS = PreemptionArgs(scoring=ScoringArgs(weights=()))


def _fast_path_taken(state: ClusterState, pod: Pod) -> bool:
    return new_context(ClusterView(state), pod, PreemptionArgs()).volumes is not None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(volume_scenarios(), st.booleans())
def test_volume_pods_equal_the_reference(scenario: tuple[ClusterState, list[Pod]], bulk: bool) -> None:
    """Node, victims, candidate count, tied nodes and the PostFilter message ("0/N nodes are available: ...", every
    ruled-out node counted with its reason) equal the reference's transcription of the storage filters (``bulk``:
    a profile without Score plugins, whose Filter pass takes its every-node-at-once form, as on large clusters)."""
    state, pods = scenario
    args = BULK_ARGS if bulk else PreemptionArgs()
    with mock.patch.object(schedule_one, "QUICK_SCAN_NODES", 0 if bulk else schedule_one.QUICK_SCAN_NODES):
        fast = [as_dict(r) for r in simulate_pods(state, pods, args)]
    event(f"fast path: {_fast_path_taken(state, pods[0])}, outcome: {fast[0]['outcome']}")
    assert fast == reference_predict(state, pods, scoring=args.scoring)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(volume_scenarios(unbound=True), st.booleans())
def test_volume_pods_equal_the_plugin_by_plugin_path(scenario: tuple[ClusterState, list[Pod]], bulk: bool) -> None:
    """The whole result (messages, statuses, scores, what a replica's claims assume for the next) equals the one of
    every Filter plugin run node by node, unbound WaitForFirstConsumer claims included. ``bulk``: a profile without
    Score plugins, whose Filter pass takes its every-node-at-once form, as on large clusters."""
    state, pods = scenario
    args = BULK_ARGS if bulk else PreemptionArgs()
    with mock.patch.object(schedule_one, "QUICK_SCAN_NODES", 0 if bulk else schedule_one.QUICK_SCAN_NODES):
        fast = simulate_pods(state, pods, args)
    event(f"fast path: {_fast_path_taken(state, pods[0])}, outcome: {fast[0].outcome}")
    with mock.patch.object(schedule_one, "volume_restriction", return_value=None):
        assert not _fast_path_taken(state, pods[0])
        slow = simulate_pods(state, pods, args)
    assert fast == slow


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(volume_scenarios())
def test_most_drawn_volume_pods_take_the_fast_path(scenario: tuple[ClusterState, list[Pod]]) -> None:
    """Only a ReadWriteOncePod claim in use (VolumeRestrictions runs) sends a pod with bound claims node by node."""
    state, pods = scenario
    pod = pods[0]
    in_use = any(state.pvc_ref_counts.get(f"default/{c.claim_name}") and RWOP in state.volumes.pvcs[
        f"default/{c.claim_name}"].access_modes for c in (pod.volumes.claims if pod.volumes else ()))
    assert _fast_path_taken(state, pod) == (pod.volumes is not None and not in_use)


def test_a_zonal_volume_pod_preempts_in_its_zone_and_counts_the_other_zones() -> None:
    """Both zones' nodes are full; the volume is in z2: the victim is on z2's node, and with nothing to evict
    there the message counts z1's nodes with VolumeBinding's reason (after resources: their status in the dry run)."""
    objects: list[dict[str, Any]] = []
    for name, zone in (("a1", "z1"), ("a2", "z1"), ("b1", "z2")):
        objects.append({"kind": "Node", "metadata": {"name": name, "labels": {ZONE: zone}},
                        "status": {"allocatable": {"cpu": "1000m", "memory": "2000", "pods": "4"}}})
        objects.append(pod_dict(f"low-{name}", 0, 900, [], node=name))
    objects += claim_objects("data", ("affinity", "z2"), "ReadWriteOnce")
    state = ClusterState()
    for raw in objects:
        obj = object_from_dict(raw)
        assert obj is not None
        state.upsert(obj)
    pod = pod_from_dict(pod_dict("new", 1000, 500, ["data"]))
    assert _fast_path_taken(state, pod)
    [result] = simulate_pods(state, [pod], PreemptionArgs())
    assert (result.outcome, result.node, [v.name for v in result.victims]) == (Outcome.PREEMPTS, "b1", ["low-b1"])
    assert result.candidate_nodes == 1
    high = pod_from_dict(pod_dict("new", 0, 500, ["data"]))  # nothing of lower priority anywhere
    [result] = simulate_pods(state, [high], PreemptionArgs())
    assert result.outcome == Outcome.UNSCHEDULABLE
    assert result.preemption_status == ("preemption: 0/3 nodes are available: 3 No preemption victims found for "
                                        "incoming pod.")
    # z2's node holds only a pod the preemptor cannot evict.
    blocked = pod_from_dict(pod_dict("new", 1000, 500, ["data"]))
    state.delete("Pod", "default/low-b1")
    state.upsert(pod_from_dict(pod_dict("high-b1", 2000, 900, [], node="b1")))
    [result] = simulate_pods(state, [blocked], PreemptionArgs())
    assert result.outcome == Outcome.UNSCHEDULABLE
    assert result.preemption_status == (
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 node(s) didn't match PersistentVolume's node affinity.")
    assert [as_dict(r) for r in simulate_pods(state, [blocked], PreemptionArgs())] == reference_predict(
        state, [blocked])


@st.composite
def storage_events(draw: st.DrawFn, state: ClusterState) -> list[tuple[str, Any]]:
    """Informer events that change what a node counts toward its CSI limit: claims rebound or deleted, volumes and
    CSINodes changed, VolumeAttachments added and removed, pods with claims added and deleted, a StorageClass."""
    nodes = sorted(state.nodes)
    claims = sorted(state.volumes.pvcs)
    events: list[tuple[str, Any]] = []
    for i in range(draw(st.integers(1, 5))):
        what = draw(st.sampled_from(["rebind", "delete-claim", "csinode", "attach", "detach", "pod", "delete-pod",
                                     "delete-pv", "class"]))
        if what == "rebind" and claims:
            claim = state.volumes.pvcs[draw(st.sampled_from(claims))]
            events.append(("upsert", dataclasses.replace(claim, volume_name=f"pv-{draw(st.sampled_from(claims))[8:]}")))
        elif what == "delete-claim" and claims:
            events.append(("delete", "PersistentVolumeClaim", draw(st.sampled_from(claims))))
        elif what == "delete-pv" and state.volumes.pvs:
            events.append(("delete", "PersistentVolume", draw(st.sampled_from(sorted(state.volumes.pvs)))))
        elif what == "csinode":
            node = draw(st.sampled_from(nodes))
            events.append(("upsert", CSINode(node, (CSIDriverLimit(DRIVER, draw(st.sampled_from([0, 1, 2, 5]))),))))
        elif what == "attach" and state.volumes.pvs:
            events.append(("upsert", VolumeAttachment(f"va{i}", draw(st.sampled_from(nodes)), DRIVER,
                                                      draw(st.sampled_from(sorted(state.volumes.pvs))))))
        elif what == "detach":
            events.append(("delete", "VolumeAttachment", f"va{draw(st.integers(0, 4))}"))
        elif what == "pod" and claims:
            events.append(("upsert", pod_from_dict(pod_dict(f"e{i}", 0, 100, [draw(st.sampled_from(claims))[8:]],
                                                            node=draw(st.sampled_from(nodes))))))
        elif what == "delete-pod" and state.pods:
            events.append(("delete", "Pod", draw(st.sampled_from(sorted(state.pods)))))
        elif what == "class":
            events.append(("upsert", StorageClass("standard", provisioner=DRIVER)))
    return events


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_attach_index_follows_storage_and_pod_events(data: st.DataObject) -> None:
    """NodeVolumeLimits' per-node headroom, refreshed per changed object after informer events, equals the one built
    from scratch on the changed state."""
    state, _ = data.draw(volume_scenarios())
    for _ in range(data.draw(st.integers(1, 3))):
        kept = AttachIndex()
        kept.sync(ClusterView(state))
        for event_ in data.draw(storage_events(state)):
            if event_[0] == "upsert":
                state.upsert(event_[1])
            else:
                state.delete(event_[1], event_[2])
        view = ClusterView(state)
        kept.sync(view)
        fresh = AttachIndex()
        fresh.sync(view)
        assert kept.headroom == fresh.headroom
        assert {d: list(zip(o.values, o.names, strict=True)) for d, o in kept.by_driver.items() if o.names} == {
            d: list(zip(o.values, o.names, strict=True)) for d, o in fresh.by_driver.items() if o.names}
