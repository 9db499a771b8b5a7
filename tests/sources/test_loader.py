"""Snapshot files: List, multi-document YAML, nested Lists, JSON, unknown kinds, and errors that name the place."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cluster.model import Namespace, Node, Pod, PriorityClass
from webhook.errors import InvalidInput, SnapshotError
from webhook.sources.loader import load_snapshot, parse_documents


def _pc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value}


def _pod(name: str, node: str = "n1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"}}


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_kubectl_list(tmp_path: Path) -> None:
    document = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                "items": [_pc("high", 1000), NODE, _pod("a"), _pod("b")]}
    state = load_snapshot(_write(tmp_path, "cluster.yaml", yaml.safe_dump(document)))
    assert set(state.priority_classes) == {"high"}
    assert set(state.pods) == {"ns/a", "ns/b"}
    assert state.node_usage["n1"].milli_cpu == 500


def test_multi_document_stream_with_nested_lists(tmp_path: Path) -> None:
    nested = {"kind": "List", "items": [{"kind": "PodList", "items": [_pod("c")]}, _pod("d")]}
    text = yaml.safe_dump_all([_pc("low", 1), None, NODE, nested, {"kind": "Namespace", "metadata": {"name": "ns"}}])
    objects = parse_documents(text, "stream.yaml")
    assert [type(o) for o in objects] == [PriorityClass, Node, Pod, Pod, Namespace]
    assert {o.name for o in objects if isinstance(o, Pod)} == {"c", "d"}
    assert load_snapshot(_write(tmp_path, "s.yaml", text)).counts()["Pod"] == 2


def test_json_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "cluster.json", json.dumps({"kind": "List", "items": [NODE, _pod("a")]}, indent=2))
    state = load_snapshot(path)
    assert set(state.nodes) == {"n1"}
    assert state.pods["ns/a"].requests.milli_cpu == 250


def test_unknown_kinds_are_ignored_with_a_debug_log(caplog: pytest.LogCaptureFixture) -> None:
    text = yaml.safe_dump_all([{"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}},
                               {"kind": "Deployment", "metadata": {"name": "d"}}, NODE])
    with caplog.at_level(logging.DEBUG, logger="webhook.sources.loader"):
        objects = parse_documents(text, "mixed.yaml")
    assert [type(o) for o in objects] == [Node]
    assert "ConfigMap" in caplog.text and "Deployment" in caplog.text


@pytest.mark.parametrize("as_json", [False, True])
def test_an_optional_kind_the_file_holds_none_of_is_not_known(tmp_path: Path, as_json: bool) -> None:
    """A snapshot taken with an older command (no limitranges, no storage or device kinds) cannot tell "none" from
    "not dumped": every optional kind without an object in the file is unknown; one object makes its kind known."""
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "ns"},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    limit_range = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "ns"},
                   "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]}}
    document = {"apiVersion": "v1", "kind": "List", "items": [_pc("low", 1), NODE, _pod("a"), pvc, limit_range]}
    text = json.dumps(document) if as_json else yaml.safe_dump(document)
    state = load_snapshot(_write(tmp_path, "snapshot.json" if as_json else "snapshot.yaml", text))
    assert state.knows("PersistentVolumeClaim") and state.knows("LimitRange")
    assert state.knows("Pod") and state.knows("Node")
    assert state.unknown_kinds == {"RuntimeClass", "PersistentVolume", "StorageClass", "CSINode", "VolumeAttachment",
                                   "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"}


def test_unquoted_timestamps_stay_strings() -> None:
    text = "kind: Pod\nmetadata: {name: a, namespace: ns}\nstatus: {startTime: 2025-06-02T09:30:00Z}\n"
    (pod,) = parse_documents(text, "t.yaml")
    assert isinstance(pod, Pod) and pod.start_time_ns == 1_748_856_600 * 10**9


def test_empty_file_is_an_empty_cluster(tmp_path: Path) -> None:
    assert load_snapshot(_write(tmp_path, "empty.yaml", "")).counts()["Pod"] == 0


def test_broken_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.yaml", "kind: List\nitems:\n- kind: Pod\n  metadata: {name: [a\n")
    with pytest.raises(SnapshotError) as excinfo:
        load_snapshot(path)
    message = str(excinfo.value)
    assert str(path) in message
    assert "line 4" in message or "line 5" in message
    assert "\n" not in message


def test_broken_document_in_stream_names_document_and_line() -> None:
    text = yaml.safe_dump(NODE) + "---\nkind: Pod\n  bad: indent\n"
    with pytest.raises(SnapshotError, match=r"stream\.yaml: document 1, line \d+"):
        parse_documents(text, "stream.yaml")


def test_wrong_type_names_file_document_and_object(tmp_path: Path) -> None:
    bad = _pod("web-0")
    bad["spec"]["priority"] = "high"
    path = _write(tmp_path, "cluster.yaml", yaml.safe_dump_all([NODE, {"kind": "List", "items": [_pod("a"), bad]}]))
    with pytest.raises(SnapshotError) as excinfo:
        load_snapshot(path)
    message = str(excinfo.value)
    assert str(path) in message
    assert "document 1" in message
    assert "Pod web-0" in message
    assert "spec.priority" in message


def test_bad_quantity_names_the_field() -> None:
    bad = dict(NODE, status={"allocatable": {"cpu": "four"}})
    with pytest.raises(SnapshotError, match=r"document 0 \(Node n1\): status\.allocatable"):
        parse_documents(yaml.safe_dump(bad), "nodes.yaml")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- just\n- a list\n", "document 0: expected a Kubernetes object"),
        ("kind: List\nitems: {a: b}\n", "items must be a list"),
        ("kind: List\nitems: [42]\n", "items[0]: expected a Kubernetes object"),
        ("--- {kind: Namespace, metadata: {name: a}}\n--- plain string\n", "document 1"),
    ],
)
def test_non_objects_are_snapshot_errors(text: str, fragment: str) -> None:
    with pytest.raises(SnapshotError) as excinfo:
        parse_documents(text, "f.yaml")
    assert fragment in str(excinfo.value)
    assert str(excinfo.value).startswith("f.yaml")


def test_missing_or_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="cannot read snapshot"):
        load_snapshot(tmp_path / "nope.yaml")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind")
    with pytest.raises(SnapshotError, match=str(binary)):
        load_snapshot(binary)


def test_snapshot_error_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        parse_documents("[", "x.yaml")


def test_the_documented_snapshot_command_lists_every_kind_the_state_holds() -> None:
    """The command the refusal of a manifest prints (and docs/interfaces.md §1 documents) takes every kind the
    predictor reads from a snapshot, storage and devices included (#27)."""
    from fake_apiserver import BY_KIND

    from webhook.cluster.snapshot import KIND_OF
    from webhook.sources.loader import SNAPSHOT_COMMAND

    listed = set(SNAPSHOT_COMMAND.split()[2].split(","))
    assert {BY_KIND[kind].plural for kind in KIND_OF.values()} <= listed
    assert {"runtimeclasses", "limitranges"} <= listed
    contract = (Path(__file__).resolve().parents[2] / "docs" / "interfaces.md").read_text()
    assert f"`{SNAPSHOT_COMMAND}`" in contract
