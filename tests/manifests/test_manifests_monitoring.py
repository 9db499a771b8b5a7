"""The alerts and the dashboard read only metrics that a running server exports (its /metrics, scraped)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from manifest_build import MANIFESTS, REPO
from prometheus_client.parser import text_string_to_metric_families
from promql import metric_names

MONITORING = MANIFESTS / "components" / "monitoring"
# The series a histogram, counter, ... family exposes, by its TYPE (families without samples yet included).
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "gauge": ("",), "info": ("_info",), "summary": ("", "_sum", "_count", "_created"), "unknown": ("",)}
# Series Prometheus adds to every scrape target.
SCRAPE_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[set[str]]:
    """Start `preempt-guard serve` on the example snapshot and scrape its metrics port."""
    port, metrics_port = free_port(), free_port()
    log = tmp_path_factory.mktemp("monitoring") / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--cluster-snapshot",
             str(REPO / "examples" / "cluster.yaml"), "--tls-self-signed", "--host", "127.0.0.1", "--port", str(port),
             "--metrics-port", str(metrics_port), "--shutdown-grace", "0"],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as response:
                    text = response.read().decode()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"preempt-guard serve did not serve /metrics:\n{log.read_text()}")
                time.sleep(0.2)
        names = set()
        for family in text_string_to_metric_families(text):
            names |= {family.name + suffix for suffix in SUFFIXES[family.type]}
            names |= {sample.name for sample in family.samples}
        yield names
    finally:
        server.terminate()
        server.wait(15)


def alert_rules() -> list[dict[str, Any]]:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def test_the_server_exports_the_new_metrics(exported: set[str]) -> None:
    assert {"preemptguard_build_info", "preemptguard_serving_certificate_expiry_timestamp_seconds",
            "process_resident_memory_bytes", "python_info"} <= exported


def test_alerts_cover_what_the_issue_asks(exported: set[str]) -> None:
    rules = {r["alert"]: metric_names(r["expr"]) for r in alert_rules()}
    assert rules == {
        "PreemptGuardDown": {"up"},
        "PreemptGuardAdmissionSlow": {"preemptguard_admission_duration_seconds_bucket"},
        "PreemptGuardPredictionsSkipped": {"preemptguard_predictions_skipped_total"},
        "PreemptGuardCertificateExpiring": {"preemptguard_serving_certificate_expiry_timestamp_seconds"},
        "PreemptGuardCacheStale": {"preemptguard_cluster_cache_staleness_seconds"},
        "PreemptGuardNoLeader": {"preemptguard_leader_election", "preemptguard_leader"},
        "PreemptGuardPredictionsDisagree": {"preemptguard_prediction_observed_total"},
    }
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]


def test_alerts_read_only_exported_metrics(exported: set[str]) -> None:
    for rule in alert_rules():
        assert metric_names(rule["expr"]) <= exported | SCRAPE_SERIES, rule["alert"]


def test_dashboard_reads_only_exported_metrics(exported: set[str]) -> None:
    expressions = dashboard_expressions()
    assert len(expressions) >= 10
    used = set()
    for expression in expressions:
        names = metric_names(expression)
        assert names, expression
        assert names <= exported | SCRAPE_SERIES, expression
        used |= names
    assert "preemptguard_admission_duration_seconds_bucket" in used
    assert "preemptguard_prediction_observed_total" in used  # the agreement rate (docs/interfaces.md §9)
    # A tenant's own panels (docs/interfaces.md §7): its exposure and its preemptions, per namespace.
    assert {"preemptguard_exposure_preemptible_by_other_tenants_pods", "preemptguard_preemptions_total",
            "preemptguard_leader"} <= used


def test_the_tenant_panels_follow_the_namespace_variable() -> None:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert "pod_namespace" in variables["pod_namespace"]["query"]["query"]
    tenant = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])
              if "preemptguard_exposure_" in t["expr"] or "preemptguard_preemptions_total" in t["expr"]]
    assert len(tenant) >= 5 and all('pod_namespace=~"$pod_namespace"' in e for e in tenant)


def test_no_panel_groups_by_the_scrape_targets_namespace() -> None:
    """A metric's own `namespace` label (the predicted victims') reaches Prometheus as `exported_namespace`:
    the scrape target's namespace takes the name (honor_labels false, Prometheus's default), so grouping
    `by (namespace)` would sum every tenant into PreemptGuard's own namespace."""
    expressions = dashboard_expressions()
    victims = [e for e in expressions if "preemptguard_predicted_victims_total" in e]
    assert victims and all("by (exported_namespace)" in e for e in victims), victims
    assert not [e for e in expressions if re.search(r"by \(([^)]*,\s*)?namespace\b", e)]


def test_the_server_exports_every_observed_verdict_from_the_start(exported: set[str]) -> None:
    assert "preemptguard_prediction_observed_total" in exported


def test_metric_name_extraction_is_not_vacuous() -> None:
    assert metric_names('sum by (le) (rate(a_b_bucket{job="x", le=~"1|2"}[5m])) > 1 or absent(up{job="x"})') == \
        {"a_b_bucket", "up"}
    with pytest.raises(ValueError, match="no_such_function"):
        metric_names("no_such_function(x)")
