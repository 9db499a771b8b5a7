"""Building pod AdmissionRequests and running the pipeline against an in-memory cluster, for the unit tests."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from webhook.admission.decision import AdmissionDecision
from webhook.admission.pipeline import PodAdmission, PodStep
from webhook.admission.pod import PodReview
from webhook.admission.review import AdmissionRequest, parse_admission_review
from webhook.cluster.model import Pod, PriorityClass
from webhook.cluster.reader import object_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.config import DEFAULT_CONFIG, Config
from webhook.guardrails import GuardrailDecision, SkipReason
from webhook.preemption.results import PreemptionResult
from webhook.server.testing import admission_review
from webhook.sources.source import MemorySource


def pod_request(operation: str = "CREATE", *, spec: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
                old_spec: dict[str, Any] | None = None, name: str = "", namespace: str = "ns",
                dry_run: bool = False, user: dict[str, Any] | None = None) -> AdmissionRequest:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta or {}}
    if spec is not None:
        obj["spec"] = spec
    old = None if old_spec is None else {"apiVersion": "v1", "kind": "Pod", "metadata": meta or {}, "spec": old_spec}
    return parse_admission_review(admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": name, "namespace": namespace, "operation": operation, "object": obj, "oldObject": old,
        "dryRun": dry_run, "userInfo": user or {"username": "dev", "groups": ["devs"]},
    }, uid="u"))


def state_of(*objects: dict[str, Any] | PriorityClass) -> ClusterState:
    state = ClusterState()
    for raw in objects:
        obj = raw if isinstance(raw, PriorityClass) else object_from_dict(raw)
        assert obj is not None
        state.upsert(obj)
    return state


class FixedPredictor:
    """Answers every prediction with ``result`` (or raises ``error``); records the pods it was asked about."""

    def __init__(self, result: PreemptionResult | None = None, error: Exception | None = None) -> None:
        self.result = result
        self.error = error
        self.pods: list[Pod] = []

    async def predict(self, state: ClusterState, pod: Pod, *, scheduler: Any, budget_seconds: float
                      ) -> PreemptionResult:
        self.pods.append(pod)
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


@dataclass
class ListRecorder:
    events: list[tuple[str, Any]] = field(default_factory=list)

    def prediction_made(self, result: PreemptionResult, seconds: float) -> None:
        self.events.append(("made", result.outcome))

    def prediction_failed(self, review: PodReview, error: Exception, seconds: float) -> None:
        self.events.append(("failed", type(error).__name__))

    def prediction_skipped(self, reason: SkipReason) -> None:
        self.events.append(("skipped", reason))

    def guardrail_decided(self, decision: GuardrailDecision, result: PreemptionResult | None, *,
                          dry_run: bool) -> None:
        self.events.append(("decided", decision.decision))


@dataclass
class RecordingFollower:
    """A ``PredictionFollower`` that records what it was asked to follow and numbers the ids."""

    followed: list[tuple[str, str, PreemptionResult]] = field(default_factory=list)

    def follow(self, review: PodReview, result: PreemptionResult) -> str:
        self.followed.append((review.namespace, review.name_for_messages, result))
        return f"id-{len(self.followed)}"


def pipeline(state: ClusterState, *, config: Config = DEFAULT_CONFIG, predictor: FixedPredictor | None = None,
             source: MemorySource | None = None, steps: list[PodStep] | None = None,
             follower: RecordingFollower | None = None) -> PodAdmission:
    return PodAdmission(source or MemorySource(state), predictor or FixedPredictor(), ListRecorder(),
                        lambda: config, list(steps or ()), follower=follower)


def admit(admission: PodAdmission, request: AdmissionRequest) -> AdmissionDecision:
    return asyncio.run(admission.admit(request))
