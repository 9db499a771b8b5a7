"""The informers' progress on /metrics: what bench/scale.py reads to measure the cache's lag."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from webhook.server.metrics import WebhookMetrics, make_metrics_app


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


async def test_name_filter_answers_only_the_series_asked(aiohttp_client: Any) -> None:
    """``GET /metrics?name[]=...`` as the Prometheus client libraries answer it: bench/scale.py polls the Pod
    informer's resourceVersion every 100 ms, and the whole text costs the event loop milliseconds at 15,000 nodes."""
    metrics = WebhookMetrics()
    metrics.track_informers(lambda: {"Pod": {"synced": True, "resourceVersion": "4711", "eventsApplied": 3}})
    client: TestClient = await aiohttp_client(make_metrics_app(metrics))
    response = await client.get("/metrics", params=[("name[]", "preemptguard_informer_resource_version"),
                                                    ("name[]", "preemptguard_informer_events_total")])
    assert response.status == 200
    samples = [line for line in (await response.text()).splitlines() if not line.startswith("#")]
    assert samples == ['preemptguard_informer_resource_version{kind="Pod"} 4711.0',
                       'preemptguard_informer_events_total{kind="Pod"} 3.0']
    everything = await (await client.get("/metrics")).text()
    assert "preemptguard_build_info" in everything and "preemptguard_informer_synced" in everything
    unknown = await (await client.get("/metrics", params={"name[]": "no_such_series"})).text()
    assert unknown == ""
