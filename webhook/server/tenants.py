"""What tenants can read, wired into the server (docs/interfaces.md §7): leader election, the preemption
attribution (``webhook.server.attributing``) and the exposure scan (``webhook.server.exposing``).

Every replica follows the pod changes; only the one holding the Lease writes (Events, PolicyReports) and sets
the tenant metrics. With a cluster source only: a snapshot never changes and has nobody to tell.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from webhook.config import Config
from webhook.kubeapi import KubeClient
from webhook.server.attributing import PreemptionReporter
from webhook.server.events import PodEvents
from webhook.server.exposing import ExposureScanner, ReportWriter
from webhook.server.leaderelection import ElectionSettings, LeaderElector, default_identity, default_namespace
from webhook.server.metrics import WebhookMetrics
from webhook.server.settings import ServerSettings
from webhook.sources.source import ClusterSource
from webhook.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class TenantServices:
    """The leader-only writers of one replica and the election that decides which replica writes."""

    def __init__(self, source: ClusterSource, api: KubeClient, settings: ServerSettings, metrics: WebhookMetrics,
                 config: Callable[[], Config]) -> None:
        self.source = source
        self.api = api
        self.settings = settings
        self.metrics = metrics.tenants
        self.elector: LeaderElector | None = None
        if settings.leader_elect:
            # The namespace is known once the client is open (the lifecycle fills it in).
            self.elector = LeaderElector(api, ElectionSettings(
                namespace="", identity=default_identity(), name=settings.leader_elect_lease,
                lease_duration_seconds=settings.leader_lease_seconds,
                renew_deadline_seconds=settings.leader_renew_deadline_seconds,
                retry_period_seconds=settings.leader_retry_period_seconds),
                on_started_leading=self.started_leading, on_stopped_leading=self.stopped_leading)
        self.events: PodEvents | None = None
        self.reporter: PreemptionReporter | None = None
        if settings.attribute_preemptions:
            self.events = PodEvents(api)
            self.reporter = PreemptionReporter(source, self.metrics, config, self.leading, self.events,
                                               wait_seconds=settings.attribution_wait_seconds)
            source.state.add_pod_listener(self.reporter.pod_changed)
        self.writer: ReportWriter | None = None
        self.scanner: ExposureScanner | None = None
        if settings.exposure_scan:
            if settings.exposure_reports:
                self.writer = ReportWriter(api, self.metrics, writes_per_second=settings.exposure_writes_per_second)
            self.scanner = ExposureScanner(source, self.metrics, config, self.leading, self.writer,
                                           interval_seconds=settings.exposure_interval_seconds,
                                           max_duty=settings.exposure_max_duty)
            source.state.add_pod_listener(self.scanner.pod_changed)

    def leading(self) -> bool:
        return self.elector.is_leader if self.elector is not None else True

    def started_leading(self) -> None:
        self.metrics.set_leader(True)
        if self.scanner is not None:
            self.scanner.started_leading()
        if self.reporter is not None:
            self.reporter.started_leading()

    def stopped_leading(self) -> None:
        self.metrics.set_leader(False)
        if self.scanner is not None:
            self.scanner.stopped_leading()

    async def lifecycle(self) -> AsyncIterator[None]:
        """Campaign and run while the app runs (the source started first); on shutdown stop writing, release
        the Lease and give Events on their way a moment."""
        tasks: list[asyncio.Task[None]] = []
        if self.elector is not None:
            namespace = self.settings.leader_elect_namespace or default_namespace(self.api)
            self.elector.settings = replace(self.elector.settings, namespace=namespace)
            self.metrics.set_campaigning(True)
            tasks.append(asyncio.create_task(self.elector.run(), name="preemptguard-leader-election"))
        else:
            self.started_leading()
        if self.reporter is not None:
            tasks.append(asyncio.create_task(self.reporter.run(), name="preemptguard-preemption-attribution"))
        if self.scanner is not None:
            tasks.append(asyncio.create_task(self.scanner.run(), name="preemptguard-exposure-scan"))
        if self.writer is not None:
            tasks.append(asyncio.create_task(self.writer.run(), name="preemptguard-exposure-reports"))
        try:
            yield
        finally:
            for task in tasks:
                await cancel_and_wait(task)
            if self.elector is not None:
                await self.elector.release()
                self.metrics.set_campaigning(False)
            else:
                self.stopped_leading()
            if self.events is not None:
                await self.events.close()
