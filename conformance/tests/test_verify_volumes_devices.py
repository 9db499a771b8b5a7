"""Volumes and devices on the real control plane (#27): ``verify`` restores PersistentVolumes, claims, CSINodes,
DeviceClasses, ResourceSlices and ResourceClaims as stored, and the real kube-scheduler's VolumeBinding, VolumeZone,
VolumeRestrictions, NodeVolumeLimits and DynamicResources decide the same node and victims as the prediction: a
zonal volume, a volume zone without nodes, a ReadWriteOncePod holder, a node out of CSI attachments, a free device
and a device held by a lower-priority pod (never freed by preemption in v1.37)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli import main

ZONE = "topology.kubernetes.io/zone"
CLASSES = [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
]
START = "2024-01-01T00:00:00Z"


def _node(name: str, cpu: str, zone: str | None = None) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": "8Gi", "pods": "10"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **({ZONE: zone} if zone else {})}},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, node: str, cpu: str, priority: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
            "spec": {"nodeName": node, "priority": priority, "priorityClassName": "low",
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu}}}], **spec},
            "status": {"phase": "Running", "startTime": START}}


def _bound_claim(name: str, pv: str, zone: str, mode: str = "ReadWriteOnce") -> list[dict[str, Any]]:
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": ZONE, "operator": "In", "values": [zone]}]}]}}
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv, "labels": {ZONE: zone}},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": [mode], "storageClassName": "zonal",
                  "persistentVolumeReclaimPolicy": "Retain",
                  "csi": {"driver": "pd.csi.example.com", "volumeHandle": pv},
                  "claimRef": {"namespace": "team-a", "name": name, "uid": f"uid-{name}"},
                  "nodeAffinity": affinity},
         "status": {"phase": "Bound"}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                      "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
         "spec": {"accessModes": [mode], "storageClassName": "zonal", "volumeName": pv,
                  "resources": {"requests": {"storage": "1Gi"}}},
         "status": {"phase": "Bound", "accessModes": [mode], "capacity": {"storage": "1Gi"}}},
    ]


def _claim_volume(claim: str) -> list[dict[str, Any]]:
    return [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]


def _preemptor(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {"priorityClassName": "high",
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "1"}}}], **spec}}


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
SLICE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
         "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                  "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}}


def _gpu_claim(name: str, holder: str | None = None) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    if holder:
        claim["status"] = {
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1",
                                                    "device": "gpu-0"}]},
                           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                               {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": holder, "uid": f"uid-{holder}"}]}
    return claim


def _gpu_pod() -> dict[str, Any]:
    return _preemptor(resourceClaims=[{"name": "gpu", "resourceClaimName": "mine"}])


def _csinode(name: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": "pd.csi.example.com", "nodeID": name, "allocatable": {"count": 1}}]}}


# scenario -> (snapshot objects, pod under test, what the real scheduler does: outcome, node, victims)
SCENARIOS: dict[str, tuple[list[dict[str, Any]], dict[str, Any], tuple[str, str | None, list[str]]]] = {
    "zonal-volume-preempts-in-its-zone": (
        [_node("a1", "2", "zone-a"), _node("b1", "2", "zone-b"), _pod("cheap", "a1", "2", 1),
         _pod("dear", "b1", "2", 10), *_bound_claim("data", "pv-b", "zone-b")],
        _preemptor(volumes=_claim_volume("data")), ("Preempts", "b1", ["team-a/dear"])),
    "volume-zone-without-nodes-stays-pending": (
        [_node("a1", "2", "zone-a"), _pod("cheap", "a1", "2", 1), *_bound_claim("data", "pv-c", "zone-c")],
        _preemptor(volumes=_claim_volume("data")), ("Unschedulable", None, [])),
    "read-write-once-pod-holder-is-the-victim": (
        [_node("b1", "4", "zone-b"), _node("b2", "4", "zone-b"), _pod("cheap", "b1", "100m", 1),
         _pod("holder", "b2", "100m", 10, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "excl"}}]),
         *_bound_claim("excl", "pv-x", "zone-b", mode="ReadWriteOncePod")],
        _preemptor(volumes=_claim_volume("excl")), ("Preempts", "b2", ["team-a/holder"])),
    "csi-attach-limit-fills-a-node": (
        [_node("b1", "8", "zone-b"), _node("b2", "2", "zone-b"), _csinode("b1"), _csinode("b2"),
         _pod("busy", "b2", "2", 10),
         _pod("attached", "b1", "100m", 5, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "other"}}]),
         *_bound_claim("other", "pv-o", "zone-b"), *_bound_claim("data", "pv-b", "zone-b")],
        _preemptor(volumes=_claim_volume("data")), ("Preempts", "b1", ["team-a/attached"])),
    "free-device-fits": (
        [_node("n1", "4"), DEVICE_CLASS, SLICE, _gpu_claim("mine")], _gpu_pod(), ("Fits", "n1", [])),
    "held-device-is-not-freed-by-preemption": (
        [_node("n1", "4"), DEVICE_CLASS, SLICE, _gpu_claim("mine"), _gpu_claim("theirs", holder="holder"),
         _pod("holder", "n1", "100m", 1, resourceClaims=[{"name": "gpu", "resourceClaimName": "theirs"}])],
        _gpu_pod(), ("Unschedulable", None, [])),
}
# Not here: a pod whose ResourceClaim does not exist. v1.37's DynamicResources PreEnqueue keeps it out of the active
# queue, so the real scheduler makes no attempt and verify observes no decision ("no scheduling decision within
# 30s", an Error); the prediction says Unschedulable with nobody evicted, which is what happens to the pod.


def _write(directory: Path) -> Path:
    for name, (objects, pod, _) in SCENARIOS.items():
        (directory / name).mkdir(parents=True)
        snapshot = {"apiVersion": "v1", "kind": "List", "items": [*CLASSES, *objects]}
        (directory / name / "snapshot.yaml").write_text(yaml.safe_dump(snapshot), encoding="utf-8")
        (directory / name / "pod.yaml").write_text(yaml.safe_dump(pod), encoding="utf-8")
    return directory


@pytest.mark.timeout(900)
def test_volumes_and_devices_are_predicted_as_the_real_scheduler_decides(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from controlplane import kube_bin_dir

    code = main(["verify", "--kube-bin", str(kube_bin_dir()), "-o", "json", "--scenarios", str(_write(tmp_path))])
    report = json.loads(capsys.readouterr().out)
    assert code in (0, 1), json.dumps(report, indent=1)
    seen = {}
    for result in report["results"]:
        observed = result["observed"]
        seen[result["scenario"]] = (observed["outcome"], observed.get("node") or None, sorted(observed["victims"]))
    assert seen == {name: expected for name, (_, _, expected) in SCENARIOS.items()}, json.dumps(report, indent=1)
    assert all(r["agree"] for r in report["results"]), json.dumps(
        [r for r in report["results"] if not r["agree"]], indent=1)


# A seeded sample of bench/real_scheduler.py --features volumes,dra (the README's figure is its 200 scenarios).
SAMPLE_SEED, SAMPLE_START, SAMPLE_SIZE = 4, 181, 8  # a window with every controller stand-in and preemptions
SAMPLE_FAMILIES = frozenset({"volumes", "dra"})


@pytest.mark.timeout(600)
def test_a_seeded_sample_of_random_clusters_with_volumes_and_devices_agrees(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from controlplane import kube_bin_dir

    from bench.scenariogen import features, generate_scenario, write_scenarios

    write_scenarios(tmp_path / "sample", SAMPLE_SIZE, SAMPLE_SEED, SAMPLE_START, SAMPLE_FAMILIES)
    code = main(["verify", "--kube-bin", str(kube_bin_dir()), "-o", "json", "--scenarios", str(tmp_path / "sample")])
    report = json.loads(capsys.readouterr().out)
    summary = report["summary"]
    print(f"\nseed {SAMPLE_SEED}, {SAMPLE_SIZE} random clusters with volumes and devices against kube-scheduler"
          f" {report['kubernetesVersion']}: {summary}")
    used = set().union(*(features(*generate_scenario(SAMPLE_SEED, i, SAMPLE_FAMILIES))
                         for i in range(SAMPLE_START, SAMPLE_START + SAMPLE_SIZE)))
    assert {"WaitForFirstConsumer claim, provisioned", "ephemeral volume", "devices: a claim template",
            "ReadWriteOncePod claim held by a running pod", "CSI attach limits (CSINode)"} <= used, used
    outcomes = {r["observed"]["outcome"] for r in report["results"]}
    assert {"Fits", "Preempts", "Unschedulable"} <= outcomes, outcomes
    assert summary["scenarios"] == SAMPLE_SIZE and summary["errors"] == 0
    assert [r for r in report["results"] if not r["agree"]] == [] and code == 0
