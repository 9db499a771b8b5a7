"""The pod admission pipeline, with no HTTP in it.

    read the pod once → fetch state → Priority plugin → quota → (extra steps) → predict → guardrails → decision

``PodAdmission.admit`` takes a parsed ``AdmissionRequest`` and returns an ``AdmissionDecision``; the server
turns JSON into the one and the other back into JSON. Its collaborators come in through small protocols:
the cluster source (``webhook.sources.source.ClusterSource``), a ``Predictor`` (the prediction thread pool
with its time budget), an ``AdmissionRecorder`` (metrics and logs) and, with a live cluster, a
``PredictionFollower`` (the observer of docs/interfaces.md §9, which learns what the scheduler then did).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from webhook.admission.decision import ALLOWED, AdmissionDecision, internal_error
from webhook.admission.pod import PodReview, is_pod_admission, read_pod_review
from webhook.admission.priority import admit_priority
from webhook.admission.review import AdmissionRequest
from webhook.cluster.copying import replace_fields
from webhook.cluster.model import PREEMPT_NEVER, Pod, PriorityClass, ResourceQuota, labels_of_namespace
from webhook.cluster.snapshot import ClusterState
from webhook.config import Config, GuardrailsConfig, QuotaConfig, SchedulerConfig
from webhook.errors import PredictionTimeout, PreemptGuardError
from webhook.guardrails import (
    GuardrailDecision,
    SkipReason,
    Unpredictable,
    effective_mode,
    evaluate_guardrails,
    prediction_skipped,
)
from webhook.preemption.complexity import too_complex
from webhook.preemption.framework.index import lowest_priority_level
from webhook.preemption.results import PreemptionResult
from webhook.preemption.simulate import PodQuotaCheck, resource_quota_only
from webhook.priority.quota import QuotaDenial, admit_pod_quota
from webhook.priority.resolution import PriorityRejection, effective_classes, resolve_pod_priority
from webhook.routes import GUARDRAIL_DECISION_ANNOTATION, PREDICTION_ANNOTATION, PREDICTION_ID_ANNOTATION
from webhook.sources.source import ClusterSource

# The admission deadline's fail-open: the same result the API server would produce with failurePolicy: Ignore,
# but visible to the user and audited.
DEADLINE_WARNING = (
    "PreemptGuard did not finish its checks within {seconds:g}s and admitted the pod without them "
    "(the API server's Priority admission plugin still applied)"
)
AUDIT_DEADLINE = "deadline-exceeded"
ANNOTATION_PATH = ("metadata", "annotations", PREDICTION_ANNOTATION)
PREDICTION_ID_PATH = ("metadata", "annotations", PREDICTION_ID_ANNOTATION)
GUARDRAIL_DECISION_PATH = ("metadata", "annotations", GUARDRAIL_DECISION_ANNOTATION)
GUARDRAIL_DENIAL = "PreemptGuard guardrail denied the predicted preemption"


class Predictor(Protocol):
    async def predict(self, state: ClusterState, pod: Pod, *, scheduler: SchedulerConfig,
                      budget_seconds: float) -> PreemptionResult:
        """The prediction for one admitted pod; raises ``PredictionTimeout`` when the budget passes first."""
        ...


class AdmissionRecorder(Protocol):
    """What the pipeline reports as it goes (the server counts it in metrics and writes the logs)."""

    def prediction_made(self, result: PreemptionResult, seconds: float) -> None: ...

    def prediction_failed(self, review: PodReview, error: Exception, seconds: float) -> None: ...

    def prediction_skipped(self, reason: SkipReason) -> None: ...

    def guardrail_decided(self, decision: GuardrailDecision, result: PreemptionResult | None, *,
                          dry_run: bool) -> None: ...


class PredictionFollower(Protocol):
    """Follows a pod predicted at a non-dry-run CREATE that is allowed, to hold the prediction against what the
    scheduler does (docs/interfaces.md §9)."""

    def follow(self, review: PodReview, result: PreemptionResult) -> str:
        """Start following; returns the id the patch writes in ``preemptguard.io/prediction-id``."""
        ...


class ProbeRateLimit(Protocol):
    """Per-caller rate of dry-run previews (``prediction.previewsPerMinute``): None to go on, else the wait."""

    def take(self, caller: str, asked: Hashable | None = None) -> float | None: ...


# An extra stage after the quota: an allowed decision (warnings, audit annotations) or a denial.
PodStep = Callable[[PodReview], AdmissionDecision]
RULE_PREVIEW_RATE = "previewsPerMinute"


@dataclass(slots=True)
class PodAdmission:
    """``await admit(request)`` for every review sent to ``/mutate/pods``."""

    source: ClusterSource
    predictor: Predictor
    recorder: AdmissionRecorder
    # The configuration in force for the next request (it may be reloaded between requests).
    config: Callable[[], Config]
    steps: list[PodStep] = field(default_factory=list)
    # The API server proves itself with a client certificate (``--client-ca``): ``auditDetail: full`` applies.
    callers_authenticated: bool = False
    # With a live cluster source: each admitted prediction is followed (the patch writes its id on the pod).
    follower: PredictionFollower | None = None
    # Dry-run CREATEs carry a full preview: at most prediction.previewsPerMinute per user (429 beyond).
    probe_limit: ProbeRateLimit | None = None

    async def admit(self, request: AdmissionRequest, review: PodReview | None = None) -> AdmissionDecision:
        """The decision for ``request``; ``review``: its pod already read (``read_pod_review``), e.g. off the loop."""
        if not is_pod_admission(request):
            return ALLOWED
        if review is None:
            review = read_pod_review(request)
        config = self.config()
        state = self.source.state
        try:
            classes = await self.priority_classes(review, state)
        except ClassLookupFailed as exc:
            return internal_error(str(exc))
        decision = admit_priority(review, classes)
        for step in (lambda r: admit_quota(r, config.quota, state), *self.steps):
            if not decision.allowed:
                return decision
            decision = decision.merged(step(review))
        if decision.allowed and review.is_create:
            decision = decision.merged(await self.guard(review, state, config))
        return decision.with_patch(review.patch.operations) if decision.allowed else decision

    def undecided(self, request: AdmissionRequest, seconds: float,
                  review: PodReview | None = None) -> AdmissionDecision:
        """The answer to a review not decided within the admission deadline of ``seconds`` (the server keeps the
        clock): a denial when it is a guarded CREATE that ``onUnpredictable`` denies and whose pod might preempt
        someone, else allowed, with a warning that says so. ``review``: its pod as already read, if it was (it
        is not read again here: past the deadline the event loop must answer at once); without it the pod is
        judged unknown."""
        denial = self.undecided_denial(request, review)
        if denial is not None:
            return denial
        return AdmissionDecision.allow(warnings=[DEADLINE_WARNING.format(seconds=seconds)],
                                       audit_annotations={AUDIT_DEADLINE: f"{seconds:g}s"})

    def undecided_denial(self, request: AdmissionRequest, review: PodReview | None) -> AdmissionDecision | None:
        """``undecided``'s denial under ``guardrails.onUnpredictable``, or None."""
        if not is_pod_admission(request) or request.operation != "CREATE":
            return None
        state = self.source.state
        config = self.config()
        policy = config.guardrails
        namespace = review.namespace if review is not None else (request.namespace or "default")
        if review is not None and not prediction_planned(review, policy, state):
            return None
        if review is None and effective_mode(policy, labels_of_namespace(state.namespaces, namespace)) == "off" \
                and not request.dry_run:
            return None
        may_preempt = True  # a pod never read may preempt anyone
        if review is not None:
            pod = review.pod
            try:
                resolved = resolve_pod_priority(pod.priority_class_name, pod.priority, pod.preemption_policy,
                                                effective_classes(state))
                pod = replace_fields(pod, priority=resolved.priority, preemption_policy=resolved.preemption_policy)
            except PriorityRejection:
                pass  # judged as it stands (it may preempt)
            may_preempt = may_preempt_anyone(pod, state, config.scheduler, state_known=self.source.is_ready())
        decision = prediction_skipped(policy, namespace=namespace, namespaces=state.namespaces,
                                      reason=Unpredictable("deadline-exceeded"),
                                      budget_milliseconds=config.prediction.budget_milliseconds,
                                      pod_name=review.name_for_messages if review is not None else (
                                          request.name or "Unknown"),
                                      user=request.user_info, may_preempt=may_preempt)
        if decision.allowed:
            return None
        self.recorder.guardrail_decided(decision, None, dry_run=request.dry_run)
        return AdmissionDecision.deny(decision.status_code, decision.status_reason,
                                      decision.denial_message or GUARDRAIL_DENIAL, warnings=decision.warnings,
                                      audit_annotations=decision.audit_annotations, denied_by=decision.denied_rules)

    def admit_unread(self, request: AdmissionRequest, reason: UnreadReason) -> AdmissionDecision:
        """A pod review whose object was never read (its body over the size limit, or no memory for it now): a
        CREATE cannot be predicted, so it is decided as any prediction that could not be made; anything else is
        allowed with a warning (the API server's own Priority plugin still applies)."""
        if not is_pod_admission(request):
            return ALLOWED
        config = self.config()
        if request.operation != "CREATE":
            return AdmissionDecision.allow(warnings=[unread_warning(reason)])
        state = self.source.state
        decision = prediction_skipped(config.guardrails, namespace=request.namespace, namespaces=state.namespaces,
                                      reason=reason, budget_milliseconds=config.prediction.budget_milliseconds)
        self.recorder.prediction_skipped(reason)
        if not decision.allowed:
            return AdmissionDecision.deny(decision.status_code, decision.status_reason,
                                          decision.denial_message or GUARDRAIL_DENIAL, warnings=decision.warnings,
                                          audit_annotations=decision.audit_annotations, denied_by=decision.denied_rules)
        return AdmissionDecision.allow(warnings=decision.warnings, audit_annotations=decision.audit_annotations)

    async def priority_classes(self, review: PodReview, state: ClusterState) -> Mapping[str, PriorityClass]:
        """The classes the Priority plugin resolves against: the cache, plus one direct lookup of a class a
        CREATE names that the cache lacks (it may have been created a moment ago)."""
        classes = effective_classes(state)
        name = review.pod.priority_class_name
        if not review.is_create or not name or name in classes:
            return classes
        try:
            found = await self.source.get_priority_class(name)
        except (PreemptGuardError, OSError, TimeoutError) as exc:
            raise ClassLookupFailed(f"failed to get PriorityClass with name {name}: {exc}") from exc
        return classes if found is None else {**classes, found.name: found}

    async def guard(self, review: PodReview, state: ClusterState, config: Config) -> AdmissionDecision:
        """Predict (when planned) and decide by the guardrail policy; a prediction that cannot be made is judged
        by ``guardrails.onUnpredictable``."""
        policy = config.guardrails
        predicted: PreemptionResult | Unpredictable | None = None
        if prediction_planned(review, policy, state):
            limited = self.probe_limited(review, config)
            if limited is not None:
                return limited
            predicted = await self.predict(review, state, config)
        decision = decide_guardrails(review, policy, predicted, state,
                                     budget_milliseconds=config.prediction.budget_milliseconds,
                                     callers_authenticated=self.callers_authenticated,
                                     may_preempt=(isinstance(predicted, Unpredictable) and may_preempt_anyone(
                                         review.pod, state, config.scheduler, state_known=self.source.is_ready())))
        result = predicted if isinstance(predicted, PreemptionResult) else None
        self.recorder.guardrail_decided(decision, result, dry_run=review.request.dry_run)
        outcome = guardrail_outcome(review, decision)
        # The last stage: an allowed pod is created unless a later admission step refuses it.
        if decision.allowed and result is not None and self.follower is not None and not review.request.dry_run:
            review.patch.set(PREDICTION_ID_PATH, self.follower.follow(review, result))
            review.patch.set(GUARDRAIL_DECISION_PATH, decision_annotation(decision))
        return outcome

    async def predict(self, review: PodReview, state: ClusterState,
                      config: Config) -> PreemptionResult | Unpredictable:
        if not self.source.is_ready():
            return self._skipped(Unpredictable("cache-not-ready"))
        complexity = too_complex(review.pod)
        if complexity is not None:  # not simulated: its cost would be the tenant's choice (issue #24)
            return self._skipped(Unpredictable("too-complex", complexity))
        started = time.perf_counter()
        try:
            result = await self.predictor.predict(state, review.pod, scheduler=config.scheduler,
                                                  budget_seconds=config.prediction.budget_milliseconds / 1000)
        except PredictionTimeout:
            return self._skipped(Unpredictable("budget-exceeded"))
        except Exception as exc:  # a predictor bug: onUnpredictable decides, and the log says what broke
            self.recorder.prediction_failed(review, exc, time.perf_counter() - started)
            return Unpredictable("error")
        self.recorder.prediction_made(result, time.perf_counter() - started)
        return result

    def probe_limited(self, review: PodReview, config: Config) -> AdmissionDecision | None:
        """A 429 denial for a dry run over its user's rate of previews, else None (dry runs only: a real
        create is paid for by the pod it creates)."""
        if not review.request.dry_run or self.probe_limit is None:
            return None
        # The same pod again (a workload's replicas differ by name only) is no new probe.
        asked = (review.namespace, replace_fields(review.pod, name="", uid=""))
        wait = self.probe_limit.take(review.request.user_info.username or "anonymous", asked)
        if wait is None:
            return None
        per_minute = config.prediction.previews_per_minute
        message = (f'pods "{review.name_for_messages}" is forbidden: too many dry-run previews from '
                   f"{review.request.user_info.display_name}: PreemptGuard answers at most {per_minute} per minute "
                   f"per user (prediction.previewsPerMinute); retry in {max(1, math.ceil(wait))} s")
        return AdmissionDecision.deny(429, "TooManyRequests", message, denied_by=(RULE_PREVIEW_RATE,))

    def _skipped(self, unpredictable: Unpredictable) -> Unpredictable:
        self.recorder.prediction_skipped(unpredictable.reason)
        return unpredictable


# Why a review's pod was never read (a SkipReason of the guardrails).
UnreadReason = Literal["too-large", "overloaded"]


def unread_warning(reason: UnreadReason) -> str:
    why = "over the size limit" if reason == "too-large" else "more than the webhook could hold in memory just then"
    return f"PreemptGuard did not check this request: its review was {why}"


class ClassLookupFailed(Exception):
    """The direct lookup of a PriorityClass failed: upstream answers with a plain internal error."""


def pod_quota_check(quota: QuotaConfig, state: ClusterState) -> PodQuotaCheck:
    """The pipeline's quota stage for the pods /preview simulates (``webhook.preemption.simulate.PodQuotaCheck``):
    ``quota.classes`` and ResourceQuota with ``limitedResources``, as ``admit_quota`` applies them, so a preview
    predicts only pods the caller could create. Without a quota configuration, upstream ResourceQuota alone
    (the API server's own plugin refuses a pod over quota before the scheduler sees it)."""
    if quota.is_empty:
        return resource_quota_only

    def check(pod: Pod, quotas: Sequence[ResourceQuota]) -> QuotaDenial | None:
        return admit_pod_quota(pod, namespace=pod.namespace,
                               namespace_labels=labels_of_namespace(state.namespaces, pod.namespace),
                               operation="CREATE", quotas=quotas, config=quota)

    return check


def admit_quota(review: PodReview, quota: QuotaConfig, state: ClusterState) -> AdmissionDecision:
    """``quota.classes`` and upstream ResourceQuota admission for a pod CREATE on the mutated pod.

    With no quota configuration at all nothing is checked (docs/interfaces.md §6: no configuration file, no
    quota rules); the API server's own ResourceQuota plugin still applies after the webhooks.
    """
    if quota.is_empty or not review.is_create:
        return ALLOWED
    denial = admit_pod_quota(
        review.pod,
        namespace=review.namespace,
        namespace_labels=labels_of_namespace(state.namespaces, review.namespace),
        operation=review.request.operation,
        quotas=list(state.quotas_by_namespace.get(review.namespace, {}).values()),
        config=quota,
        subresource=review.request.sub_resource,
    )
    if denial is None:
        return ALLOWED
    return AdmissionDecision.deny(denial.code, denial.reason, denial.message, denied_by=(denial.rule,))


def prediction_planned(review: PodReview, policy: GuardrailsConfig, state: ClusterState) -> bool:
    """A CREATE the scheduler will place gets a prediction, unless the namespace's guardrail mode is ``off``
    — except on a dry run, whose annotation carries the full preview ``kubectl preempt-preview`` reads."""
    if not review.is_create or review.pod.node_name:
        return False  # created already bound: it bypasses the scheduler, so it never preempts
    mode = effective_mode(policy, labels_of_namespace(state.namespaces, review.namespace))
    return mode != "off" or review.request.dry_run


def may_preempt_anyone(pod: Pod, state: ClusterState, scheduler: SchedulerConfig, *, state_known: bool = True) -> bool:
    """False when the (resolved) pod cannot evict anybody whatever a prediction would say: ``preemptionPolicy:
    Never``, preemption disabled in the scheduler profile, or no pod of lower priority bound anywhere (asked
    only when ``state_known``: a cache that has not synced yet proves nothing)."""
    if pod.preemption_policy == PREEMPT_NEVER or not scheduler.preemption_enabled:
        return False
    if not state_known:
        return True
    lowest = lowest_priority_level(state)
    return lowest is None or lowest < pod.effective_priority


def decide_guardrails(review: PodReview, policy: GuardrailsConfig,
                      predicted: PreemptionResult | Unpredictable | SkipReason | None, state: ClusterState, *,
                      budget_milliseconds: int, callers_authenticated: bool = False,
                      may_preempt: bool = True) -> GuardrailDecision:
    """The guardrail decision for a CREATE; ``predicted`` is None when no prediction was planned, an
    ``Unpredictable`` (or its reason) when none could be made; ``may_preempt`` (``may_preempt_anyone``) False
    when the pod cannot evict anybody, which onUnpredictable never denies."""
    if isinstance(predicted, (str, Unpredictable)):
        return prediction_skipped(policy, namespace=review.namespace, namespaces=state.namespaces, reason=predicted,
                                  budget_milliseconds=budget_milliseconds, pod_name=review.name_for_messages,
                                  user=review.request.user_info, may_preempt=may_preempt)
    return evaluate_guardrails(policy, pod_name=review.name_for_messages, namespace=review.namespace,
                               user=review.request.user_info, outcome=predicted, namespaces=state.namespaces,
                               dry_run=review.request.dry_run, callers_authenticated=callers_authenticated)


def decision_annotation(decision: GuardrailDecision) -> str:
    """``preemptguard.io/guardrail-decision``: the decision and the rules it found violated (``warned:
    maxVictims``), which the victims' tenants are told; never who is exempt or why."""
    rules = ",".join(violation.rule for violation in decision.violations)
    return f"{decision.decision}: {rules}" if rules else decision.decision


def guardrail_outcome(review: PodReview, decision: GuardrailDecision) -> AdmissionDecision:
    """403 with the violated rules, or allowed with warnings and the prediction annotation on the pod."""
    if not decision.allowed:
        return AdmissionDecision.deny(decision.status_code, decision.status_reason,
                                      decision.denial_message or GUARDRAIL_DENIAL, warnings=decision.warnings,
                                      audit_annotations=decision.audit_annotations, denied_by=decision.denied_rules)
    if decision.annotation is not None:
        review.patch.set(ANNOTATION_PATH, decision.annotation)
    return AdmissionDecision.allow(warnings=decision.warnings, audit_annotations=decision.audit_annotations)
