"""Load a cluster snapshot file: a ``kubectl get ... -o json|yaml`` List or a multi-document YAML stream, plain or
gzip-compressed (docs/interfaces.md §1).

The file is streamed: ``jsonstream`` and ``yamlstream`` hand over each document's ``items`` one by one, each is
converted into the slim model at once (``webhook.cluster.reader``) and dropped, so a 150,000-pod dump never
exists as Python dicts (bench/snapshot.py). Text that starts like JSON is read as strict JSON; when it is not
(a syntax error anywhere), the whole file is read again as YAML, whose errors name the document and the line.
Errors in the objects themselves (a wrong type, a bad quantity) are reported once the whole file has parsed,
so a file with both kinds of error names its syntax error, as when the file was parsed before conversion.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import io
import logging
import os
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import cast

import yaml

from webhook.cluster.model import ClusterObject
from webhook.cluster.sharing import forget_read_values
from webhook.cluster.snapshot import OPTIONAL_KINDS, ClusterState
from webhook.errors import SnapshotError
from webhook.sources.conversion_worker import ConversionWorker, ConversionWorkerFailed, available_cpus
from webhook.sources.converting import convert_all
from webhook.sources.docparts import (
    DOCUMENT,
    ITEM,
    ITEMS,
    NO_ITEMS,
    OFFLOADED,
    ByteStream,
    Offloaded,
    Part,
    TextStream,
)
from webhook.sources.jsonstream import JsonSyntaxError, json_parts
from webhook.sources.yamlstream import yaml_parts

log = logging.getLogger(__name__)

# (bytes of the file read so far, its size)
ProgressFn = Callable[[int, int], None]
# How many items are read between two progress reports.
PROGRESS_EVERY = 1024
# From this size a JSON snapshot is converted on two CPUs when there are two (webhook/sources/conversion_worker.py):
# starting the worker costs about 0.15 s of one CPU, a 1,000-node dump ~110 MB takes ~1 s to convert.
PARALLEL_MIN_BYTES = 32 << 20
_JSON_WHITESPACE = b" \t\n\r"


def _is_list(document: object) -> bool:
    kind = document.get("kind") if isinstance(document, Mapping) else None
    return isinstance(kind, str) and kind.endswith("List")


class _Pending:
    """Items the conversion worker converts, in their place among the streamed objects."""

    __slots__ = ("handle",)

    def __init__(self, handle: object) -> None:
        self.handle = handle


class _Converter:
    """The model objects of a stream of document parts, in file order. The first error in an object is kept
    (``error``; no object is converted after it) for the caller to raise once the whole stream has parsed.
    With a ``worker``, ``offload`` hands it batches of a List's items (webhook/sources/conversion_worker.py)."""

    def __init__(self, source: str, kinds: Counter[str] | None, tick: Callable[[], None] | None,
                 worker: ConversionWorker | None = None) -> None:
        self.source = source
        self.kinds = kinds
        self.tick = tick
        self.worker = worker
        self.error: SnapshotError | None = None
        self.documents = 0
        self._offloading = False  # whether the items read now may go to the worker
        self._items_arrays = 0

    def offload(self, text: str, read_before: int) -> int | None:
        """``jsonstream``'s ``Offload``: the worker's handle for a batch of items, or None to parse it here."""
        if self.worker is None or not self._offloading:
            return None
        return self.worker.offer(f"{self.source}: document {self.documents}", self._items_arrays, read_before, text)

    def objects(self, parts: Iterable[Part]) -> Iterator[ClusterObject]:
        # The streamed items of the current document, their kinds and first error: they count only once the
        # document turns out to be a List (kubectl writes "kind" after "items"). Batches the worker converts are
        # in their place (``_Pending``), all before the first error found here.
        streamed: list[ClusterObject | _Pending] | None = None
        streamed_kinds: Counter[str] = Counter()
        streamed_error: SnapshotError | None = None
        pending: list[object] = []  # the worker's handles for this items array's batches
        for part, index, value in parts:
            where = f"{self.source}: document {self.documents}"
            if part == ITEM:
                if self.tick is not None and not (index or 0) % PROGRESS_EVERY:
                    self.tick()
                if streamed is None or streamed_error is not None or self.error is not None:
                    continue
                try:
                    streamed.extend(convert_all(value, where, f"{where}, items[{index}]", streamed_kinds))
                except SnapshotError as exc:
                    streamed_error = self._placed(exc, value, where, index or 0, pending)
                    self._offloading = False
            elif part == OFFLOADED:
                assert isinstance(value, Offloaded)
                if streamed is not None and streamed_error is None and self.error is None:
                    streamed.append(_Pending(value.handle))
                    pending.append(value.handle)
            elif part == ITEMS:
                streamed, streamed_kinds, streamed_error, pending = [], Counter(), None, []
                self._items_arrays += 1
                self._offloading = self.error is None
            elif part == NO_ITEMS:
                streamed, pending, self._offloading = None, [], False
            elif part == DOCUMENT:
                self.documents += 1
                self._offloading = False
                if streamed is not None and _is_list(value):
                    objects, error = (self._resolved(streamed, streamed_kinds) if pending
                                      else (cast(list[ClusterObject], streamed), None))
                    if self.kinds is not None:
                        self.kinds.update(streamed_kinds)
                    if self.error is None:
                        self.error = error or streamed_error
                        yield from objects
                elif self.error is None:
                    try:
                        yield from convert_all(value, where, where, self.kinds)
                    except SnapshotError as exc:
                        self.error = exc
                streamed, pending = None, []

    def _placed(self, error: SnapshotError, item: object, where: str, read_before: int, pending: list[object]
                ) -> SnapshotError:
        """The error of an item read here, with its index in the items array: after batches of the worker, the
        reader counted only the items it read (jsonstream), so the item is converted again where it stands."""
        if not pending:
            return error
        assert self.worker is not None
        index = read_before + sum(self.worker.result(handle).count for handle in pending)
        try:
            convert_all(item, where, f"{where}, items[{index}]", None)
        except SnapshotError as placed:
            return placed
        return error  # cannot be: converting is a function of the item

    def _resolved(self, streamed: list[ClusterObject | _Pending], kinds: Counter[str]
                  ) -> tuple[list[ClusterObject], SnapshotError | None]:
        """The streamed objects with the worker's in their place, up to the first error among the worker's."""
        assert self.worker is not None
        objects: list[ClusterObject] = []
        for entry in streamed:
            if isinstance(entry, _Pending):
                converted = self.worker.result(entry.handle)
                kinds.update(converted.kinds)
                objects.extend(converted.objects)
                if converted.error is not None:
                    return objects, SnapshotError(converted.error)
            else:
                objects.append(entry)
        return objects, None


def _yaml_objects(converter: _Converter, stream: TextStream) -> Iterator[ClusterObject]:
    """The objects of a YAML stream; a syntax error names the file, the document index and the line."""
    try:
        yield from converter.objects(yaml_parts(stream))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SnapshotError(f"{converter.source}: document {converter.documents}{line}: invalid YAML: {problem}"
                            ) from exc


def _fill(state: ClusterState, converter: _Converter, objects: Iterable[ClusterObject]) -> ClusterState:
    for obj in objects:
        state.upsert(obj)
    if converter.worker is not None:
        converter.worker.finish()  # a batch it could not parse: the serial path decides (conversion_worker.py)
    if converter.error is not None:
        raise converter.error
    return state


def parse_documents(text: str, source: str, kinds: Counter[str] | None = None) -> list[ClusterObject]:
    """Every supported object in a YAML/JSON text; errors name the source and document index.

    ``kinds``, when given, counts every object's kind, the ignored ones included.
    """
    found: list[ClusterObject] = []
    if text.lstrip(" \t\n\r").startswith(("{", "[")):
        converter = _Converter(source, Counter() if kinds is not None else None, None)
        try:
            found = list(converter.objects(json_parts(io.BytesIO(text.encode("utf-8")))))
        except (JsonSyntaxError, UnicodeError):
            pass
        else:
            if converter.error is not None:
                raise converter.error
            if kinds is not None and converter.kinds is not None:
                kinds.update(converter.kinds)
            return found
    converter = _Converter(source, kinds, None)
    found = list(_yaml_objects(converter, io.StringIO(text)))
    if converter.error is not None:
        raise converter.error
    return found


class SnapshotFile:
    """A snapshot file opened for streaming: gzip-compressed or not (by its magic bytes), read from the start
    as often as needed; ``position`` is how far the file has been read (compressed bytes for gzip)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.raw = open(path, "rb")  # noqa: SIM115 (closed by __exit__)
        self.size = os.fstat(self.raw.fileno()).st_size
        self.gzipped = self.raw.read(2) == b"\x1f\x8b"

    def __enter__(self) -> SnapshotFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.raw.close()

    def binary(self) -> ByteStream:
        return self._binary()

    def _binary(self) -> gzip.GzipFile | io.BufferedReader:
        self.raw.seek(0)
        return gzip.GzipFile(fileobj=self.raw, mode="rb") if self.gzipped else self.raw

    def text(self) -> TextStream:
        """Decoded as UTF-8 with universal newlines, as ``Path.read_text`` reads it."""
        return io.TextIOWrapper(self._binary(), encoding="utf-8")

    def position(self) -> int:
        return self.raw.tell()

    def starts_like_json(self) -> bool:
        """Whether the first character that is not JSON whitespace opens an object or an array."""
        stream = self.binary()
        while chunk := stream.read(4096):
            stripped = chunk.lstrip(_JSON_WHITESPACE)
            if stripped:
                return stripped[:1] in (b"{", b"[")
        return False


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """No garbage collection in the body (then as before): loading a cluster creates a million objects and no
    reference cycle, so a collection would only walk the growing state, again and again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_snapshot(snapshot: SnapshotFile, kinds: Counter[str], progress: ProgressFn | None = None,
                  parallel: bool | None = None) -> ClusterState:
    """The ``ClusterState`` of an opened snapshot file, streamed (see the module docstring). ``parallel``: whether
    a conversion worker takes part (by default, for a file of ``PARALLEL_MIN_BYTES`` or more with 2 CPUs)."""
    if parallel is None:
        parallel = snapshot.size >= PARALLEL_MIN_BYTES and available_cpus() >= 2
    with collections_paused():
        state = _read_snapshot(snapshot, kinds, progress, parallel)
    forget_read_values()
    # A file holding no object of an optional kind is a snapshot taken without it, not a cluster without any.
    state.unknown_kinds = {kind for kind in OPTIONAL_KINDS if not kinds[kind]}
    return state


def _read_snapshot(snapshot: SnapshotFile, kinds: Counter[str], progress: ProgressFn | None, parallel: bool
                   ) -> ClusterState:
    source = str(snapshot.path)
    tick = None if progress is None else (lambda: progress(snapshot.position(), snapshot.size))
    if snapshot.starts_like_json():
        state = _read_json_on_two_cpus(snapshot, kinds, tick) if parallel else _read_json(snapshot, kinds, tick, None)
        if state is not None:
            return state
    converter = _Converter(source, kinds, tick)
    return _fill(ClusterState(), converter, _yaml_objects(converter, snapshot.text()))


def _read_json_on_two_cpus(snapshot: SnapshotFile, kinds: Counter[str], tick: Callable[[], None] | None
                           ) -> ClusterState | None:
    """``_read_json`` with a conversion worker; on one CPU when none starts or it fails (conversion_worker.py)."""
    worker = ConversionWorker.start()
    if worker is not None:
        try:
            with worker:
                return _read_json(snapshot, kinds, tick, worker)
        except ConversionWorkerFailed as exc:
            log.info("%s: reading it again on one CPU: %s", snapshot.path, exc)
    return _read_json(snapshot, kinds, tick, None)


def _read_json(snapshot: SnapshotFile, kinds: Counter[str], tick: Callable[[], None] | None,
               worker: ConversionWorker | None) -> ClusterState | None:
    """The state of a strict JSON file, or None when it is not one (``kinds`` untouched then)."""
    converter = _Converter(str(snapshot.path), Counter(), tick, worker)
    offload = None if worker is None else converter.offload
    try:
        state = _fill(ClusterState(), converter, converter.objects(json_parts(snapshot.binary(), offload)))
    except JsonSyntaxError:
        if worker is not None:
            worker.finish()  # first, a batch the worker could not parse: the serial path decides
        return None  # not strict JSON: read as YAML, which also gives the error messages
    assert converter.kinds is not None
    kinds.update(converter.kinds)
    return state


# Kinds a manifest holds and a cluster snapshot (docs/interfaces.md §1) does not.
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "CronJob"})
# Storage and devices (#27) last: a cluster before v1.34 serves no resource.k8s.io/v1, and kubectl refuses the
# whole command for a resource type it does not know, so those four are left out there (docs/interfaces.md §1).
SNAPSHOT_COMMAND = ("kubectl get priorityclasses,nodes,pods,poddisruptionbudgets,resourcequotas,namespaces,"
                    "runtimeclasses,limitranges,persistentvolumes,persistentvolumeclaims,storageclasses,csinodes,"
                    "resourceslices,resourceclaims,deviceclasses,resourceclaimtemplates,volumeattachments -A -o yaml")
READ_ERRORS = (OSError, UnicodeDecodeError, EOFError, zlib.error)


def load_snapshot(path: str | Path, *, require_cluster: bool = False, progress: ProgressFn | None = None,
                  parallel: bool | None = None) -> ClusterState:
    """A ``ClusterState`` holding every supported object of the snapshot file.

    ``require_cluster``: refuse a file that is a manifest (workloads, or pods and no node) rather than a
    cluster, the usual slip of passing the pod to preview as the snapshot. ``progress`` is called now and
    then with the bytes read so far and the file's size; ``parallel`` as ``read_snapshot``'s.
    """
    path = Path(path)
    kinds: Counter[str] = Counter()
    try:
        with SnapshotFile(path) as snapshot:
            state = read_snapshot(snapshot, kinds, progress, parallel)
    except READ_ERRORS as exc:
        raise SnapshotError(f"{path}: cannot read snapshot: {exc}") from exc
    if require_cluster:
        check_cluster_snapshot(state, kinds, path)
    return state


def check_cluster_snapshot(state: ClusterState, kinds: Counter[str], path: Path) -> None:
    """Raise ``SnapshotError`` when the file looks like a manifest, not a cluster."""
    if state.nodes:
        return
    found = sorted(kind for kind in kinds if kind in WORKLOAD_KINDS or kind == "Pod")
    if not found:
        return
    raise SnapshotError(f"{path}: not a cluster snapshot: it holds {', '.join(found)} and no Node (a manifest?);"
                        f" take a snapshot with `{SNAPSHOT_COMMAND}`")
