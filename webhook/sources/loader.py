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
from typing import Any

import yaml

from webhook.cluster.model import ClusterObject
from webhook.cluster.reader import object_from_dict
from webhook.cluster.sharing import forget_read_values
from webhook.cluster.snapshot import OPTIONAL_KINDS, ClusterState
from webhook.errors import InvalidInput, SnapshotError
from webhook.sources.docparts import DOCUMENT, ITEM, ITEMS, NO_ITEMS, ByteStream, Part, TextStream
from webhook.sources.jsonstream import JsonSyntaxError, json_parts
from webhook.sources.yamlstream import yaml_parts

log = logging.getLogger(__name__)

# (bytes of the file read so far, its size)
ProgressFn = Callable[[int, int], None]
# How many items are read between two progress reports.
PROGRESS_EVERY = 1024
_JSON_WHITESPACE = b" \t\n\r"


def iter_objects(document: object, where: str) -> Iterator[Mapping[str, Any]]:
    """The API objects of one YAML document, flattening ``List`` kinds (nested too)."""
    if document is None:
        return
    if not isinstance(document, Mapping):
        raise SnapshotError(f"{where}: expected a Kubernetes object, got {type(document).__name__}")
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in document:
        items = document.get("items") or []
        if not isinstance(items, list):
            raise SnapshotError(f"{where}: items must be a list")
        for i, item in enumerate(items):
            yield from iter_objects(item, f"{where}, items[{i}]")
        return
    yield document


def _is_list(document: object) -> bool:
    kind = document.get("kind") if isinstance(document, Mapping) else None
    return isinstance(kind, str) and kind.endswith("List")


class _Converter:
    """The model objects of a stream of document parts, in file order. The first error in an object is kept
    (``error``; no object is converted after it) for the caller to raise once the whole stream has parsed."""

    def __init__(self, source: str, kinds: Counter[str] | None, tick: Callable[[], None] | None) -> None:
        self.source = source
        self.kinds = kinds
        self.tick = tick
        self.error: SnapshotError | None = None
        self.documents = 0

    def objects(self, parts: Iterable[Part]) -> Iterator[ClusterObject]:
        # The streamed items of the current document, their kinds and first error: they count only once the
        # document turns out to be a List (kubectl writes "kind" after "items").
        streamed: list[ClusterObject] | None = None
        streamed_kinds: Counter[str] = Counter()
        streamed_error: SnapshotError | None = None
        for part, index, value in parts:
            where = f"{self.source}: document {self.documents}"
            if part == ITEM:
                if self.tick is not None and not (index or 0) % PROGRESS_EVERY:
                    self.tick()
                if streamed is None or streamed_error is not None or self.error is not None:
                    continue
                try:
                    streamed.extend(self._convert_all(value, where, f"{where}, items[{index}]", streamed_kinds))
                except SnapshotError as exc:
                    streamed_error = exc
            elif part == ITEMS:
                streamed, streamed_kinds, streamed_error = [], Counter(), None
            elif part == NO_ITEMS:
                streamed = None
            elif part == DOCUMENT:
                self.documents += 1
                if streamed is not None and _is_list(value):
                    if self.kinds is not None:
                        self.kinds.update(streamed_kinds)
                    if self.error is None:
                        self.error = streamed_error
                        yield from streamed
                elif self.error is None:
                    try:
                        yield from self._convert_all(value, where, where, self.kinds)
                    except SnapshotError as exc:
                        self.error = exc
                streamed = None

    @staticmethod
    def _convert_all(document: object, where: str, item_where: str, kinds: Counter[str] | None
                     ) -> list[ClusterObject]:
        converted: list[ClusterObject] = []
        for raw in iter_objects(document, item_where):
            if kinds is not None:
                kinds[str(raw.get("kind"))] += 1
            obj = _convert(raw, where)
            if obj is not None:
                converted.append(obj)
        return converted


def _convert(raw: Mapping[str, Any], where: str) -> ClusterObject | None:
    try:
        obj = object_from_dict(raw)
    except InvalidInput as exc:
        name = (raw.get("metadata") or {}).get("name") if isinstance(raw.get("metadata"), Mapping) else None
        raise SnapshotError(f"{where} ({raw.get('kind')} {name}): {exc}") from exc
    if obj is None:
        log.debug("%s: ignoring object of kind %r", where, raw.get("kind"))
    return obj


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


def read_snapshot(snapshot: SnapshotFile, kinds: Counter[str], progress: ProgressFn | None = None) -> ClusterState:
    """The ``ClusterState`` of an opened snapshot file, streamed (see the module docstring)."""
    with collections_paused():
        state = _read_snapshot(snapshot, kinds, progress)
    forget_read_values()
    # A file holding no object of an optional kind is a snapshot taken without it, not a cluster without any.
    state.unknown_kinds = {kind for kind in OPTIONAL_KINDS if not kinds[kind]}
    return state


def _read_snapshot(snapshot: SnapshotFile, kinds: Counter[str], progress: ProgressFn | None) -> ClusterState:
    source = str(snapshot.path)
    tick = None if progress is None else (lambda: progress(snapshot.position(), snapshot.size))
    if snapshot.starts_like_json():
        converter = _Converter(source, Counter(), tick)
        try:
            state = _fill(ClusterState(), converter, converter.objects(json_parts(snapshot.binary())))
        except JsonSyntaxError:
            pass  # not strict JSON: read as YAML below, which also gives the error messages
        else:
            assert converter.kinds is not None
            kinds.update(converter.kinds)
            return state
    converter = _Converter(source, kinds, tick)
    return _fill(ClusterState(), converter, _yaml_objects(converter, snapshot.text()))


# Kinds a manifest holds and a cluster snapshot (docs/interfaces.md §1) does not.
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "CronJob"})
# Storage and devices (#27) last: a cluster before v1.34 serves no resource.k8s.io/v1, and kubectl refuses the
# whole command for a resource type it does not know, so those four are left out there (docs/interfaces.md §1).
SNAPSHOT_COMMAND = ("kubectl get priorityclasses,nodes,pods,poddisruptionbudgets,resourcequotas,namespaces,"
                    "runtimeclasses,limitranges,persistentvolumes,persistentvolumeclaims,storageclasses,csinodes,"
                    "resourceslices,resourceclaims,deviceclasses,resourceclaimtemplates,volumeattachments -A -o yaml")
READ_ERRORS = (OSError, UnicodeDecodeError, EOFError, zlib.error)


def load_snapshot(path: str | Path, *, require_cluster: bool = False,
                  progress: ProgressFn | None = None) -> ClusterState:
    """A ``ClusterState`` holding every supported object of the snapshot file.

    ``require_cluster``: refuse a file that is a manifest (workloads, or pods and no node) rather than a
    cluster, the usual slip of passing the pod to preview as the snapshot. ``progress`` is called now and
    then with the bytes read so far and the file's size.
    """
    path = Path(path)
    kinds: Counter[str] = Counter()
    try:
        with SnapshotFile(path) as snapshot:
            state = read_snapshot(snapshot, kinds, progress)
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
