"""The informers' progress on /metrics: what bench/scale.py reads to measure the cache's lag."""

from __future__ import annotations

from webhook.server.metrics import WebhookMetrics


def test_each_kind_reports_its_applied_resource_version_events_relists_and_listed_bytes() -> None:
    status: dict[str, dict[str, object]] = {
        "Pod": {"synced": True, "resourceVersion": "4711", "relists": 1, "eventsApplied": 12, "listedBytes": 2048},
        "Node": {"synced": False, "resourceVersion": None, "relists": 0, "eventsApplied": 0, "listedBytes": 0},
    }
    metrics = WebhookMetrics()
    metrics.track_informers(lambda: status)
    text = metrics.render().decode()
    assert 'preemptguard_informer_resource_version{kind="Pod"} 4711.0' in text
    assert 'preemptguard_informer_resource_version{kind="Node"} 0.0' in text
    assert 'preemptguard_informer_synced{kind="Pod"} 1.0' in text
    assert 'preemptguard_informer_synced{kind="Node"} 0.0' in text
    assert 'preemptguard_informer_events_total{kind="Pod"} 12.0' in text
    assert 'preemptguard_informer_relists_total{kind="Pod"} 1.0' in text
    assert 'preemptguard_informer_listed_bytes_total{kind="Pod"} 2048.0' in text
    status["Pod"]["resourceVersion"] = "4712"  # read at every scrape
    assert 'preemptguard_informer_resource_version{kind="Pod"} 4712.0' in metrics.render().decode()


def test_without_informers_there_is_no_informer_series() -> None:
    assert "preemptguard_informer_" not in WebhookMetrics().render().decode()
