"""The parts every JSON schema of a Kubernetes object here shares: its envelope and its metadata."""

from __future__ import annotations

from typing import Any

STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
        "namespace": {"type": "string"},
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
    },
    "additionalProperties": False,
}


def resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The schema of an object of ``kind``: exactly apiVersion, kind, metadata and ``spec``."""
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {"apiVersion": {"const": api_version}, "kind": {"const": kind}, "metadata": METADATA,
                       "spec": spec},
        "additionalProperties": False,
    }
