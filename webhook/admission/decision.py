"""One admission decision, independent of HTTP: allowed (with warnings, audit annotations and the pod's
JSONPatch) or denied with a status; the server layer serialises it.

Pipeline steps (Priority plugin, quota, prediction, guardrails) each produce an ``AdmissionDecision``;
``merged`` combines an allowed decision with the next step's, and a denial ends the pipeline. A step that
mutates the pod writes to the review's one ``JsonPatchBuilder`` (``PodReview.patch``); the pipeline hands its
operations to the allowed decision once, at the end (``with_patch``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from webhook.admission.patch import PatchOperation

# metav1.StatusReason values used by admission.
REASON_FORBIDDEN = "Forbidden"
REASON_INVALID = "Invalid"
REASON_ALREADY_EXISTS = "AlreadyExists"
REASON_UNKNOWN = ""  # a plain (non-status) error from an admission plugin: HTTP 500, reason Unknown


@dataclass(frozen=True, slots=True)
class AdmissionStatus:
    code: int
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    allowed: bool
    status: AdmissionStatus | None = None
    patch: tuple[PatchOperation, ...] = ()
    warnings: tuple[str, ...] = ()
    audit_annotations: Mapping[str, str] = field(default_factory=dict)
    # Which rules refused the request (for metrics): "priority", "quota.classes", a guardrail rule, ...
    denied_by: tuple[str, ...] = ()

    @classmethod
    def allow(cls, *, warnings: Sequence[str] = (), audit_annotations: Mapping[str, str] | None = None
              ) -> AdmissionDecision:
        if not warnings and not audit_annotations:
            return ALLOWED
        return cls(True, None, (), tuple(warnings), dict(audit_annotations or {}))

    @classmethod
    def deny(
        cls,
        code: int,
        reason: str,
        message: str,
        *,
        warnings: Sequence[str] = (),
        audit_annotations: Mapping[str, str] | None = None,
        denied_by: Sequence[str] = (),
    ) -> AdmissionDecision:
        return cls(False, AdmissionStatus(code, reason, message), (), tuple(warnings), dict(audit_annotations or {}),
                   tuple(denied_by))

    def denied_by_rule(self, *rules: str) -> AdmissionDecision:
        """This denial labelled with the rules that caused it (an allowed decision is returned unchanged)."""
        if self.allowed:
            return self
        return AdmissionDecision(False, self.status, (), self.warnings, self.audit_annotations, tuple(rules))

    def with_patch(self, patch: Sequence[PatchOperation]) -> AdmissionDecision:
        """This allowed decision answering ``patch``: the operations the steps wrote to ``PodReview.patch``, handed
        over once by the pipeline."""
        if not patch:
            return self
        return AdmissionDecision(True, self.status, tuple(patch), self.warnings, self.audit_annotations)

    @property
    def denial_reason(self) -> str:
        """A short label for metrics: the status reason, or ``Unknown`` for a plain error."""
        if self.allowed or self.status is None:
            return ""
        return self.status.reason or "Unknown"

    def merged(self, later: AdmissionDecision) -> AdmissionDecision:
        """This (allowed) decision followed by a later step's: warnings and annotations kept.

        A later denial wins but keeps the earlier warnings.
        """
        if later is ALLOWED:
            return self
        if self is ALLOWED:
            return later
        warnings = self.warnings + tuple(w for w in later.warnings if w not in self.warnings)
        annotations = {**self.audit_annotations, **later.audit_annotations}
        if not later.allowed:
            return AdmissionDecision(False, later.status, (), warnings, annotations, later.denied_by)
        return AdmissionDecision(True, self.status, (), warnings, annotations, self.denied_by)


# The plain "allowed" (no patch, warnings or annotations) most steps answer: one shared immutable instance.
ALLOWED = AdmissionDecision(True, audit_annotations=MappingProxyType({}))


def forbidden(resource: str, name: str, inner: str) -> AdmissionDecision:
    """403 Forbidden as apierrors.NewForbidden words it: ``<resource> "<name>" is forbidden: <inner>``."""
    return AdmissionDecision.deny(403, REASON_FORBIDDEN, f'{resource} "{name}" is forbidden: {inner}')


def invalid(message: str) -> AdmissionDecision:
    """422 Invalid with an already formatted ``<Kind> "<name>" is invalid: ...`` message."""
    return AdmissionDecision.deny(422, REASON_INVALID, message)


def already_exists(resource: str, name: str) -> AdmissionDecision:
    return AdmissionDecision.deny(409, REASON_ALREADY_EXISTS, f'{resource} "{name}" already exists')


def internal_error(message: str) -> AdmissionDecision:
    """A plain error from an admission plugin: HTTP 500, reason Unknown, the bare message."""
    return AdmissionDecision.deny(500, REASON_UNKNOWN, message)
