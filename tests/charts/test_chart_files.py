"""The Helm chart without helm: its values against its own schema, the generated README table, and the files
it shares with manifests/. Rendering with the real helm is in conformance/tests/test_helm_chart.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "preemptguard"
MONITORING = REPO / "manifests" / "components" / "monitoring"


def schema() -> dict[str, Any]:
    return dict(json.loads((CHART / "values.schema.json").read_text()))


def default_values() -> dict[str, Any]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text()))


def test_default_values_satisfy_the_schema() -> None:
    jsonschema.Draft7Validator.check_schema(schema())
    jsonschema.validate(default_values(), schema())


@pytest.mark.parametrize(("change", "path"), [
    ({"replicaCount": "three"}, ["replicaCount"]),
    ({"replicas": 3}, []),
    ({"certificates": {"mode": "vault"}}, ["certificates", "mode"]),
    ({"image": {"repository": "r", "digest": "latest"}}, ["image", "digest"]),
    ({"labelPolicy": {"adminGroups": ["it's"]}}, ["labelPolicy", "adminGroups", 0]),
    ({"networkPolicy": {"enabled": "yes"}}, ["networkPolicy", "enabled"]),
])
def test_schema_refuses_unknown_keys_and_wrong_types(change: dict[str, Any], path: list[Any]) -> None:
    values = copy.deepcopy(default_values())
    for key, value in change.items():
        values[key] = {**values[key], **value} if isinstance(value, dict) and key in values else value
    errors = list(jsonschema.Draft7Validator(schema()).iter_errors(values))
    assert [list(e.absolute_path) for e in errors] == [path], [e.message for e in errors]


def test_every_value_is_described_in_the_schema() -> None:
    def walk(node: dict[str, Any], where: str) -> None:
        for key, prop in node.get("properties", {}).items():
            assert prop.get("description"), f"{where}{key} has no description"
            walk(prop, f"{where}{key}.")
    walk(schema(), "")
    assert set(default_values()) <= set(schema()["properties"])


def test_readme_values_table_is_generated_from_the_schema() -> None:
    run = subprocess.run([sys.executable, str(REPO / "charts" / "values_table.py"), "--check"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr


def test_chart_is_released_with_the_application() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert chart["appVersion"] == version == chart["version"]


def test_default_policy_is_the_manifests_policy() -> None:
    assert default_values()["config"] == yaml.safe_load((REPO / "manifests" / "base" / "config.yaml").read_text())


def test_alerts_and_dashboard_are_the_manifests_ones() -> None:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text()) == rule["spec"]
    dashboard = "grafana-dashboard.json"
    assert (CHART / "files" / dashboard).read_bytes() == (MONITORING / dashboard).read_bytes()


def test_the_policy_report_crd_is_the_exposure_reports_component_s() -> None:
    crd = "policyreport-crd.yaml"
    component = REPO / "manifests" / "components" / "exposure-reports"
    assert (CHART / "files" / crd).read_bytes() == (component / crd).read_bytes()
