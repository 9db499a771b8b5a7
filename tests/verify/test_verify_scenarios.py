"""Scenario discovery and the Pod manifests ``verify`` creates (named as PreemptGuard's expansion names them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook.errors import InvalidInput
from webhook.preemption.workloads import expand_object
from webhook.verify.scenarios import discover, pod_manifests, read_pods

REPO = Path(__file__).resolve().parents[2]
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a", "labels": {"a": "b"},
                                                        "uid": "u", "resourceVersion": "7"},
       "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Running"}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "team-b"},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"priorityClassName": "high",
                                             "containers": [{"name": "c", "image": "x"}]}}}}


def make(directory: Path, name: str, files: tuple[str, ...] = ("snapshot.yaml", "pod.yaml")) -> None:
    (directory / name).mkdir()
    for file in files:
        (directory / name / file).write_text("{}", encoding="utf-8")


def test_discover_takes_subdirectories_with_both_files_in_name_order(tmp_path: Path) -> None:
    for name in ("b", "a", "c-10", "c-9"):
        make(tmp_path, name)
    make(tmp_path, "no-pod", ("snapshot.yaml",))
    make(tmp_path, "no-snapshot", ("pod.yaml",))
    (tmp_path / "stray.yaml").write_text("{}", encoding="utf-8")
    found = discover(tmp_path)
    assert [s.name for s in found] == ["a", "b", "c-10", "c-9"]
    assert found[0].snapshot == tmp_path / "a" / "snapshot.yaml"
    assert found[0].pod_files == (tmp_path / "a" / "pod.yaml",)


def test_discover_refuses_an_empty_folder_and_a_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no scenario"):
        discover(tmp_path)
    (tmp_path / "f").write_text("", encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a directory"):
        discover(tmp_path / "f")


def test_a_pod_is_created_as_written_without_server_fields() -> None:
    [manifest] = pod_manifests(POD)
    assert manifest["metadata"] == {"name": "p", "namespace": "team-a", "labels": {"a": "b"}}
    assert manifest["spec"] == POD["spec"] and "status" not in manifest


def test_workload_replicas_get_the_names_preemptguard_predicts_for() -> None:
    manifests = pod_manifests(DEPLOYMENT)
    names = [f"{m['metadata']['namespace']}/{m['metadata']['name']}" for m in manifests]
    assert names == [p.key for p in expand_object(DEPLOYMENT)] == ["team-b/web-0", "team-b/web-1", "team-b/web-2"]
    assert all(m["metadata"]["labels"] == {"app": "web"} and m["spec"]["priorityClassName"] == "high"
               for m in manifests)


def test_generate_name_is_left_to_the_api_server() -> None:
    [manifest] = pod_manifests({**POD, "metadata": {"generateName": "report-", "namespace": "batch"}})
    assert manifest["metadata"] == {"generateName": "report-", "namespace": "batch"}


def test_lists_and_several_files_keep_their_order(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text(yaml.safe_dump({"kind": "List", "items": [POD, DEPLOYMENT]}), encoding="utf-8")
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(POD | {"metadata": {"name": "q"}}), encoding="utf-8")
    pods = read_pods([tmp_path / "one.yaml", tmp_path / "two.yaml"])
    assert [p["metadata"]["name"] for p in pods] == ["p", "web-0", "web-1", "web-2", "q"]
    assert pods[-1]["metadata"]["namespace"] == "default"


def test_every_example_pod_expands() -> None:
    for path in sorted((REPO / "examples" / "pods").glob("*.yaml")):
        assert read_pods([path]), path
