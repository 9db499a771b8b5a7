"""Load a cluster snapshot file: a ``kubectl get ... -o yaml`` List or a multi-document stream."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook.cluster.model import ClusterObject
from webhook.cluster.reader import object_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.errors import InvalidInput, SnapshotError

log = logging.getLogger(__name__)

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """Safe YAML without timestamp resolution: an unquoted time stays a string, as in Kubernetes' YAML-to-JSON."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


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


def _json_documents(text: str) -> list[object] | None:
    """A JSON text (``kubectl get -o json``) as one document, parsed ~40x faster than through YAML;
    None when the text is not strict JSON (then it is read as YAML, which also gives the error messages)."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return [orjson.loads(text)]
    except orjson.JSONDecodeError:
        return None


def _yaml_documents(text: str, source: str) -> list[object]:
    """Every YAML document; a syntax error names the file, the document index and the line."""
    documents: list[object] = []
    try:
        for document in yaml.load_all(text, Loader=_Loader):
            documents.append(document)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SnapshotError(f"{source}: document {len(documents)}{line}: invalid YAML: {problem}") from exc
    return documents


def parse_documents(text: str, source: str, kinds: Counter[str] | None = None) -> list[ClusterObject]:
    """Every supported object in a YAML/JSON text; errors name the source and document index.

    ``kinds``, when given, counts every object's kind, the ignored ones included.
    """
    objects: list[ClusterObject] = []
    documents = _json_documents(text)
    if documents is None:
        documents = _yaml_documents(text, source)
    for index, document in enumerate(documents):
        where = f"{source}: document {index}"
        for raw in iter_objects(document, where):
            if kinds is not None:
                kinds[str(raw.get("kind"))] += 1
            try:
                obj = object_from_dict(raw)
            except InvalidInput as exc:
                name = (raw.get("metadata") or {}).get("name") if isinstance(raw.get("metadata"), Mapping) else None
                raise SnapshotError(f"{where} ({raw.get('kind')} {name}): {exc}") from exc
            if obj is None:
                log.debug("%s: ignoring object of kind %r", where, raw.get("kind"))
                continue
            objects.append(obj)
    return objects


# Kinds a manifest holds and a cluster snapshot (docs/interfaces.md §1) does not.
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "CronJob"})
SNAPSHOT_COMMAND = "kubectl get priorityclasses,nodes,pods,poddisruptionbudgets,resourcequotas,namespaces -A -o yaml"


def load_snapshot(path: str | Path, *, require_cluster: bool = False) -> ClusterState:
    """A ``ClusterState`` holding every supported object of the snapshot file.

    ``require_cluster``: refuse a file that is a manifest (workloads, or pods and no node) rather than a
    cluster, the usual slip of passing the pod to preview as the snapshot.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: cannot read snapshot: {exc}") from exc
    kinds: Counter[str] = Counter()
    state = ClusterState()
    for obj in parse_documents(text, str(path), kinds):
        state.upsert(obj)
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
