"""Helpers for the admission tests: the vectors in tests/vectors, snapshots built from them, and a JSONPatch applier."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import yaml

from webhook.sources.source import SnapshotSource

# The suite's own copy of the vectors (tests/vectors/README.md says where each file comes from).
SHARED_VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def load_vectors(name: str) -> list[dict[str, Any]]:
    """The cases of ``tests/vectors/<name>``; a missing file fails the run loudly (never a skip)."""
    path = SHARED_VECTORS / name
    if not path.is_file():
        raise FileNotFoundError(f"test vectors not found at {path} (they are part of the repository: tests/vectors)")
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(cases, list) and cases, f"{path} holds no cases"
    return cases


def write_snapshot(directory: Path, objects: list[dict[str, Any]]) -> Path:
    """A snapshot file (a v1 List, as kubectl prints it) holding ``objects``."""
    path = directory / "snapshot.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
    return path


def snapshot_source(directory: Path, objects: list[dict[str, Any]]) -> SnapshotSource:
    return SnapshotSource(write_snapshot(directory, objects))


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_json_patch(document: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """A minimal RFC 6902 applier (add/replace on object members), strict about replace needing the member."""
    result = copy.deepcopy(document)
    for operation in operations:
        tokens = [_unescape(t) for t in operation["path"].split("/")[1:]]
        parent = result
        for token in tokens[:-1]:
            parent = parent[token]
        assert isinstance(parent, dict), f"patch parent of {operation['path']} is not an object"
        if operation["op"] == "replace":
            assert tokens[-1] in parent, f"replace of missing member {operation['path']}"
        else:
            assert operation["op"] == "add", f"unexpected patch op {operation['op']}"
        parent[tokens[-1]] = operation["value"]
    return result


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch of an AdmissionReview response ([] when there is none)."""
    if "patch" not in response:
        assert "patchType" not in response
        return []
    assert response["patchType"] == "JSONPatch"
    operations = json.loads(base64.b64decode(response["patch"], validate=True))
    assert isinstance(operations, list) and operations, "a patch, when present, is a non-empty list"
    return operations


