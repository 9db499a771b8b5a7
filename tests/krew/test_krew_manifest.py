"""krew/preempt-preview.yaml, rendered as krew-release-bot renders it at release, is a valid krew Plugin."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from krew_schema import PLUGIN

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "krew" / "preempt-preview.yaml"
FAKE_SHA256 = "3f" * 32
ADD_URI_AND_SHA = re.compile(r'^(\s*)\{\{\s*addURIAndSha\s+"([^"]+)"\s+\.TagName\s*\}\}\s*$', re.MULTILINE)


def render(tag: str) -> dict[str, Any]:
    """What krew-release-bot does: ``.TagName`` replaced, each ``addURIAndSha`` line -> ``uri:`` + ``sha256:``."""
    text = ADD_URI_AND_SHA.sub(lambda m: f"{m[1]}uri: {m[2]}\n{m[1]}sha256: {FAKE_SHA256}", TEMPLATE.read_text())
    text = re.sub(r"\{\{\s*\.TagName\s*\}\}", tag, text)
    actions = [line for line in text.splitlines() if "{{" in line and not line.lstrip().startswith("#")]
    assert not actions, f"template actions krew-release-bot would not render: {actions}"
    return dict(yaml.safe_load(text))


def test_rendered_manifest_is_a_valid_krew_plugin() -> None:
    jsonschema.validate(render("v0.2.0"), PLUGIN)


def test_platforms_are_distinct_and_install_the_plugin_executable() -> None:
    plugin = render("v0.2.0")
    seen = set()
    for platform in plugin["spec"]["platforms"]:
        labels = platform["selector"]["matchLabels"]
        key = (labels["os"], labels["arch"])
        assert key not in seen, f"two platforms for {key}: krew would pick one at random"
        seen.add(key)
        assert "v0.2.0" in platform["uri"] and key[0] in platform["uri"] and key[1] in platform["uri"]
        # kubectl finds plugins by executable name: kubectl-<name with - as _>
        assert platform["bin"] == "kubectl-" + plugin["metadata"]["name"].replace("-", "_")
        assert platform["bin"] in {f["to"].rstrip("/.") or f["from"] for f in platform["files"]} | {
            f["from"] for f in platform["files"]}
    assert {"linux", "darwin"} <= {os for os, _ in seen}


def test_the_schema_refuses_broken_manifests() -> None:
    plugin = render("v0.2.0")
    for breakage in ("no-version-prefix", "bad-sha", "unknown-field", "no-platforms", "http-uri"):
        broken = copy.deepcopy(plugin)
        if breakage == "no-version-prefix":
            broken["spec"]["version"] = "0.2.0"
        elif breakage == "bad-sha":
            broken["spec"]["platforms"][0]["sha256"] = "abc"
        elif breakage == "unknown-field":
            broken["spec"]["platforms"][0]["binary"] = "x"
        elif breakage == "no-platforms":
            broken["spec"]["platforms"] = []
        else:
            broken["spec"]["platforms"][0]["uri"] = broken["spec"]["platforms"][0]["uri"].replace("https", "http")
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, PLUGIN)
