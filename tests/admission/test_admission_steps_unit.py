"""The pure admission stages after the Priority plugin: quota step, prediction planning, guardrail outcomes."""

from __future__ import annotations

from typing import Any

from webhook.admission.outcome import AdmissionOutcome
from webhook.admission.pods import RULE_PRIORITY, PodAdmissionContext, run_pod_pipeline
from webhook.admission.review import parse_admission_review
from webhook.admission.steps import (
    Prediction,
    decide_guardrails,
    guardrail_outcome,
    plan_prediction,
    quota_step,
)
from webhook.cluster.reader import object_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.config import DEFAULT_CONFIG, parse_config
from webhook.guardrails import PREDICTION_ANNOTATION

QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tiny", "namespace": "team-a"},
         "spec": {"hard": {"pods": "1"}}, "status": {"hard": {"pods": "1"}, "used": {"pods": "1"}}}


def state(*objects: dict[str, Any]) -> ClusterState:
    result = ClusterState()
    for raw in [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                 "value": 1000, "preemptionPolicy": "PreemptLowerPriority"}, *objects]:
        obj = object_from_dict(raw)
        assert obj is not None
        result.upsert(obj)
    return result


def review(operation: str = "CREATE", *, namespace: str = "team-a", dry_run: bool = False,
           pod_meta: dict[str, Any] | None = None, spec: dict[str, Any] | None = None) -> Any:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta or {"name": "web", "namespace": namespace},
           "spec": spec or {"priorityClassName": "high", "containers": [{"name": "c"}]}}
    return parse_admission_review({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": "web", "namespace": namespace,
        "operation": operation, "userInfo": {"username": "dev", "groups": ["devs"]}, "object": pod,
        "oldObject": pod if operation == "UPDATE" else None, "dryRun": dry_run}})


def context_of(request: Any, cluster: ClusterState) -> PodAdmissionContext:
    result = run_pod_pipeline(request, cluster)
    assert result.context is not None
    return result.context


def test_quota_step_applies_only_with_a_quota_configuration() -> None:
    cluster = state(QUOTA)
    unconfigured = run_pod_pipeline(review(), cluster, steps=[quota_step(DEFAULT_CONFIG.quota)])
    assert unconfigured.outcome.allowed
    configured = parse_config({"quota": {"classes": [{"match": {"names": ["other"]}, "allowedNamespaces": []}]}}, "t")
    denied = run_pod_pipeline(review(), cluster, steps=[quota_step(configured.quota)]).outcome
    assert not denied.allowed and denied.status is not None
    assert (denied.status.code, denied.status.reason) == (403, "Forbidden")
    assert denied.status.message.startswith('pods "web" is forbidden: exceeded quota: tiny')
    assert denied.denied_by == ("ResourceQuota",)


def test_priority_denials_are_labelled_and_carry_no_context() -> None:
    result = run_pod_pipeline(review(spec={"priorityClassName": "gold", "containers": []}), state())
    assert not result.outcome.allowed and result.outcome.denied_by == (RULE_PRIORITY,) and result.context is None


def test_merged_keeps_the_rules_of_a_later_denial() -> None:
    later = AdmissionOutcome.deny(403, "Forbidden", "no", warnings=["w"], audit_annotations={"a": "1"},
                                  denied_by=["maxVictims"])
    merged = AdmissionOutcome.allow(warnings=["first"]).merged(later)
    assert merged.denied_by == ("maxVictims",) and merged.warnings == ("first", "w")
    assert merged.audit_annotations == {"a": "1"}


def test_plan_prediction_only_for_creates_the_scheduler_will_place() -> None:
    cluster = state({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": "quiet", "labels": {"preemptguard.io/mode": "off"}}})
    policy = DEFAULT_CONFIG.guardrails
    plan = plan_prediction(context_of(review(), cluster), policy)
    assert plan is not None and plan.namespace == "team-a" and plan.mode == "warn" and not plan.dry_run
    assert plan.pod["spec"]["priority"] == 1000  # the mutated pod is predicted
    assert plan_prediction(context_of(review("UPDATE"), cluster), policy) is None
    bound = review(spec={"priorityClassName": "high", "nodeName": "node-1", "containers": []})
    assert plan_prediction(context_of(bound, cluster), policy) is None
    assert plan_prediction(context_of(review(namespace="quiet"), cluster), policy) is None
    dry = plan_prediction(context_of(review(namespace="quiet", dry_run=True), cluster), policy)
    assert dry is not None and dry.mode == "off" and dry.dry_run
    # A namespace missing from the request falls back to the object's, then to default.
    unnamed = plan_prediction(context_of(review(namespace="", pod_meta={"name": "web"}), cluster), policy)
    assert unnamed is not None and unnamed.namespace == "default"


PREVIEW = {"apiVersion": "preemptguard.io/v1alpha1", "kind": "PreemptionPreview", "results": [{
    "pod": "team-a/web", "outcome": "Preempts", "node": "n1", "pdbViolations": 0,
    "victims": [{"namespace": "team-b", "name": "v", "node": "n1", "priority": 1, "pdbViolation": False}]}]}


def test_guardrail_outcome_sets_the_annotation_through_the_patch() -> None:
    cluster = state()
    meta = {"name": "web", "namespace": "team-a", "annotations": {"owner": "me"}}
    context = context_of(review(pod_meta=meta), cluster)
    decision = decide_guardrails(context, DEFAULT_CONFIG.guardrails, Prediction.made(PREVIEW), budget_milliseconds=250)
    outcome = guardrail_outcome(context, decision)
    assert outcome.allowed and outcome.warnings[0] == "would preempt 1 pod in team-b on n1"
    assert outcome.patch == ({"op": "add", "path": "/metadata/annotations/preemptguard.io~1prediction",
                              "value": decision.annotation},)
    bare = context_of(review(), cluster)
    patch = guardrail_outcome(bare, decide_guardrails(bare, DEFAULT_CONFIG.guardrails, Prediction.made(PREVIEW),
                                                      budget_milliseconds=250)).patch
    assert patch[0]["path"] == "/metadata/annotations" and PREDICTION_ANNOTATION in patch[0]["value"]


def test_guardrail_denials_and_skips() -> None:
    cluster = state()
    context = context_of(review(), cluster)
    enforce = parse_config({"guardrails": {"mode": "enforce", "maxVictims": 0}}, "t").guardrails
    denied = guardrail_outcome(context, decide_guardrails(context, enforce, Prediction.made(PREVIEW),
                                                          budget_milliseconds=250))
    assert not denied.allowed and denied.status is not None and denied.status.code == 403
    assert denied.denied_by == ("maxVictims",) and denied.audit_annotations["guardrail-decision"] == "denied"
    skipped = guardrail_outcome(context, decide_guardrails(context, enforce, Prediction.skip("budget-exceeded"),
                                                           budget_milliseconds=80))
    assert skipped.allowed and skipped.patch == ()
    assert skipped.warnings == ("PreemptGuard made no preemption prediction for this pod: it did not finish "
                                "within the 80 ms budget",)
    failed = guardrail_outcome(context, decide_guardrails(context, enforce, Prediction.failure(),
                                                          budget_milliseconds=80))
    assert failed.allowed and "the prediction failed" in failed.warnings[0]
    assert failed.audit_annotations["prediction-skipped"] == "error"
