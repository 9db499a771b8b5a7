"""The preemption guardrail policy: given a prediction for a pod CREATE, decide allow / warn / deny.

Pure functions over ``GuardrailsConfig`` (``webhook.config``) and the predictor's typed ``PreemptionResult``:
- mode: ``guardrails.mode``, overridden per namespace by the label ``preemptguard.io/mode``;
- exemptions: the request's namespace, user, group or service account (``guardrails.exempt``);
- rules, named by their configuration keys: ``denyCrossTenantPreemption``, ``maxPdbViolations``,
  ``maxVictims``, ``denyVictimPriorityAtLeast``.

Mode ``off`` evaluates nothing and warns nothing (the prediction is still recorded in the annotations);
``warn`` reports violations as warnings; ``enforce`` denies with HTTP 403. An exempt request is never
denied, but still gets the warnings, marked as not enforced.

A CREATE whose prediction cannot be made (over its budget, too complex, the predictor failed, the cache not
ready, not decided within the admission deadline) is judged by ``guardrails.onUnpredictable``: denied by
default under ``enforce`` (the rule ``onUnpredictable``; a tenant must not get a pod through by making it
expensive to predict), allowed with a warning under ``warn``. A pod that cannot preempt anyone
(``preemptionPolicy: Never``, preemption disabled, no lower-priority pod in the cluster) is never denied for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from webhook.cluster.model import Namespace, labels_of_namespace
from webhook.config import GUARDRAIL_MODES, Exemptions, GuardrailMode, GuardrailsConfig
from webhook.guardrails.disclosure import (
    FULL_DETAIL,
    Audience,
    audience_of,
    count_by_namespace,
    plural,
    tenant_of,
)
from webhook.guardrails.report import (
    compact_prediction,
    csv,
    fit_warnings,
    namespace_breakdown,
    prediction_annotation,
    prediction_warnings,
    to_json,
    truncate,
    victims_breakdown,
)
from webhook.identity import UserInfo
from webhook.preemption.results import Outcome, PreemptionResult
from webhook.routes import MODE_LABEL

RULE_CROSS_TENANT = "denyCrossTenantPreemption"
RULE_MAX_PDB_VIOLATIONS = "maxPdbViolations"
RULE_MAX_VICTIMS = "maxVictims"
RULE_VICTIM_PRIORITY = "denyVictimPriorityAtLeast"
RULES = (RULE_CROSS_TENANT, RULE_MAX_PDB_VIOLATIONS, RULE_MAX_VICTIMS, RULE_VICTIM_PRIORITY)
# The rule of a denial for want of a prediction (the configuration key guardrails.onUnpredictable).
RULE_UNPREDICTABLE = "onUnpredictable"

# Audit annotation keys (the API server prefixes them with the webhook name).
AUDIT_PREDICTION = "prediction"
AUDIT_MODE = "guardrail-mode"
AUDIT_DECISION = "guardrail-decision"
AUDIT_VIOLATIONS = "guardrail-violations"
AUDIT_EXEMPTION = "guardrail-exemption"
AUDIT_SKIPPED = "prediction-skipped"

Decision = Literal["off", "allowed", "warned", "denied", "exempt", "skipped"]
# Why no prediction was made: over its time budget, the cache not synced yet, the predictor failed, the pod is
# beyond a documented limit (webhook.preemption.complexity), the review was not decided within the admission
# deadline, or the pod was never read (its review over the body size limit, or more than the webhook could hold
# in memory just then).
SkipReason = Literal["budget-exceeded", "cache-not-ready", "error", "too-complex", "deadline-exceeded", "too-large",
                     "overloaded"]


@dataclass(frozen=True, slots=True)
class Unpredictable:
    """Why no prediction was made for a pod: the reason, and for ``too-complex`` which limit it is beyond."""

    reason: SkipReason
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str  # one of RULES (the configuration key)
    detail: str  # full sentence fragment for the denial message
    warning: str  # the same, under 120 characters


@dataclass(frozen=True, slots=True)
class GuardrailDecision:
    allowed: bool
    decision: Decision  # for metrics and the audit log
    mode: GuardrailMode  # effective mode for the request's namespace
    violations: tuple[Violation, ...] = ()
    exemption: str | None = None  # e.g. "group system:masters"
    warnings: tuple[str, ...] = ()
    # Full status.message when denied (HTTP 403, reason Forbidden), e.g. 'pods "x" is forbidden: ...'.
    denial_message: str | None = None
    # Value for the pod annotation preemptguard.io/prediction (None when no prediction was made).
    annotation: str | None = None
    audit_annotations: Mapping[str, str] = field(default_factory=dict)

    # A denial's status: 403 Forbidden, or 400 BadRequest for a pod beyond a documented limit.
    status_code: int = 403
    status_reason: str = "Forbidden"

    @property
    def denied_rules(self) -> tuple[str, ...]:
        return tuple(v.rule for v in self.violations) if not self.allowed else ()


# --- mode, exemptions, tenants ----------------------------------------------------------------------

def mode_override(namespace_labels: Mapping[str, str]) -> GuardrailMode | None:
    """The namespace's ``preemptguard.io/mode`` label when it names a valid mode."""
    value = namespace_labels.get(MODE_LABEL)
    for mode in GUARDRAIL_MODES:
        if value == mode:
            return mode
    return None


def effective_mode(policy: GuardrailsConfig, namespace_labels: Mapping[str, str]) -> GuardrailMode:
    """The mode for a namespace: its label override, else ``guardrails.mode``. Call it before predicting:
    with ``off`` the caller may skip the prediction altogether."""
    return mode_override(namespace_labels) or policy.mode


def find_exemption(exempt: Exemptions, namespace: str, user: UserInfo) -> str | None:
    """Why the request is exempt (``namespace kube-system``, ``user alice``, ...), or None."""
    if namespace in exempt.namespaces:
        return f"namespace {namespace}"
    if user.username and user.username in exempt.users:
        return f"user {user.username}"
    account = user.service_account
    if account is not None:
        sa_namespace, sa_name = account
        for entry in exempt.service_accounts:
            if entry in (f"{sa_namespace}/{sa_name}", f"{sa_namespace}/*"):
                return f"service account {sa_namespace}/{sa_name}"
    for group in user.groups:
        if group in exempt.groups:
            return f"group {group}"
    return None


# --- rules ------------------------------------------------------------------------------------------

def _cross_tenant(policy: GuardrailsConfig, outcome: PreemptionResult, audience: Audience) -> Violation | None:
    own, label = audience.tenant, policy.tenant_label
    foreign = [v for v in outcome.victims if tenant_of(v.namespace, audience.namespaces, label) != own]
    if not foreign:
        return None
    head = f"would preempt {plural(len(foreign), 'pod')} of other tenants"
    if not audience.everything:  # which tenants, and where, is theirs to know
        mine = own.describe(label) if audience.names_tenant else f"that of namespace {audience.namespace}"
        return Violation(RULE_CROSS_TENANT, f"{RULE_CROSS_TENANT}: the pod {head}, but its own tenant is {mine}",
                         truncate(f"{RULE_CROSS_TENANT}: {head}"))
    counts = count_by_namespace(foreign)
    tenants = sorted({tenant_of(ns, audience.namespaces, label).describe(label) for ns in counts})
    detail = (f"{RULE_CROSS_TENANT}: the pod {head} ({namespace_breakdown(counts, 2000)}; tenant "
              f"{', '.join(tenants)}), but its own tenant is {own.describe(label)}")
    warning = truncate(f"{RULE_CROSS_TENANT}: {head} ({namespace_breakdown(counts)})")
    return Violation(RULE_CROSS_TENANT, detail, warning)


def _max_pdb_violations(policy: GuardrailsConfig, outcome: PreemptionResult, audience: Audience) -> Violation | None:
    limit = policy.max_pdb_violations
    if limit is None or outcome.pdb_violations <= limit:
        return None
    named, hidden = audience.split(v for v in outcome.victims if v.pdb_violation)
    namespaces = sorted({v.namespace for v in named})
    where = f" in {', '.join(namespaces)}" if namespaces else ""
    if hidden:
        where += f" and {len(hidden)} {audience.unnamed}" if namespaces else f" {audience.unnamed}"
    text = (f"{RULE_MAX_PDB_VIOLATIONS}: the preemption would violate "
            f"{plural(outcome.pdb_violations, 'PodDisruptionBudget')}{where} (at most {limit} allowed)")
    warning = (f"{RULE_MAX_PDB_VIOLATIONS}: {plural(outcome.pdb_violations, 'PDB violation')} "
               f"(at most {limit} allowed){where}")
    return Violation(RULE_MAX_PDB_VIOLATIONS, text, truncate(warning))


def _max_victims(policy: GuardrailsConfig, outcome: PreemptionResult, audience: Audience) -> Violation | None:
    limit = policy.max_victims
    if limit is None or len(outcome.victims) <= limit:
        return None
    head = f"would preempt {plural(len(outcome.victims), 'pod')}"
    text = (f"{RULE_MAX_VICTIMS}: the pod {head} ({victims_breakdown(outcome.victims, audience, 2000)}), "
            f"at most {limit} allowed")
    warning = (f"{RULE_MAX_VICTIMS}: {head}, at most {limit} allowed "
               f"({victims_breakdown(outcome.victims, audience, 40)})")
    return Violation(RULE_MAX_VICTIMS, text, truncate(warning))


def _victim_priority(policy: GuardrailsConfig, outcome: PreemptionResult, audience: Audience) -> Violation | None:
    threshold = policy.deny_victim_priority_at_least
    if threshold is None:
        return None
    high = [v for v in outcome.victims if v.priority >= threshold]
    if not high:
        return None
    top = max(v.priority for v in high)
    text = (f"{RULE_VICTIM_PRIORITY}: the pod would preempt {plural(len(high), 'pod')} with priority "
            f"{threshold} or higher ({victims_breakdown(high, audience, 2000)}; highest {top})")
    warning = (f"{RULE_VICTIM_PRIORITY}: would preempt {plural(len(high), 'pod')} with priority >= {threshold} "
               f"({victims_breakdown(high, audience, 40)})")
    return Violation(RULE_VICTIM_PRIORITY, text, truncate(warning))


def evaluate_rules(policy: GuardrailsConfig, outcome: PreemptionResult, audience: Audience) -> tuple[Violation, ...]:
    """Every configured rule the predicted preemption breaks, in ``RULES`` order, worded for ``audience``
    (the requesting pod's tenant: victims of other tenants are counted, not named)."""
    if outcome.outcome != Outcome.PREEMPTS or not outcome.victims:
        return ()
    found = [
        _cross_tenant(policy, outcome, audience) if policy.deny_cross_tenant_preemption else None,
        _max_pdb_violations(policy, outcome, audience),
        _max_victims(policy, outcome, audience),
        _victim_priority(policy, outcome, audience),
    ]
    return tuple(v for v in found if v is not None)


# --- decision ---------------------------------------------------------------------------------------

def exemption_hint(namespace: str) -> str:
    return (f"To be exempted, ask a cluster admin to add namespace {namespace}, your user, one of your groups "
            f"or your service account to guardrails.exempt in the PreemptGuard configuration, "
            f"or to label namespace {namespace} with {MODE_LABEL}=warn")


def denial_message(pod_name: str, namespace: str, outcome: PreemptionResult,
                   violations: tuple[Violation, ...]) -> str:
    rules = "; ".join(v.detail for v in violations)
    node = f" on node {outcome.node}" if outcome.node else ""
    return (f'pods "{pod_name}" is forbidden: PreemptGuard guardrail denied the predicted preemption{node} '
            f"({plural(len(violations), 'rule')} violated) - {rules}. {exemption_hint(namespace)}")


def _audit(decision: Decision, mode: GuardrailMode, prediction_json: str | None,
           violations: tuple[Violation, ...], exemption: str | None) -> dict[str, str]:
    audit: dict[str, str] = {AUDIT_DECISION: decision, AUDIT_MODE: mode}
    if prediction_json is not None:
        audit[AUDIT_PREDICTION] = prediction_json
    if violations:
        audit[AUDIT_VIOLATIONS] = csv(v.rule for v in violations)
    if exemption:
        audit[AUDIT_EXEMPTION] = exemption
    return audit


def _invalid_label_warning(namespace: str, labels: Mapping[str, str], mode: GuardrailMode) -> list[str]:
    value = labels.get(MODE_LABEL)
    if value is None or mode_override(labels) is not None:
        return []
    return [truncate(f"namespace {namespace} label {MODE_LABEL}={value} is not off, warn or enforce; using {mode}")]


def evaluate_guardrails(
    policy: GuardrailsConfig,
    *,
    pod_name: str,
    namespace: str,
    user: UserInfo,
    outcome: PreemptionResult | None,
    namespaces: Mapping[str, Namespace],
    dry_run: bool = False,
    callers_authenticated: bool = False,
) -> GuardrailDecision:
    """Decide a pod CREATE from its prediction (``outcome``: the pod's ``PreemptionResult``, None when no
    prediction was planned).

    ``namespaces``: the cluster's Namespaces by name (``ClusterState.namespaces``), for the mode label and
    tenant labels. ``pod_name``: the name for the denial message (name, else generateName, else ``Unknown``).
    ``dry_run``: the annotation carries the full preview instead of the compact summary.
    ``callers_authenticated``: the API server proves itself with a client certificate (``--client-ca``), the
    condition for naming the tenant's victims and for ``auditDetail: full``; otherwise the namespace is only a
    claim, and ``unverifiedDisclosure`` says what may be named.
    """
    labels = labels_of_namespace(namespaces, namespace)
    mode = effective_mode(policy, labels)
    audience = audience_of(namespace, namespaces, policy.tenant_label, policy.disclosure,
                           unverified=None if callers_authenticated else policy.unverified_disclosure)
    audit_audience = FULL_DETAIL if policy.audit_detail == "full" and callers_authenticated else audience
    compact = to_json(compact_prediction(outcome, audience)) if outcome is not None else None
    audited = compact if audit_audience is audience or outcome is None else to_json(
        compact_prediction(outcome, audit_audience))
    annotation = (prediction_annotation(outcome, audience, dry_run=dry_run, compact_json=compact)
                  if outcome is not None else None)
    if mode == "off":
        return GuardrailDecision(True, "off", mode, annotation=annotation,
                                 audit_annotations=_audit("off", mode, audited, (), None))
    violations = evaluate_rules(policy, outcome, audience) if outcome is not None else ()
    exemption = find_exemption(policy.exempt, namespace, user) if violations else None
    report = prediction_warnings(outcome, audience) if outcome is not None else []
    label_warning = _invalid_label_warning(namespace, labels, mode)

    if violations and mode == "enforce" and exemption is None and outcome is not None:
        message = denial_message(pod_name, namespace, outcome, violations)
        warnings = fit_warnings([*(v.warning for v in violations), *report, *label_warning])
        return GuardrailDecision(False, "denied", mode, violations, None, warnings, message, annotation,
                                 _audit("denied", mode, audited, violations, None))
    if exemption is not None:
        note = truncate(f"guardrails not enforced: the request is exempt ({exemption})")
        warnings = fit_warnings([*(v.warning for v in violations), note, *report, *label_warning])
        return GuardrailDecision(True, "exempt", mode, violations, exemption, warnings, None, annotation,
                                 _audit("exempt", mode, audited, violations, exemption))
    decision: Decision = "warned" if violations else "allowed"
    warnings = fit_warnings([*(v.warning for v in violations), *report, *label_warning])
    return GuardrailDecision(True, decision, mode, violations, None, warnings, None, annotation,
                             _audit(decision, mode, audited, violations, None))


def _unpredictable_why(unpredictable: Unpredictable, budget_milliseconds: int) -> str:
    reason = unpredictable.reason
    if reason == "budget-exceeded":
        return f"it did not finish within the {budget_milliseconds} ms budget"
    if reason == "cache-not-ready":
        return "the cluster cache is not ready yet"
    if reason == "too-complex":
        return f"the pod is too complex to predict ({unpredictable.detail})" if unpredictable.detail else (
            "the pod is too complex to predict")
    if reason == "deadline-exceeded":
        return "the webhook did not decide within its admission deadline"
    if reason == "too-large":
        return "its admission review is over the webhook's size limit"
    if reason == "overloaded":
        return "the webhook had no memory for its review just then"
    return "the prediction failed (see the webhook log)"


def _unpredictable_fix(reason: SkipReason) -> str:
    if reason == "too-complex":
        return "remove repeated or unneeded affinity terms, spread constraints or tolerations"
    if reason == "too-large":
        return "make the pod's manifest smaller"
    if reason == "error":
        return "retry, and report the webhook's log to a cluster admin if it persists"
    return "retry (the webhook may be busy), or simplify the pod's scheduling constraints"


def prediction_skipped_warning(reason: SkipReason | Unpredictable, budget_milliseconds: int) -> str:
    unpredictable = reason if isinstance(reason, Unpredictable) else Unpredictable(reason)
    why = _unpredictable_why(unpredictable, budget_milliseconds)
    return truncate(f"PreemptGuard made no preemption prediction for this pod: {why}")


def unpredictable_denial_message(pod_name: str, namespace: str, unpredictable: Unpredictable,
                                 budget_milliseconds: int) -> str:
    why = _unpredictable_why(unpredictable, budget_milliseconds)
    return (f'pods "{pod_name}" is forbidden: PreemptGuard could not predict whether the pod would preempt other '
            f"pods: {why}. Under guardrails mode enforce such a pod is denied ({RULE_UNPREDICTABLE}: deny). "
            f"To get it through: {_unpredictable_fix(unpredictable.reason)}; or give it a PriorityClass with "
            f"preemptionPolicy: Never (a pod that cannot preempt is never denied for this). "
            f"{exemption_hint(namespace)}")


def prediction_skipped(policy: GuardrailsConfig, *, namespace: str, namespaces: Mapping[str, Namespace],
                       reason: SkipReason | Unpredictable, budget_milliseconds: int, pod_name: str = "Unknown",
                       user: UserInfo | None = None, may_preempt: bool = True) -> GuardrailDecision:
    """The decision for a CREATE whose prediction was not made (or failed).

    ``guardrails.onUnpredictable`` (by default: deny under ``enforce``, allow under ``warn``) decides, unless
    the request is exempt or the pod cannot preempt anyone (``may_preempt`` False): those are allowed with a
    warning saying so (none under ``off``).
    """
    unpredictable = reason if isinstance(reason, Unpredictable) else Unpredictable(reason)
    mode = effective_mode(policy, labels_of_namespace(namespaces, namespace))
    audit: dict[str, str] = {AUDIT_DECISION: "skipped", AUDIT_MODE: mode, AUDIT_SKIPPED: unpredictable.reason}
    if mode == "off":
        return GuardrailDecision(True, "skipped", mode, audit_annotations=audit)
    warning = prediction_skipped_warning(unpredictable, budget_milliseconds)
    if policy.unpredictable_action(mode) == "allow" or not may_preempt:
        return GuardrailDecision(True, "skipped", mode, warnings=(warning,), audit_annotations=audit)
    violation = Violation(RULE_UNPREDICTABLE, warning, truncate(f"{RULE_UNPREDICTABLE}: {warning}"))
    exemption = find_exemption(policy.exempt, namespace, user or UserInfo())
    if exemption is not None:
        note = truncate(f"guardrails not enforced: the request is exempt ({exemption})")
        return GuardrailDecision(True, "exempt", mode, (violation,), exemption, (warning, note),
                                 audit_annotations={**audit, AUDIT_DECISION: "exempt",
                                                    AUDIT_VIOLATIONS: RULE_UNPREDICTABLE,
                                                    AUDIT_EXEMPTION: exemption})
    message = unpredictable_denial_message(pod_name, namespace, unpredictable, budget_milliseconds)
    too_complex = unpredictable.reason == "too-complex"
    return GuardrailDecision(False, "denied", mode, (violation,), None, (violation.warning,), message,
                             audit_annotations={**audit, AUDIT_DECISION: "denied",
                                                AUDIT_VIOLATIONS: RULE_UNPREDICTABLE},
                             status_code=400 if too_complex else 403,
                             status_reason="BadRequest" if too_complex else "Forbidden")
