"""Build info, the serving certificate's expiry and the standard process_/python_ collectors, per app registry."""

from __future__ import annotations

import platform
from datetime import UTC, datetime, timedelta, timezone

from prometheus_client.parser import text_string_to_metric_families

from webhook.server.metrics import WebhookMetrics
from webhook.version import package_version


def families(metrics: WebhookMetrics) -> set[str]:
    return {family.name for family in text_string_to_metric_families(metrics.render().decode())}


def test_build_info_names_version_python_and_kubernetes_client() -> None:
    metrics = WebhookMetrics()
    (sample,) = [s for f in text_string_to_metric_families(metrics.render().decode())
                 if f.name == "preemptguard_build_info" for s in f.samples]
    assert sample.value == 1
    assert sample.labels["version"] == package_version()
    assert sample.labels["python"] == platform.python_version()
    assert sample.labels["kubernetes_client"] not in ("", "unknown")


def test_serving_certificate_expiry_is_a_unix_time() -> None:
    metrics = WebhookMetrics()
    name = "preemptguard_serving_certificate_expiry_timestamp_seconds"
    assert metrics.registry.get_sample_value(name) == 0  # not reported yet: the alert ignores 0
    not_after = datetime(2031, 5, 4, 3, 2, 1, tzinfo=UTC)
    metrics.set_serving_certificate_expiry(not_after)
    assert metrics.registry.get_sample_value(name) == not_after.timestamp()
    # cryptography's not_valid_after is naive UTC; an aware time in another zone is converted
    metrics.set_serving_certificate_expiry(not_after.replace(tzinfo=None))
    assert metrics.registry.get_sample_value(name) == not_after.timestamp()
    metrics.set_serving_certificate_expiry(not_after.astimezone(timezone(timedelta(hours=5))))
    assert metrics.registry.get_sample_value(name) == not_after.timestamp()


def test_standard_collectors_in_each_apps_own_registry() -> None:
    first, second = WebhookMetrics(), WebhookMetrics()  # two apps side by side must not collide
    for metrics in (first, second):
        names = families(metrics)
        assert {"process_resident_memory_bytes", "process_cpu_seconds", "process_open_fds"} <= names
        assert {"python_info", "python_gc_collections"} <= names
