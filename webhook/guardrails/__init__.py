"""Preemption guardrails: mode, exemptions and rules applied to a predicted preemption, and its reporting."""

from webhook.guardrails.disclosure import Audience, Tenant, audience_of, tenant_of
from webhook.guardrails.policy import (
    RULE_UNPREDICTABLE,
    RULES,
    GuardrailDecision,
    SkipReason,
    Unpredictable,
    Violation,
    effective_mode,
    evaluate_guardrails,
    evaluate_rules,
    find_exemption,
    prediction_skipped,
    prediction_skipped_warning,
)
from webhook.guardrails.report import fit_warnings, prediction_annotation

__all__ = [
    "RULES",
    "RULE_UNPREDICTABLE",
    "Audience",
    "GuardrailDecision",
    "SkipReason",
    "Tenant",
    "Unpredictable",
    "Violation",
    "audience_of",
    "effective_mode",
    "evaluate_guardrails",
    "evaluate_rules",
    "find_exemption",
    "fit_warnings",
    "prediction_annotation",
    "prediction_skipped",
    "prediction_skipped_warning",
    "tenant_of",
]
