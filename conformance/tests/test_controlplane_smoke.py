"""The harness itself: the control plane comes up, schedules a pod, and names its release."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from controlplane import ControlPlane, binary_version, kube_bin_dir


def test_kube_apiserver_names_its_release(control_plane: ControlPlane) -> None:
    version = binary_version(control_plane.bin_dir, "kube-apiserver")
    assert version.startswith("Kubernetes v1."), version


def test_the_scheduler_binds_a_pod_to_a_node(control_plane: ControlPlane) -> None:
    control_plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "smoke"}})
    control_plane.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default",
                                                                                    "namespace": "smoke"}})
    control_plane.add_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "smoke-node"},
                         "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                                    "capacity": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                                    "conditions": [{"type": "Ready", "status": "True"}]}})
    control_plane.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": "smoke-class"}, "value": 7})
    control_plane.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "smoke"},
                         "spec": {"priorityClassName": "smoke-class",
                                  "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                  "resources": {"requests": {"cpu": "1"}}}]}})
    deadline = time.monotonic() + 30
    node = None
    while time.monotonic() < deadline and not node:
        _, pod = control_plane.request("GET", "/api/v1/namespaces/smoke/pods/p")
        node = pod["spec"].get("nodeName")
        time.sleep(0.2)
    assert node == "smoke-node"
    assert pod["spec"]["priority"] == 7  # the built-in Priority plugin ran


def test_the_harness_sets_pdb_status_as_the_disruption_controller_would(control_plane: ControlPlane) -> None:
    control_plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": "pdbs"}})
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "pdbs"},
           "spec": {"selector": {"matchLabels": {"app": "x"}}, "maxUnavailable": 1}}
    control_plane.apply(pdb)
    control_plane.set_status(pdb, {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2,
                                   "expectedPods": 2, "observedGeneration": 1})
    _, stored = control_plane.request("GET", "/apis/policy/v1/namespaces/pdbs/poddisruptionbudgets/b")
    assert stored["status"]["disruptionsAllowed"] == 0 and stored["status"]["expectedPods"] == 2


def test_a_port_taken_between_choosing_and_binding_is_chosen_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two control planes starting at once on one machine can pick the same free port: the one that loses the bind
    starts again on new ports instead of failing (or talking to the other one's etcd)."""
    import webhook.verify.controlplane as harness

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        real = harness.free_port
        handed = iter([port])
        monkeypatch.setattr(harness, "free_port", lambda: next(handed, None) or real())
        plane = ControlPlane(tmp_path, kube_bin_dir(), with_scheduler=False)
        try:
            plane.start()
            assert plane.etcd_port != port
            status, _ = plane.request("GET", "/readyz")
            assert status == 200
        finally:
            plane.stop()
