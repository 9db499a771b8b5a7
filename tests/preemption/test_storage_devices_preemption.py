"""Volumes and devices through the whole prediction (#27): which node preemption picks and which pods it evicts
when the pod's volumes or devices decide it, as kube-scheduler v1.37 runs VolumeBinding/VolumeZone (a zonal PV rules
a zone out, UnschedulableAndUnresolvable), VolumeRestrictions (a ReadWriteOncePod claim held by a lower-priority
pod: preemption frees it, so that holder is the victim), NodeVolumeLimits (a node full for attachments) and
DynamicResources (no AddPod/RemovePod: evicting a device holder does not free its device)."""

from __future__ import annotations

from typing import Any

from webhook.cluster.snapshot import ClusterState
from webhook.preemption.preview import preview_objects
from webhook.preemption.results import Outcome

from .clusters import bound_item, cluster, pod_manifest

ZONE = "topology.kubernetes.io/zone"


def _zonal_node(name: str, zone: str, cpu: str = "2") -> str:
    return f"""
- apiVersion: v1
  kind: Node
  metadata: {{name: {name}, labels: {{{ZONE}: {zone}}}}}
  status: {{allocatable: {{cpu: "{cpu}", memory: 8Gi, pods: "10"}}}}
"""


def _bound_claim(name: str, pv: str, zone: str, mode: str = "ReadWriteOnce", driver: str = "pd.csi.example.com") -> str:
    return f"""
- apiVersion: v1
  kind: PersistentVolume
  metadata: {{name: {pv}, labels: {{{ZONE}: {zone}}}}}
  spec:
    capacity: {{storage: 1Gi}}
    accessModes: [{mode}]
    storageClassName: zonal
    csi: {{driver: {driver}, volumeHandle: {pv}}}
    claimRef: {{namespace: team-a, name: {name}}}
    nodeAffinity:
      required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {ZONE}, operator: In, values: [{zone}]}}]}}]}}
  status: {{phase: Bound}}
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {{name: {name}, namespace: team-a, annotations: {{pv.kubernetes.io/bind-completed: "yes"}}}}
  spec: {{accessModes: [{mode}], storageClassName: zonal, volumeName: {pv}, resources: {{requests: {{storage: 1Gi}}}}}}
  status: {{phase: Bound, accessModes: [{mode}], capacity: {{storage: 1Gi}}}}
"""


def _claim_volume(name: str) -> list[dict[str, Any]]:
    return [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]


def _preview(state: ClusterState, pod: dict[str, Any]) -> dict[str, Any]:
    (result,) = preview_objects(state, [pod])["results"]
    return result


def test_a_pod_whose_volume_is_pinned_to_zone_b_preempts_in_zone_b_not_on_the_cheaper_zone_a_node() -> None:
    # zone-a's victim has the lower priority (preemption's first criterion would pick it), but the pod's PV is in
    # zone-b: VolumeZone/VolumeBinding rule zone-a out as UnschedulableAndUnresolvable, so only b1 is a candidate.
    state = cluster(_zonal_node("a1", "zone-a") + _zonal_node("b1", "zone-b")
                    + bound_item("cheap", "a1", cpu="2", priority=1) + bound_item("dear", "b1", cpu="2", priority=10)
                    + _bound_claim("data", "pv-b", "zone-b"))
    result = _preview(state, pod_manifest(cpu="1", volumes=_claim_volume("data")))
    assert result["outcome"] == Outcome.PREEMPTS and result["node"] == "b1"
    assert [v["name"] for v in result["victims"]] == ["dear"] and result["candidateNodes"] == 1
    # The same pod without the volume takes the cheaper victim in zone-a.
    plain = _preview(state, pod_manifest(cpu="1"))
    assert plain["node"] == "a1" and [v["name"] for v in plain["victims"]] == ["cheap"]


def test_a_pod_whose_volume_zone_holds_no_node_stays_pending_and_evicts_nobody() -> None:
    state = cluster(_zonal_node("a1", "zone-a") + bound_item("cheap", "a1", cpu="2", priority=1)
                    + _bound_claim("data", "pv-c", "zone-c"))
    result = _preview(state, pod_manifest(cpu="1", volumes=_claim_volume("data")))
    assert result["outcome"] == Outcome.UNSCHEDULABLE and not result.get("victims")


def test_a_read_write_once_pod_claim_held_by_a_lower_priority_pod_makes_that_holder_the_victim() -> None:
    # Both nodes have CPU to spare; the claim is the only conflict, and preemption frees it by evicting its holder
    # (VolumeRestrictions' AddPod/RemovePod), not some cheaper pod elsewhere.
    holder = bound_item("holder", "b2", cpu="100m", priority=10,
                        spec=", volumes: [{name: d, persistentVolumeClaim: {claimName: excl}}]")
    holder = holder.replace("namespace: batch", "namespace: team-a")
    state = cluster(_zonal_node("b1", "zone-b", cpu="4") + _zonal_node("b2", "zone-b", cpu="4")
                    + bound_item("cheap", "b1", cpu="100m", priority=1) + holder
                    + _bound_claim("excl", "pv-x", "zone-b", mode="ReadWriteOncePod"))
    result = _preview(state, pod_manifest(cpu="1", volumes=_claim_volume("excl")))
    assert result["outcome"] == Outcome.PREEMPTS and result["node"] == "b2"
    assert [(v["namespace"], v["name"]) for v in result["victims"]] == [("team-a", "holder")]


def test_a_node_full_for_csi_attachments_is_full_although_it_has_cpu_to_spare() -> None:
    csinode = """
- apiVersion: storage.k8s.io/v1
  kind: CSINode
  metadata: {name: b1}
  spec: {drivers: [{name: pd.csi.example.com, nodeID: b1, allocatable: {count: 1}}]}
- apiVersion: storage.k8s.io/v1
  kind: CSINode
  metadata: {name: b2}
  spec: {drivers: [{name: pd.csi.example.com, nodeID: b2, allocatable: {count: 1}}]}
"""
    user = bound_item("attached", "b1", cpu="100m", priority=5,
                      spec=", volumes: [{name: d, persistentVolumeClaim: {claimName: other}}]")
    user = user.replace("namespace: batch", "namespace: team-a")
    state = cluster(_zonal_node("b1", "zone-b", cpu="8") + _zonal_node("b2", "zone-b", cpu="2") + csinode
                    + bound_item("busy", "b2", cpu="2", priority=10) + user
                    + _bound_claim("other", "pv-o", "zone-b") + _bound_claim("data", "pv-b", "zone-b"))
    result = _preview(state, pod_manifest(cpu="1", volumes=_claim_volume("data")))
    # b1 has the CPU but its one attachment is used (without NodeVolumeLimits the pod would fit there); evicting
    # the priority-5 pod that holds it frees the attachment, a cheaper victim than b2's priority-10 CPU hog.
    assert result["outcome"] == Outcome.PREEMPTS and result["node"] == "b1"
    assert [v["name"] for v in result["victims"]] == ["attached"]


DRA = """
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: gpu}
  spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: n1-gpus}
  spec:
    driver: gpu.example.com
    nodeName: n1
    pool: {name: n1, generation: 1, resourceSliceCount: 1}
    devices: [{name: gpu-0}]
"""


def _gpu_claim(name: str, allocated_to: str | None = None) -> str:
    status = ""
    if allocated_to:
        status = f"""
  status:
    allocation:
      devices: {{results: [{{request: gpu, driver: gpu.example.com, pool: n1, device: gpu-0}}]}}
      nodeSelector: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, values: [n1]}}]}}]}}
    reservedFor: [{{resource: pods, name: {allocated_to}, uid: uid-{allocated_to}}}]"""
    return f"""
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata: {{name: {name}, namespace: team-a}}
  spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu}}}}]}}}}{status}
"""


def _dra_node() -> str:
    return """
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""


def test_a_pod_whose_claim_a_free_device_can_satisfy_fits() -> None:
    free = cluster(_dra_node() + DRA + _gpu_claim("mine"))
    pod = pod_manifest(cpu="1", resourceClaims=[{"name": "gpu", "resourceClaimName": "mine"}])
    assert _preview(free, pod)["outcome"] == Outcome.FITS


def test_preemption_does_not_free_a_lower_priority_pods_device_as_in_v1_37() -> None:
    holder = bound_item("holder", "n1", cpu="100m", priority=1,
                        spec=', resourceClaims: [{name: gpu, resourceClaimName: theirs}]')
    holder = holder.replace("namespace: batch", "namespace: team-a").replace(
        "metadata: {name: holder,", "metadata: {uid: uid-holder, name: holder,")
    state = cluster(_dra_node() + DRA + _gpu_claim("theirs", allocated_to="holder") + _gpu_claim("mine") + holder)
    pod = pod_manifest(cpu="1", resourceClaims=[{"name": "gpu", "resourceClaimName": "mine"}])
    result = _preview(state, pod)
    # The only device is allocated to a priority-1 pod; v1.37's DynamicResources has no AddPod/RemovePod, so the
    # dry run cannot see the device freed: no candidate, the pod stays pending, nobody is evicted.
    assert result["outcome"] == Outcome.UNSCHEDULABLE and not result.get("victims")


def test_a_missing_claim_makes_the_pod_unschedulable_everywhere() -> None:
    state = cluster(_dra_node() + DRA + bound_item("cheap", "n1", cpu="4", priority=1))
    pod = pod_manifest(cpu="1", resourceClaims=[{"name": "gpu", "resourceClaimName": "nowhere"}])
    result = _preview(state, pod)
    assert result["outcome"] == Outcome.UNSCHEDULABLE and not result.get("victims")
    assert "nowhere" in result["message"]


def test_an_extended_resource_pod_on_a_cluster_serving_dra_is_predicted_like_any_other() -> None:
    """A live cluster lists DeviceClasses (resource.k8s.io is served since v1.34): a pod asking a device plugin's
    extended resource goes through DRAExtendedResource's class lookup (none backs it here), and is predicted as
    NodeResourcesFit alone decides. The lookup's cache once raised TypeError on every such pod."""
    state = cluster("""
- apiVersion: v1
  kind: Node
  metadata: {name: gpu-node}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10", example.com/gpu: "2"}}
""")
    for kind in ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"):
        state.mark_known(kind)
    gpu = {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "team-a"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": gpu}]}}
    fits = _preview(state, pod)
    assert (fits["outcome"], fits["node"]) == (Outcome.FITS, "gpu-node")
    too_many = {"requests": {"example.com/gpu": "3"}, "limits": {"example.com/gpu": "3"}}
    pod["spec"]["containers"][0]["resources"] = too_many
    assert _preview(state, pod)["outcome"] == Outcome.UNSCHEDULABLE
