"""krew's Plugin manifest (``krew.googlecontainertools.github.com/v1alpha2``) as a JSON schema, written from
krew's documented manifest fields and the rules of its validation (``pkg/index/validation``): required
``shortDescription``, a ``v``-prefixed semantic version, at least one platform, each with a label selector,
an https ``uri``, a 64-hex ``sha256``, a ``bin`` and ``files`` with ``from``/``to``. No schema file ships with
krew, so this one is kept strict: an unknown field is an error, as it is for krew's strict YAML decoding."""

from __future__ import annotations

from typing import Any

SEMVER = r"^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
# krew's IsSafePluginName plus its naming guide: lowercase words joined by hyphens.
PLUGIN_NAME = r"^[a-z0-9]+(-[a-z0-9]+)*$"

_SELECTOR: dict[str, Any] = {
    "type": "object",
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"},
                        "properties": {"os": {"enum": ["linux", "darwin", "windows"]},
                                       "arch": {"enum": ["amd64", "arm64", "386", "arm", "ppc64le", "s390x"]}}},
        "matchExpressions": {"type": "array", "items": {
            "type": "object", "required": ["key", "operator"],
            "properties": {"key": {"type": "string"}, "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                           "values": {"type": "array", "items": {"type": "string"}}},
            "additionalProperties": False}},
    },
    "additionalProperties": False,
}

PLATFORM: dict[str, Any] = {
    "type": "object",
    "required": ["selector", "uri", "sha256", "bin"],
    "properties": {
        "selector": _SELECTOR,
        "uri": {"type": "string", "pattern": r"^https://[^\s]+\.(tar\.gz|tgz|zip)$"},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "bin": {"type": "string", "minLength": 1},
        "files": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["from", "to"],
            "properties": {"from": {"type": "string", "minLength": 1}, "to": {"type": "string", "minLength": 1}},
            "additionalProperties": False}},
    },
    "additionalProperties": False,
}

PLUGIN: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "krew.googlecontainertools.github.com/v1alpha2"},
        "kind": {"const": "Plugin"},
        "metadata": {"type": "object", "required": ["name"],
                     "properties": {"name": {"type": "string", "pattern": PLUGIN_NAME}},
                     "additionalProperties": False},
        "spec": {
            "type": "object",
            "required": ["version", "shortDescription", "platforms"],
            "properties": {
                "version": {"type": "string", "pattern": SEMVER},
                "homepage": {"type": "string", "pattern": r"^https?://"},
                "shortDescription": {"type": "string", "minLength": 1, "maxLength": 80},
                "description": {"type": "string"},
                "caveats": {"type": "string"},
                "platforms": {"type": "array", "minItems": 1, "items": PLATFORM},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
