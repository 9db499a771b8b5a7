"""How ``verify`` restores a snapshot as stored (``plan_load``, pure): what a cluster that has lived for a while
holds loads as it is (stale priorities, several default classes, RuntimeClass pods, LimitRanges, terminating
namespaces), stand-ins are named in the fidelity notes, and nothing the API server would rewrite is rewritten.
The same plans run against the real control plane in conformance/tests/test_verify_fidelity.py."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from webhook.verify import loader, storage

NOW = "2025-07-01T00:00:00Z"


def pod(name: str = "p", namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "9",
                         "creationTimestamp": "2025-01-01T00:00:00Z", "managedFields": [{"manager": "x"}]},
            "spec": {"containers": [{"name": "c", "image": "x"}], **spec}, "status": {"phase": "Running"}}


def namespace(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **meta}}


def priority_class(name: str, value: int, default: bool = False) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": default}


def stored(plan: loader.LoadPlan, kind: str) -> dict[str, dict[str, Any]]:
    return {loader._key(o): o for o in plan.objects if o["kind"] == kind}


def test_stored_state_is_kept_as_stored_past_admission() -> None:
    """Stale priorities and two globalDefault classes: what the Priority plugin would refuse on create is stored
    unchanged (the failure modes of issue #32: 'must not be provided in pod spec', 'already marked as default')."""
    objects = [namespace("team-a"), priority_class("default-priority", 100, True),
               priority_class("also-default", 50, True), priority_class("system-node-critical", 2000001000),
               pod("old", priority=0), pod("renamed", priorityClassName="default-priority", priority=7)]
    plan = loader.plan_load(objects, now=NOW)
    classes = stored(plan, "PriorityClass")
    assert set(classes) == {"default-priority", "also-default"}  # the system classes are the API server's own
    assert classes["also-default"]["globalDefault"] and classes["default-priority"]["globalDefault"]
    pods = stored(plan, "Pod")
    assert pods["team-a/old"]["spec"]["priority"] == 0 and "priorityClassName" not in pods["team-a/old"]["spec"]
    assert pods["team-a/renamed"]["spec"]["priority"] == 7
    meta = pods["team-a/old"]["metadata"]
    assert meta["uid"] == "uid-old" and meta["creationTimestamp"] == "2025-01-01T00:00:00Z"
    assert "resourceVersion" not in meta and "managedFields" not in meta
    assert plan.notes == []


def test_pending_pods_are_held_so_that_a_nomination_still_reserves_room_in_every_release() -> None:
    """A scheduling gate hides a nomination before v1.37 (the queue records ungated pods' nominations only):
    found by bench/real_scheduler.py on v1.34.4, where 4 of 200 scenarios disagreed because of it."""
    nominated = pod("nominated", nodeSelector={"pool": "a"}, preemptionPolicy="PreemptLowerPriority")
    nominated["status"] = {"phase": "Pending", "nominatedNodeName": "n2"}
    bare = pod("bare")
    bare["status"] = {"phase": "Pending", "nominatedNodeName": "n2"}
    waiting = pod("waiting", schedulingGates=[{"name": "theirs"}])
    waiting["status"] = {"phase": "Pending"}
    pods = stored(loader.plan_load([namespace("team-a"), nominated, bare, waiting], now=NOW), "Pod")
    held = pods["team-a/nominated"]
    assert held["spec"]["nodeSelector"] == {"pool": "a", loader.HOLD: "nominated"}
    assert held["spec"]["preemptionPolicy"] == "Never" and "schedulingGates" not in held["spec"]
    assert held["status"]["nominatedNodeName"] == "n2"
    assert pods["team-a/waiting"]["spec"]["schedulingGates"] == [{"name": "theirs"}, {"name": loader.HOLD}]
    # Read back, every pod is the snapshot's again.
    for key, original in (("team-a/nominated", nominated), ("team-a/bare", bare)):
        copy = json.loads(json.dumps(pods[key]))
        loader._release_hold(copy)
        assert copy["metadata"].get("annotations") is None
        assert copy["spec"].get("nodeSelector") == original["spec"].get("nodeSelector")
        assert copy["spec"].get("preemptionPolicy") == original["spec"].get("preemptionPolicy")


def test_a_terminating_pod_keeps_its_deletion_and_a_finished_one_is_not_held() -> None:
    terminating = pod("leaving", nodeName="n1")
    terminating["metadata"].update(deletionTimestamp="2025-06-02T09:30:41Z", deletionGracePeriodSeconds=30,
                                   finalizers=["batch.kubernetes.io/job-tracking"])
    done = pod("done")
    done["status"] = {"phase": "Succeeded"}
    pods = stored(loader.plan_load([namespace("team-a"), terminating, done], now=NOW), "Pod")
    leaving = pods["team-a/leaving"]
    assert leaving["metadata"]["deletionTimestamp"] == "2025-06-02T09:30:41Z"
    assert leaving["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    assert "schedulingGates" not in leaving["spec"] and "schedulingGates" not in pods["team-a/done"]["spec"]


def test_a_missing_runtime_class_gets_a_stand_in_from_its_pods_and_a_note() -> None:
    overhead = {"cpu": "250m", "memory": "120Mi"}
    gvisor = [pod(f"sandboxed-{i}", runtimeClassName="gvisor", overhead=overhead,
                  nodeSelector={"sandbox.gke.io/runtime": "gvisor", "pool": pool},
                  tolerations=[{"key": "sandbox.gke.io/runtime", "value": "gvisor", "effect": "NoSchedule"},
                               {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                "effect": "NoExecute", "tolerationSeconds": 300}])
              for i, pool in enumerate(("a", "b"))]
    kata = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
            "handler": "kata", "overhead": {"podFixed": {"cpu": "1"}}}
    plan = loader.plan_load([namespace("team-a"), kata, *gvisor, pod("vm", runtimeClassName="kata",
                                                                    overhead={"cpu": "500m"})], now=NOW)
    classes = stored(plan, "RuntimeClass")
    assert classes["kata"]["overhead"] == {"podFixed": {"cpu": "1"}}  # present: as stored, whatever its pods carry
    stand_in = classes["gvisor"]
    assert stand_in["handler"] == "gvisor" and stand_in["overhead"] == {"podFixed": overhead}
    assert stand_in["scheduling"] == {"nodeSelector": {"sandbox.gke.io/runtime": "gvisor"},
                                      "tolerations": [{"key": "sandbox.gke.io/runtime", "value": "gvisor",
                                                       "effect": "NoSchedule"}]}
    assert stored(plan, "Pod")["team-a/vm"]["spec"]["overhead"] == {"cpu": "500m"}
    [note] = plan.notes
    assert note.startswith("RuntimeClass gvisor is not in the snapshot (2 pod(s) name it)") and "250m" in note


def test_limit_ranges_quotas_and_pdbs_keep_their_status() -> None:
    limits = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "team-a"},
              "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]}}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "team-a"},
             "spec": {"hard": {"pods": "10"}}, "status": {"hard": {"pods": "10"}, "used": {"pods": "3"}}}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "team-a"},
           "spec": {"maxUnavailable": 0}, "status": {"disruptionsAllowed": 0}}
    plan = loader.plan_load([namespace("team-a"), limits, quota, pdb], now=NOW)
    assert stored(plan, "LimitRange")["team-a/defaults"]["spec"] == limits["spec"]
    assert stored(plan, "ResourceQuota")["team-a/q"]["status"]["used"] == {"pods": "3"}
    assert stored(plan, "PodDisruptionBudget")["team-a/b"]["status"] == {"disruptionsAllowed": 0}
    assert [o["kind"] for o in plan.objects] == ["Namespace", "PodDisruptionBudget", "ResourceQuota", "LimitRange"]


def test_a_terminating_namespace_stays_terminating_and_every_namespace_gets_the_name_label() -> None:
    plan = loader.plan_load([namespace("old", deletionTimestamp="2025-06-01T00:00:00Z"), namespace("team-a")],
                            now=NOW)
    old, live = stored(plan, "Namespace")["old"], stored(plan, "Namespace")["team-a"]
    assert old["status"]["phase"] == "Terminating" and old["spec"]["finalizers"] == ["kubernetes"]
    assert live["status"]["phase"] == "Active"
    assert live["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}


def test_namespaces_the_snapshot_lacks() -> None:
    # Some namespaces in the snapshot: only those its objects use are created, with a note; a pod under test in
    # another one meets the API server's NotFound, as in the real cluster.
    plan = loader.plan_load([namespace("team-a"), pod("x", namespace="team-b")],
                            pods_under_test=[pod("new", namespace="team-c")], now=NOW)
    assert set(stored(plan, "Namespace")) == {"team-a", "team-b"}
    assert plan.notes == ["namespace(s) team-b hold objects of the snapshot but are not in it: created without "
                          "labels or annotations"]
    # No namespace at all (an older snapshot command): the pods under test's namespace is created too.
    plan = loader.plan_load([pod("x", namespace="team-b")], pods_under_test=[pod("new", namespace="team-c")], now=NOW)
    assert set(stored(plan, "Namespace")) == {"team-b", "team-c"}
    assert plan.notes[0].startswith("the snapshot holds no Namespace")


def test_objects_without_uid_get_a_stable_one_and_the_storage_version() -> None:
    bare = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PriorityClass", "metadata": {"name": "old"},
            "value": 5}
    first = loader.plan_load([bare], now=NOW).objects[0]
    again = loader.plan_load([bare], now="2030-01-01T00:00:00Z").objects[0]
    assert first["apiVersion"] == "scheduling.k8s.io/v1"
    assert first["metadata"]["uid"] == again["metadata"]["uid"] and first["metadata"]["creationTimestamp"] == NOW


def test_kinds_verify_does_not_load_are_named_in_a_note() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"}}
    plan = loader.plan_load([service, dict(service, metadata={"name": "t"})], now=NOW)
    assert plan.notes == ["not loaded (verify restores only the kinds of the documented snapshot command): 2 Service"]


def test_storage_keys_are_kube_apiservers() -> None:
    assert storage.storage_key("Node", "n1") == "/registry/minions/n1"
    assert storage.storage_key("Pod", "p", "team-a") == "/registry/pods/team-a/p"
    assert storage.storage_key("PodDisruptionBudget", "b", "x") == "/registry/poddisruptionbudgets/x/b"
    assert storage.storage_key("RuntimeClass", "kata") == "/registry/runtimeclasses/kata"
    assert base64.b64decode(storage._range_end("/registry/pods/")) == b"/registry/pods0"


def test_read_back_strips_the_stand_ins_and_the_probe() -> None:
    held = pod()
    held["spec"]["schedulingGates"] = [{"name": loader.HOLD}]
    probe = pod(loader.PROBE_PREFIX + "x")

    class Listing:
        def request(self, method: str, path: str, body: object = None, **options: Any) -> tuple[int, Any]:
            return 200, {"items": [held, probe] if path == "/api/v1/pods" else []}

    [read] = loader.read_back(Listing())  # type: ignore[arg-type]
    assert read["kind"] == "Pod" and read["apiVersion"] == "v1" and read["spec"]["schedulingGates"] is None


def test_read_objects_keeps_times_as_strings_flattens_lists_and_reads_gzip(tmp_path: Path) -> None:
    text = ("kind: List\nitems:\n- kind: Pod\n  metadata: {name: a, deletionTimestamp: 2025-06-02T09:30:41Z}\n"
            "---\nkind: Node\nmetadata: {name: n}\n")
    (tmp_path / "s.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "s.yaml.gz").write_bytes(gzip.compress(text.encode()))
    for name in ("s.yaml", "s.yaml.gz"):
        objects = loader.read_objects(tmp_path / name)
        assert [o["kind"] for o in objects] == ["Pod", "Node"]
        assert objects[0]["metadata"]["deletionTimestamp"] == "2025-06-02T09:30:41Z"


def test_an_unreadable_snapshot_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("kind: [", encoding="utf-8")
    with pytest.raises(loader.SnapshotError, match=r"s\.yaml"):
        loader.read_objects(tmp_path / "s.yaml")


def test_every_stored_form_is_json() -> None:
    plan = loader.plan_load([namespace("team-a"), pod(), priority_class("x", 1)], now=NOW)
    assert all(json.loads(json.dumps(o)) == o for o in plan.objects)


def test_volumes_and_devices_are_restored_as_stored_before_the_pods_that_use_them() -> None:
    """#27: a bound PV/PVC pair with its status, a CSINode, a ResourceSlice and an allocated claim go into etcd as the
    snapshot has them (no controller runs to bind or allocate again), under kube-apiserver's storage keys."""
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-b"},
          "spec": {"capacity": {"storage": "1Gi"}, "claimRef": {"namespace": "team-a", "name": "data"}},
          "status": {"phase": "Bound"}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "team-a"},
           "spec": {"volumeName": "pv-b"}, "status": {"phase": "Bound"}}
    csinode = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
               "spec": {"drivers": []}}
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
              "spec": {"driver": "gpu.example.com", "nodeName": "n1"}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c", "namespace": "team-a"}, "spec": {},
             "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]}}
    plan = loader.plan_load([namespace("team-a"), pod(), pv, pvc, csinode, slice_, claim], now=NOW)
    assert stored(plan, "PersistentVolume")["pv-b"]["status"] == {"phase": "Bound"}
    assert stored(plan, "PersistentVolumeClaim")["team-a/data"]["spec"]["volumeName"] == "pv-b"
    assert stored(plan, "ResourceClaim")["team-a/c"]["status"] == claim["status"]
    kinds = [o["kind"] for o in plan.objects]
    assert kinds.index("Pod") > max(kinds.index(k) for k in ("PersistentVolume", "CSINode", "ResourceSlice"))
    assert storage.storage_key("PersistentVolumeClaim", "data", "team-a") == \
        "/registry/persistentvolumeclaims/team-a/data"
    assert storage.storage_key("ResourceSlice", "n1-gpus") == "/registry/resourceslices/n1-gpus"
