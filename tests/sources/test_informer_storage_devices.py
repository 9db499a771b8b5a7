"""Live mode's storage and device kinds (#27): the informers list and watch PersistentVolumes, claims,
StorageClasses, CSINodes, VolumeAttachments, DeviceClasses, ResourceSlices, ResourceClaims and their templates; a
cluster that does not serve resource.k8s.io/v1 (before v1.34), or a ClusterRole that does not grant a kind, leaves
that kind "not known" (and the predictions say so) instead of keeping the server unready or stale."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer, seed_cluster, wait_for, wait_until_consistent

from webhook.cluster.model import Pod
from webhook.cluster.reader import pod_from_dict
from webhook.preemption.simulate import predict_pods
from webhook.sources.informer import InformerSettings
from webhook.sources.kube_source import KubernetesSource

FAST = InformerSettings(page_size=2, watch_timeout_seconds=30, backoff_base_seconds=0.01, backoff_cap_seconds=0.1,
                        connect_timeout_seconds=1.0, request_timeout_seconds=5.0, watch_read_slack_seconds=5.0)
TOKEN = "a-token-for-the-fake-apiserver"

DRA_KINDS = {"DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"}
STORAGE_KINDS = {"PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode", "VolumeAttachment"}


def _pv(name: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "zonal",
                     "csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": name},
                     "claimRef": {"namespace": "team-a", "name": "data"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}},
            "status": {"phase": "Bound"}}


def _pvc() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "team-a"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "zonal", "volumeName": "pv-b",
                     "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"}}


def _device_class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}


def _claiming_pod() -> Pod:
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "team-a"},
                          "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                                   "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}})


async def _source(server: FakeApiServer, tmp_path: Path) -> KubernetesSource:
    source = KubernetesSource(kubeconfig=str(server.write_kubeconfig(tmp_path)), context="fake", settings=FAST)
    await source.start()
    assert await source.wait_until_ready(timeout=5), source.readiness_reason()
    return source


@pytest.fixture
async def started() -> AsyncIterator[list[KubernetesSource]]:
    sources: list[KubernetesSource] = []
    yield sources
    for source in sources:
        await source.stop()


async def test_storage_and_device_kinds_are_listed_and_watched(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    state = synced_source.state
    assert all(state.knows(kind) for kind in STORAGE_KINDS | DRA_KINDS)  # listed, even empty: none, not "not known"
    fake_api.create(_pv("pv-b", "zone-b"))
    fake_api.create(_pvc())
    fake_api.create(_device_class())
    await wait_until_consistent(fake_api, state)
    assert state.volumes.pvs["pv-b"].name == "pv-b" and "team-a/data" in state.volumes.pvcs
    assert "gpu" in state.devices.device_classes
    fake_api.delete("PersistentVolume", "pv-b")
    await wait_until_consistent(fake_api, state)
    assert "pv-b" not in state.volumes.pvs


@pytest.mark.parametrize("refusal", ["not served", "forbidden"])
async def test_a_kind_the_cluster_does_not_serve_or_grant_is_not_known_and_said_so(
        refusal: str, tmp_path: Path, started: list[KubernetesSource]) -> None:
    arguments: dict[str, Any] = ({"not_served": frozenset({"resource.k8s.io/v1"})} if refusal == "not served" else
                                 {"forbidden": frozenset({"deviceclasses", "resourceslices", "resourceclaims",
                                                          "resourceclaimtemplates"})})
    async with FakeApiServer(token=TOKEN, **arguments) as server:
        seed_cluster(server)
        source = await _source(server, tmp_path)
        started.append(source)
        state = source.state
        assert source.is_ready() and source.readiness_reason() == ""
        assert state.unknown_kinds == DRA_KINDS
        await wait_for(lambda: source.staleness_seconds() < 1.0, what="not stale")
        result, = predict_pods(state, [_claiming_pod()])
        assert "Not known" in result.message and "DynamicResources" in result.message


async def test_without_the_device_kinds_a_claiming_pod_is_not_known_but_with_them_its_missing_claim_blocks(
        synced_source: KubernetesSource) -> None:
    # Listed (known) and no such claim: upstream's PreFilter refuses the pod (UnschedulableAndUnresolvable).
    result, = predict_pods(synced_source.state, [_claiming_pod()])
    assert result.outcome.value != "Fits" and "gpu-claim" in result.message
