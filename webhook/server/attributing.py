"""Preemption attribution wired into the server (docs/interfaces.md §7): every replica follows the informers'
pod changes (``webhook.observe.attribution``), and the leader tells each victim's tenant.

For each pod kube-scheduler preempted, the replica holding the Lease (``webhook.server.leaderelection``)
creates one Event in the victim's namespace (reason ``PreemptedByScheduler``, on the victim pod) saying who it
was preempted for as the victim's tenant may hear it, and counts it in ``preemptguard_preemptions_total``. The
Event's name is fixed per victim (``preemption_event_name``), so a new leader that writes it again after a
failover gets 409 and nothing doubles. Followers keep what they attributed for ``BACKLOG_SECONDS``: a replica
that becomes leader writes what happened while nobody led.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from webhook.cluster.model import Pod
from webhook.config import Config
from webhook.guardrails.disclosure import audience_of
from webhook.observe.attribution import (
    DEFAULT_WAIT_SECONDS,
    Preemption,
    PreemptionAttributor,
    attribution_message,
    prediction_verdict,
)
from webhook.server.events import EventResult, PodEvents, preemption_event_name
from webhook.server.logs import FIELDS
from webhook.server.tenant_metrics import TenantMetrics
from webhook.sources.source import ClusterSource

log = logging.getLogger("webhook.attribution")

PREEMPTED_REASON = "PreemptedByScheduler"
BACKLOG_SECONDS = 120.0
BACKLOG_LIMIT = 10_000


class PreemptionReporter:
    """The attributor of one replica, reporting what it attributes while ``leading()``."""

    def __init__(self, source: ClusterSource, metrics: TenantMetrics, config: Callable[[], Config],
                 leading: Callable[[], bool], events: PodEvents | None, *,
                 wait_seconds: float = DEFAULT_WAIT_SECONDS, tick_seconds: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.metrics = metrics
        self.config = config
        self.leading = leading
        self.events = events
        self.tick_seconds = tick_seconds
        self.clock = clock
        self.attributor = PreemptionAttributor(self.attributed, self.nominated_on, wait_seconds=wait_seconds,
                                               clock=clock)
        self._backlog: deque[tuple[float, Preemption]] = deque(maxlen=BACKLOG_LIMIT)

    def nominated_on(self, node: str) -> Iterable[Pod]:
        return self.source.state.nominated_by_node.get(node, {}).values()

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        try:
            self.attributor.pod_changed(old, new)
        except Exception:  # the informer applying this change must go on whatever attribution does
            log.exception("preemption attribution failed on a pod change")

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)
            try:
                self.attributor.tick()
            except Exception:
                log.exception("preemption attribution failed on its tick")

    # ---- reporting ------------------------------------------------------------------------------
    def attributed(self, preemption: Preemption) -> None:
        if self.leading():
            self.report(preemption)
        else:
            self._backlog.append((self.clock(), preemption))

    def started_leading(self) -> None:
        """Report what was attributed lately while another replica led (or nobody did): its Events already
        written are refused as existing and not counted again."""
        now = self.clock()
        backlog, self._backlog = list(self._backlog), deque(maxlen=BACKLOG_LIMIT)
        for at, preemption in backlog:
            if now - at <= BACKLOG_SECONDS:
                self.report(preemption)

    def report(self, preemption: Preemption) -> None:
        config = self.config()
        guardrails = config.guardrails
        audience = audience_of(preemption.namespace, self.source.state.namespaces, guardrails.tenant_label,
                               guardrails.disclosure)
        message = attribution_message(preemption, audience, wait_seconds=self.attributor.wait_seconds)
        fields: dict[str, Any] = {"namespace": preemption.namespace, "pod": preemption.name, "node": preemption.node,
                                  "preemptorClass": preemption.preemptor_class,
                                  "predicted": prediction_verdict(preemption)}
        log.info("pod %s/%s preempted: %s", preemption.namespace, preemption.name, message, extra={FIELDS: fields})
        if self.events is None:
            self.metrics.record_preemption(preemption)
            return
        preemptor = preemption.preemptor
        related = None
        if preemptor is not None and audience.names_namespace(preemptor.namespace):
            related = {"apiVersion": "v1", "kind": "Pod", "namespace": preemptor.namespace, "name": preemptor.name,
                       "uid": preemptor.uid}

        def done(result: EventResult) -> None:
            if result != "exists":  # "exists": another leader wrote (and counted) it
                self.metrics.record_preemption(preemption)

        self.events.post(preemption.namespace, preemption.name, preemption.uid, PREEMPTED_REASON, message,
                         name=preemption_event_name(preemption.name, preemption.uid), related=related, done=done)
