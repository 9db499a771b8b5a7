"""The metrics a tenant's dashboard reads: preemptions by victim namespace and preemptor class, each namespace's
exposure, and which replica leads (docs/interfaces.md §7).

Only the leader (``webhook.server.leaderelection``) counts and sets them, so summing over replicas counts each
preemption once; a replica that stops leading clears its exposure gauges. Label values are bounded: at most
``max_namespaces`` namespaces and ``max_classes`` preemptor classes get a series of their own, the rest share
``OVERFLOW`` (a namespace's exposure gauges then add into it), so a cluster that creates namespaces or classes
without end cannot grow the scrape without end.

The namespace label is ``pod_namespace``, not ``namespace``: Prometheus gives every scraped series its target's
``namespace`` (PreemptGuard's own), and would rename a ``namespace`` label of the series to ``exported_namespace``.

Series (prefixed ``preemptguard_``):
- ``preemptions_total{pod_namespace,preemptor_class}``: pods kube-scheduler preempted, by the victim's namespace and
  the preemptor's PriorityClass (``unknown`` when no preemptor was found; ``""`` for a pod without a class);
- ``preemptions_predicted_total{predicted}``: the same preemptions by what PreemptGuard had predicted
  (``predicted``, ``elsewhere``, ``not_predicted``, ``no_prediction``);
- ``exposure_running_pods{pod_namespace}``, ``exposure_preemptible_pods{pod_namespace}`` (running pods some class
  could preempt), ``exposure_preemptible_by_other_tenants_pods{pod_namespace}`` (... some class another tenant may
  use could preempt);
- ``exposure_scan_duration_seconds`` (one pass over the namespaces that changed), ``exposure_reports_total{result}``
  (PolicyReport writes: ``written``, ``unchanged``, ``failed``);
- ``leader`` (1 on the replica holding the Lease, else 0).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from webhook.exposure import NamespaceExposure
from webhook.observe.attribution import PREDICTION_VERDICTS, Preemption, prediction_verdict

OVERFLOW = "_other"
DEFAULT_MAX_NAMESPACES = 2000
DEFAULT_MAX_CLASSES = 100
SCAN_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
REPORT_RESULTS = ("written", "unchanged", "failed")



class BoundedLabel:
    """The first ``limit`` distinct values pass; later ones become ``OVERFLOW``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.admitted: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self.admitted:
            return value
        if len(self.admitted) < self.limit:
            self.admitted.add(value)
            return value
        return OVERFLOW


class TenantMetrics:
    def __init__(self, registry: CollectorRegistry, *, max_namespaces: int = DEFAULT_MAX_NAMESPACES,
                 max_classes: int = DEFAULT_MAX_CLASSES) -> None:
        self.namespace_label = BoundedLabel(max_namespaces)
        self.class_label = BoundedLabel(max_classes)
        self.preemptions = Counter(
            "preemptguard_preemptions",
            "Pods kube-scheduler preempted, by the victim's namespace and the preemptor's PriorityClass (counted by "
            "the leader only).",
            ["pod_namespace", "preemptor_class"], registry=registry)
        self.preemptions_predicted = Counter(
            "preemptguard_preemptions_predicted",
            "Pods kube-scheduler preempted, by what PreemptGuard had predicted for the preemptor at admission "
            "(predicted, elsewhere, not_predicted, no_prediction).",
            ["predicted"], registry=registry)
        for verdict in PREDICTION_VERDICTS:
            self.preemptions_predicted.labels(verdict)
        self.running = Gauge(
            "preemptguard_exposure_running_pods",
            "Running pods of a namespace (bound, not terminal, not being deleted), as the leader last scanned them.",
            ["pod_namespace"], registry=registry)
        self.preemptible = Gauge(
            "preemptguard_exposure_preemptible_pods",
            "Running pods of a namespace that some PriorityClass could preempt (higher value, PreemptLowerPriority).",
            ["pod_namespace"], registry=registry)
        self.by_other_tenants = Gauge(
            "preemptguard_exposure_preemptible_by_other_tenants_pods",
            "Running pods of a namespace that a PriorityClass other tenants may use could preempt.",
            ["pod_namespace"], registry=registry)
        self.scan_duration = Histogram(
            "preemptguard_exposure_scan_duration_seconds",
            "CPU time of one exposure scan pass over the namespaces that changed (slices included, pauses not).",
            buckets=SCAN_BUCKETS, registry=registry)
        self.reports = Counter(
            "preemptguard_exposure_reports",
            "Exposure PolicyReport writes by result (written, unchanged, failed).",
            ["result"], registry=registry)
        for result in REPORT_RESULTS:
            self.reports.labels(result)
        self.leader = Gauge(
            "preemptguard_leader",
            "1 on the replica that holds the leader-election Lease (writes Events and PolicyReports), else 0.",
            registry=registry)
        self.leader_election = Gauge(
            "preemptguard_leader_election",
            "1 while this replica campaigns in Lease-based leader election (live mode, --leader-elect), else 0: "
            "with preemptguard_leader it tells a Lease nobody holds from a mode without one.",
            registry=registry)
        # The latest values per namespace, so an overflowed namespace's share can be taken back out.
        self._exposure: dict[str, tuple[int, int, int]] = {}

    # ---- preemptions -----------------------------------------------------------------------------
    def record_preemption(self, preemption: Preemption) -> None:
        self.preemptions.labels(self.namespace_label(preemption.namespace),
                                self.class_label(preemption.preemptor_class)).inc()
        self.preemptions_predicted.labels(prediction_verdict(preemption)).inc()

    # ---- exposure --------------------------------------------------------------------------------
    def set_exposure(self, exposure: NamespaceExposure) -> None:
        values = (exposure.running_pods, exposure.preemptible_pods, exposure.preemptible_by_other_tenants)
        self._put(exposure.namespace, values)

    def forget_exposure(self, namespace: str) -> None:
        """A namespace gone from the cluster: its series go too."""
        self._put(namespace, None)

    def clear_exposure(self) -> None:
        """This replica stopped leading: it exports no exposure any more."""
        for gauge in (self.running, self.preemptible, self.by_other_tenants):
            gauge.clear()
        self._exposure.clear()

    def _put(self, namespace: str, values: tuple[int, int, int] | None) -> None:
        label = self.namespace_label(namespace)
        before = self._exposure.pop(namespace, None)
        if values is not None:
            self._exposure[namespace] = values
        gauges = (self.running, self.preemptible, self.by_other_tenants)
        if label != OVERFLOW:
            for gauge, value in zip(gauges, values or (0, 0, 0), strict=True):
                if values is None:
                    if before is not None:
                        gauge.remove(label)
                else:
                    gauge.labels(label).set(value)
            return
        old = before or (0, 0, 0)
        new = values or (0, 0, 0)
        for gauge, was, now in zip(gauges, old, new, strict=True):
            gauge.labels(OVERFLOW).inc(now - was)

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def set_campaigning(self, campaigning: bool) -> None:
        self.leader_election.set(1 if campaigning else 0)
