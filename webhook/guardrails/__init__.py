"""Preemption guardrails: mode, exemptions and rules applied to a predicted preemption, and its reporting."""

from webhook.guardrails.policy import (
    MODE_LABEL,
    RULES,
    GuardrailDecision,
    Tenant,
    Violation,
    effective_mode,
    evaluate_guardrails,
    evaluate_rules,
    find_exemption,
    prediction_skipped,
    prediction_skipped_warning,
    tenant_of,
)
from webhook.guardrails.prediction import PredictedOutcome, UserInfo, Victim, outcome_from_preview
from webhook.guardrails.report import PREDICTION_ANNOTATION, fit_warnings, prediction_annotation

__all__ = [
    "MODE_LABEL",
    "PREDICTION_ANNOTATION",
    "RULES",
    "GuardrailDecision",
    "PredictedOutcome",
    "Tenant",
    "UserInfo",
    "Victim",
    "Violation",
    "effective_mode",
    "evaluate_guardrails",
    "evaluate_rules",
    "find_exemption",
    "fit_warnings",
    "outcome_from_preview",
    "prediction_annotation",
    "prediction_skipped",
    "prediction_skipped_warning",
    "tenant_of",
]
