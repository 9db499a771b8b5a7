"""The shipped policy does what its comments say: warn only, no quota rules, nothing denied; the GKE-style
critical-class quota is one switch (components/critical-class-quota here, criticalClassQuota.enabled in the
chart, rendered by the real helm in the conformance tier)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from manifest_build import MANIFESTS, REPO, find, with_components

from webhook.cli import main
from webhook.config import parse_config

CRITICAL_CLASS_RULE = {"resource": "pods", "matchScopes": [
    {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical", "system-cluster-critical"]}]}
BASE_CONFIG = MANIFESTS / "base" / "config.yaml"
QUOTA_CONFIG = MANIFESTS / "components" / "critical-class-quota" / "config.yaml"


def test_the_base_policy_warns_and_has_no_quota_rules() -> None:
    document = yaml.safe_load(BASE_CONFIG.read_text())
    config = parse_config(document, str(BASE_CONFIG))
    assert config.guardrails.mode == "warn"
    assert document["quota"] == {"limitedResources": [], "classes": []}


def test_the_component_is_the_base_policy_plus_the_critical_class_rule() -> None:
    base, with_quota = yaml.safe_load(BASE_CONFIG.read_text()), yaml.safe_load(QUOTA_CONFIG.read_text())
    assert with_quota["quota"]["limitedResources"] == [CRITICAL_CLASS_RULE]
    with_quota["quota"]["limitedResources"] = []
    assert with_quota == base
    parse_config(yaml.safe_load(QUOTA_CONFIG.read_text()), str(QUOTA_CONFIG))
    rendered = find(with_components("overlays/self-signed", "components/critical-class-quota"), "ConfigMap",
                    "preemptguard-config")
    assert yaml.safe_load(rendered["data"]["config.yaml"])["quota"]["limitedResources"] == [CRITICAL_CLASS_RULE]


def _demo_line(capsys: pytest.CaptureFixture[str], config: Path, pod: str) -> str:
    assert main(["demo", "--cluster-snapshot", str(REPO / "examples" / "cluster.yaml"), "--config", str(config),
                 str(REPO / "examples" / "pods" / pod)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    return line


def test_with_the_base_policy_a_critical_pod_outside_kube_system_is_admitted(
        capsys: pytest.CaptureFixture[str]) -> None:
    line = _demo_line(capsys, BASE_CONFIG, "15-critical-outside-kube-system.yaml")
    assert line.startswith("15-critical-outside-kube-system.yaml: allowed, priority 2000000000"), line


def test_with_the_component_it_is_denied_for_want_of_a_covering_quota(capsys: pytest.CaptureFixture[str]) -> None:
    line = _demo_line(capsys, QUOTA_CONFIG, "15-critical-outside-kube-system.yaml")
    assert line.startswith("15-critical-outside-kube-system.yaml: denied"), line
    assert "insufficient quota to match these scopes" in line
