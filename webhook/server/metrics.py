"""Prometheus metrics, one registry per application (so tests can build many apps side by side).

Series (all prefixed ``preemptguard_``):
- ``admission_duration_seconds{endpoint,outcome}`` histogram; ``admission_requests_total{endpoint,outcome}``;
  ``admission_denials_total{endpoint,reason}`` (status reason) and ``admission_denials_by_rule_total{endpoint,rule}``
  (``priority``, ``quota.classes``, ``quota.limitedResources``, ``ResourceQuota`` or a guardrail rule name);
- ``http_requests_total{endpoint,code}``;
- ``predictions_total{endpoint,outcome}`` (``Fits``, ``Preempts``, ``Unschedulable``, ``Rejected``, ``Gated``,
  ``NotScheduled``, ``skipped``, ``failed``), ``predictions_skipped_total{endpoint,reason}``,
  ``prediction_duration_seconds{endpoint}``;
- ``predicted_victims_total{namespace}``: victims predicted for pods actually admitted (not dry runs);
- ``guardrail_decisions_total{decision,mode}``;
- ``prediction_observed_total{verdict}``: predictions made at pod creation held against what kube-scheduler then
  did (docs/interfaces.md §9), every ``verdict`` present from the start (0 without a live cluster);
- ``cluster_cache_staleness_seconds`` (the source's ``staleness_seconds()``);
- with a live cluster, per watched ``kind``: ``informer_resource_version`` (the last resourceVersion applied to the
  cache, as a number: compare it with a write's to see how far behind the cache is), ``informer_synced``,
  ``informer_events_total``, ``informer_relists_total`` and ``informer_listed_bytes_total`` (LIST bodies read);
- ``config_reloads_total`` and ``config_reload_failures_total``;
- the tenant series of ``webhook.server.tenant_metrics`` (preemptions, exposure, ``leader``), set by the leader;
- ``build_info{version,python,kubernetes_client}`` (always 1) and ``serving_certificate_expiry_timestamp_seconds``
  (``notAfter`` of the served certificate as a Unix time; 0 until the TLS layer calls
  ``set_serving_certificate_expiry``).

The standard ``process_*`` and ``python_*`` collectors of prometheus_client are registered in the same registry.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from typing import Any, TypeVar

import orjson
from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from webhook.admission.pod import PodReview
from webhook.config import ReloadResult
from webhook.errors import InvalidInput
from webhook.guardrails import GuardrailDecision, SkipReason
from webhook.observe.compare import Verdict
from webhook.preemption.results import PreemptionResult
from webhook.routes import DEBUG_PREDICTIONS_PATH, HEALTHZ_PATH, METRICS_PATH, READYZ_PATH
from webhook.server.tenant_metrics import TenantMetrics
from webhook.version import package_version

log = logging.getLogger(__name__)

# The ``endpoint`` label of prediction and admission series.
MUTATE_PODS = "mutate_pods"
PREVIEW = "preview"

# Admission must answer well inside the API server's timeout (10 s default, often 1-3 s).
ADMISSION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PREDICTION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

_Metric = TypeVar("_Metric", Counter, Histogram)


class LabelledChildren(dict[tuple[str, ...], _Metric]):
    """The children of one labelled metric by label values, looked up once: ``.labels(...)`` validates and
    locks on every call, which costs more than the observation itself on the admission path."""

    def __init__(self, parent: _Metric) -> None:
        super().__init__()
        self.parent: _Metric = parent

    def __missing__(self, values: tuple[str, ...]) -> _Metric:
        child = self[values] = self.parent.labels(*values)
        return child


class WebhookMetrics:
    """The webhook's metrics; add new ones here with ``registry=self.registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.admission_duration = Histogram(
            "preemptguard_admission_duration_seconds",
            "Time to answer one admission request.",
            ["endpoint", "outcome"],
            buckets=ADMISSION_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "preemptguard_http_requests",
            "HTTP requests served, by endpoint and status code.",
            ["endpoint", "code"],
            registry=self.registry,
        )
        self.denials = Counter(
            "preemptguard_admission_denials",
            "Admission requests denied, by endpoint and status reason.",
            ["endpoint", "reason"],
            registry=self.registry,
        )

        self.admission_requests = Counter(
            "preemptguard_admission_requests",
            "Admission requests answered, by endpoint and outcome (allowed or denied).",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.denials_by_rule = Counter(
            "preemptguard_admission_denials_by_rule",
            "Admission requests denied, by endpoint and the rule that denied them.",
            ["endpoint", "rule"],
            registry=self.registry,
        )
        self.predictions = Counter(
            "preemptguard_predictions",
            "Preemption predictions, by endpoint and outcome (Fits, Preempts, Unschedulable, Rejected, Gated, "
            "NotScheduled, skipped, "
            "failed); a preview of several replicas counts each replica.",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.predictions_skipped = Counter(
            "preemptguard_predictions_skipped",
            "Predictions not made, by endpoint and reason (budget-exceeded, cache-not-ready).",
            ["endpoint", "reason"],
            registry=self.registry,
        )
        self.prediction_duration = Histogram(
            "preemptguard_prediction_duration_seconds",
            "Time to make one prediction (including the wait for a worker), by endpoint.",
            ["endpoint"],
            buckets=PREDICTION_BUCKETS,
            registry=self.registry,
        )
        self.predicted_victims = Counter(
            "preemptguard_predicted_victims",
            "Pods predicted to be preempted by admitted pods, by the victim's namespace.",
            ["namespace"],
            registry=self.registry,
        )
        self.guardrail_decisions = Counter(
            "preemptguard_guardrail_decisions",
            "Guardrail decisions on pod creation, by decision and effective mode.",
            ["decision", "mode"],
            registry=self.registry,
        )
        self.prediction_observed = Counter(
            "preemptguard_prediction_observed",
            "Predictions made at pod creation held against what kube-scheduler then did, by verdict (agree, "
            "node_differs, victims_differ, outcome_differs, unobserved).",
            ["verdict"],
            registry=self.registry,
        )
        self._prediction_observed = {verdict: self.prediction_observed.labels(str(verdict)) for verdict in Verdict}
        self.cache_staleness = Gauge(
            "preemptguard_cluster_cache_staleness_seconds",
            "Seconds since the cluster cache was last known to match the cluster (0 for a snapshot file).",
            registry=self.registry,
        )
        self.config_reloads = Counter(
            "preemptguard_config_reloads",
            "Configuration file reloads applied.",
            registry=self.registry,
        )
        self.config_reload_failures = Counter(
            "preemptguard_config_reload_failures",
            "Configuration file changes rejected (the previous configuration stays in force).",
            registry=self.registry,
        )
        self.build_info = Gauge(
            "preemptguard_build_info",
            "Always 1; the labels say which PreemptGuard, Python and Kubernetes client this replica runs.",
            ["version", "python", "kubernetes_client"],
            registry=self.registry,
        )
        self.build_info.labels(package_version(), platform.python_version(), _kubernetes_client_version()).set(1)
        # Preemptions by victim namespace, exposure, leadership (docs/interfaces.md §7): set by the leader only.
        self.tenants = TenantMetrics(self.registry)
        self.serving_certificate_expiry = Gauge(
            "preemptguard_serving_certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate in use, as a Unix time (0 until the TLS layer reports it).",
            registry=self.registry,
        )
        # process_* (CPU, memory, file descriptors) and python_* (version, garbage collector), as a default
        # prometheus_client registry would have them, but in this app's own registry.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._admission_duration = LabelledChildren(self.admission_duration)
        self._admission_requests = LabelledChildren(self.admission_requests)
        self._denials = LabelledChildren(self.denials)
        self._denials_by_rule = LabelledChildren(self.denials_by_rule)
        self._predictions = LabelledChildren(self.predictions)
        self._predictions_skipped = LabelledChildren(self.predictions_skipped)
        self._prediction_duration = LabelledChildren(self.prediction_duration)
        self._predicted_victims = LabelledChildren(self.predicted_victims)
        self._guardrail_decisions = LabelledChildren(self.guardrail_decisions)
        self._requests = LabelledChildren(self.requests)

    def record_admission(self, endpoint: str, outcome: str, seconds: float, denial_reason: str = "",
                          rules: Iterable[str] = ()) -> None:
        self._admission_duration[endpoint, outcome].observe(seconds)
        self._admission_requests[endpoint, outcome].inc()
        if denial_reason:
            self._denials[endpoint, denial_reason].inc()
        for rule in rules:
            self._denials_by_rule[endpoint, rule].inc()

    def record_prediction(self, endpoint: str, outcomes: Iterable[str], seconds: float) -> None:
        for outcome in outcomes:
            self._predictions[endpoint, outcome].inc()
        self._prediction_duration[(endpoint,)].observe(seconds)

    def record_skipped_prediction(self, endpoint: str, reason: str) -> None:
        self._predictions[endpoint, "skipped"].inc()
        self._predictions_skipped[endpoint, reason].inc()

    def record_victims(self, result: PreemptionResult) -> None:
        for victim in result.victims:
            self._predicted_victims[(victim.namespace,)].inc()

    def record_prediction_verdict(self, verdict: Verdict) -> None:
        self._prediction_observed[verdict].inc()

    def record_guardrail(self, decision: str, mode: str) -> None:
        self._guardrail_decisions[decision, mode].inc()

    def record_config_reload(self, result: ReloadResult) -> None:
        """The ``on_reload`` callback of the live configuration: count applied and rejected changes."""
        if result is ReloadResult.RELOADED:
            self.config_reloads.inc()
        elif result is ReloadResult.FAILED:
            self.config_reload_failures.inc()

    def track_staleness(self, staleness_seconds: Callable[[], float]) -> None:
        """Read the gauge from the source at every scrape."""
        self.cache_staleness.set_function(staleness_seconds)

    def track_informers(self, status: Callable[[], Mapping[str, Mapping[str, object]]]) -> None:
        """Read the informers' progress (``KubernetesSource.informer_status``) at every scrape."""
        self.registry.register(InformerCollector(status))

    def set_serving_certificate_expiry(self, not_after: datetime) -> None:
        """Record the ``notAfter`` of the certificate now served (at start and after each reload); a naive
        datetime is UTC, as cryptography's ``not_valid_after`` is."""
        if not_after.tzinfo is None:
            not_after = not_after.replace(tzinfo=UTC)
        self.serving_certificate_expiry.set(not_after.timestamp())

    def track_serving_certificate(self, not_after: Callable[[], datetime]) -> None:
        """Read the served certificate's ``notAfter`` at every scrape (it follows reloads on its own)."""
        self.serving_certificate_expiry.set_function(lambda: not_after().timestamp())

    def record_request(self, endpoint: str, code: int) -> None:
        self._requests[endpoint, str(code)].inc()

    def render(self, names: Iterable[str] = ()) -> bytes:
        """The text format; with ``names``, only those series (a family's ``_total``, ``_count``, ... by their
        sample names), as the Prometheus client libraries answer ``?name[]=``: what is not asked is not collected
        into the answer, so a reader of one gauge does not pay for rendering every series."""
        wanted = list(names)
        return generate_latest(self.registry.restricted_registry(wanted) if wanted else self.registry)


class InformerCollector:
    """The ``informer_*`` series, one sample per kind, from the source's ``informer_status()`` at each scrape."""

    def __init__(self, status: Callable[[], Mapping[str, Mapping[str, object]]]) -> None:
        self.status = status

    def describe(self) -> list[Metric]:
        """The families without samples (their kinds are the source's, read at each scrape): their names let the
        registry answer ``?name[]=`` with them."""
        return list(self._families().values())

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        for kind, status in self.status().items():
            for key, family in families.items():
                family.add_metric([kind], _number(status.get(key)))
        return families.values()

    @staticmethod
    def _families() -> dict[str, GaugeMetricFamily | CounterMetricFamily]:
        return {
            "resourceVersion": GaugeMetricFamily(
                "preemptguard_informer_resource_version",
                "The last resourceVersion the informer applied to the cluster cache (0 when not a number).",
                labels=["kind"]),
            "synced": GaugeMetricFamily("preemptguard_informer_synced",
                                        "1 once the informer's first LIST is in the cache.", labels=["kind"]),
            "eventsApplied": CounterMetricFamily("preemptguard_informer_events",
                                                 "Watch events applied to the cluster cache.", labels=["kind"]),
            "relists": CounterMetricFamily("preemptguard_informer_relists", "Full LISTs (the first one and every "
                                           "relist after 410 Gone).", labels=["kind"]),
            "listedBytes": CounterMetricFamily("preemptguard_informer_listed_bytes",
                                               "Bytes of LIST answers read.", labels=["kind"]),
        }


def _number(value: object) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(int(str(value)))
    except ValueError:
        return 0.0


def _kubernetes_client_version() -> str:
    try:
        return metadata.version("kubernetes-asyncio")
    except metadata.PackageNotFoundError:
        return "unknown"


class AdmissionMetrics:
    """The pod pipeline's ``AdmissionRecorder``: its events counted in ``metrics`` and logged."""

    def __init__(self, metrics: WebhookMetrics) -> None:
        self.metrics = metrics

    def prediction_made(self, result: PreemptionResult, seconds: float) -> None:
        self.metrics.record_prediction(MUTATE_PODS, (result.outcome,), seconds)

    def prediction_failed(self, review: PodReview, error: Exception, seconds: float) -> None:
        if isinstance(error, InvalidInput):  # e.g. a quantity the API server's validation refuses after admission
            log.info("no prediction for pod %s in %s: %s", review.name_for_messages, review.namespace, error)
        else:
            log.error("preemption prediction failed for pod %s in %s", review.name_for_messages, review.namespace,
                      exc_info=error)
        self.metrics.record_prediction(MUTATE_PODS, ("failed",), seconds)

    def prediction_skipped(self, reason: SkipReason) -> None:
        self.metrics.record_skipped_prediction(MUTATE_PODS, reason)

    def guardrail_decided(self, decision: GuardrailDecision, result: PreemptionResult | None, *,
                          dry_run: bool) -> None:
        self.metrics.record_guardrail(decision.decision, decision.mode)
        if result is not None and decision.allowed and not dry_run:
            self.metrics.record_victims(result)


def make_metrics_app(metrics: WebhookMetrics,
                     predictions: Callable[[], Mapping[str, Any]] | None = None, *,
                     readiness: Callable[[], tuple[int, str]] | None = None) -> web.Application:
    """``GET /metrics`` in the Prometheus text format (served on the plain-HTTP metrics port); with ``readiness``
    the kubelet's probes ``GET /healthz`` and ``GET /readyz`` (``readiness()``: the admission application's
    status and text); with ``predictions`` ``GET /debug/predictions``: the live observer's summary,
    tenant-redacted (docs/interfaces.md §9)."""

    async def serve_metrics(request: web.Request) -> web.Response:
        response = web.Response(body=metrics.render(request.query.getall("name[]", [])))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get(METRICS_PATH, serve_metrics)
    if readiness is not None:
        ready = readiness

        async def healthz(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def readyz(request: web.Request) -> web.Response:
            status, text = ready()
            return web.Response(status=status, text=text)

        app.router.add_get(HEALTHZ_PATH, healthz)
        app.router.add_get(READYZ_PATH, readyz)
    if predictions is not None:
        summary = predictions

        async def serve_predictions(request: web.Request) -> web.Response:
            return web.Response(body=orjson.dumps(summary(), option=orjson.OPT_INDENT_2),
                                content_type="application/json")

        app.router.add_get(DEBUG_PREDICTIONS_PATH, serve_predictions)
    return app
