"""Pod admission: the upstream Priority plugin (mutating) followed by pluggable PreemptGuard steps.

Upstream: plugin/pkg/admission/priority/admission.go (``Admit``/``admitPod``). Pure: no I/O; the server
fetches a PriorityClass missing from the cache (``priority_class_to_fetch``) before calling ``admit_pod``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from webhook.admission.outcome import AdmissionOutcome, forbidden, invalid
from webhook.admission.patch import JsonPatchBuilder
from webhook.admission.review import (
    AdmissionRequest,
    JsonObject,
    object_name_for_messages,
    optional_int32,
    optional_object,
    optional_str,
    require_object,
)
from webhook.cluster.model import PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.errors import InvalidInput
from webhook.priority.resolution import (
    PriorityRejection,
    ResolvedPriority,
    effective_classes,
    resolve_pod_priority,
)
from webhook.priority.validation import FieldError, invalid_message

PODS_RESOURCE = "pods"
POD_KIND = "Pod"
# ValidatePodUpdate's message (stable prefix; upstream appends a diff of the specs).
POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)

SPEC_PRIORITY = ("spec", "priority")
SPEC_PREEMPTION_POLICY = ("spec", "preemptionPolicy")
SPEC_PRIORITY_CLASS_NAME = ("spec", "priorityClassName")


@dataclass(frozen=True, slots=True)
class PodPriorityFields:
    """The fields of a pod object the Priority plugin reads."""

    name: str
    generate_name: str
    namespace: str
    priority_class_name: str
    priority: int | None
    preemption_policy: str | None


def pod_priority_fields(obj: JsonObject, path: str) -> PodPriorityFields:
    """Read and type-check a pod object; anything that is not a Pod raises ``InvalidInput`` (HTTP 400)."""
    kind = obj.get("kind")
    if kind is not None and kind != POD_KIND:
        raise InvalidInput(f"{path} is not a Pod (kind {optional_str(kind, f'{path}.kind')[:60]!r})")
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version != "v1":
        raise InvalidInput(f"{path}.apiVersion must be v1 for a Pod")
    meta = optional_object(obj.get("metadata"), f"{path}.metadata") or {}
    spec = optional_object(obj.get("spec"), f"{path}.spec") or {}
    return PodPriorityFields(
        name=optional_str(meta.get("name"), f"{path}.metadata.name"),
        generate_name=optional_str(meta.get("generateName"), f"{path}.metadata.generateName"),
        namespace=optional_str(meta.get("namespace"), f"{path}.metadata.namespace"),
        priority_class_name=optional_str(spec.get("priorityClassName"), f"{path}.spec.priorityClassName"),
        priority=optional_int32(spec.get("priority"), f"{path}.spec.priority"),
        preemption_policy=_optional_policy(spec.get("preemptionPolicy"), f"{path}.spec.preemptionPolicy"),
    )


def _optional_policy(value: object, path: str) -> str | None:
    return None if value is None else optional_str(value, path)


def is_pod_admission(request: AdmissionRequest) -> bool:
    """The Priority plugin mutates only CREATE and UPDATE of ``pods`` itself (no subresource)."""
    return request.targets("", PODS_RESOURCE) and request.operation in ("CREATE", "UPDATE")


@dataclass(slots=True)  # built for every review: no frozen-init cost
class PodAdmissionContext:
    """What a pipeline step sees: the pod as mutated so far, the store, and the Priority plugin's result."""

    request: AdmissionRequest
    pod: JsonObject
    old_pod: JsonObject | None
    fields: PodPriorityFields
    name_for_messages: str
    state: ClusterState
    classes: Mapping[str, PriorityClass]
    # CREATE: the resolved class (name rewritten to the global default when one applied); UPDATE: None.
    resolved: ResolvedPriority | None


# A step returns an allowed outcome (optionally with patch operations on the mutated pod, warnings and
# audit annotations) or a denial, which ends the pipeline.
PodAdmissionStep = Callable[[PodAdmissionContext], AdmissionOutcome]


def priority_class_to_fetch(request: AdmissionRequest, state: ClusterState) -> str | None:
    """The class a CREATE names that the cache lacks: look it up once at the source before rejecting."""
    if not is_pod_admission(request) or request.operation != "CREATE" or request.object is None:
        return None
    spec = request.object.get("spec")
    name = spec.get("priorityClassName") if isinstance(spec, dict) else None
    if not isinstance(name, str) or not name:
        return None
    return None if name in effective_classes(state) else name


# The label of denials by the Priority plugin itself (and by the pod update validation it mirrors), for metrics.
RULE_PRIORITY = "priority"


@dataclass(slots=True)  # built for every review: no frozen-init cost
class PodPipelineResult:
    """The outcome of the synchronous pipeline, and the context its steps saw (None when no step ran:
    a pass-through request or a Priority plugin denial). Later, asynchronous stages continue from it."""

    outcome: AdmissionOutcome
    context: PodAdmissionContext | None


def admit_pod(
    request: AdmissionRequest,
    state: ClusterState,
    *,
    fetched_classes: Mapping[str, PriorityClass] | None = None,
    steps: Sequence[PodAdmissionStep] = (),
) -> AdmissionOutcome:
    """Admit one pod request: pass-through, the Priority plugin on CREATE/UPDATE, then ``steps`` in order.

    ``fetched_classes`` are classes looked up at the source because the cache lacked them.
    Raises ``InvalidInput`` when the request's objects are not pods.
    """
    return run_pod_pipeline(request, state, fetched_classes=fetched_classes, steps=steps).outcome


def run_pod_pipeline(
    request: AdmissionRequest,
    state: ClusterState,
    *,
    fetched_classes: Mapping[str, PriorityClass] | None = None,
    steps: Sequence[PodAdmissionStep] = (),
) -> PodPipelineResult:
    """``admit_pod``, also returning the context after the last step (the pod as mutated so far)."""
    if not is_pod_admission(request):
        return PodPipelineResult(AdmissionOutcome.allow(), None)
    pod = require_object(request.object, "request.object")
    fields = pod_priority_fields(pod, "request.object")
    classes = effective_classes(state)
    if fetched_classes:
        classes = {**classes, **fetched_classes}
    builder = JsonPatchBuilder(pod)
    old_pod: JsonObject | None = None
    resolved: ResolvedPriority | None = None
    name = object_name_for_messages(request)
    if request.operation == "CREATE":
        try:
            resolved = resolve_pod_priority(
                fields.priority_class_name, fields.priority, fields.preemption_policy, classes
            )
        except PriorityRejection as rejection:
            return PodPipelineResult(forbidden(PODS_RESOURCE, name, str(rejection)).denied_by_rule(RULE_PRIORITY), None)
        apply_resolved_priority(builder, fields, resolved)
    else:
        old_pod = require_object(request.old_object, "request.oldObject")
        old_fields = pod_priority_fields(old_pod, "request.oldObject")
        restored = restore_priority_on_update(builder, fields, old_fields)
        changed = priority_fields_changed(restored, old_fields)
        if changed:
            denial = invalid(invalid_message(POD_KIND, fields.name or name, [FieldError("spec", "Forbidden", changed)]))
            return PodPipelineResult(denial.denied_by_rule(RULE_PRIORITY), None)
    outcome = AdmissionOutcome.allow(builder.operations)
    context = PodAdmissionContext(request, builder.document, old_pod, fields, name, state, classes, resolved)
    for step in steps:
        outcome = outcome.merged(step(context))
        if not outcome.allowed:
            break
    return PodPipelineResult(outcome, context)


def apply_resolved_priority(builder: JsonPatchBuilder, fields: PodPriorityFields, resolved: ResolvedPriority) -> None:
    """CREATE: set spec.priority and spec.preemptionPolicy, and the class name when a default applied."""
    builder.set(SPEC_PRIORITY, resolved.priority)
    builder.set(SPEC_PREEMPTION_POLICY, resolved.preemption_policy)
    if resolved.priority_class_name != fields.priority_class_name:
        builder.set(SPEC_PRIORITY_CLASS_NAME, resolved.priority_class_name)


def restore_priority_on_update(
    builder: JsonPatchBuilder, new: PodPriorityFields, old: PodPriorityFields
) -> PodPriorityFields:
    """UPDATE: omitted priority/preemptionPolicy are copied from the old pod (upstream PR #65739)."""
    priority, policy = new.priority, new.preemption_policy
    if priority is None and old.priority is not None:
        priority = old.priority
        builder.set(SPEC_PRIORITY, priority)
    if policy is None and old.preemption_policy is not None:
        policy = old.preemption_policy
        builder.set(SPEC_PREEMPTION_POLICY, policy)
    return PodPriorityFields(
        new.name, new.generate_name, new.namespace, new.priority_class_name, priority, policy
    )


def priority_fields_changed(new: PodPriorityFields, old: PodPriorityFields) -> str:
    """Core ValidatePodUpdate for the fields we own: the Forbidden detail, or "" when none changed.

    The plugin itself never rejects an update; the API server's pod validation (422) does, after admission.
    """
    if (new.priority, new.priority_class_name, new.preemption_policy) == (
        old.priority, old.priority_class_name, old.preemption_policy
    ):
        return ""
    return POD_UPDATE_FORBIDDEN
