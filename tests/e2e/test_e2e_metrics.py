"""The Prometheus endpoint on --metrics-port exposes the admission, rule, prediction, victim, staleness and
configuration series after real traffic over TLS."""

from __future__ import annotations

import aiohttp
from e2e_support import admit, config, create_review, free_port, pod, settings, state_of
from guardrail_cluster import guardrail_cluster, preemptor

from webhook.routes import PREVIEW_PATH
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import MemorySource

POLICY = {
    "quota": {"classes": [{"match": {"names": ["mid"]}, "allowedNamespaces": ["team-b"]}]},
    "guardrails": {"mode": "enforce", "maxVictims": 2},
}


async def scrape(port: int) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        return await response.text()


async def test_metrics_expose_the_admission_and_prediction_series() -> None:
    metrics_port = free_port()
    source = MemorySource(state_of(guardrail_cluster()))
    async with LoopbackWebhook(source, settings(metrics_port=metrics_port), config=config(POLICY)) as hook:
        denied = await admit(hook, create_review(preemptor()))  # maxVictims
        warned = await admit(hook, create_review(preemptor("team-a-warn")))  # admitted: its victims are counted
        quota = await admit(hook, create_review(pod("m", "team-a", priority_class_name="mid")))  # quota.classes
        unknown = await admit(hook, create_review(pod("g", "team-a", priority_class_name="gold")))  # priority
        # node-1 is full: even a small mid pod evicts team-a2's low pod (1 victim, within maxVictims).
        small = await admit(hook, create_review(pod("small", "team-b", cpu="10m", priority_class_name="mid")))
        status, _ = await hook.post_json(PREVIEW_PATH, {"pod": preemptor(), "replicas": 2})
        text = await scrape(metrics_port)
    assert [r["allowed"] for r in (denied, warned, quota, unknown, small)] == [False, True, False, False, True]
    assert status == 200
    expected = [
        'preemptguard_admission_requests_total{endpoint="mutate_pods",outcome="denied"} 3.0',
        'preemptguard_admission_requests_total{endpoint="mutate_pods",outcome="allowed"} 2.0',
        'preemptguard_admission_denials_by_rule_total{endpoint="mutate_pods",rule="maxVictims"} 1.0',
        'preemptguard_admission_denials_by_rule_total{endpoint="mutate_pods",rule="quota.classes"} 1.0',
        'preemptguard_admission_denials_by_rule_total{endpoint="mutate_pods",rule="priority"} 1.0',
        'preemptguard_admission_denials_total{endpoint="mutate_pods",reason="Forbidden"} 3.0',
        'preemptguard_admission_duration_seconds_count{endpoint="mutate_pods",outcome="denied"} 3.0',
        'preemptguard_predictions_total{endpoint="mutate_pods",outcome="Preempts"} 3.0',
        'preemptguard_predictions_total{endpoint="preview",outcome="Preempts"} 1.0',
        'preemptguard_predictions_total{endpoint="preview",outcome="Unschedulable"} 1.0',
        'preemptguard_prediction_duration_seconds_count{endpoint="mutate_pods"} 3.0',
        'preemptguard_prediction_duration_seconds_count{endpoint="preview"} 1.0',
        'preemptguard_predicted_victims_total{namespace="team-b"} 2.0',
        'preemptguard_predicted_victims_total{namespace="team-a2"} 2.0',
        'preemptguard_guardrail_decisions_total{decision="denied",mode="enforce"} 1.0',
        'preemptguard_guardrail_decisions_total{decision="warned",mode="warn"} 1.0',
        'preemptguard_cluster_cache_staleness_seconds 0.0',
        'preemptguard_config_reload_failures_total 0.0',
        'preemptguard_config_reloads_total 0.0',
        'preemptguard_http_requests_total{code="200",endpoint="/preview"} 1.0',
    ]
    missing = [line for line in expected if line not in text]
    assert not missing, missing


async def test_staleness_gauge_reads_the_source() -> None:
    metrics_port = free_port()
    source = MemorySource(state_of([]), ready=False, staleness=12.5)
    async with LoopbackWebhook(source, settings(metrics_port=metrics_port)) as hook:
        assert hook.server is not None
        text = await scrape(metrics_port)
    assert "preemptguard_cluster_cache_staleness_seconds 12.5" in text


async def test_gated_and_other_schedulers_pods_are_counted_as_such_and_never_denied() -> None:
    """Neither is a preemption (issue #26): under enforce with maxVictims 0, both are admitted with their warning,
    and predictions_total counts them under their own outcomes."""
    metrics_port = free_port()
    source = MemorySource(state_of(guardrail_cluster()))
    gated, other = preemptor(name="gated"), preemptor(name="other")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    other["spec"]["schedulerName"] = "batch-scheduler"
    policy = {"guardrails": {"mode": "enforce", "maxVictims": 0}}
    async with LoopbackWebhook(source, settings(metrics_port=metrics_port), config=config(policy)) as hook:
        answers = [await admit(hook, create_review(p)) for p in (gated, other, preemptor())]
        text = await scrape(metrics_port)
    assert [a["allowed"] for a in answers] == [True, True, False]
    assert any("spec.schedulingGates (example.com/quota)" in w for w in answers[0].get("warnings", []))
    assert any("spec.schedulerName batch-scheduler" in w for w in answers[1].get("warnings", []))
    for line in ('preemptguard_predictions_total{endpoint="mutate_pods",outcome="Gated"} 1.0',
                 'preemptguard_predictions_total{endpoint="mutate_pods",outcome="NotScheduled"} 1.0',
                 'preemptguard_predictions_total{endpoint="mutate_pods",outcome="Preempts"} 1.0'):
        assert line in text
