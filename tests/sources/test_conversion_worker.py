"""The loader's conversion worker (webhook/sources/conversion_worker.py): a snapshot read with it holds exactly
what the loader alone reads, errors name the same item, and whatever goes wrong there ends in the loader's own
reading, never in another answer."""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from webhook.cluster.snapshot import ClusterState
from webhook.errors import SnapshotError
from webhook.sources import conversion_worker, jsonstream, loader
from webhook.sources.conversion_worker import ConversionWorker, available_cpus
from webhook.sources.loader import load_snapshot

FALLBACK = "reading it again on one CPU"


def pod(i: int, cpu: str = "250m") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i:04d}", "namespace": f"team-{i % 3}",
                         "labels": {"app": f"app-{i % 7}", "tier": "web" if i % 2 else "batch"}},
            "spec": {"nodeName": f"n{i % 4}", "priority": 100 * (i % 5), "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}] if i % 3 else [],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": f"{64 + i % 9}Mi"}}}]},
            "status": {"phase": "Running", "startTime": "2025-06-02T09:30:00Z"}}


def node(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": {"zone": f"z{i % 2}"}},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}


def cluster(pods: int = 240) -> dict[str, Any]:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb", "namespace": "team-0"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "app-1"}}}}
    items = [*(node(i) for i in range(4)), *(pod(i) for i in range(pods)), pdb]
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def kubectl_json(document: dict[str, Any]) -> str:
    """As ``kubectl get -o json`` prints it: 4-space indent, sorted keys (Go's json.MarshalIndent of a map)."""
    return json.dumps(document, indent=4, sort_keys=True) + "\n"


def contents(state: ClusterState) -> dict[str, Any]:
    return {name: value for name, value in vars(state).items() if name != "pod_listener"}


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of a few items, so a small file makes dozens of them."""
    monkeypatch.setattr(jsonstream, "BATCH_CHARS", 2048)


@pytest.fixture
def offers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], list[bool]]]:
    """``offers(n)``: the worker takes every n-th batch offered (the loader converts the others) and nothing
    stops it from taking them (in flight); returns the list of what it took, filled as the loader reads."""
    original = ConversionWorker.offer
    taken: list[bool] = []

    def install(every: int) -> list[bool]:
        def offer(self: ConversionWorker, where: str, items_array: int, read_before: int, text: str) -> int | None:
            take = not len(taken) % every
            taken.append(take)
            return original(self, where, items_array, read_before, text) if take else None

        monkeypatch.setattr(conversion_worker, "IN_FLIGHT", 1 << 20)
        monkeypatch.setattr(ConversionWorker, "offer", offer)
        return taken

    yield install


def write(tmp_path: Path, text: str, name: str = "cluster.json") -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    return path


def error_of(path: Path, parallel: bool) -> str:
    with pytest.raises(SnapshotError) as raised:
        load_snapshot(path, require_cluster=True, parallel=parallel)
    return str(raised.value)


# ---- the same state ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cluster.json", "cluster.json.gz"])
@pytest.mark.parametrize("every", [1, 2, 3])
@pytest.mark.parametrize("memo_window", [2, 256])
def test_a_kubectl_dump_reads_the_same_with_the_worker(
        tmp_path: Path, offers: Callable[[int], list[bool]], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, name: str, every: int, memo_window: int) -> None:
    monkeypatch.setattr(conversion_worker, "MEMO_ANSWERS", memo_window)
    path = write(tmp_path, kubectl_json(cluster()), name)
    alone = load_snapshot(path, require_cluster=True, parallel=False)
    taken = offers(every)
    with caplog.at_level(logging.INFO, logger=loader.__name__):
        shared = load_snapshot(path, require_cluster=True, parallel=True)
    assert FALLBACK not in caplog.text
    assert taken.count(True) >= 10 and (every == 1 or taken.count(False) >= 10)
    assert contents(shared) == contents(alone)
    assert len(shared.pods) == 240


def test_label_maps_and_requests_come_back_shared(tmp_path: Path, offers: Callable[[int], list[bool]]) -> None:
    path = write(tmp_path, kubectl_json(cluster()))
    offers(2)
    state = load_snapshot(path, require_cluster=True, parallel=True)
    pods = list(state.pods.values())
    same_labels = [p for p in pods if p.labels == pods[0].labels]
    assert len(same_labels) > 10
    assert len({id(p.labels) for p in same_labels}) == 1  # one map, whichever process converted the pod


# ---- errors: the same message, the same item -----------------------------------------------------------------
BAD_ITEMS: dict[str, tuple[object, str]] = {
    # (what replaces the item, what the error says after the item's place)
    "not an object": (7, ": expected a Kubernetes object, got int"),
    "a List of a non-object": ({"kind": "PodList", "items": ["x"]}, ", items[0]: expected a Kubernetes object"),
}


@pytest.mark.parametrize("every", [1, 2, 3])
@pytest.mark.parametrize("bad", [0, 7, 40, 101, 163, 239])
@pytest.mark.parametrize("what", list(BAD_ITEMS))
def test_an_error_names_the_same_item(tmp_path: Path, offers: Callable[[int], list[bool]], every: int, bad: int,
                                      what: str) -> None:
    document = cluster()
    replacement, said = BAD_ITEMS[what]
    document["items"][4 + bad] = replacement
    path = write(tmp_path, kubectl_json(document))
    alone = error_of(path, parallel=False)
    assert f"document 0, items[{4 + bad}]{said}" in alone
    taken = offers(every)
    assert error_of(path, parallel=True) == alone
    # The worker took part. A bare 7 does not start with "{", so the reader stops batching there (jsonstream): before
    # it, at least the first batch went to the worker; a List item keeps the batches going.
    assert taken[0] and (what == "not an object" or taken.count(True) >= 3)


@pytest.mark.parametrize("every", [1, 2, 3])
@pytest.mark.parametrize("bad", [3, 120, 236])
def test_an_error_in_an_object_is_the_same(tmp_path: Path, offers: Callable[[int], list[bool]], every: int,
                                           bad: int) -> None:
    document = cluster()
    document["items"][4 + bad]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    path = write(tmp_path, kubectl_json(document))
    alone = error_of(path, parallel=False)
    assert f"(Pod p{bad:04d}): spec.containers[0].resources.requests.cpu" in alone
    offers(every)
    assert error_of(path, parallel=True) == alone


@pytest.mark.parametrize("every", [1, 2, 3])
@pytest.mark.parametrize(("first", "second"), [(30, 200), (200, 30 + 200), (5, 6)])
def test_the_first_of_two_errors_is_named(tmp_path: Path, offers: Callable[[int], list[bool]], every: int,
                                          first: int, second: int) -> None:
    document = cluster()
    document["items"][4 + first] = 7
    document["items"][4 + second % 240]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    path = write(tmp_path, kubectl_json(document))
    alone = error_of(path, parallel=False)
    assert (f"items[{4 + first}]: expected" in alone) == (first < second % 240)
    offers(every)
    assert error_of(path, parallel=True) == alone


def test_a_syntax_error_after_batches_is_read_as_yaml_as_alone(tmp_path: Path,
                                                                offers: Callable[[int], list[bool]]) -> None:
    text = kubectl_json(cluster())
    cut = text.rindex('"kind": "List"')
    path = write(tmp_path, text[:cut] + '"kind": List, {' + text[cut + 14:])
    alone = error_of(path, parallel=False)
    assert "invalid YAML" in alone
    offers(2)
    assert error_of(path, parallel=True) == alone


# ---- the loader alone decides whenever the worker cannot ----------------------------------------------------
def dedented(document: dict[str, Any]) -> str:
    """Valid JSON whose items open with a map closed on a line indented as an item's end: a batch bounded there
    is not a run of items, and only parsing can tell."""
    items = []
    for item in document["items"]:
        body = json.dumps(item, indent=4, sort_keys=True).replace("\n", "\n        ")
        items.append('        {\n            "aaa": {"a": "b"\n        },' + body[1:])
    return '{\n    "apiVersion": "v1",\n    "items": [\n' + ",\n".join(items) + '\n    ],\n    "kind": "List"\n}\n'


def test_a_batch_the_worker_cannot_parse_is_read_again_alone(tmp_path: Path, offers: Callable[[int], list[bool]],
                                                             caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, dedented(cluster()))
    alone = load_snapshot(path, require_cluster=True, parallel=False)
    assert len(alone.pods) == 240
    offers(1)
    with caplog.at_level(logging.INFO, logger=loader.__name__):
        shared = load_snapshot(path, require_cluster=True, parallel=True)
    assert f"{FALLBACK}: batch" in caplog.text and "not a JSON array of items" in caplog.text
    assert contents(shared) == contents(alone)


def read_alone_after(tmp_path: Path, caplog: pytest.LogCaptureFixture, why: str) -> None:
    """A dump read with a worker that fails (``why``, logged) holds what the loader alone reads."""
    path = write(tmp_path, kubectl_json(cluster()))
    with caplog.at_level(logging.INFO, logger=loader.__name__):
        shared = load_snapshot(path, require_cluster=True, parallel=True)
    assert f"{FALLBACK}: {why}" in caplog.text
    assert contents(shared) == contents(load_snapshot(path, require_cluster=True, parallel=False))


def test_a_worker_that_dies_leaves_the_load_to_the_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(conversion_worker, "worker_command", lambda: [sys.executable, "-c", "raise SystemExit(3)"])
    read_alone_after(tmp_path, caplog, "the conversion worker exited (3)")


def test_a_worker_killed_halfway_leaves_the_load_to_the_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    original = ConversionWorker.offer
    offered: list[int | None] = []

    def offer(self: ConversionWorker, *args: Any) -> int | None:
        if len(offered) == 5:
            self.process.kill()
            self.process.wait()
        offered.append(original(self, *args))
        return offered[-1]

    monkeypatch.setattr(ConversionWorker, "offer", offer)
    read_alone_after(tmp_path, caplog, "the conversion worker exited (-9)")


def test_a_worker_of_another_webhook_package_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(conversion_worker, "package_root", lambda: "/elsewhere/webhook")
    read_alone_after(tmp_path, caplog, "the worker imported another webhook package")


def test_an_answer_naming_anything_else_is_refused() -> None:
    reader = conversion_worker._Answer()
    reader.bytes = io.BytesIO(pickle.dumps((os.system, ("true",))))
    with pytest.raises(pickle.UnpicklingError, match=r"posix\.system is not part of a conversion worker's answer"):
        conversion_worker._AnswerUnpickler(reader).load()


# ---- when it takes part ------------------------------------------------------------------------------------
def test_a_small_file_or_one_cpu_starts_no_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[bool] = []

    class Spy:
        @staticmethod
        def start() -> None:
            started.append(True)  # and no worker: the loader reads alone

    monkeypatch.setattr(loader, "ConversionWorker", Spy)
    path = write(tmp_path, kubectl_json(cluster(pods=20)))
    load_snapshot(path, require_cluster=True)
    assert started == []
    monkeypatch.setattr(loader, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(loader, "available_cpus", lambda: 1)
    load_snapshot(path, require_cluster=True)
    assert started == []
    monkeypatch.setattr(loader, "available_cpus", lambda: 2)
    load_snapshot(path, require_cluster=True)
    assert started == [True]


@pytest.mark.parametrize(("cpu_max", "expected"), [("max 100000\n", 8), ("150000 100000\n", 2),
                                                   ("50000 100000\n", 1), ("800000 100000\n", 8), ("garbage", 8)])
def test_available_cpus_follow_a_cgroup_quota(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str,
                                              expected: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    (tmp_path / "cpu.max").write_text(cpu_max)
    assert available_cpus(tmp_path / "cpu.max") == expected
    assert available_cpus(tmp_path / "missing") == 8
