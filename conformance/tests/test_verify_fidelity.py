"""A snapshot of a cluster that has lived for a while loads into the real control plane as it was stored, on the
default and on the older release: each failure mode issue #32 found is a case here.

- ``pod rejected: RuntimeClass "gvisor" not found``: pods of a RuntimeClass the snapshot does not carry (a stand-in
  is made from what its pods show, and named in a fidelity note); a class whose overhead changed since its pods
  were created.
- ``the integer value of priority (0) must not be provided in pod spec``: pods from before the default class.
- ``PriorityClass ... is already marked as default``: two globalDefault classes.
- A pod under test in a namespace the snapshot lacks: the real API server's NotFound, which PreemptGuard now
  predicts (it predicted Preempts); in a terminating namespace: Forbidden.
Then the pods under test meet every admission plugin: the lowest default class, LimitRange defaults, the
RuntimeClass's overhead and scheduling."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from releases import default_bin, older_bin

from webhook.verify.engine import DEFAULT_CONFIG, state_from_objects
from webhook.verify.loader import load_cluster, read_back, read_objects
from webhook.verify.runner import run_scenario, start_plane
from webhook.verify.scenarios import single

OVERHEAD = {"cpu": "250m", "memory": "64Mi"}
SANDBOX = {"sandbox.gke.io/runtime": "gvisor"}
SANDBOX_TOLERATION = {"key": "sandbox.gke.io/runtime", "operator": "Equal", "value": "gvisor",
                      "effect": "NoSchedule"}


def _node(name: str, cpu: str, labels: dict[str, str] | None = None, taints: list[Any] | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "20"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints} if taints else {},
            "status": {"allocatable": alloc, "capacity": alloc, "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(namespace: str, name: str, node: str | None, cpu: str, start: str = "2025-05-01T00:00:00Z",
         **spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"0000-{namespace}-{name}",
                     "labels": {"app": name.rsplit("-", 1)[0]}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}], **spec},
        "status": {"phase": "Running", "startTime": start}}
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def lived_in_snapshot() -> list[dict[str, Any]]:
    pc = "scheduling.k8s.io/v1"
    return [
        {"apiVersion": pc, "kind": "PriorityClass", "metadata": {"name": "default-priority"}, "value": 1000,
         "globalDefault": True},
        {"apiVersion": pc, "kind": "PriorityClass", "metadata": {"name": "legacy-default"}, "value": 100,
         "globalDefault": True},
        {"apiVersion": pc, "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100000},
        *({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in ("team-a", "batch", "sandbox")),
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "retired", "deletionTimestamp": "2025-06-01T00:00:00Z"},
         "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Terminating"}},
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
         "overhead": {"podFixed": {"cpu": "500m"}}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "team-a"},
         "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "300m", "memory": "100Mi"}}]}},
        _node("node-1", "4"),
        _node("node-2", "2", SANDBOX, [{"key": "sandbox.gke.io/runtime", "value": "gvisor", "effect": "NoSchedule"}]),
        # Stale priorities: from before any default class (0), and of a class created again with another value.
        _pod("batch", "old-0", "node-1", "1500m", "2025-01-01T00:00:00Z", priority=0),
        _pod("batch", "legacy-0", "node-1", "1", priorityClassName="high", priority=99000),
        # Kata's overhead changed since this pod was created.
        _pod("batch", "vm-0", "node-1", "500m", priorityClassName="high", priority=99000, runtimeClassName="kata",
             overhead={"cpu": "250m"}),
        # gVisor: no RuntimeClass in the snapshot.
        _pod("sandbox", "gvisor-0", "node-2", "500m", priorityClassName="high", priority=100000,
             runtimeClassName="gvisor", overhead=OVERHEAD, nodeSelector=SANDBOX, tolerations=[SANDBOX_TOLERATION]),
        _pod("retired", "leftover-0", "node-1", "500m", priority=100),
        *(_pod("kube-system", f"agent-{n}", n, "100m", priorityClassName="system-node-critical",
               priority=2000001000, tolerations=[{"operator": "Exists"}]) for n in ("node-1", "node-2")),
    ]


@pytest.fixture(params=["default", "older"])
def kube_bin(request: pytest.FixtureRequest) -> Iterator[Path]:
    yield default_bin() if request.param == "default" else older_bin()


def _write(directory: Path, name: str, objects: list[dict[str, Any]]) -> Path:
    import yaml

    path = directory / name
    path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    return path


@pytest.mark.timeout(300)
def test_a_lived_in_snapshot_loads_as_stored_and_its_pods_meet_real_admission(kube_bin: Path, tmp_path: Path) -> None:
    snapshot = _write(tmp_path, "snapshot.yaml", lived_in_snapshot())
    objects = read_objects(snapshot)
    with start_plane(tmp_path / "plane", kube_bin, DEFAULT_CONFIG.scheduler) as plane:
        notes = load_cluster(plane, objects)
        assert len(notes) == 1 and notes[0].startswith("RuntimeClass gvisor is not in the snapshot (1 pod(s) name it)")
        stored = {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in read_back(plane)}
        assert stored["batch/old-0"]["spec"]["priority"] == 0 and stored["batch/legacy-0"]["spec"]["priority"] == 99000
        assert stored["/default-priority"]["globalDefault"] and stored["/legacy-default"]["globalDefault"]
        assert stored["batch/vm-0"]["spec"]["overhead"] == {"cpu": "250m"}
        assert stored["/kata"]["overhead"] == {"podFixed": {"cpu": "500m"}}
        assert stored["/retired"]["status"]["phase"] == "Terminating"
        from_file = state_from_objects(objects, str(snapshot))
        from_plane = state_from_objects(read_back(plane), "the control plane")
        kinds = ("Pod", "Node", "PodDisruptionBudget", "ResourceQuota")
        assert {k: from_plane.counts()[k] for k in kinds} == {k: from_file.counts()[k] for k in kinds}
        # The API server's own system classes besides the snapshot's.
        assert set(from_plane.priority_classes) == {*from_file.priority_classes, "system-node-critical",
                                                    "system-cluster-critical"}

        # What the pods under test meet: the lowest of the two defaults, the LimitRange's default requests, the
        # stand-in RuntimeClass's overhead and scheduling (what its pods carried).
        def created(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                   "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                            "schedulingGates": [{"name": "conformance.preemptguard.io/hold"}], **spec}}
            code, body = plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
            assert code == 201, body
            return dict(body)

        defaulted = created("defaulted", "team-a")
        assert defaulted["spec"]["priority"] == 100 and defaulted["spec"]["priorityClassName"] == "legacy-default"
        assert defaulted["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "300m", "memory": "100Mi"}
        sandboxed = created("sandboxed", "sandbox", runtimeClassName="gvisor")
        assert sandboxed["spec"]["overhead"] == OVERHEAD and sandboxed["spec"]["nodeSelector"] == SANDBOX
        assert SANDBOX_TOLERATION in sandboxed["spec"]["tolerations"]


PREEMPTOR = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "urgent", "namespace": "team-a"},
             "spec": {"priorityClassName": "default-priority",
                      "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                      "resources": {"requests": {"cpu": "1500m", "memory": "128Mi"}}}]}}


@pytest.mark.timeout(300)
def test_pods_under_test_on_a_lived_in_snapshot_agree(kube_bin: Path, tmp_path: Path) -> None:
    """The preemptor evicts the pod from before the default class (its stored priority 0, not today's default)
    and reprieves the terminating namespace's (100); a pod in a missing namespace is NotFound and one in the
    terminating namespace Forbidden, on both sides."""
    snapshot = _write(tmp_path, "snapshot.yaml", lived_in_snapshot())
    missing = {**PREEMPTOR, "metadata": {"name": "lost", "namespace": "team-x"}}
    retired = {**PREEMPTOR, "metadata": {"name": "late", "namespace": "retired"}}
    pods = _write(tmp_path, "pods.yaml", [PREEMPTOR, missing, retired])
    with start_plane(tmp_path / "plane", kube_bin, DEFAULT_CONFIG.scheduler) as plane:
        results = run_scenario(plane, single(snapshot, [pods]), DEFAULT_CONFIG.scheduler, timeout=30)
    seen = {r.pod: (r.observed.outcome, r.observed.node, r.observed.victims, r.comparison.agree) for r in results}
    assert seen["team-a/urgent"] == ("Preempts", "node-1", ("batch/old-0",), True), results
    assert seen["team-x/lost"][0] == "Rejected" and seen["team-x/lost"][3], results
    assert seen["retired/late"][0] == "Rejected" and seen["retired/late"][3], results
    [lost] = [r for r in results if r.pod == "team-x/lost"]
    assert lost.observed.message == lost.predicted.message == 'namespaces "team-x" not found'  # type: ignore[union-attr]
