"""snapshot_cache.py: a valid cache gives the state and the predictions of a fresh load; any other cache (stale,
of another version, damaged or forged) is refused and the snapshot is loaded instead, never run."""

from __future__ import annotations

import builtins
import hashlib
import logging
import os
import pickle
import shutil
import subprocess
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from webhook.cluster.snapshot import ClusterState
from webhook.errors import SnapshotError
from webhook.preemption.framework.index import index_sync_is_cheap
from webhook.preemption.preview import preview_objects
from webhook.sources import modelpickle, snapshot_cache
from webhook.sources.loader import load_snapshot
from webhook.sources.snapshot_cache import MAGIC, SnapshotCache, cache_path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
POD_FILES = sorted((EXAMPLES / "pods").glob("*.yaml"))
VERSION = "1.2.3"
# The first PriorityClass with this value is "high" (examples/cluster.yaml); the edit keeps the file's size.
HIGH_VALUE, EDITED_HIGH_VALUE = b'"value": 1000000', b'"value": 1000009'


@pytest.fixture(scope="module")
def example_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/cluster.yaml as ``kubectl get -o json`` would print it: JSON loads several times faster than YAML,
    and these tests load the snapshot a hundred times (the YAML path has its own test below)."""
    path = tmp_path_factory.mktemp("example") / "cluster.json"
    document = yaml.load((EXAMPLES / "cluster.yaml").read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return path


@pytest.fixture
def snapshot(tmp_path: Path, example_json: Path) -> Path:
    """The example cluster, copied where its cache may be written."""
    path = tmp_path / "cluster.json"
    shutil.copyfile(example_json, path)
    return path


def pods() -> list[dict[str, Any]]:
    return [obj for path in POD_FILES for obj in yaml.safe_load_all(path.read_text(encoding="utf-8")) if obj]


def predictions(state: ClusterState) -> list[dict[str, Any]]:
    """Each example pod's PreemptionPreview, one pod at a time (as the plugin's -f FILE is)."""
    return [preview_objects(state, [pod]) for pod in pods()]


def contents(state: ClusterState) -> dict[str, Any]:
    """What a ClusterState holds, change stamps included (the index and predictions key on them)."""
    return {name: value for name, value in vars(state).items() if name != "pod_listener"}


def load(path: Path, version: str = VERSION) -> SnapshotCache:
    cache = SnapshotCache(path, version=version)
    cache.load(require_cluster=True)
    return cache


def written(path: Path) -> SnapshotCache:
    """The cache of ``path`` written from a fresh load, after a prediction (as the plugin writes it)."""
    cache = SnapshotCache(path, version=VERSION)
    preview_objects(cache.load(require_cluster=True), pods()[:1])
    assert not cache.hit
    assert cache.save()
    assert cache_path(path).is_file()
    return cache


def header_and_payload(path: Path) -> tuple[dict[str, Any], bytes]:
    data = cache_path(path).read_bytes()
    assert data.startswith(MAGIC)
    line, payload = data[len(MAGIC):].split(b"\n", 1)
    header: dict[str, Any] = orjson.loads(line)
    return header, payload


def write_cache(path: Path, header: dict[str, Any], payload: bytes) -> None:
    cache_path(path).write_bytes(MAGIC + orjson.dumps(header) + b"\n" + payload)


# ---- a valid cache --------------------------------------------------------------------------------------
def test_a_second_load_reads_the_cache_and_predicts_as_a_fresh_load(snapshot: Path) -> None:
    written(snapshot)
    cache = SnapshotCache(snapshot, version=VERSION)
    state = cache.load(require_cluster=True)
    assert cache.hit
    assert index_sync_is_cheap(state)  # the index came with it: nothing to rebuild before predicting
    fresh = load_snapshot(snapshot, require_cluster=True)
    assert contents(state) == contents(fresh)
    assert predictions(state) == predictions(fresh)
    assert {r["outcome"] for p in predictions(state) for r in p["results"]} >= {"Fits", "Preempts", "Unschedulable"}
    assert not cache.save()  # nothing new to write


def test_the_cache_is_next_to_the_snapshot_with_its_permission_bits(snapshot: Path) -> None:
    snapshot.chmod(0o640)
    written(snapshot)
    assert cache_path(snapshot) == snapshot.with_name(".cluster.json.pgcache")
    assert cache_path(snapshot).stat().st_mode & 0o777 == 0o640
    assert [p.name for p in snapshot.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_gzip_snapshot_cached_too(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml.gz"
    subprocess.run(["gzip", "-c", str(EXAMPLES / "cluster.yaml")], stdout=path.open("wb"), check=True)
    written(path)
    cache = SnapshotCache(path, version=VERSION)
    state = cache.load(require_cluster=True)
    assert cache.hit
    assert contents(state) == contents(load_snapshot(path))


# ---- stale: the content or the version differ ----------------------------------------------------------
def edit_in_place(path: Path, old: bytes, new: bytes, *, keep_mtime: bool) -> None:
    before = path.stat()
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    path.write_bytes(data.replace(old, new, 1))
    if keep_mtime:  # as a careless copy tool might: only the content (and the change time) tell
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["new-mtime", "same-mtime"])
def test_one_changed_character_makes_the_cache_stale(snapshot: Path, keep_mtime: bool) -> None:
    written(snapshot)
    edit_in_place(snapshot, HIGH_VALUE, EDITED_HIGH_VALUE, keep_mtime=keep_mtime)
    cache = SnapshotCache(snapshot, version=VERSION)
    state = cache.load(require_cluster=True)
    assert not cache.hit
    assert state.priority_classes["high"].value == 1000009
    assert contents(state) == contents(load_snapshot(snapshot))
    assert cache.save()  # rewritten for the new content
    assert load(snapshot).hit


def test_touching_the_snapshot_keeps_the_cache(snapshot: Path) -> None:
    written(snapshot)
    info = snapshot.stat()
    os.utime(snapshot, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))
    cache = SnapshotCache(snapshot, version=VERSION)
    state = cache.load(require_cluster=True)
    assert cache.hit
    assert predictions(state) == predictions(load_snapshot(snapshot))
    assert cache.save()  # the new identity is recorded, so the next load need not hash the file again
    header, _ = header_and_payload(snapshot)
    assert header["mtime_ns"] == info.st_mtime_ns + 5_000_000_000
    assert load(snapshot).hit


def test_a_copy_with_its_cache_still_hits(snapshot: Path, tmp_path: Path) -> None:
    written(snapshot)
    elsewhere = tmp_path / "copy"
    elsewhere.mkdir()
    shutil.copy2(snapshot, elsewhere / snapshot.name)
    shutil.copy2(cache_path(snapshot), cache_path(elsewhere / snapshot.name))
    assert load(elsewhere / snapshot.name).hit


def test_another_version_misses(snapshot: Path) -> None:
    written(snapshot)
    other = load(snapshot, version="1.2.4")
    assert not other.hit
    assert load(snapshot, version=VERSION).hit  # a miss alone does not overwrite it


def test_another_model_shape_misses(snapshot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written(snapshot)
    monkeypatch.setattr(snapshot_cache, "FINGERPRINT", "0" * 16)
    assert not load(snapshot).hit


# ---- damaged or forged caches are refused, and the snapshot is loaded ------------------------------------
def truncated(data: bytes) -> bytes:
    return data[:len(data) // 2]


def payload_byte_flipped(data: bytes) -> bytes:
    return data[:-100] + bytes([data[-100] ^ 0x01]) + data[-99:]


def header_garbled(data: bytes) -> bytes:
    return MAGIC + b"{not json\n" + data.split(b"\n", 2)[2]


@pytest.mark.parametrize("damage", [truncated, payload_byte_flipped, header_garbled, lambda data: b"",
                                    lambda data: MAGIC, lambda data: b"PK\x03\x04" + data[4:]],
                         ids=["truncated", "payload-byte-flipped", "header-garbled", "empty", "magic-only",
                              "other-magic"])
def test_a_damaged_cache_is_refused_and_rewritten(snapshot: Path, damage: Callable[[bytes], bytes]) -> None:
    written(snapshot)
    cache_path(snapshot).write_bytes(damage(cache_path(snapshot).read_bytes()))
    cache = SnapshotCache(snapshot, version=VERSION)
    state = cache.load(require_cluster=True)
    assert not cache.hit
    assert contents(state) == contents(load_snapshot(snapshot))
    assert cache.save()
    assert load(snapshot).hit


class Call:
    """Pickles as a call of ``function(*args)``: what a forged cache would ask the unpickler to run."""

    def __init__(self, function: Callable[..., object], *args: object) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        return self.function, self.args


def forge(snapshot: Path, value: object) -> None:
    """Replace the cache's payload by ``value`` pickled, with a header that matches it and the snapshot."""
    header, _ = header_and_payload(snapshot)
    payload = pickle.dumps(value, protocol=5)
    write_cache(snapshot, {**header, "payload_bytes": len(payload),
                           "payload_sha256": hashlib.sha256(payload).hexdigest()}, payload)


def forgeries(marker: Path) -> dict[str, object]:
    command = f"touch {marker}"
    return {
        "os.system": Call(os.system, command),
        "subprocess.call": Call(subprocess.call, ["touch", str(marker)]),
        "builtins.exec": Call(builtins.exec, f"open({str(marker)!r}, 'w').close()"),
        "nested in a state": [Call(os.system, command)],
        # Allowed classes called with arguments they refuse, or a value of the wrong type: still refused.
        "Fraction(1, 0)": Call(Fraction, 1, 0),
        "rebuild(ClusterState)": Call(modelpickle.rebuild, ClusterState, ()),
        "ClusterState(1)": Call(ClusterState, 1),
        "a plain dict": {"state": None},
    }


@pytest.mark.parametrize("name", list(forgeries(Path("m"))))
def test_a_forged_cache_never_runs_anything(snapshot: Path, tmp_path: Path, name: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    written(snapshot)
    marker = tmp_path / "ran"
    forge(snapshot, forgeries(marker)[name])
    cache = SnapshotCache(snapshot, version=VERSION)
    with caplog.at_level(logging.WARNING, logger=snapshot_cache.__name__):
        state = cache.load(require_cluster=True)
    assert not marker.exists()
    assert not cache.hit
    assert contents(state) == contents(load_snapshot(snapshot))
    if name in ("os.system", "subprocess.call", "builtins.exec"):
        assert "is not part of a snapshot cache" in caplog.text


# ---- where the cache cannot be written ----------------------------------------------------------------------
@pytest.fixture
def read_only_directory(snapshot: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    directory = snapshot.parent
    directory.chmod(0o555)
    if os.access(directory, os.W_OK):
        # root ignores permission bits: the cache module gets the error the kernel gives everyone else.
        def refusing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if "w" in mode and Path(file).parent == directory:
                raise PermissionError(13, "Permission denied", str(file))
            return builtins.open(file, mode, *args, **kwargs)

        monkeypatch.setattr(snapshot_cache, "open", refusing_open, raising=False)
    try:
        yield directory
    finally:
        directory.chmod(0o755)


def test_an_unwritable_directory_warns_and_predicts(snapshot: Path, read_only_directory: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    cache = SnapshotCache(snapshot, version=VERSION)
    state = cache.load(require_cluster=True)
    got = predictions(state)
    with caplog.at_level(logging.WARNING, logger=snapshot_cache.__name__):
        assert not cache.save()
    assert cache.write_error == f"snapshot cache: cannot write {cache_path(snapshot)}: Permission denied"
    assert cache.write_error in caplog.text
    assert not cache_path(snapshot).exists()
    assert sorted(p.name for p in read_only_directory.iterdir()) == ["cluster.json"]
    assert got == predictions(load_snapshot(snapshot))


# ---- malformed snapshots: the loader's error, cache or not -----------------------------------------------
BROKEN = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: Node\nmetadata:\n  name: [n1\n"


def loader_error(path: Path) -> str:
    with pytest.raises(SnapshotError) as caught:
        load_snapshot(path, require_cluster=True)
    return str(caught.value)


def cache_error(path: Path) -> str:
    with pytest.raises(SnapshotError) as caught:
        SnapshotCache(path, version=VERSION).load(require_cluster=True)
    return str(caught.value)


def test_a_malformed_snapshot_gives_the_loaders_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN, encoding="utf-8")
    message = cache_error(path)
    assert message == loader_error(path)
    assert message.startswith(f"{path}: document 1, line ") and "invalid YAML" in message
    assert "\n" not in message
    assert not cache_path(path).exists()


def test_a_snapshot_broken_after_caching_is_not_served_from_the_cache(snapshot: Path) -> None:
    written(snapshot)
    snapshot.write_text(BROKEN, encoding="utf-8")
    assert cache_error(snapshot) == loader_error(snapshot)


def test_a_manifest_given_as_the_snapshot_is_refused_cache_or_not(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    shutil.copyfile(POD_FILES[0], path)
    assert cache_error(path) == loader_error(path)
    assert "not a cluster snapshot" in loader_error(path)
    cache = SnapshotCache(path, version=VERSION)
    cache.load()  # a caller that accepts any file may cache it; the kinds it held are cached too
    assert cache.save()
    assert cache_error(path) == loader_error(path)


@pytest.mark.parametrize("case", ["chain-runtimeclass-overhead-and-scheduling",
                                  "chain-limitrange-defaults-make-a-pod-preempt", "quota-exceeded-is-rejected"])
def test_the_cache_keeps_what_the_admission_chain_reads_and_what_was_not_known(tmp_path: Path, case: str) -> None:
    """LimitRanges, RuntimeClasses and the kinds a snapshot did not hold come back from the cache as loaded."""
    path = tmp_path / "snapshot.yaml"
    shutil.copy(Path(__file__).resolve().parents[1] / "vectors" / "real_scheduler" / case / "snapshot.yaml", path)
    first = SnapshotCache(path, version=VERSION)
    loaded = first.load(require_cluster=True)
    assert first.save()
    again = SnapshotCache(path, version=VERSION)
    cached = again.load(require_cluster=True)
    assert again.hit
    assert (cached.unknown_kinds, cached.runtime_classes, cached.limit_ranges_by_namespace) == (
        loaded.unknown_kinds, loaded.runtime_classes, loaded.limit_ranges_by_namespace)
    assert cached.unknown_kinds or cached.runtime_classes or cached.limit_ranges_by_namespace
