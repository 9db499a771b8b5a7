"""How ``verify`` writes a snapshot into the API server, held against a recording stand-in for the plane: the
calls a pending, a nominated, a bound and a terminating pod need, and the stand-ins read back away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from webhook.verify import loader
from webhook.verify.observe import ALREADY_DELETING, VICTIM_COUNT


class RecordingPlane:
    """``request`` as ``ControlPlane.request``: records each call and answers like an accepting API server."""

    def __init__(self, lists: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.calls: list[tuple[str, str, Any, dict[str, Any]]] = []
        self.lists = lists or {}
        self.scheduler_log = Path("/nonexistent")

    def request(self, method: str, path: str, body: object = None, **options: Any) -> tuple[int, Any]:
        self.calls.append((method, path, body, options))
        if method == "GET":
            return 200, {"items": self.lists.get(path, [])}
        return (201 if method == "POST" else 200), body


def pod(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "uid": "1", "resourceVersion": "9",
                     "creationTimestamp": "2025-01-01T00:00:00Z", "finalizers": ["batch.kubernetes.io/job-tracking"]},
        "spec": {"containers": [{"name": "c", "image": "x"}], "terminationGracePeriodSeconds": 45},
        "status": {"phase": "Pending"},
    }
    for key, value in changes.items():
        base[key] = {**base[key], **value}
    return base


def test_a_bound_pod_is_created_bound_and_its_status_written_without_a_nomination() -> None:
    plane = RecordingPlane()
    loader._load_pod(plane, pod(spec={"nodeName": "n1"},  # type: ignore[arg-type]
                                status={"phase": "Running", "startTime": "2025-01-01T00:00:01Z",
                                        "nominatedNodeName": "n1"}))
    (post, path, created, _), (patch, status_path, status, options) = plane.calls
    assert (post, path) == ("POST", "/api/v1/namespaces/team-a/pods")
    assert created["metadata"] == {"name": "p", "namespace": "team-a"}  # server fields and finalizers dropped
    assert created["spec"]["nodeName"] == "n1" and "schedulingGates" not in created["spec"]
    assert "status" not in created
    assert (patch, status_path) == ("PATCH", "/api/v1/namespaces/team-a/pods/p/status")
    assert status == {"status": {"phase": "Running", "startTime": "2025-01-01T00:00:01Z"}}
    assert options["content_type"] == "application/merge-patch+json"


def test_a_pending_pod_is_held_by_a_gate_and_keeps_its_nomination() -> None:
    plane = RecordingPlane()
    loader._load_pod(plane, pod(spec={"schedulingGates": [{"name": "theirs"}]},  # type: ignore[arg-type]
                                status={"nominatedNodeName": "n2"}))
    created, status = plane.calls[0][2], plane.calls[1][2]
    assert created["spec"]["schedulingGates"] == [{"name": "theirs"}, {"name": loader.HOLD}]
    assert status == {"status": {"phase": "Pending", "nominatedNodeName": "n2"}}


def test_a_terminating_pod_is_held_by_a_finalizer_and_deleted_with_its_grace_period() -> None:
    plane = RecordingPlane()
    loader._load_pod(plane, pod(metadata={"deletionTimestamp": "2025-01-01T00:01:00Z"},  # type: ignore[arg-type]
                                spec={"nodeName": "n1"}, status={"phase": "Running"}))
    created = plane.calls[0][2]
    assert created["metadata"]["finalizers"] == [loader.HOLD] and "deletionTimestamp" not in created["metadata"]
    method, path, options, _ = plane.calls[-1]
    assert (method, path) == ("DELETE", "/api/v1/namespaces/team-a/pods/p")
    assert options["gracePeriodSeconds"] == 45


def test_read_back_strips_the_stand_ins_and_the_probe() -> None:
    held = pod(metadata={"finalizers": [loader.HOLD]}, spec={"schedulingGates": [{"name": loader.HOLD}]})
    probe = pod(metadata={"name": loader.PROBE_PREFIX + "x"})
    plane = RecordingPlane({"/api/v1/pods": [held, probe]})
    [read] = loader.read_back(plane)  # type: ignore[arg-type]
    assert read["kind"] == "Pod" and read["apiVersion"] == "v1"
    assert read["metadata"]["finalizers"] is None and read["spec"]["schedulingGates"] is None


def test_read_objects_keeps_times_as_strings_and_flattens_lists(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "kind: List\nitems:\n- kind: Pod\n  metadata: {name: a, deletionTimestamp: 2025-06-02T09:30:41Z}\n"
        "---\nkind: Node\nmetadata: {name: n}\n", encoding="utf-8")
    objects = loader.read_objects(tmp_path / "s.yaml")
    assert [o["kind"] for o in objects] == ["Pod", "Node"]
    assert objects[0]["metadata"]["deletionTimestamp"] == "2025-06-02T09:30:41Z"


def test_an_unreadable_snapshot_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("kind: [", encoding="utf-8")
    with pytest.raises(loader.SnapshotError, match=r"s\.yaml"):
        loader.read_objects(tmp_path / "s.yaml")


def test_the_scheduler_log_and_message_are_read_as_upstream_writes_them() -> None:
    # pkg/scheduler/framework/preemption/executor.go (V(2)) and preemption.go (the PostFilter status).
    line = ('I1124 22:13:07.030346    2213 executor.go:205] "Victim Pod is already being deleted, skipping the API call'
            ' for it" preemptor="team-a/web-0" node="n1" victim="batch/old"')
    assert ALREADY_DELETING.findall(line) == [("team-a/web-0", "batch/old")]
    message = "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node " \
              "n1, preempting 2 victims"
    match = VICTIM_COUNT.search(message)
    assert match is not None and match.group(1) == "2"
