"""``verify``'s stand-ins for kube-controller-manager (webhook/verify/controllers.py), on an API that records what
it is asked: the ephemeral volume controller's claim, the resourceclaim controller's claim and the pod's
``resourceClaimStatuses``, the PV controller's side of a binding the scheduler started (a volume it chose, a volume
provisioned for the node it selected), and the scheduling gate that keeps the scheduler away until the claims
exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import webhook.verify.observe as verify_observe
from webhook.preemption.results import Outcome
from webhook.verify.controllers import (
    BIND_COMPLETED,
    POD_CLAIM_NAME,
    SELECTED_NODE,
    STAND_IN_GATE,
    complete_bindings,
    create_pod_claims,
    needs_claims_made,
)

TEMPLATE: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu-template", "namespace": "team-a"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}


class RecordingPlane:
    """Answers GETs from ``objects`` (by path), records every call, creates with a name from generateName."""

    def __init__(self, objects: dict[str, Any] | None = None, tmp: Path | None = None) -> None:
        self.objects = objects or {}
        self.calls: list[tuple[str, str, Any]] = []
        self.scheduler_log = (tmp or Path("/nonexistent")) / "scheduler.log"

    def request(self, method: str, path: str, body: Any = None, query: Any = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        self.calls.append((method, path, body))
        if method == "GET":
            found = self.objects.get(path)
            return (200, found) if found is not None else (404, {"message": "not found"})
        if method == "POST":
            made = dict(body)
            meta = dict(made.get("metadata") or {})
            meta.setdefault("name", f"{meta.get('generateName', '')}abcde")
            meta.setdefault("uid", "made-uid")
            made["metadata"] = meta
            return 201, made
        return 200, body

    def sent(self, method: str, path_end: str) -> list[Any]:
        return [body for m, path, body in self.calls if m == method and path.endswith(path_end)]


POD: dict[str, Any] = {"metadata": {"namespace": "team-a", "name": "web", "uid": "uid-web"},
       "spec": {"schedulingGates": [{"name": "theirs"}, {"name": STAND_IN_GATE}],
                "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                    "metadata": {"labels": {"kept": "yes"}},
                    "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}}}}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"},
                                   {"name": "named", "resourceClaimName": "shared"}]}}


def test_the_claims_the_controllers_make_for_a_new_pod_and_its_gate_removed() -> None:
    plane = RecordingPlane({"/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates/gpu-template":
                            TEMPLATE})
    create_pod_claims(plane, POD)
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "uid-web", "controller": True,
             "blockOwnerDeletion": True}
    (pvc,) = plane.sent("POST", "/namespaces/team-a/persistentvolumeclaims")
    # ephemeral.VolumeClaimName: <pod>-<volume>; the template's metadata and spec, the pod as controller.
    assert pvc["metadata"] == {"labels": {"kept": "yes"}, "name": "web-scratch", "namespace": "team-a",
                               "ownerReferences": [owner]}
    assert pvc["spec"]["storageClassName"] == "local"
    (claim,) = plane.sent("POST", "/namespaces/team-a/resourceclaims")
    assert claim["metadata"]["generateName"] == "web-gpu-"
    assert claim["metadata"]["annotations"] == {POD_CLAIM_NAME: "gpu"}
    assert claim["metadata"]["ownerReferences"] == [owner]
    assert claim["spec"] == TEMPLATE["spec"]["spec"]
    (status,) = plane.sent("PATCH", "/pods/web/status")
    assert status == {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-gpu-abcde"}]}}
    (gates,) = plane.sent("PATCH", "/pods/web")
    assert gates == {"spec": {"schedulingGates": [{"name": "theirs"}]}}  # the pod's own gate stays


def test_a_pod_without_ephemeral_volumes_or_templates_needs_no_claims_made() -> None:
    assert needs_claims_made(POD)
    assert not needs_claims_made({"spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "x"}}],
                                           "resourceClaims": [{"name": "n", "resourceClaimName": "shared"}]}})


def _claims(*claims: dict[str, Any]) -> dict[str, Any]:
    return {"items": list(claims)}


def _pending(name: str, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": name, "uid": f"uid-{name}", "annotations": annotations},
            "spec": {"storageClassName": "zonal", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "5Gi"}}}}


def test_the_pv_controller_completes_a_static_binding_and_a_provisioning_the_scheduler_started() -> None:
    chosen = {"metadata": {"name": "local-pv-0"},
              "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                       "claimRef": {"namespace": "team-a", "name": "static", "uid": "uid-static"}}}
    bound = {"metadata": {"namespace": "team-a", "name": "done", "uid": "uid-done"}, "spec": {"volumeName": "pv-1"}}
    plane = RecordingPlane({
        "/api/v1/namespaces/team-a/persistentvolumeclaims": _claims(
            _pending("static"), _pending("provisioned", **{SELECTED_NODE: "node-1"}), _pending("waiting"), bound),
        "/api/v1/persistentvolumes": {"items": [chosen]},
        "/apis/storage.k8s.io/v1/storageclasses/zonal": {"provisioner": "pd.csi.example.com"}})
    complete_bindings(plane, "team-a")
    (pv,) = plane.sent("POST", "/api/v1/persistentvolumes")
    assert pv["metadata"]["name"] == "pvc-uid-provisioned"
    assert pv["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "namespace": "team-a", "name": "provisioned",
                                      "uid": "uid-provisioned"}
    assert pv["spec"]["csi"]["driver"] == "pd.csi.example.com" and pv["spec"]["capacity"] == {"storage": "5Gi"}
    assert "nodeAffinity" not in pv["spec"]  # VolumeBinding's checkBindings then accepts it on the selected node
    # What checkBindings waits for: volumeName and bind-completed on the claim (isPVCFullyBound).
    assert plane.sent("PATCH", "/persistentvolumeclaims/static") == [
        {"metadata": {"annotations": {BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "local-pv-0"}}]
    assert plane.sent("PATCH", "/persistentvolumeclaims/provisioned") == [
        {"metadata": {"annotations": {BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "pvc-uid-provisioned"}}]
    assert not plane.sent("PATCH", "/persistentvolumeclaims/waiting")  # nothing chosen for it yet
    assert not plane.sent("PATCH", "/persistentvolumeclaims/done")
    assert plane.sent("PATCH", "/persistentvolumeclaims/static/status")[0]["status"]["phase"] == "Bound"


def test_a_pod_with_an_ephemeral_volume_is_created_gated_until_its_claim_exists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler must not try the pod before the controllers' claims exist (it would fail, back off, and the
    observation would take that for the decision); once verify's gate is gone the pod is the scheduler's."""
    stored = {"metadata": {"namespace": "team-a", "name": "web", "uid": "uid-web"},
              "spec": {"volumes": POD["spec"]["volumes"], "containers": []},
              "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}

    class Plane(RecordingPlane):
        def request(self, method: str, path: str, body: Any = None, query: Any = None,
                    content_type: str = "application/json") -> tuple[int, Any]:
            if method == "POST" and path.endswith("/pods"):
                self.calls.append((method, path, body))
                return 201, stored
            if method == "GET" and path.endswith("/pods/web"):
                self.calls.append((method, path, body))
                return 200, stored
            return super().request(method, path, body, query, content_type)

    plane = Plane({"/api/v1/pods": {"items": []}}, tmp_path)
    monkeypatch.setattr(verify_observe, "UNSCHEDULABLE_SETTLE_SECONDS", 0.1)
    seen = verify_observe.observe_pod(plane, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "team-a", "name": "web"},
        "spec": {"volumes": POD["spec"]["volumes"], "containers": []}}, timeout=0.5)
    (created,) = plane.sent("POST", "/namespaces/team-a/pods")
    assert created["spec"]["schedulingGates"] == [{"name": STAND_IN_GATE}]
    assert plane.sent("POST", "/persistentvolumeclaims")[0]["metadata"]["name"] == "web-scratch"
    assert plane.sent("PATCH", "/pods/web") == [{"spec": {"schedulingGates": None}}]
    # Still SchedulingGated without gates in the spec: the scheduler has not looked yet, which is no decision.
    assert seen.outcome == "Error" and "no scheduling decision" in seen.message
    assert seen.outcome != Outcome.GATED


class EmptyPlane:
    """An API server that serves every kind and holds one node (``read_back`` lists each)."""

    def request(self, method: str, path: str, body: Any = None, query: Any = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        if path == "/api/v1/nodes":
            return 200, {"items": [{"metadata": {"name": "n1"},
                                    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}]}
        return 200, {"items": []}


def test_the_control_planes_kinds_are_known_even_when_empty_so_a_missing_claim_is_missing() -> None:
    """Found by bench/real_scheduler.py --features volumes: a scenario whose only claim is missing read back no
    PersistentVolumeClaim at all, and the prediction said "not known" and Fits where kube-scheduler said
    'persistentvolumeclaim "never-created" not found'."""
    from webhook.verify.engine import DEFAULT_CONFIG, predict
    from webhook.verify.runner import state_of_plane

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "default", "name": "web"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "never-created"}}]}}
    prediction = predict(state_of_plane(EmptyPlane()), pod, DEFAULT_CONFIG.scheduler)
    assert prediction.outcome == Outcome.UNSCHEDULABLE
    assert 'persistentvolumeclaim "never-created" not found' in prediction.message


def test_a_binding_cycles_nomination_under_the_gated_condition_is_no_preemption(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by bench/real_scheduler.py --features volumes,dra (seed 4: 92, 170, 193): a pod created behind verify's
    gate keeps the API server's PodScheduled=False/SchedulingGated until it is bound; while VolumeBinding's PreBind
    waits for its volume, v1.37 sets nominatedNodeName (the binding cycle's), which was taken for a preemption that
    never evicted anyone (an Error after the timeout) instead of the pod bound to that node."""
    gated_condition = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    waiting = {"metadata": {"namespace": "team-a", "name": "web", "uid": "uid-web"},
               "spec": {"volumes": POD["spec"]["volumes"], "containers": []},
               "status": {"nominatedNodeName": "node-2", "conditions": gated_condition}}
    bound = {**waiting, "spec": {**waiting["spec"], "nodeName": "node-2"}}
    reads = iter([waiting, waiting, waiting])

    class Plane(RecordingPlane):
        def request(self, method: str, path: str, body: Any = None, query: Any = None,
                    content_type: str = "application/json") -> tuple[int, Any]:
            if path.endswith("/pods") and method == "POST":
                return 201, waiting
            if path.endswith("/pods/web") and method == "GET":
                return 200, next(reads, bound)
            return super().request(method, path, body, query, content_type)

    seen = verify_observe.observe_pod(Plane({"/api/v1/pods": {"items": []}}, tmp_path), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "team-a", "name": "web"},
        "spec": {"volumes": POD["spec"]["volumes"], "containers": []}}, timeout=5)
    assert (seen.outcome, seen.node) == (Outcome.FITS, "node-2")
