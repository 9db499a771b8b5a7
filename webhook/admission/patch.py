"""RFC 6902 JSONPatch building for admission responses: ``add`` or ``replace`` chosen by presence."""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

import orjson


class PatchOperation(TypedDict):
    op: Literal["add", "replace", "remove"]
    path: str
    value: NotRequired[object]


def json_pointer(tokens: Sequence[str]) -> str:
    """RFC 6901 pointer for ``tokens``."""
    return _pointer(tuple(tokens))


@functools.lru_cache(maxsize=256)  # the same few paths (spec.priority, the annotation, ...) on every review
def _pointer(tokens: tuple[str, ...]) -> str:
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens)


class JsonPatchBuilder:
    """Builds RFC 6902 operations that set values, choosing ``add`` or ``replace`` by presence.

    ``document`` is a copy-on-write view of the object after the operations so far, so later steps
    see the mutated object and setting an unchanged value produces no operation (idempotent patches).
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document: dict[str, Any] = dict(document)
        self.operations: list[PatchOperation] = []

    def set(self, tokens: Sequence[str], value: object) -> None:
        if not tokens:
            raise ValueError("cannot set the document root")
        parent: dict[str, Any] = self.document
        for depth, token in enumerate(tokens[:-1]):
            child = parent.get(token)
            if not isinstance(child, dict):
                # Missing (or null) parent: create the whole remaining subtree in one operation.
                subtree: object = value
                for inner in reversed(tokens[depth + 1:]):
                    subtree = {inner: subtree}
                op: Literal["add", "replace"] = "replace" if token in parent else "add"
                self.operations.append(PatchOperation(op=op, path=json_pointer(tokens[: depth + 1]), value=subtree))
                parent[token] = subtree
                return
            child = dict(child)  # copy on write: the caller's object is never modified
            parent[token] = child
            parent = child
        last = tokens[-1]
        if last in parent and parent[last] == value and type(parent[last]) is type(value):
            return
        op = "replace" if last in parent else "add"
        self.operations.append(PatchOperation(op=op, path=json_pointer(tokens), value=value))
        parent[last] = value


def encode_patch(operations: Sequence[PatchOperation]) -> str:
    """The base64 of the compact JSON array, as ``AdmissionResponse.patch`` carries it."""
    return base64.b64encode(orjson.dumps(list(operations))).decode()
