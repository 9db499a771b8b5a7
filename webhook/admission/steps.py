"""PreemptGuard's pod admission stages after the Priority plugin (pure; the server wires them together).

1. ``quota_step``: quota on critical classes (``quota.classes``, then upstream ``limitedResources`` and the
   namespace's ResourceQuotas) on the pod as the Priority plugin mutated it. A denial keeps the upstream
   code, reason and message.
2. ``plan_prediction``: whether a pod CREATE gets a preemption prediction, and of which object. The
   prediction itself is made by the server, off the event loop and within a time budget.
3. ``decide_guardrails`` + ``guardrail_outcome``: the guardrail decision for that prediction (or for a
   skipped one) as an ``AdmissionOutcome``: warnings, the ``preemptguard.io/prediction`` annotation as a
   JSONPatch on the pod, auditAnnotations, or a 403 denial naming the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.admission.outcome import AdmissionOutcome
from webhook.admission.patch import JsonPatchBuilder
from webhook.admission.pods import PodAdmissionContext, PodAdmissionStep
from webhook.admission.review import JsonObject
from webhook.cluster.model import EMPTY_LABELS
from webhook.cluster.reader import pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.config import GuardrailMode, GuardrailsConfig, QuotaConfig
from webhook.guardrails import (
    PREDICTION_ANNOTATION,
    GuardrailDecision,
    UserInfo,
    effective_mode,
    evaluate_guardrails,
    prediction_skipped,
)
from webhook.guardrails.policy import AUDIT_DECISION, AUDIT_MODE, AUDIT_SKIPPED, SkipReason
from webhook.guardrails.report import truncate
from webhook.priority.quota import admit_pod_quota

ANNOTATION_PATH = ("metadata", "annotations", PREDICTION_ANNOTATION)
PREDICTION_FAILED_WARNING = truncate(
    "PreemptGuard made no preemption prediction for this pod: the prediction failed (see the webhook log)"
)


def pod_namespace(context: PodAdmissionContext) -> str:
    """The namespace the pod is created in: the request's, else the object's, else ``default``."""
    return context.request.namespace or context.fields.namespace or "default"


def namespace_labels(state: ClusterState, namespace: str) -> Mapping[str, str]:
    found = state.namespaces.get(namespace)
    return found.labels if found is not None else EMPTY_LABELS


# ---- quota --------------------------------------------------------------------------------------
def quota_step(quota: QuotaConfig) -> PodAdmissionStep:
    """``quota.classes`` and upstream ResourceQuota admission for a pod CREATE (no subresource).

    With no quota configuration at all the step does nothing (contract §6: no configuration file, no
    quota rules); the API server's own ResourceQuota plugin still applies after the webhooks.
    """

    def admit_quota(context: PodAdmissionContext) -> AdmissionOutcome:
        if quota.is_empty or context.resolved is None:
            return AdmissionOutcome.allow()
        namespace = pod_namespace(context)
        state = context.state
        denial = admit_pod_quota(
            pod_from_dict(context.pod),
            namespace=namespace,
            namespace_labels=namespace_labels(state, namespace),
            operation=context.request.operation,
            quotas=list(state.quotas_by_namespace.get(namespace, {}).values()),
            config=quota,
            subresource=context.request.sub_resource,
        )
        if denial is None:
            return AdmissionOutcome.allow()
        return AdmissionOutcome.deny(denial.code, denial.reason, denial.message, denied_by=(denial.rule,))

    return admit_quota


# ---- prediction ---------------------------------------------------------------------------------
@dataclass(slots=True)  # built for every review: no frozen-init cost
class PredictionPlan:
    """What to predict for one admission: the mutated pod in its namespace."""

    pod: JsonObject
    namespace: str
    mode: GuardrailMode
    dry_run: bool


def plan_prediction(context: PodAdmissionContext, policy: GuardrailsConfig) -> PredictionPlan | None:
    """A prediction is made for a pod CREATE without subresource that the scheduler will place, unless the
    namespace's guardrail mode is ``off`` — except on a dry run, whose annotation carries the full preview
    that ``kubectl preempt-preview`` reads back (so the preview works whatever the mode)."""
    request = context.request
    if request.operation != "CREATE" or request.sub_resource or context.resolved is None:
        return None
    spec = context.pod.get("spec")
    if isinstance(spec, Mapping) and spec.get("nodeName"):
        return None  # created already bound: it bypasses the scheduler, so it never preempts
    namespace = pod_namespace(context)
    mode = effective_mode(policy, namespace_labels(context.state, namespace))
    if mode == "off" and not request.dry_run:
        return None
    return PredictionPlan(context.pod, namespace, mode, request.dry_run)


@dataclass(slots=True)  # built for every review: no frozen-init cost
class Prediction:
    """The result of a planned prediction: a PreemptionPreview, or why there is none."""

    preview: Mapping[str, Any] | None = None
    skipped: SkipReason | None = None
    failed: bool = False

    @classmethod
    def made(cls, preview: Mapping[str, Any]) -> Prediction:
        return cls(preview=preview)

    @classmethod
    def skip(cls, reason: SkipReason) -> Prediction:
        return cls(skipped=reason)

    @classmethod
    def failure(cls) -> Prediction:
        return cls(failed=True)


def prediction_failed(policy: GuardrailsConfig, namespace: str, state: ClusterState) -> GuardrailDecision:
    """An unexpected predictor error is treated like a skipped prediction: allow, and say so."""
    mode = effective_mode(policy, namespace_labels(state, namespace))
    audit = {AUDIT_DECISION: "skipped", AUDIT_MODE: mode, AUDIT_SKIPPED: "error"}
    warnings = () if mode == "off" else (PREDICTION_FAILED_WARNING,)
    return GuardrailDecision(True, "skipped", mode, warnings=warnings, audit_annotations=audit)


def decide_guardrails(
    context: PodAdmissionContext,
    policy: GuardrailsConfig,
    prediction: Prediction | None,
    *,
    budget_milliseconds: int,
) -> GuardrailDecision:
    """The guardrail decision for a CREATE; ``prediction`` is None when none was planned."""
    namespace = pod_namespace(context)
    namespaces = context.state.namespaces
    if prediction is not None and prediction.skipped is not None:
        return prediction_skipped(policy, namespace=namespace, namespaces=namespaces, reason=prediction.skipped,
                                  budget_milliseconds=budget_milliseconds)
    if prediction is not None and prediction.failed:
        return prediction_failed(policy, namespace, context.state)
    return evaluate_guardrails(
        policy,
        pod_name=context.name_for_messages,
        namespace=namespace,
        user=UserInfo.from_dict(context.request.user_info),
        preview=prediction.preview if prediction is not None else None,
        namespaces=namespaces,
        dry_run=context.request.dry_run,
    )


def guardrail_outcome(context: PodAdmissionContext, decision: GuardrailDecision) -> AdmissionOutcome:
    """The decision as the webhook answers it: 403 with the rules, or allowed with warnings and the annotation."""
    if not decision.allowed:
        return AdmissionOutcome.deny(
            decision.status_code,
            decision.status_reason,
            decision.denial_message or "PreemptGuard guardrail denied the predicted preemption",
            warnings=decision.warnings,
            audit_annotations=decision.audit_annotations,
            denied_by=decision.denied_rules,
        )
    patch = JsonPatchBuilder(context.pod)
    if decision.annotation is not None:
        patch.set(ANNOTATION_PATH, decision.annotation)
    return AdmissionOutcome.allow(patch.operations, warnings=decision.warnings,
                                  audit_annotations=decision.audit_annotations)
