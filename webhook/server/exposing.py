"""The exposure scan in the server (docs/interfaces.md §7): each namespace's exposure (``webhook.exposure``)
kept current on every replica and published by the leader as its ``preemptguard-exposure`` PolicyReport and as
the ``preemptguard_exposure_*`` gauges.

Incremental: the cluster state's pod listener updates the namespace's counts pod change by pod change
(``ExposureIndex``, a few microseconds each). Every ``interval_seconds`` the scan compares what every namespace
shares (PriorityClasses, Namespaces and their labels, the quota configuration and, when ``limitedResources`` is
set, the ResourceQuotas' scopes) and each namespace's PodDisruptionBudgets with what it saw last; it counts a
namespace's pods again only when its PDB selectors changed (``ExposureIndex.recount``: a few hundred pods per step,
so that recount is paced like the rest: a replica starting at 15,000 nodes recounts every namespace with PDBs,
~20,000 pods each), rebuilds who may use which class only when what
every namespace shares changed, and publishes the namespaces whose counts, budgets or classes changed, each in
O(bands x classes).

Rate-limited, on the event loop: it reads the cluster state where the informers write it, so it never races
them, and it gives the loop back (``asyncio.sleep``) after every ``slice_seconds`` of work, sleeping long enough
that it uses at most ``max_duty`` of the loop's time. PolicyReports are written by server-side apply, only when
their content changed (the ``preemptguard.io/exposure-hash`` annotation, read back with one LIST when this
replica starts leading), at most ``writes_per_second``. Without the PolicyReport CRD (the optional component)
the gauges are still kept; the writer looks for the CRD again every ``CRD_RETRY_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.cluster.model import Namespace, Pod, PodDisruptionBudget, PriorityClass
from webhook.cluster.snapshot import ClusterState
from webhook.config import Config, QuotaConfig
from webhook.errors import ApiError, ClusterUnavailable
from webhook.exposure import ClassAccess, ClassAccessTable, ExposureIndex, NamespaceExposure
from webhook.exposure.access import class_access, make_table, tenants_by_namespace
from webhook.exposure.compute import known_namespaces
from webhook.exposure.report import (
    API_VERSION,
    HASH_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    REPORT_NAME,
    policy_report,
)
from webhook.kubeapi import KubeClient
from webhook.server.tenant_metrics import TenantMetrics
from webhook.sources.source import ClusterSource

log = logging.getLogger("webhook.exposure")

DEFAULT_INTERVAL_SECONDS = 2.0
# An admission that comes while the scan works waits for its slice to end: no longer than a batch of watch events
# (informer.py). A namespace's exposure is one piece (~0.5 ms at 15,000 nodes, 225 PDBs a namespace); with 1 ms
# slices two or three of them ran back to back.
DEFAULT_SLICE_SECONDS = 0.0002
DEFAULT_MAX_DUTY = 0.2
DEFAULT_WRITES_PER_SECOND = 10.0
CRD_RETRY_SECONDS = 60.0
RETRY_SECONDS = 1.0
FIELD_MANAGER = "preemptguard"
REPORTS_PATH = f"/apis/{API_VERSION}/policyreports"


def report_path(namespace: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/policyreports/{REPORT_NAME}"


def _exposure_fields(pod: Pod) -> tuple[object, ...]:
    return (pod.node_name, pod.phase, pod.deleting, pod.priority, pod.priority_class_name, pod.labels)


def exposure_changed(old: Pod | None, new: Pod | None) -> bool:
    """Whether a pod change can change its namespace's exposure (status-only updates cannot)."""
    return old is None or new is None or _exposure_fields(old) != _exposure_fields(new)


@dataclass(frozen=True, slots=True)
class SharedInputs:
    """What every namespace's exposure reads: compared by value each pass (unchanged dicts compare by identity)."""

    classes: dict[str, PriorityClass]
    namespaces: dict[str, Namespace]
    quota: QuotaConfig
    tenant_label: str | None
    quota_scopes: tuple[tuple[str, str, object], ...]  # (namespace, name, scopes): only with limitedResources

    @classmethod
    def of(cls, state: ClusterState, config: Config) -> SharedInputs:
        scopes: tuple[tuple[str, str, object], ...] = ()
        if config.quota.limited_resources:
            scopes = tuple(sorted((q.namespace, q.name, (q.scopes, q.scope_selector))
                                  for quotas in state.quotas_by_namespace.values() for q in quotas.values()))
        return cls(dict(state.priority_classes), dict(state.namespaces), config.quota,
                   config.guardrails.tenant_label, scopes)


class Pacer:
    """Gives the event loop back after each ``slice_seconds`` of work, for long enough that the work takes at
    most ``max_duty`` of the loop's time; counts the busy time."""

    def __init__(self, slice_seconds: float, max_duty: float, clock: Callable[[], float] = time.perf_counter) -> None:
        self.slice_seconds = slice_seconds
        self.rest_factor = (1.0 / max_duty - 1.0) if 0 < max_duty < 1 else 0.0
        self.clock = clock
        self.busy = 0.0
        self._since = clock()

    def start(self) -> None:
        self.busy, self._since = 0.0, self.clock()

    async def pace(self) -> None:
        worked = self.clock() - self._since
        if worked < self.slice_seconds:
            return
        self.busy += worked
        await asyncio.sleep(worked * self.rest_factor)
        self._since = self.clock()

    def stop(self) -> float:
        self.busy += self.clock() - self._since
        return self.busy


class ReportWriter:
    """Writes the PolicyReports the scan offers: the latest per namespace, only when its content hash differs
    from what the API holds, at most ``writes_per_second`` (a token bucket with a burst of two seconds' worth)."""

    def __init__(self, api: KubeClient, metrics: TenantMetrics, *,
                 writes_per_second: float = DEFAULT_WRITES_PER_SECOND, timeout_seconds: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.metrics = metrics
        self.writes_per_second = writes_per_second
        self.timeout_seconds = timeout_seconds
        self.clock = clock
        self.written: dict[str, str] = {}  # namespace -> hash the API holds
        self.crd_missing_since: float | None = None
        self._pending: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._wake = asyncio.Event()
        self._tokens = max(1.0, writes_per_second * 2)
        self._refilled = clock()
        self._synced = False
        self._warned_at = -60.0

    def offer(self, report: dict[str, Any]) -> None:
        namespace = report["metadata"]["namespace"]
        self._pending.pop(namespace, None)
        self._pending[namespace] = report
        self._wake.set()

    def forget(self, namespace: str) -> None:
        self._pending.pop(namespace, None)
        self.written.pop(namespace, None)

    def reset(self) -> None:
        """A new term as leader: what the API holds is read again before anything is written."""
        self._pending.clear()
        self.written.clear()
        self._synced = False

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                if not await self._ready():
                    await asyncio.sleep(1.0)
                    continue
                namespace, report = self._pending.popitem(last=False)
                digest = report["metadata"]["annotations"][HASH_ANNOTATION]
                if self.written.get(namespace) == digest:
                    self.metrics.reports.labels("unchanged").inc()
                    continue
                await self._take_token()
                if not await self._write(namespace, report, digest):
                    await asyncio.sleep(RETRY_SECONDS)  # the API server is unreachable: no tight loop

    async def _ready(self) -> bool:
        """The CRD is there and what the API holds has been read (once per term)."""
        if self.crd_missing_since is not None and self.clock() - self.crd_missing_since < CRD_RETRY_SECONDS:
            return False
        if self._synced:
            return True
        try:
            listed = await self.api.get(REPORTS_PATH, query=(("labelSelector", f"{MANAGED_BY_LABEL}={MANAGED_BY}"),),
                                        timeout=self.timeout_seconds)
        except ApiError as exc:
            if exc.code == 404:
                self._crd_missing()
                return False
            self._complain("list PolicyReports", exc)
            return False
        except ClusterUnavailable as exc:
            self._complain("list PolicyReports", exc)
            return False
        self.crd_missing_since = None
        for item in listed.get("items") or ():
            meta = item.get("metadata") or {}
            if meta.get("name") == REPORT_NAME and meta.get("namespace"):
                self.written[meta["namespace"]] = str((meta.get("annotations") or {}).get(HASH_ANNOTATION) or "")
        self._synced = True
        return True

    async def _take_token(self) -> None:
        while True:
            now = self.clock()
            self._tokens = min(max(1.0, self.writes_per_second * 2),
                               self._tokens + (now - self._refilled) * self.writes_per_second)
            self._refilled = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return
            await asyncio.sleep((1.0 - self._tokens) / self.writes_per_second)

    async def _write(self, namespace: str, report: dict[str, Any], digest: str) -> bool:
        """Apply one report; False when the API server could not be reached (the report waits its turn again)."""
        try:
            await self.api.apply(report_path(namespace), report, field_manager=FIELD_MANAGER,
                                 timeout=self.timeout_seconds)
        except ApiError as exc:
            self.metrics.reports.labels("failed").inc()
            if exc.code == 404 and "namespaces" in exc.message and namespace in exc.message:
                return True  # the namespace is gone; nothing to report
            if exc.code == 404:
                self._crd_missing()
                self._pending.setdefault(namespace, report)
                return True
            self._complain(f"write PolicyReport {namespace}/{REPORT_NAME}", exc)
            return True
        except ClusterUnavailable as exc:
            self.metrics.reports.labels("failed").inc()
            self._complain(f"write PolicyReport {namespace}/{REPORT_NAME}", exc)
            self._pending.setdefault(namespace, report)  # tried again after the others
            return False
        self.written[namespace] = digest
        self.metrics.reports.labels("written").inc()
        return True

    def _crd_missing(self) -> None:
        if self.crd_missing_since is None:
            log.warning("no PolicyReport API (%s): exposure reports are not written until its CRD is installed "
                        "(the optional exposure-reports component); looking again every %gs", API_VERSION,
                        CRD_RETRY_SECONDS)
        self.crd_missing_since = self.clock()

    def _complain(self, what: str, exc: Exception) -> None:
        now = self.clock()
        level = logging.DEBUG
        if now - self._warned_at >= 60.0:
            level, self._warned_at = logging.WARNING, now
        log.log(level, "cannot %s: %s", what, exc)


class ExposureScanner:
    """The exposure of every namespace, counted on every replica, published by the leader; ``run`` until
    cancelled."""

    def __init__(self, source: ClusterSource, metrics: TenantMetrics, config: Callable[[], Config],
                 leading: Callable[[], bool], writer: ReportWriter | None, *,
                 interval_seconds: float = DEFAULT_INTERVAL_SECONDS, slice_seconds: float = DEFAULT_SLICE_SECONDS,
                 max_duty: float = DEFAULT_MAX_DUTY, wall_clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.metrics = metrics
        self.config = config
        self.leading = leading
        self.writer = writer
        self.interval_seconds = interval_seconds
        self.pacer = Pacer(slice_seconds, max_duty)
        self.wall_clock = wall_clock
        self.scans = 0
        self.index = ExposureIndex()
        self.exposures: dict[str, NamespaceExposure] = {}  # the latest published, per namespace
        self._everything = True
        self._shared: SharedInputs | None = None
        self._table: ClassAccessTable | None = None
        self._pdbs: dict[str, dict[str, PodDisruptionBudget]] = {}

    # ---- the cluster state's pod listener, and leadership --------------------------------------------
    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        self.index.pod_changed(old, new)

    def started_leading(self) -> None:
        self._everything = True
        self._shared = None
        if self.writer is not None:
            self.writer.reset()

    def stopped_leading(self) -> None:
        self.metrics.clear_exposure()
        self.exposures.clear()
        if self.writer is not None:
            self.writer.reset()

    # ---- the scan ------------------------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_seconds)
            if not self.source.is_ready():
                continue
            try:
                await self.scan()
            except Exception:
                log.exception("the exposure scan failed; trying again at the next interval")
                self._everything = True

    async def scan(self) -> None:
        """One pass: count again what PDB selector changes ask for (every replica, so a new leader's counts are
        ready), and on the leader publish every namespace whose exposure may have changed."""
        state, config = self.source.state, self.config()
        self.pacer.start()
        namespaces = known_namespaces(state)
        present = set(namespaces)
        changed: set[str] = set()
        for namespace in namespaces:
            pdbs = state.pdbs_by_namespace.get(namespace) or {}
            if self._pdbs.get(namespace, {}) != pdbs:
                seen = dict(pdbs)
                # A selector changed: the namespace's pods are counted again in steps, the loop given back between
                # them (a namespace of 20,000 pods counted whole held it for ~50 ms).
                pods = state.pods_by_namespace.get(namespace, {}).values()
                steps = self.index.recount(namespace, seen.values(), pods)
                if steps is not None:
                    with contextlib.closing(steps):
                        for _ in steps:
                            await self.pacer.pace()
                self._pdbs[namespace] = seen  # only once counted: an abandoned recount is started again next pass
                changed.add(namespace)  # a budget left, or a selector
        for gone in [ns for ns in self._pdbs if ns not in present]:
            del self._pdbs[gone]
        if not self.leading():
            self.index.take_dirty()
            self.pacer.stop()
            return
        shared = SharedInputs.of(state, config)
        if shared != self._shared or self._table is None:
            self._table = await self._access_table(state, shared)
            self._shared = shared
            self._everything = True
        dirty = (present if self._everything else (self.index.take_dirty() | changed) & present)
        if self._everything:
            self.index.take_dirty()
        self._everything = False
        for gone in [ns for ns in self.exposures if ns not in present]:
            self.exposures.pop(gone, None)
            self.index.forget(gone)
            self.metrics.forget_exposure(gone)
            if self.writer is not None:
                self.writer.forget(gone)
        table, now = self._table, int(self.wall_clock())
        for namespace in sorted(dirty):
            if not self.leading():
                return
            exposure = self.index.exposure(namespace, state.pdbs_in(namespace), table, shared.namespaces,
                                           shared.tenant_label)
            self.exposures[namespace] = exposure
            self.metrics.set_exposure(exposure)
            if self.writer is not None:
                self.writer.offer(policy_report(exposure, timestamp=now))
            await self.pacer.pace()
        self.metrics.scan_duration.observe(self.pacer.stop())
        self.scans += 1

    async def _access_table(self, state: ClusterState, shared: SharedInputs) -> ClassAccessTable:
        tenants = tenants_by_namespace(known_namespaces(state), shared.namespaces, shared.tenant_label)
        accesses: list[ClassAccess] = []
        for priority_class in shared.classes.values():
            accesses.append(class_access(priority_class, tenants, shared.namespaces, state.quotas_by_namespace,
                                         shared.quota))
            await self.pacer.pace()
        return make_table(accesses)


