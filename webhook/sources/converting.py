"""A snapshot document's API objects into the slim model, with errors that name where they are; used by the
loader and by its conversion worker alike, so both convert and word errors the same way."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from webhook.cluster.model import ClusterObject
from webhook.cluster.reader import object_from_dict
from webhook.errors import InvalidInput, SnapshotError

# The loader's logger: the "ignoring object of kind" lines kept the name operators filter on when they moved here.
log = logging.getLogger("webhook.sources.loader")


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


def convert_all(document: object, where: str, item_where: str, kinds: Counter[str] | None) -> list[ClusterObject]:
    """The supported objects of one document (or one item of a List), counting every object's kind."""
    converted: list[ClusterObject] = []
    for raw in iter_objects(document, item_where):
        if kinds is not None:
            kinds[str(raw.get("kind"))] += 1
        obj = convert_object(raw, where)
        if obj is not None:
            converted.append(obj)
    return converted


def convert_object(raw: Mapping[str, Any], where: str) -> ClusterObject | None:
    try:
        obj = object_from_dict(raw)
    except InvalidInput as exc:
        name = (raw.get("metadata") or {}).get("name") if isinstance(raw.get("metadata"), Mapping) else None
        raise SnapshotError(f"{where} ({raw.get('kind')} {name}): {exc}") from exc
    if obj is None:
        log.debug("%s: ignoring object of kind %r", where, raw.get("kind"))
    return obj
