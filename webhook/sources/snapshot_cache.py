"""``--snapshot-cache``: a snapshot file's loaded model and the predictor's index of it, in a compact binary file
next to the snapshot.

A 5,000-node dump takes seconds to parse, convert and index; the cache restores the ``ClusterState`` and its
``StateIndex`` (index.py) in under a second (the plugin with its cache: 0.88 s, bench/scale.py), ready to predict.
The cache of ``cluster.json`` is ``.cluster.json.pgcache`` in the same directory, written atomically (a temporary
file, then a rename) with the snapshot's permission bits, or skipped with a warning where the directory is not
writable. The plugin writes it after its predictions, so the capacity orderings they built are kept too.

It is used only when its header matches:

- the format version, the PreemptGuard version (the caller's ``webhook.version``), and a fingerprint of the
  classes it holds and their fields, so a changed model or index never reads an old cache, version bump or not;
- the snapshot's size and SHA-256. Its modification and change times (nanoseconds), inode and device are
  recorded too: while they match, the file has not been written since (writing a file moves its change time,
  which no user can set back), so the hash is not read again; when they differ (a touched, copied or rewritten
  file) the file is hashed on another thread while the cache is decoded, and only the same content keeps the
  cache (with the new identity written to it). Any other change makes the cache stale, and it is written again;
- the SHA-256 and length of the payload, checked before a byte of it is decoded.

Why pickle is safe here. The payload is a pickle (protocol 5), because pickle restores the sharing of equal
values (150,000 pods point at a few thousand label maps and request sets) and the index's lists at C speed. It
is decoded only after the checks above, and by an unpickler whose ``find_class`` resolves nothing but the
classes listed in ``_ALLOWED`` (the model's frozen dataclasses, storage and devices included, ``FrozenMap``,
``Fraction``, ``ClusterState`` and its stores, the index's own classes, ``deque`` and ``Counter``) and
``modelpickle.rebuild``, which builds only those model classes. A pickle can only run the callables it names, and every
other name is refused, so no cache file, however crafted, can call ``os.system``, import a module or run code:
the worst a forged cache (written by someone who could as well rewrite the snapshot next to it) can do is
describe a different cluster.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import io
import logging
import os
import stat
import threading
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson

from webhook.cluster.model import FrozenMap
from webhook.cluster.snapshot import ClusterState, NodeUsage
from webhook.cluster.storage_state import DeviceStore, VolumeStore
from webhook.errors import SnapshotError
from webhook.preemption.framework.index import OrderKey, SortedNames, StateIndex, adopt_index, state_index
from webhook.preemption.framework.nodelabels import NodeLabelIndex
from webhook.preemption.framework.summary import NodeSummary
from webhook.sources.loader import (
    READ_ERRORS,
    ProgressFn,
    SnapshotFile,
    check_cluster_snapshot,
    collections_paused,
    read_snapshot,
)
from webhook.sources.modelpickle import MODEL_NAMES, ModelPickler, RestrictedUnpickler, qualified

log = logging.getLogger(__name__)

MAGIC = b"PREEMPTGUARD-SNAPSHOT-CACHE\n"
FORMAT = 3  # 2: model objects rebuilt by modelpickle.rebuild; 3: their trailing defaults left out
# Read in large chunks: the hashing thread then needs the GIL only a few dozen times for 500 MB.
HASH_CHUNK = 32 << 20
MAX_HEADER_BYTES = 1 << 16


_STATE_CLASSES = (FrozenMap, Fraction, ClusterState, NodeUsage, VolumeStore, DeviceStore, StateIndex, NodeSummary,
                  SortedNames, OrderKey, NodeLabelIndex, collections.deque, collections.Counter)
_ALLOWED: dict[tuple[str, str], Any] = {**MODEL_NAMES, **{qualified(cls): cls for cls in _STATE_CLASSES}}


def _fingerprint() -> str:
    """The classes a cache holds and their fields or attributes."""
    shapes = []
    for cls in _ALLOWED.values():
        if dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls))
        else:
            names = tuple(getattr(cls, "__slots__", ()) or getattr(cls, "_fields", ()))
        shapes.append((f"{cls.__module__}.{cls.__qualname__}", names))
    shapes.append(("StateIndex", tuple(sorted(vars(StateIndex(ClusterState()))))))
    shapes.append(("ClusterState", tuple(sorted(vars(ClusterState())))))
    shapes.append(("VolumeStore", tuple(sorted(vars(VolumeStore())))))
    shapes.append(("DeviceStore", tuple(sorted(vars(DeviceStore())))))
    return hashlib.sha256(repr(sorted(shapes)).encode()).hexdigest()[:16]


FINGERPRINT = _fingerprint()


class _Unpickler(RestrictedUnpickler):
    """Resolves the classes of ``_ALLOWED`` and nothing else (see the module docstring)."""

    allowed = _ALLOWED
    what = "a snapshot cache"


def cache_path(snapshot: Path) -> Path:
    return snapshot.with_name(f".{snapshot.name}.pgcache")


class _Hasher(threading.Thread):
    """The SHA-256 of a file, computed on another thread (``hashlib`` and file reads release the GIL)."""

    def __init__(self, path: Path) -> None:
        super().__init__(name="preemptguard-snapshot-hash", daemon=True)
        self.path = path
        self.digest: str | None = None
        self.start()

    def run(self) -> None:
        digest = hashlib.sha256()
        chunk = memoryview(bytearray(HASH_CHUNK))
        try:
            with open(self.path, "rb", buffering=0) as f:
                while size := f.readinto(chunk):
                    digest.update(chunk[:size])
        except OSError:
            return
        self.digest = digest.hexdigest()

    def result(self) -> str | None:
        self.join()
        return self.digest


class SnapshotCache:
    """The cache of one snapshot file: ``load`` reads it when it is valid, else loads the snapshot; ``save`` then
    writes the state and its index as they are (after the first predictions, their capacity orderings too)."""

    def __init__(self, path: str | Path, *, version: str) -> None:
        self.path = Path(path)
        self.file = cache_path(self.path)
        self.version = version
        self.hit = False
        self.write_error: str | None = None  # why the last ``save`` could not write the cache
        self._index: StateIndex | None = None
        self._kinds: Counter[str] = Counter()
        # What the next ``save`` writes: the key and identity of the file read, its hash, and the payload when
        # only the identity changed (a valid cache of a copied or touched file).
        self._header: dict[str, Any] | None = None
        self._payload: bytes | None = None

    def _stat(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(key, identity) of the snapshot file now: the key must match; a matching identity saves the hash."""
        info = self.path.stat()
        key = {"format": FORMAT, "version": self.version, "fingerprint": FINGERPRINT, "size": info.st_size}
        identity = {"mtime_ns": info.st_mtime_ns, "ctime_ns": info.st_ctime_ns, "inode": info.st_ino,
                    "device": info.st_dev}
        return key, identity

    def load(self, *, require_cluster: bool = False, progress: ProgressFn | None = None) -> ClusterState:
        """The snapshot's state (its index ready when the cache was valid); errors as ``load_snapshot``'s."""
        try:
            key, identity = self._stat()
            index = self._read(key, identity)
            if index is None:
                index = self._load_snapshot(key, identity, progress)
        except READ_ERRORS as exc:
            raise SnapshotError(f"{self.path}: cannot read snapshot: {exc}") from exc
        self._index = index
        if require_cluster:
            check_cluster_snapshot(index.state, self._kinds, self.path)
        return index.state

    def _read(self, key: dict[str, Any], identity: dict[str, Any]) -> StateIndex | None:
        try:
            with open(self.file, "rb") as f:
                if f.read(len(MAGIC)) != MAGIC:
                    return None
                header = orjson.loads(f.readline(MAX_HEADER_BYTES))
                if not isinstance(header, dict) or any(header.get(k) != v for k, v in key.items()):
                    return None
                # The file may have been touched, copied or rewritten since: then only its hash can tell.
                untouched = all(header.get(k) == v for k, v in identity.items())
                hasher = None if untouched else _Hasher(self.path)
                payload = f.read(int(header["payload_bytes"]) + 1)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if len(payload) != header["payload_bytes"] or hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
            return None
        index = _decode(payload)
        if index is None or (hasher is not None and hasher.result() != header.get("sha256")):
            return None
        adopt_index(index)
        self.hit = True
        self._kinds = Counter(header.get("kinds") or {})
        if hasher is not None and self._stat() == (key, identity):  # the same content: record the new identity
            self._header, self._payload = {**header, **identity}, payload
        return index

    def _load_snapshot(self, key: dict[str, Any], identity: dict[str, Any], progress: ProgressFn | None
                       ) -> StateIndex:
        hasher = _Hasher(self.path)
        kinds: Counter[str] = Counter()
        with SnapshotFile(self.path) as snapshot:
            state = read_snapshot(snapshot, kinds, progress)
        digest = hasher.result()
        if digest is not None and self._stat() == (key, identity):  # else replaced meanwhile: not what was read
            self._header = {**key, **identity, "sha256": digest, "kinds": dict(kinds)}
        self._kinds = kinds
        return state_index(state)

    def save(self) -> bool:
        """Write the cache when the load did not read it, or read it for a file with a new identity; False (with a
        warning when it could not be written) otherwise."""
        index, header, payload = self._index, self._header, self._payload
        if index is None or header is None:
            return False
        if payload is None:
            buffer = io.BytesIO()
            with index.lock:
                index.sync()
                ModelPickler(buffer, protocol=5).dump(index)
            payload = buffer.getvalue()
            header = {**header, "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest()}
        temporary = self.file.with_name(f"{self.file.name}.{os.getpid()}.tmp")
        try:
            with open(temporary, "wb") as f:
                os.chmod(temporary, stat.S_IMODE(self.path.stat().st_mode) & 0o666)
                f.write(MAGIC + orjson.dumps(header) + b"\n")
                f.write(payload)
            os.replace(temporary, self.file)
        except OSError as exc:
            self.write_error = f"snapshot cache: cannot write {self.file}: {exc.strerror or exc}"
            log.warning("%s", self.write_error)
            temporary.unlink(missing_ok=True)
            return False
        finally:
            self._header = self._payload = None
        return True


def _decode(payload: bytes) -> StateIndex | None:
    try:
        with collections_paused():
            index = _Unpickler(io.BytesIO(payload)).load()
    except Exception as exc:  # an allowed class called with forged arguments may raise anything
        log.warning("snapshot cache: cannot decode it (%s: %s); loading the snapshot", type(exc).__name__, exc)
        return None
    if type(index) is not StateIndex or type(index.state) is not ClusterState:
        return None
    return index
