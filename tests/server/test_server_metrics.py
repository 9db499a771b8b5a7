"""Observations through the cached label children land in the registry like ``.labels(...)`` ones."""

from __future__ import annotations

from webhook.observe.compare import Verdict
from webhook.preemption.results import Outcome, PreemptionResult, VictimInfo
from webhook.server.metrics import WebhookMetrics


def sample(metrics: WebhookMetrics, name: str, labels: dict[str, str]) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_cached_children_count_per_label_values() -> None:
    metrics = WebhookMetrics()
    for _ in range(3):
        metrics.record_request("/mutate/pods", 200)
    metrics.record_request("/mutate/pods", 400)
    metrics.record_admission("mutate_pods", "denied", 0.002, "Forbidden", ("priority", "maxVictims"))
    metrics.record_admission("mutate_pods", "allowed", 0.001)
    metrics.record_prediction("mutate_pods", ["Fits", "Fits"], 0.003)
    metrics.record_skipped_prediction("mutate_pods", "budget-exceeded")
    metrics.record_guardrail("warned", "warn")
    metrics.record_victims(PreemptionResult(
        pod="team-a/p", priority=1, priority_class_name="", preemption_policy="", outcome=Outcome.PREEMPTS, node="n",
        victims=(VictimInfo("team-b", "v1", "n", 0, False, 30), VictimInfo("team-b", "v2", "n", 0, False, 30))))

    assert sample(metrics, "preemptguard_http_requests_total", {"endpoint": "/mutate/pods", "code": "200"}) == 3
    assert sample(metrics, "preemptguard_http_requests_total", {"endpoint": "/mutate/pods", "code": "400"}) == 1
    assert sample(metrics, "preemptguard_admission_denials_by_rule_total",
                  {"endpoint": "mutate_pods", "rule": "maxVictims"}) == 1
    assert sample(metrics, "preemptguard_admission_denials_total",
                  {"endpoint": "mutate_pods", "reason": "Forbidden"}) == 1
    assert sample(metrics, "preemptguard_admission_duration_seconds_count",
                  {"endpoint": "mutate_pods", "outcome": "allowed"}) == 1
    assert sample(metrics, "preemptguard_predictions_total", {"endpoint": "mutate_pods", "outcome": "Fits"}) == 2
    assert sample(metrics, "preemptguard_predictions_total", {"endpoint": "mutate_pods", "outcome": "skipped"}) == 1
    assert sample(metrics, "preemptguard_prediction_duration_seconds_count", {"endpoint": "mutate_pods"}) == 1
    assert sample(metrics, "preemptguard_guardrail_decisions_total", {"decision": "warned", "mode": "warn"}) == 1
    assert sample(metrics, "preemptguard_predicted_victims_total", {"namespace": "team-b"}) == 2


def test_every_observed_verdict_is_exported_from_the_start() -> None:
    metrics = WebhookMetrics()
    for verdict in ("agree", "node_differs", "victims_differ", "outcome_differs", "unobserved"):
        assert sample(metrics, "preemptguard_prediction_observed_total", {"verdict": verdict}) == 0
    metrics.record_prediction_verdict(Verdict.VICTIMS_DIFFER)
    assert sample(metrics, "preemptguard_prediction_observed_total", {"verdict": "victims_differ"}) == 1
