"""What a snapshot's load leaves behind besides the state: the reader's caches are emptied once it is read."""

from __future__ import annotations

import json
from pathlib import Path

from webhook.cluster import reader_constraints, resources, sharing
from webhook.cluster.reader import state_pod_from_dict
from webhook.sources.loader import load_snapshot


def snapshot(path: Path, pods: int = 50) -> Path:
    items: list[dict[str, object]] = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                       "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}]
    items += [{"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"p{i}", "namespace": "ns", "labels": {"app": f"a{i % 7}"}},
               "spec": {"nodeName": "n1",
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{i + 1}m"}}}]},
               "status": {"phase": "Running"}} for i in range(pods)]
    path.write_text(json.dumps({"apiVersion": "v1", "items": items, "kind": "List"}, indent=4))
    return path


def test_the_readers_caches_are_empty_after_a_load(tmp_path: Path) -> None:
    state = load_snapshot(snapshot(tmp_path / "cluster.json"), require_cluster=True)
    assert len(state.pods) == 50
    assert len(sharing.SHARED_VALUES) == 0
    assert len(resources._resources_by_units) == 0 and len(reader_constraints._labels_by_items) == 0


def test_forgetting_read_values_keeps_what_is_read_next_equal(tmp_path: Path) -> None:
    state = load_snapshot(snapshot(tmp_path / "cluster.json"))
    again = load_snapshot(tmp_path / "cluster.json")
    assert again.pods == state.pods and again.nodes == state.nodes
    raw = {"metadata": {"name": "p1", "namespace": "ns", "labels": {"app": "a1"}},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2m"}}}]},
           "status": {"phase": "Running"}}
    assert state_pod_from_dict(raw) == state.pods["ns/p1"]


def test_caches_that_are_gone_are_not_kept_for_forgetting() -> None:
    cache = sharing.BoundedCache[str, int](4)
    cache.remember("a", 1)
    assert any(c is cache for c in sharing._EVERY_CACHE.values())
    sharing.forget_read_values()
    assert not cache
    key = id(cache)
    del cache
    assert key not in sharing._EVERY_CACHE
