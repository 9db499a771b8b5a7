"""Stand-ins for the controllers kube-controller-manager would run for a pod under test (none runs here).

A real cluster creates an ``ephemeral:`` volume's claim and a ResourceClaimTemplate's claim right after the pod,
and its PersistentVolume controller completes the bindings the scheduler's VolumeBinding PreBind starts. Without
them the scheduler waits (VolumeBinding's PreFilter: "waiting for ephemeral volume controller"; DynamicResources'
PreEnqueue keeps the pod out of the queue; PreBind waits for the claim to be fully bound), which no cluster shows.
So ``verify`` does their part, on the pods it creates only. A pod that needs claims made is created with one more
scheduling gate (``STAND_IN_GATE``), removed once its claims exist: the scheduler first sees it as a cluster's
scheduler does after the controllers' few milliseconds (not before, when its first attempt would fail and be
retried after a backoff that the observation would take for the decision).

- ``create_pod_claims`` after the pod is created: the ephemeral volume controller's claim ``<pod>-<volume>``
  (pkg/controller/volume/ephemeral/controller.go ``handleVolume``: the template's spec, the pod as controlling
  owner) and the resourceclaim controller's claim from each template (pkg/controller/resourceclaim/controller.go
  ``handleClaim``: ``<pod>-<claim>-`` generated, annotation ``resource.kubernetes.io/pod-claim-name``, the pod as
  owner, then the pod's ``status.resourceClaimStatuses``).
- ``complete_bindings`` while the pod waits: for each unbound claim of the namespace that the scheduler gave a
  volume (the volume's ``claimRef``) or a node (``volume.kubernetes.io/selected-node``: a volume is provisioned,
  without node affinity, as a CSI provisioner would for any node), the PV controller's side: the claim's
  ``volumeName``, ``pv.kubernetes.io/bind-completed`` and phase Bound (pkg/controller/volume/persistentvolume/
  pv_controller.go ``bindClaimToVolume``), which is what VolumeBinding's ``checkBindings`` waits for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.verify.controlplane import PlaneApi

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
PROVISIONED_SIZE_DEFAULT = "1Gi"
STAND_IN_GATE = "preemptguard.example.com/verify-controllers"


def _owner(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"], "controller": True,
            "blockOwnerDeletion": True}


def pod_needs_controllers(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return bool(spec.get("resourceClaims")) or any(
        "ephemeral" in v or "persistentVolumeClaim" in v for v in spec.get("volumes") or [])


def needs_claims_made(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` has an ephemeral volume or a claim template (a claim a controller makes for it)."""
    spec = pod.get("spec") or {}
    return any("ephemeral" in v for v in spec.get("volumes") or []) or any(
        c.get("resourceClaimTemplateName") for c in spec.get("resourceClaims") or [])


def with_stand_in_gate(pod: Mapping[str, Any]) -> dict[str, Any]:
    spec = dict(pod.get("spec") or {})
    spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": STAND_IN_GATE}]
    return {**pod, "spec": spec}


def create_pod_claims(plane: PlaneApi, pod: Mapping[str, Any]) -> None:
    """The claims the ephemeral volume and resourceclaim controllers create for ``pod`` (as the API returned it)."""
    spec = pod.get("spec") or {}
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    for volume in spec.get("volumes") or []:
        template = (volume.get("ephemeral") or {}).get("volumeClaimTemplate")
        if template is None:
            continue
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {**(template.get("metadata") or {}), "name": f"{name}-{volume['name']}",
                              "namespace": namespace, "ownerReferences": [_owner(pod)]},
                 "spec": template.get("spec") or {}}
        plane.request("POST", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim)
    statuses = []
    for pod_claim in spec.get("resourceClaims") or []:
        template_name = pod_claim.get("resourceClaimTemplateName")
        if not template_name:
            continue
        code, template = plane.request(
            "GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates/{template_name}")
        if code != 200:
            continue  # the controller cannot either: the pod waits, as it would in a cluster
        meta = template.get("metadata") or {}
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"generateName": f"{name}-{pod_claim['name']}-", "namespace": namespace,
                              "labels": meta.get("labels") or {},
                              "annotations": {**(meta.get("annotations") or {}), POD_CLAIM_NAME: pod_claim["name"]},
                              "ownerReferences": [_owner(pod)]},
                 "spec": (template.get("spec") or {}).get("spec") or {}}
        code, made = plane.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", claim)
        if code in (200, 201):
            statuses.append({"name": pod_claim["name"], "resourceClaimName": made["metadata"]["name"]})
    if statuses:
        plane.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                      {"status": {"resourceClaimStatuses": statuses}},
                      content_type="application/merge-patch+json")
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != STAND_IN_GATE]
    plane.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", {"spec": {"schedulingGates": gates or None}},
                  content_type="application/merge-patch+json")


def complete_bindings(plane: PlaneApi, namespace: str) -> None:
    """The PV controller's side of the bindings the scheduler started in ``namespace`` (see the module docstring)."""
    _, listed = plane.request("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims")
    pending = [c for c in (listed or {}).get("items", []) if not (c.get("spec") or {}).get("volumeName")]
    if not pending:
        return
    _, volumes = plane.request("GET", "/api/v1/persistentvolumes")
    by_claim = {((pv["spec"].get("claimRef") or {}).get("uid")): pv for pv in (volumes or {}).get("items", [])
                if (pv.get("spec") or {}).get("claimRef")}
    for claim in pending:
        meta = claim["metadata"]
        pv = by_claim.get(meta["uid"])
        if pv is None and SELECTED_NODE in (meta.get("annotations") or {}):
            pv = _provision(plane, claim)
        if pv is not None:
            _bind(plane, claim, pv)


def _provision(plane: PlaneApi, claim: Mapping[str, Any]) -> dict[str, Any] | None:
    meta, spec = claim["metadata"], claim.get("spec") or {}
    name = f"pvc-{meta['uid']}"
    _, storage_class = plane.request("GET", f"/apis/storage.k8s.io/v1/storageclasses/{spec.get('storageClassName')}")
    driver = (storage_class or {}).get("provisioner") or "provisioner.example.com"
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage") or PROVISIONED_SIZE_DEFAULT
    pv = {"apiVersion": "v1", "kind": "PersistentVolume",
          "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": driver}},
          "spec": {"capacity": {"storage": size}, "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                   "storageClassName": spec.get("storageClassName") or "", "persistentVolumeReclaimPolicy": "Delete",
                   "csi": {"driver": driver, "volumeHandle": name},
                   "claimRef": {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"],
                                "uid": meta["uid"]}}}
    code, made = plane.request("POST", "/api/v1/persistentvolumes", pv)
    return made if code in (200, 201) else None


def _bind(plane: PlaneApi, claim: Mapping[str, Any], pv: Mapping[str, Any]) -> None:
    meta = claim["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}"
    code, _ = plane.request("PATCH", path, {"metadata": {"annotations": {BIND_COMPLETED: "yes"}},
                                            "spec": {"volumeName": pv["metadata"]["name"]}},
                            content_type="application/merge-patch+json")
    if code != 200:
        return
    spec = pv.get("spec") or {}
    plane.request("PATCH", f"{path}/status", {"status": {"phase": "Bound", "accessModes": spec.get("accessModes"),
                                                         "capacity": spec.get("capacity")}},
                  content_type="application/merge-patch+json")
    plane.request("PATCH", f"/api/v1/persistentvolumes/{pv['metadata']['name']}/status",
                  {"status": {"phase": "Bound"}}, content_type="application/merge-patch+json")
