"""The alerting rules through Prometheus's own `promtool` (built by conformance/build, pinned in
conformance/promtool/go.mod): `check rules` on the shipped file, the kustomize component and the chart's
rendering, and `test rules` with a firing and a not-firing case for every alert (promtool/rules_test.yaml)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import REPO
from helm_tool import bin_dir, template
from manifest_build import MANIFESTS

HERE = Path(__file__).resolve().parent
RULES = REPO / "charts" / "preemptguard" / "files" / "prometheus-rules.yaml"
UNIT_TESTS = HERE / "promtool" / "rules_test.yaml"


def promtool(*args: str, cwd: Path = HERE) -> subprocess.CompletedProcess[str]:
    path = bin_dir() / "promtool"
    if not os.access(path, os.X_OK):
        pytest.fail(f"promtool not found in {bin_dir()}: run conformance/build (it builds promtool from the Go "
                    "module proxy, pinned in conformance/promtool/go.mod) or set PREEMPTGUARD_KUBE_BIN", pytrace=False)
    return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


def pinned_version() -> str:
    for line in (REPO / "conformance" / "promtool" / "go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["github.com/prometheus/prometheus"]:
            return parts[1]
    raise AssertionError("conformance/promtool/go.mod does not require github.com/prometheus/prometheus")


def test_promtool_is_the_pinned_release() -> None:
    run = promtool("--version")
    assert run.returncode == 0, run.stderr
    major_minor, patch = pinned_version().removeprefix("v0.").split(".")[:2]
    expected = f"{int(major_minor[:-2])}.{int(major_minor[-2:])}.{patch}"
    assert run.stdout.splitlines()[0].startswith(f"promtool, version {expected} "), run.stdout


def _write_groups(spec: dict[str, Any], tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"groups": spec["groups"]}))
    return path


def test_check_rules_on_the_shipped_file_and_the_kustomize_component(tmp_path: Path) -> None:
    component = yaml.safe_load((MANIFESTS / "components" / "monitoring" / "prometheusrule.yaml").read_text())
    for path in (RULES, _write_groups(component["spec"], tmp_path, "component")):
        run = promtool("check", "rules", str(path))
        assert run.returncode == 0, run.stdout + run.stderr
        assert "SUCCESS: 7 rules found" in run.stdout, run.stdout


def test_check_rules_on_the_chart_rendering_of_another_release(tmp_path: Path) -> None:
    objects = template(tmp_path, {"prometheusRule": {"enabled": True}, "nameOverride": "guard",
                                  "metricsJob": "kubernetes-pods"})
    (rule,) = [o for o in objects if o["kind"] == "PrometheusRule"]
    path = _write_groups(rule["spec"], tmp_path, "chart")
    run = promtool("check", "rules", str(path))
    assert run.returncode == 0, run.stdout + run.stderr
    # Every selector is the release's own: its job and its namespace, never the defaults of the shipped file.
    expressions = [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]
    assert len(expressions) == 7 and not any('job="preemptguard"' in e for e in expressions)
    assert all('job="kubernetes-pods",namespace="preemptguard"' in e for e in expressions)
    expected = RULES.read_text().replace('job="preemptguard",namespace="preemptguard"',
                                         'job="kubernetes-pods",namespace="preemptguard"')
    assert rule["spec"] == yaml.safe_load(expected)


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    alerts = {r["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for r in group["rules"]}
    cases: dict[str, set[bool]] = {}
    for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for case in test["alert_rule_test"]:
            cases.setdefault(case["alertname"], set()).add(bool(case["exp_alerts"]))
    assert cases == {alert: {True, False} for alert in alerts}


def test_promtool_test_rules() -> None:
    run = promtool("test", "rules", UNIT_TESTS.name, cwd=UNIT_TESTS.parent)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout
