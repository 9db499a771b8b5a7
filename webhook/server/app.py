"""The aiohttp application: admission endpoints, health, and the listeners (HTTPS + plain-HTTP metrics).

HTTP concerns only: bodies are read and bounded here, decisions come from ``webhook.admission`` and
errors from the ``PreemptGuardError`` tree are mapped to statuses once, in ``error_middleware``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from webhook.admission.outcome import AdmissionOutcome, internal_error
from webhook.admission.pods import PodAdmissionStep, admit_pod, priority_class_to_fetch
from webhook.admission.priorityclasses import admit_priority_class
from webhook.admission.review import AdmissionRequest, build_admission_response, decode_json, parse_admission_review
from webhook.cluster.model import PriorityClass
from webhook.cluster.source import ClusterSource
from webhook.errors import BodyTooLarge, PreemptGuardError
from webhook.routes import HEALTHZ_PATH, MUTATE_PODS_PATH, READYZ_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.metrics import WebhookMetrics, make_metrics_app
from webhook.server.settings import ServerSettings
from webhook.server.tls import ServingTLS, serving_tls

log = logging.getLogger(__name__)

SOURCE_KEY = web.AppKey("source", ClusterSource)
SETTINGS_KEY = web.AppKey("settings", ServerSettings)
METRICS_KEY = web.AppKey("metrics", WebhookMetrics)
# Extra pod admission steps run after the Priority plugin, in order (quota, prediction, guardrails, ...).
POD_STEPS_KEY = web.AppKey("pod_admission_steps", list[PodAdmissionStep])

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# ---- errors -------------------------------------------------------------------------------------
def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map the exception tree to statuses once; count every response by endpoint and code."""
    metrics = request.app[METRICS_KEY]
    endpoint = _endpoint_label(request)
    try:
        response = await handler(request)
    except PreemptGuardError as exc:
        response = error_response(exc.http_status, str(exc))
    except web.HTTPRequestEntityTooLarge:
        response = error_response(413, f"request body exceeds {request.app[SETTINGS_KEY].max_body_bytes} bytes")
    except web.HTTPException as exc:
        metrics.observe_request(endpoint, exc.status)
        raise
    except asyncio.CancelledError:
        raise
    except Exception:  # a bug: logged loudly, never a hang or a dropped connection
        log.exception("unexpected error handling %s %s", request.method, request.path)
        response = error_response(500, "internal error")
    metrics.observe_request(endpoint, response.status)
    return response


def _endpoint_label(request: web.Request) -> str:
    route = request.match_info.route.resource
    return route.canonical if route is not None else "unmatched"


# ---- admission ----------------------------------------------------------------------------------
async def read_json_body(request: web.Request) -> object:
    """The decoded JSON body, refusing more than ``max_body_bytes`` (413) without buffering it all."""
    limit = request.app[SETTINGS_KEY].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise BodyTooLarge(f"request body of {request.content_length} bytes exceeds {limit} bytes")
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise BodyTooLarge(f"request body exceeds {limit} bytes") from exc
    return decode_json(body)


async def read_admission_review(request: web.Request) -> AdmissionRequest:
    return parse_admission_review(await read_json_body(request))


def admission_response(uid: str, outcome: AdmissionOutcome) -> web.Response:
    return web.json_response(build_admission_response(uid, outcome))


class _LookupFailed(Exception):
    pass


async def fetch_missing_priority_class(source: ClusterSource, name: str) -> PriorityClass | None:
    """One direct lookup for a class the cache lacks; failures surface as the upstream internal error."""
    try:
        return await source.get_priority_class(name)
    except (PreemptGuardError, OSError, TimeoutError) as exc:
        raise _LookupFailed(f"failed to get PriorityClass with name {name}: {exc}") from exc


async def admit_pod_request(app: web.Application, review: AdmissionRequest) -> AdmissionOutcome:
    """The Priority plugin plus the app's extra steps for one pod review."""
    source = app[SOURCE_KEY]
    fetched: dict[str, PriorityClass] = {}
    missing = priority_class_to_fetch(review, source.state)
    if missing is not None:
        try:
            found = await fetch_missing_priority_class(source, missing)
        except _LookupFailed as exc:
            return internal_error(str(exc))
        if found is not None:
            fetched[found.name] = found
    steps: list[PodAdmissionStep] = app[POD_STEPS_KEY]
    return admit_pod(review, source.state, fetched_classes=fetched, steps=steps)


async def mutate_pods(request: web.Request) -> web.Response:
    review = await read_admission_review(request)
    started = time.perf_counter()
    outcome = await admit_pod_request(request.app, review)
    _observe(request, "mutate_pods", outcome, started)
    return admission_response(review.uid, outcome)


async def validate_priority_classes(request: web.Request) -> web.Response:
    review = await read_admission_review(request)
    started = time.perf_counter()
    outcome = admit_priority_class(review, request.app[SOURCE_KEY].state.priority_classes)
    _observe(request, "validate_priorityclasses", outcome, started)
    return admission_response(review.uid, outcome)


def _observe(request: web.Request, endpoint: str, outcome: AdmissionOutcome, started: float) -> None:
    request.app[METRICS_KEY].observe_admission(
        endpoint, "allowed" if outcome.allowed else "denied", time.perf_counter() - started, outcome.denial_reason
    )


# ---- health -------------------------------------------------------------------------------------
async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    source = request.app[SOURCE_KEY]
    if source.is_ready():
        return web.Response(text="ok")
    return web.Response(status=503, text=source.readiness_reason() or "not ready")


# ---- application --------------------------------------------------------------------------------
def register_admission_routes(app: web.Application) -> None:
    app.router.add_post(MUTATE_PODS_PATH, mutate_pods)
    app.router.add_post(VALIDATE_PRIORITYCLASSES_PATH, validate_priority_classes)


def register_health_routes(app: web.Application) -> None:
    app.router.add_get(HEALTHZ_PATH, healthz)
    app.router.add_get(READYZ_PATH, readyz)


async def _source_lifecycle(app: web.Application) -> AsyncIterator[None]:
    source = app[SOURCE_KEY]
    await source.start()
    yield
    await source.stop()


def make_app(source: ClusterSource, settings: ServerSettings) -> web.Application:
    """The HTTPS application. More routes (e.g. ``/preview``) are added with ``app.router`` before start-up;
    more pod admission steps are appended to ``app[POD_STEPS_KEY]``. Starting the app starts the source."""
    app = web.Application(client_max_size=settings.max_body_bytes, middlewares=[error_middleware])
    app[SOURCE_KEY] = source
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = WebhookMetrics()
    app[POD_STEPS_KEY] = []
    register_admission_routes(app)
    register_health_routes(app)
    app.cleanup_ctx.append(_source_lifecycle)
    return app


# ---- listeners ----------------------------------------------------------------------------------
@dataclass(slots=True)
class RunningServer:
    app: web.Application
    tls: ServingTLS
    runner: web.AppRunner
    metrics_runner: web.AppRunner | None
    https_port: int
    metrics_port: int | None

    async def stop(self) -> None:
        if self.metrics_runner is not None:
            await self.metrics_runner.cleanup()
        await self.runner.cleanup()
        await self.tls.stop()


def _bound_port(runner: web.AppRunner) -> int:
    address = runner.addresses[-1]
    return int(address[1])


async def start_server(
    app: web.Application, settings: ServerSettings, *, tls: ServingTLS | None = None
) -> RunningServer:
    """Serve ``app`` over TLS on ``settings.host:port`` and metrics over HTTP on ``metrics_port`` (0 = off).

    Port 0 in ``settings.port`` binds a free port (see ``RunningServer.https_port``). ``tls`` defaults to
    what the settings ask for (files re-read on change, or self-signed).
    """
    tls = tls or serving_tls(
        cert_file=settings.tls_cert, key_file=settings.tls_key, self_signed=settings.tls_self_signed,
        sans=settings.tls_sans, reload_interval=settings.tls_reload_interval,
    )
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    metrics_runner: web.AppRunner | None = None
    try:
        await web.TCPSite(runner, settings.host, settings.port, ssl_context=tls.context).start()
        https_port = _bound_port(runner)
        metrics_port: int | None = None
        if settings.metrics_port:
            metrics_runner = web.AppRunner(make_metrics_app(app[METRICS_KEY]), handle_signals=False, access_log=None)
            await metrics_runner.setup()
            await web.TCPSite(metrics_runner, settings.host, settings.metrics_port).start()
            metrics_port = _bound_port(metrics_runner)
        await tls.start()
    except BaseException:
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        await runner.cleanup()
        await tls.stop()
        raise
    log.info("serving admission on https://%s:%d", settings.host, https_port)
    return RunningServer(app, tls, runner, metrics_runner, https_port, metrics_port)
