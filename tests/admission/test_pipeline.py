"""The pod admission pipeline without HTTP: stage order, the quota stage, when a prediction is made, and how the
guardrail decision becomes the answer (warnings, the annotation through the patch, a 403)."""

from __future__ import annotations

import json
from typing import Any

from pod_requests import (
    FixedPredictor,
    ListRecorder,
    RecordingFollower,
    admit,
    pipeline,
    pod_request,
    state_of,
)

from webhook.admission.decision import AdmissionDecision, forbidden
from webhook.admission.pod import PodReview
from webhook.admission.priority import RULE_PRIORITY
from webhook.cluster.model import PriorityClass
from webhook.config import parse_config
from webhook.errors import InvalidInput, PredictionTimeout
from webhook.preemption.preview import build_preview
from webhook.preemption.results import Outcome, PreemptionResult, VictimInfo
from webhook.routes import PREDICTION_ANNOTATION
from webhook.sources.source import MemorySource

HIGH = PriorityClass("high", 1000)
QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tiny", "namespace": "team-a"},
         "spec": {"hard": {"pods": "1"}}, "status": {"hard": {"pods": "1"}, "used": {"pods": "1"}}}
QUIET = {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "quiet", "labels": {"preemptguard.io/mode": "off"}}}
RESULT = PreemptionResult(pod="team-a/web", priority=1000, priority_class_name="high",
                          preemption_policy="PreemptLowerPriority", outcome=Outcome.PREEMPTS, node="n1",
                          victims=(VictimInfo("team-b", "v", "n1", 1, False, 30),))


def request(operation: str = "CREATE", *, namespace: str = "team-a", dry_run: bool = False,
            meta: dict[str, Any] | None = None, spec: dict[str, Any] | None = None) -> Any:
    return pod_request(operation, namespace=namespace, dry_run=dry_run, name="web",
                       meta=meta or {"name": "web", "namespace": namespace},
                       spec=spec or {"priorityClassName": "high", "containers": [{"name": "c"}]},
                       old_spec=(spec or {"priorityClassName": "high"}) if operation == "UPDATE" else None)


def config(**document: Any) -> Any:
    return parse_config(document, "test")


def test_quota_stage_applies_only_with_a_quota_configuration() -> None:
    cluster = state_of(HIGH, QUOTA)
    off = config(guardrails={"mode": "off"})
    assert admit(pipeline(cluster, config=off), request()).allowed
    quota = config(guardrails={"mode": "off"},
                   quota={"classes": [{"match": {"names": ["other"]}, "allowedNamespaces": []}]})
    denied = admit(pipeline(cluster, config=quota), request())
    assert not denied.allowed and denied.status is not None
    assert (denied.status.code, denied.status.reason) == (403, "Forbidden")
    assert denied.status.message.startswith('pods "web" is forbidden: exceeded quota: tiny')
    assert denied.denied_by == ("ResourceQuota",) and denied.patch == ()


def test_priority_denials_end_the_pipeline() -> None:
    predictor = FixedPredictor(RESULT)
    outcome = admit(pipeline(state_of(), predictor=predictor), request(spec={"priorityClassName": "gold"}))
    assert not outcome.allowed and outcome.denied_by == (RULE_PRIORITY,) and predictor.pods == []


def test_merged_keeps_the_rules_of_a_later_denial() -> None:
    later = AdmissionDecision.deny(403, "Forbidden", "no", warnings=["w"], audit_annotations={"a": "1"},
                                  denied_by=["maxVictims"])
    merged = AdmissionDecision.allow(warnings=["first"]).merged(later)
    assert merged.denied_by == ("maxVictims",) and merged.warnings == ("first", "w")
    assert merged.audit_annotations == {"a": "1"}


def test_prediction_only_for_creates_the_scheduler_will_place() -> None:
    cluster = state_of(HIGH, QUIET)

    def predicted(req: Any) -> list[Any]:
        predictor = FixedPredictor(RESULT)
        admit(pipeline(cluster, predictor=predictor), req)
        return predictor.pods

    [pod] = predicted(request())
    assert pod.namespace == "team-a" and pod.priority == 1000  # the mutated, typed pod is predicted
    assert predicted(request("UPDATE")) == []
    assert predicted(request(spec={"priorityClassName": "high", "nodeName": "node-1", "containers": []})) == []
    assert predicted(request(namespace="quiet")) == []
    assert len(predicted(request(namespace="quiet", dry_run=True))) == 1
    # A namespace missing from the request falls back to the object's, then to default.
    [unnamed] = predicted(request(namespace="", meta={"name": "web"}))
    assert unnamed.namespace == "default"


def test_guardrail_outcome_sets_the_annotation_through_the_patch() -> None:
    meta = {"name": "web", "namespace": "team-a", "annotations": {"owner": "me"}}
    outcome = admit(pipeline(state_of(HIGH), predictor=FixedPredictor(RESULT)), request(meta=meta))
    assert outcome.allowed and outcome.warnings[0] == "would preempt 1 pod (names withheld) on n1"  # no --client-ca
    annotation = {"op": "add", "path": "/metadata/annotations/preemptguard.io~1prediction",
                  "value": outcome.audit_annotations["prediction"]}
    assert outcome.patch[-1] == annotation
    assert [op["path"] for op in outcome.patch[:-1]] == ["/spec/priority", "/spec/preemptionPolicy"]
    bare = admit(pipeline(state_of(HIGH), predictor=FixedPredictor(RESULT)), request())
    assert bare.patch[-1]["path"] == "/metadata/annotations" and PREDICTION_ANNOTATION in bare.patch[-1]["value"]
    cluster_wide = config(guardrails={"disclosure": "cluster"})
    dry = admit(pipeline(state_of(HIGH), config=cluster_wide, predictor=FixedPredictor(RESULT)),
                request(dry_run=True))
    assert json.loads(dry.patch[-1]["value"][PREDICTION_ANNOTATION]) == build_preview([RESULT])


def test_an_admitted_prediction_is_followed_under_the_id_the_patch_writes() -> None:
    follower = RecordingFollower()
    meta = {"generateName": "web-", "namespace": "team-a", "annotations": {
        "preemptguard.io/prediction-id": "forged", "preemptguard.io/guardrail-decision": "exempt"}}
    outcome = admit(pipeline(state_of(HIGH), predictor=FixedPredictor(RESULT), follower=follower),
                    request(meta=meta))
    assert follower.followed == [("team-a", "web", RESULT)]  # the request's name, as upstream names it in messages
    # Beside the id, the guardrail decision the victims' tenants are told (a forged one is replaced).
    assert outcome.patch[-2:] == (
        {"op": "replace", "path": "/metadata/annotations/preemptguard.io~1prediction-id", "value": "id-1"},
        {"op": "replace", "path": "/metadata/annotations/preemptguard.io~1guardrail-decision", "value": "allowed"})
    # No id: a dry run, a denial, no prediction (mode off), an UPDATE.
    enforce = config(guardrails={"mode": "enforce", "maxVictims": 0})
    for admission, req in (
            (pipeline(state_of(HIGH), predictor=FixedPredictor(RESULT), follower=follower), request(dry_run=True)),
            (pipeline(state_of(HIGH), config=enforce, predictor=FixedPredictor(RESULT), follower=follower),
             request()),
            (pipeline(state_of(HIGH, QUIET), predictor=FixedPredictor(RESULT), follower=follower),
             request(namespace="quiet")),
            (pipeline(state_of(HIGH), predictor=FixedPredictor(RESULT), follower=follower), request("UPDATE"))):
        answer = admit(admission, req)
        assert not any("prediction-id" in op["path"] or "prediction-id" in str(op.get("value")) for op in answer.patch)
    assert len(follower.followed) == 1


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}
LOW_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "v", "namespace": "team-b"},
           "spec": {"nodeName": "n1", "priority": 1, "containers": [{"name": "c"}]}, "status": {"phase": "Running"}}


def test_guardrail_denials_and_skips() -> None:
    enforce = config(guardrails={"mode": "enforce", "maxVictims": 0}, prediction={"budgetMilliseconds": 80})
    denied = admit(pipeline(state_of(HIGH), config=enforce, predictor=FixedPredictor(RESULT)), request())
    assert not denied.allowed and denied.status is not None and denied.status.code == 403
    assert denied.denied_by == ("maxVictims",) and denied.audit_annotations["guardrail-decision"] == "denied"
    assert denied.patch == ()
    # Nobody of lower priority is bound anywhere: the pod cannot preempt, so a late prediction allows it.
    late = pipeline(state_of(HIGH), config=enforce, predictor=FixedPredictor(error=PredictionTimeout("late")))
    skipped = admit(late, request())
    assert skipped.allowed and [op["path"] for op in skipped.patch] == ["/spec/priority", "/spec/preemptionPolicy"]
    assert skipped.warnings == ("PreemptGuard made no preemption prediction for this pod: it did not finish "
                                "within the 80 ms budget",)
    assert isinstance(late.recorder, ListRecorder)
    assert late.recorder.events == [("skipped", "budget-exceeded"), ("decided", "skipped")]
    broken = pipeline(state_of(HIGH), config=enforce, predictor=FixedPredictor(error=InvalidInput("odd")))
    failed = admit(broken, request())
    assert failed.allowed and "the prediction failed" in failed.warnings[0]
    assert failed.audit_annotations["prediction-skipped"] == "error"
    assert isinstance(broken.recorder, ListRecorder) and broken.recorder.events[0] == ("failed", "InvalidInput")


def test_enforce_denies_a_pod_it_cannot_predict_when_it_might_preempt() -> None:
    """guardrails.onUnpredictable: deny under enforce (default), allow under warn or when set to allow."""
    cluster = (HIGH, NODE, LOW_POD)
    enforce = config(guardrails={"mode": "enforce"}, prediction={"budgetMilliseconds": 80})
    for error, reason in ((PredictionTimeout("late"), "budget-exceeded"), (InvalidInput("odd"), "error")):
        late = pipeline(state_of(*cluster), config=enforce, predictor=FixedPredictor(error=error))
        denied = admit(late, request())
        assert not denied.allowed and denied.status is not None
        assert (denied.status.code, denied.status.reason) == (403, "Forbidden")
        assert denied.denied_by == ("onUnpredictable",) and denied.patch == ()
        assert denied.audit_annotations["prediction-skipped"] == reason
        assert denied.audit_annotations["guardrail-violations"] == "onUnpredictable"
        assert denied.status.message.startswith('pods "web" is forbidden: PreemptGuard could not predict whether')
        assert "To get it through" in denied.status.message and "preemptionPolicy: Never" in denied.status.message
    late = FixedPredictor(error=PredictionTimeout("late"))
    for allowing in (config(guardrails={"mode": "warn"}),
                     config(guardrails={"mode": "enforce", "onUnpredictable": "allow"}),
                     config(guardrails={"mode": "enforce", "exempt": {"groups": ["devs"]}})):
        outcome = admit(pipeline(state_of(*cluster), config=allowing, predictor=late), request())
        assert outcome.allowed and "did not finish within" in outcome.warnings[0]
    warn_but_deny = config(guardrails={"mode": "warn", "onUnpredictable": "deny"})
    assert not admit(pipeline(state_of(*cluster), config=warn_but_deny, predictor=late), request()).allowed
    never = request(spec={"priorityClassName": "high-never", "containers": [{"name": "c"}]})
    assert admit(pipeline(state_of(*cluster, PriorityClass("high-never", 1000, preemption_policy="Never")),
                          config=enforce, predictor=late), never).allowed
    disabled = config(guardrails={"mode": "enforce"}, scheduler={"preemption": "disabled"})
    assert admit(pipeline(state_of(*cluster), config=disabled, predictor=late), request()).allowed
    equal = {**LOW_POD, "spec": {**LOW_POD["spec"], "priority": 1000}}
    assert admit(pipeline(state_of(HIGH, NODE, equal), config=enforce, predictor=late), request()).allowed


def test_too_complex_pod_is_not_predicted_and_enforce_denies_it_naming_the_limit() -> None:
    terms = [{"labelSelector": {"matchLabels": {"nothing": f"x{i}"}}, "topologyKey": "kubernetes.io/hostname"}
             for i in range(40)]
    spec = {"priorityClassName": "high", "containers": [{"name": "c"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}}
    predictor = FixedPredictor(RESULT)
    enforce = config(guardrails={"mode": "enforce"})
    denied = admit(pipeline(state_of(HIGH, NODE, LOW_POD), config=enforce, predictor=predictor), request(spec=spec))
    assert predictor.pods == []  # never simulated
    assert not denied.allowed and denied.status is not None
    assert (denied.status.code, denied.status.reason) == (400, "BadRequest")
    assert ("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution: 40 distinct terms, "
            "more than the 32 PreemptGuard predicts for one pod") in denied.status.message
    assert denied.audit_annotations["prediction-skipped"] == "too-complex"
    # The same 40 terms repeated are one term: predicted as usual.
    repeated = {**spec, "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                         terms[:1] * 6000}}}
    admit(pipeline(state_of(HIGH, NODE, LOW_POD), config=enforce, predictor=predictor), request(spec=repeated))
    assert len(predictor.pods) == 1 and len(predictor.pods[0].pod_anti_affinity) == 1
    warned = admit(pipeline(state_of(HIGH, NODE, LOW_POD), config=config(guardrails={"mode": "warn"}),
                            predictor=predictor), request(spec=spec))
    assert warned.allowed and "too complex to predict" in warned.warnings[0]


def test_cache_not_ready_skips_the_prediction() -> None:
    predictor = FixedPredictor(RESULT)
    source = MemorySource(state_of(HIGH), ready=False)
    outcome = admit(pipeline(source.state, source=source, predictor=predictor), request())
    assert outcome.allowed and predictor.pods == []
    assert outcome.audit_annotations["prediction-skipped"] == "cache-not-ready"


def test_extra_steps_run_after_the_quota_and_see_the_mutated_pod() -> None:
    seen: list[PodReview] = []

    def warn_step(review: PodReview) -> AdmissionDecision:
        seen.append(review)
        return AdmissionDecision.allow(warnings=["preemption predicted"], audit_annotations={"preemptguard.io/x": "1"})

    def deny_step(review: PodReview) -> AdmissionDecision:
        return forbidden("pods", review.name_for_messages, "quota says no")

    off = config(guardrails={"mode": "off"})
    outcome = admit(pipeline(state_of(HIGH), config=off, steps=[warn_step]), request())
    assert outcome.allowed and outcome.warnings == ("preemption predicted",) and outcome.patch
    assert seen[0].pod.priority == 1000
    denied = admit(pipeline(state_of(HIGH), config=off, steps=[warn_step, deny_step]), request())
    assert not denied.allowed and denied.patch == () and denied.warnings == ("preemption predicted",)
    assert denied.status is not None and denied.status.message == 'pods "web" is forbidden: quota says no'


def test_the_guardrail_decision_annotation_names_the_violated_rules_never_an_exemption() -> None:
    warn = config(guardrails={"mode": "warn", "maxVictims": 0})
    warned = admit(pipeline(state_of(HIGH), config=warn, predictor=FixedPredictor(RESULT),
                            follower=RecordingFollower()), request())
    assert warned.patch[-1]["value"] == "warned: maxVictims"
    exempt = config(guardrails={"mode": "enforce", "maxVictims": 0, "exempt": {"users": ["dev"]}})
    answer = admit(pipeline(state_of(HIGH), config=exempt, predictor=FixedPredictor(RESULT),
                            follower=RecordingFollower()), request())
    assert answer.allowed and answer.patch[-1]["value"].startswith("exempt")
    assert "dev" not in answer.patch[-1]["value"]


def test_dry_runs_over_the_users_rate_get_429_and_real_creates_are_not_limited() -> None:
    """Each dry-run CREATE answers with a full preview: at most prediction.previewsPerMinute per user."""
    from webhook.server.ratelimit import CallerRateLimit

    limit = CallerRateLimit(lambda: 2, clock=lambda: 0.0)
    rated = config(guardrails={"mode": "warn"}, prediction={"previewsPerMinute": 2})
    admission = pipeline(state_of(HIGH), config=rated, predictor=FixedPredictor(RESULT))
    admission.probe_limit = limit
    probes = [{"priorityClassName": "high", "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{c}"}}}]}
              for c in (1, 2, 3)]
    answers = [admit(admission, request(dry_run=True, spec=spec)) for spec in probes]
    assert [a.allowed for a in answers] == [True, True, False]
    denied = answers[2]
    assert denied.status is not None and (denied.status.code, denied.status.reason) == (429, "TooManyRequests")
    assert denied.denied_by == ("previewsPerMinute",)
    assert denied.status.message == ('pods "web" is forbidden: too many dry-run previews from dev: PreemptGuard '
                                     "answers at most 2 per minute per user (prediction.previewsPerMinute); "
                                     "retry in 30 s")
    assert all(admit(admission, request()).allowed for _ in range(5))  # real creates: not probes
    # The same pod again under another name (a workload's replicas) is no new probe.
    assert all(admit(admission, request(dry_run=True, spec=probes[0], meta={"name": f"web-{i}", "namespace":
                                                                              "team-a"})).allowed for i in range(5))
