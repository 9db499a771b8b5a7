"""Prometheus metrics, one registry per application (so tests can build many apps side by side)."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from webhook.routes import METRICS_PATH

# Admission must answer well inside the API server's timeout (10 s default, often 1-3 s).
ADMISSION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


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

    def observe_admission(self, endpoint: str, outcome: str, seconds: float, denial_reason: str = "") -> None:
        self.admission_duration.labels(endpoint, outcome).observe(seconds)
        if denial_reason:
            self.denials.labels(endpoint, denial_reason).inc()

    def observe_request(self, endpoint: str, code: int) -> None:
        self.requests.labels(endpoint, str(code)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def make_metrics_app(metrics: WebhookMetrics) -> web.Application:
    """``GET /metrics`` in the Prometheus text format (served on the plain-HTTP metrics port)."""

    async def serve_metrics(request: web.Request) -> web.Response:
        response = web.Response(body=metrics.render())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get(METRICS_PATH, serve_metrics)
    return app
