"""The upstream Priority admission plugin (mutating) on the typed pod of one review.

Upstream: plugin/pkg/admission/priority/admission.go (``Admit``/``admitPod``). CREATE resolves the class to
``spec.priority`` and ``spec.preemptionPolicy`` (``webhook.priority.resolution``); UPDATE restores omitted
values from the old pod, and core ``ValidatePodUpdate`` refuses a change of them (422, after admission
upstream; we answer it at once).
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.admission.decision import ALLOWED, AdmissionDecision, forbidden, invalid
from webhook.admission.pod import POD_KIND, PODS_RESOURCE, PodReview
from webhook.cluster.copying import replace_fields
from webhook.cluster.model import Pod, PriorityClass
from webhook.priority.resolution import PriorityRejection, resolve_pod_priority
from webhook.priority.validation import FieldError, invalid_message

# The label of denials by the Priority plugin itself (and by the pod update validation it mirrors), for metrics.
RULE_PRIORITY = "priority"
# ValidatePodUpdate's message (stable prefix; upstream appends a diff of the specs).
POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)

SPEC_PRIORITY = ("spec", "priority")
SPEC_PREEMPTION_POLICY = ("spec", "preemptionPolicy")
SPEC_PRIORITY_CLASS_NAME = ("spec", "priorityClassName")


def admit_priority(review: PodReview, classes: Mapping[str, PriorityClass]) -> AdmissionDecision:
    """The plugin on CREATE or UPDATE: ``review.pod`` and ``review.patch`` carry its mutation afterwards
    (the pipeline answers the patch once, at the end)."""
    if review.is_create:
        return _admit_create(review, classes)
    assert review.old_pod is not None  # read_pod_review reads the old pod of every UPDATE
    return _admit_update(review, review.old_pod)


def _admit_create(review: PodReview, classes: Mapping[str, PriorityClass]) -> AdmissionDecision:
    pod = review.pod
    try:
        resolved = resolve_pod_priority(pod.priority_class_name, pod.priority, pod.preemption_policy, classes)
    except PriorityRejection as rejection:
        return forbidden(PODS_RESOURCE, review.name_for_messages, str(rejection)).denied_by_rule(RULE_PRIORITY)
    review.patch.set(SPEC_PRIORITY, resolved.priority)
    review.patch.set(SPEC_PREEMPTION_POLICY, resolved.preemption_policy)
    if resolved.priority_class_name != pod.priority_class_name:
        review.patch.set(SPEC_PRIORITY_CLASS_NAME, resolved.priority_class_name)
    review.pod = replace_fields(pod, priority=resolved.priority, preemption_policy=resolved.preemption_policy,
                                priority_class_name=resolved.priority_class_name)
    return ALLOWED


def _admit_update(review: PodReview, old: Pod) -> AdmissionDecision:
    """Omitted priority/preemptionPolicy are copied from the old pod (upstream PR #65739)."""
    pod = review.pod
    priority, policy = pod.priority, pod.preemption_policy
    if priority is None and old.priority is not None:
        priority = old.priority
        review.patch.set(SPEC_PRIORITY, priority)
    if policy is None and old.preemption_policy is not None:
        policy = old.preemption_policy
        review.patch.set(SPEC_PREEMPTION_POLICY, policy)
    review.pod = replace_fields(pod, priority=priority, preemption_policy=policy)
    if (priority, pod.priority_class_name, policy) != (old.priority, old.priority_class_name,
                                                       old.preemption_policy):
        name = pod.name or review.name_for_messages
        denial = invalid(invalid_message(POD_KIND, name, [FieldError("spec", "Forbidden", POD_UPDATE_FORBIDDEN)]))
        return denial.denied_by_rule(RULE_PRIORITY)
    return ALLOWED
