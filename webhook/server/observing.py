"""The live observer wired into the server (docs/interfaces.md §9): predictions made at admission followed
through the informers' pod changes, and each decision reported.

``PredictionObserver`` is the pipeline's ``PredictionFollower`` (it hands out the random id the patch writes)
and the cluster state's pod listener; ``webhook.observe.tracker`` decides, and this module reports: the
metric ``preemptguard_prediction_observed_total{verdict}``, one log line per verdict other than ``agree``
(JSON fields under ``--log-format json``), with ``--events`` an Event on the pod, and the summary of
``GET /debug/predictions`` (with ``--debug-predictions``). Everything it says is tenant-redacted
(``webhook.observe.report``); the summary, served without authentication, names no pod or namespace at all. Only with a
live cluster source: a snapshot never changes, so there is nothing to observe.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from webhook.admission.pod import PodReview
from webhook.cluster.model import Pod
from webhook.config import Config
from webhook.observe.compare import Verdict
from webhook.observe.report import (
    PredictionSummary,
    anonymous_decision,
    audience_for,
    mismatch_line,
    render_decision,
)
from webhook.observe.tracker import Decision, PredictionRecord, PredictionTracker, predicted_of
from webhook.preemption.results import PreemptionResult
from webhook.server.events import MISMATCH_REASON, PodEvents
from webhook.server.logs import FIELDS
from webhook.server.metrics import WebhookMetrics
from webhook.server.settings import ServerSettings
from webhook.sources.source import ClusterSource
from webhook.tasks import running_in_background

log = logging.getLogger("webhook.observe")

# Decisions made between two turns of the event loop at most.
TICK_DECISIONS = 25


class PredictionObserver:
    """Follows the predictions of one replica; ``run`` ticks the tracker, ``close`` ends it (shutdown)."""

    def __init__(self, source: ClusterSource, metrics: WebhookMetrics, config: Callable[[], Config],
                 settings: ServerSettings, *, events: PodEvents | None = None) -> None:
        self.source = source
        self.metrics = metrics
        self.config = config
        self.tick_seconds = settings.observe_tick_seconds
        self.tracker = PredictionTracker(self.decided, window_seconds=settings.observe_window_seconds,
                                         max_predictions=settings.observe_max_predictions,
                                         settle_seconds=settings.observe_settle_seconds)
        self.summary = PredictionSummary()
        self.events = events
        self._closing = False
        source.state.add_pod_listener(self.pod_changed)

    # ---- PredictionFollower ----------------------------------------------------------------------
    def follow(self, review: PodReview, result: PreemptionResult) -> str:
        prediction_id = secrets.token_hex(12)  # random: several replicas never share one
        self.tracker.follow(PredictionRecord(prediction_id, review.namespace, review.name_for_messages,
                                             review.pod.effective_priority, predicted_of(result)))
        return prediction_id

    # ---- feeding the tracker --------------------------------------------------------------------
    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        try:
            self.tracker.pod_changed(old, new)
        except Exception:  # the informer applying this change must go on whatever the observer does
            log.exception("the prediction observer failed on a pod change")

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)
            try:
                # Decisions due at once (the window's end of a burst of admissions) are made a slice per turn of
                # the event loop: each is rendered and reported (~20 us), thousands would hold it.
                while self.tracker.tick(max_decisions=TICK_DECISIONS):
                    await asyncio.sleep(0)
            except Exception:
                log.exception("the prediction observer failed on its tick")

    async def close(self) -> None:
        """Every prediction still followed is counted ``unobserved``; Events still on their way get a moment."""
        self._closing = True
        self.tracker.close()
        if self.events is not None:
            await self.events.close()

    # ---- reporting ------------------------------------------------------------------------------
    def decided(self, decision: Decision) -> None:
        verdict = decision.comparison.verdict
        self.metrics.record_prediction_verdict(verdict)
        audience = audience_for(decision, self.source.state.namespaces, self.config().guardrails)
        rendered = render_decision(decision, audience)
        self.summary.add(decision, anonymous_decision(decision), datetime.now(UTC))
        if verdict == Verdict.AGREE:
            return
        line = mismatch_line(decision, audience)
        log.info("pod %s/%s: %s", decision.record.namespace, decision.pod, line, extra={FIELDS: rendered})
        if self.events is not None and decision.uid and not self._closing:
            self.events.post(decision.record.namespace, decision.pod, decision.uid, MISMATCH_REASON, line)

    def document(self) -> dict[str, Any]:
        return self.summary.document(observing=True, following=len(self.tracker),
                                     window_seconds=self.tracker.window_seconds)


def not_observing() -> dict[str, Any]:
    """``GET /debug/predictions`` without a live cluster: nothing is followed."""
    return PredictionSummary().document(observing=False, following=0, window_seconds=None)


async def observer_lifecycle(observer: PredictionObserver) -> AsyncIterator[None]:
    """Tick while the app runs; on shutdown count what is left as ``unobserved`` (before the source stops)."""
    try:
        async with running_in_background(observer.run(), name="preemptguard-prediction-observer"):
            yield
    finally:
        await observer.close()
