"""Packaging: the console script kubectl runs, and the krew manifest template rendered as krew-release-bot would."""

from __future__ import annotations

import hashlib
import re
import tomllib
from typing import Any

import yaml

from conftest import COMPLETER, PLUGIN, ROOT

TEMPLATE = ROOT / "krew" / "preempt-preview.yaml"
ADD_URI_AND_SHA = re.compile(r'^(\s*)\{\{addURIAndSha "([^"]+)" \.TagName \}\}$', re.MULTILINE)


def render_template(tag: str) -> dict[str, Any]:
    """What krew-release-bot does: tag substitution, then each addURIAndSha line as uri + sha256."""
    def uri_and_sha(match: re.Match[str]) -> str:
        indent, uri = match.group(1), match.group(2).replace("{{ .TagName }}", tag)
        return f"{indent}uri: {uri}\n{indent}sha256: {hashlib.sha256(uri.encode()).hexdigest()}"

    text = ADD_URI_AND_SHA.sub(uri_and_sha, TEMPLATE.read_text(encoding="utf-8"))
    rendered: dict[str, Any] = yaml.safe_load(text.replace("{{ .TagName }}", tag))
    return rendered


def test_console_script_is_the_kubectl_plugin_name() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"][PLUGIN] == "kubectl_plugin.cli:main"
    # kubectl >= 1.26 completes "kubectl preempt-preview" by running kubectl_complete-preempt_preview.
    assert project["scripts"][COMPLETER] == "kubectl_plugin.completion:main"


def test_krew_manifest_renders_to_a_valid_plugin() -> None:
    plugin = render_template("v0.1.0")
    assert plugin["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert plugin["kind"] == "Plugin"
    # krew: the plugin name is what follows "kubectl ", and bin is the executable kubectl finds on PATH.
    assert plugin["metadata"]["name"] == "preempt-preview"
    spec = plugin["spec"]
    assert spec["version"] == "v0.1.0" and spec["shortDescription"] and len(spec["shortDescription"]) <= 80
    selectors = set()
    for platform in spec["platforms"]:
        labels = platform["selector"]["matchLabels"]
        selectors.add((labels["os"], labels["arch"]))
        assert platform["bin"] == PLUGIN
        assert platform["uri"].startswith("https://") and "/v0.1.0/" in platform["uri"]
        assert f"{labels['os']}_{labels['arch']}" in platform["uri"]
        assert re.fullmatch(r"[0-9a-f]{64}", platform["sha256"])
        assert {"from": PLUGIN, "to": "."} in platform["files"]
        assert {"from": COMPLETER, "to": "."} in platform["files"]  # krew/kubectl_complete-preempt_preview
    # The platforms release/build-krew builds archives for (no darwin/amd64: no Intel macOS cryptography wheel).
    built = re.findall(r'^    "(\w+)/(\w+)": \(', (ROOT / "release" / "build-krew").read_text(), re.MULTILINE)
    assert selectors == set(built) == {("linux", "amd64"), ("linux", "arm64"), ("darwin", "arm64")}
    # krew links only `bin` into its bin directory (krew issue 812): the caveats say how to add the completer.
    assert f"/store/preempt-preview/*/{COMPLETER}" in spec["caveats"]
