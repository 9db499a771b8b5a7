"""The aiohttp application: admission endpoints, /preview, health, and the listeners (HTTPS + plain-HTTP metrics).

HTTP concerns only: bodies are read and bounded here, decisions come from ``webhook.admission`` and
errors from the ``PreemptGuardError`` tree are mapped to statuses once, in ``error_middleware``.

Pod CREATE pipeline (``admit_pod_request``): the Priority plugin, the quota step, any extra steps in
``app[POD_STEPS_KEY]`` (all synchronous, in ``run_pod_pipeline``), then the preemption prediction in the
prediction thread pool within ``prediction.budgetMilliseconds``, then the guardrails over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from webhook.admission.outcome import AdmissionOutcome, internal_error
from webhook.admission.pods import PodAdmissionContext, PodAdmissionStep, priority_class_to_fetch, run_pod_pipeline
from webhook.admission.priorityclasses import admit_priority_class
from webhook.admission.review import (
    AdmissionRequest,
    build_admission_response,
    decode_json,
    optional_str,
    parse_admission_review,
    require_object,
)
from webhook.admission.steps import (
    Prediction,
    PredictionPlan,
    decide_guardrails,
    guardrail_outcome,
    plan_prediction,
    quota_step,
)
from webhook.cluster.model import PriorityClass
from webhook.cluster.source import ClusterSource
from webhook.config import Config
from webhook.errors import (
    BodyTooLarge,
    ClusterUnavailable,
    ConfigError,
    Forbidden,
    InvalidInput,
    PredictionTimeout,
    PreemptGuardError,
)
from webhook.routes import HEALTHZ_PATH, MUTATE_PODS_PATH, PREVIEW_PATH, READYZ_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.auth import (
    Authenticator,
    KubernetesAuthenticator,
    NamespaceVisibility,
    NoAuthentication,
    redact_preview,
    victim_namespaces,
)
from webhook.server.limits import (
    LIMITS_KEY,
    GuardedTCPSite,
    RequestLimits,
    limits_middleware,
    runner_options,
)
from webhook.server.live_config import LiveConfig
from webhook.server.metrics import WebhookMetrics, make_metrics_app
from webhook.server.prediction import PredictionService
from webhook.server.settings import ServerSettings
from webhook.server.tls import ServingTLS, serving_tls

log = logging.getLogger(__name__)

SOURCE_KEY = web.AppKey("source", ClusterSource)
SETTINGS_KEY = web.AppKey("settings", ServerSettings)
METRICS_KEY = web.AppKey("metrics", WebhookMetrics)
# Extra pod admission steps, run in order after the Priority plugin and the quota step, before the prediction.
POD_STEPS_KEY = web.AppKey("pod_admission_steps", list[PodAdmissionStep])
CONFIG_KEY = web.AppKey("config", LiveConfig)
PREDICTOR_KEY = web.AppKey("predictor", PredictionService)
AUTHENTICATOR_KEY = web.AppKey("authenticator", Authenticator)

MUTATE_PODS = "mutate_pods"
PREVIEW = "preview"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# ---- errors -------------------------------------------------------------------------------------
def json_response(value: object, status: int = 200) -> web.Response:
    """``value`` as compact JSON (orjson: one fast encode on the admission hot path)."""
    return web.Response(body=orjson.dumps(value), status=status, content_type="application/json")


def error_response(status: int, message: str) -> web.Response:
    return json_response({"error": message}, status=status)


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
        limits = request.app.get(LIMITS_KEY)
        body = await limits.read_body(request) if limits is not None else await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise BodyTooLarge(f"request body exceeds {limit} bytes") from exc
    except (HttpProcessingError, web.RequestPayloadError) as exc:  # e.g. Content-Encoding: gzip over plain bytes
        raise InvalidInput(f"request body could not be read: {exc.__class__.__name__}") from exc
    return decode_json(body)


async def read_admission_review(request: web.Request) -> AdmissionRequest:
    return parse_admission_review(await read_json_body(request))


def admission_response(uid: str, outcome: AdmissionOutcome) -> web.Response:
    return json_response(build_admission_response(uid, outcome))


class _LookupFailed(Exception):
    pass


async def fetch_missing_priority_class(source: ClusterSource, name: str) -> PriorityClass | None:
    """One direct lookup for a class the cache lacks; failures surface as the upstream internal error."""
    try:
        return await source.get_priority_class(name)
    except (PreemptGuardError, OSError, TimeoutError) as exc:
        raise _LookupFailed(f"failed to get PriorityClass with name {name}: {exc}") from exc


async def admit_pod_request(app: web.Application, review: AdmissionRequest) -> AdmissionOutcome:
    """The Priority plugin, quota, the app's extra steps, then prediction and guardrails for one pod review."""
    source = app[SOURCE_KEY]
    config = app[CONFIG_KEY].current
    fetched: dict[str, PriorityClass] = {}
    missing = priority_class_to_fetch(review, source.state)
    if missing is not None:
        try:
            found = await fetch_missing_priority_class(source, missing)
        except _LookupFailed as exc:
            return internal_error(str(exc))
        if found is not None:
            fetched[found.name] = found
    steps: list[PodAdmissionStep] = [quota_step(config.quota), *app[POD_STEPS_KEY]]
    result = run_pod_pipeline(review, source.state, fetched_classes=fetched, steps=steps)
    context = result.context
    if not result.outcome.allowed or context is None or context.resolved is None:
        return result.outcome
    return result.outcome.merged(await apply_guardrails(app, context, config))


async def apply_guardrails(app: web.Application, context: PodAdmissionContext, config: Config) -> AdmissionOutcome:
    """Predict (when planned) and decide by the guardrail policy; a slow or impossible prediction allows."""
    plan = plan_prediction(context, config.guardrails)
    prediction = await predict_for_admission(app, plan, config) if plan is not None else None
    decision = decide_guardrails(context, config.guardrails, prediction,
                                 budget_milliseconds=config.prediction.budget_milliseconds)
    metrics = app[METRICS_KEY]
    metrics.observe_guardrail(decision.decision, decision.mode)
    if prediction is not None and prediction.preview is not None and decision.allowed and not context.request.dry_run:
        metrics.observe_victims(prediction.preview)
    return guardrail_outcome(context, decision)


async def predict_for_admission(app: web.Application, plan: PredictionPlan, config: Config) -> Prediction:
    source = app[SOURCE_KEY]
    metrics = app[METRICS_KEY]
    if not source.is_ready():
        metrics.observe_skipped_prediction(MUTATE_PODS, "cache-not-ready")
        return Prediction.skip("cache-not-ready")
    started = time.perf_counter()
    try:
        preview = await app[PREDICTOR_KEY].predict_admission(
            source.state, plan.pod, namespace=plan.namespace, scheduler=config.scheduler,
            budget_seconds=config.prediction.budget_milliseconds / 1000)
    except PredictionTimeout:
        metrics.observe_skipped_prediction(MUTATE_PODS, "budget-exceeded")
        return Prediction.skip("budget-exceeded")
    except InvalidInput as exc:  # e.g. a quantity the API server's validation will refuse after admission
        log.info("no prediction for pod %s in %s: %s", _pod_name(plan.pod), plan.namespace, exc)
        metrics.observe_prediction(MUTATE_PODS, ["failed"], time.perf_counter() - started)
        return Prediction.failure()
    except Exception:  # a predictor bug must not block pod creation
        log.exception("preemption prediction failed for pod %s in %s", _pod_name(plan.pod), plan.namespace)
        metrics.observe_prediction(MUTATE_PODS, ["failed"], time.perf_counter() - started)
        return Prediction.failure()
    metrics.observe_prediction(MUTATE_PODS, _outcomes(preview), time.perf_counter() - started)
    return Prediction.made(preview)


def _pod_name(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata")
    if isinstance(meta, Mapping):
        return str(meta.get("name") or meta.get("generateName") or "")
    return ""


def _outcomes(preview: Mapping[str, Any]) -> list[str]:
    return [str(r.get("outcome")) for r in preview.get("results") or ()]


async def mutate_pods(request: web.Request) -> web.Response:
    review = await read_admission_review(request)
    started = time.perf_counter()
    outcome = await admit_pod_within_deadline(request, review)
    _observe(request, MUTATE_PODS, outcome, started)
    return admission_response(review.uid, outcome)


async def validate_priority_classes(request: web.Request) -> web.Response:
    review = await read_admission_review(request)
    started = time.perf_counter()
    outcome = admit_priority_class(review, request.app[SOURCE_KEY].state.priority_classes)
    _observe(request, "validate_priorityclasses", outcome, started)
    return admission_response(review.uid, outcome)


async def admit_pod_within_deadline(request: web.Request, review: AdmissionRequest) -> AdmissionOutcome:
    """``admit_pod_request``, or allowed-with-warning once the admission deadline (limits.py) has passed."""
    limits = request.app.get(LIMITS_KEY)
    if limits is None:
        return await admit_pod_request(request.app, review)
    try:
        async with asyncio.timeout(max(0.0, limits.admission_time_left(request))):
            return await admit_pod_request(request.app, review)
    except TimeoutError:
        log.warning("pod review %s not decided within the admission deadline: allowed without checks", review.uid)
        return limits.deadline_outcome()


def _observe(request: web.Request, endpoint: str, outcome: AdmissionOutcome, started: float) -> None:
    rules = outcome.denied_by or (("priority",) if not outcome.allowed else ())
    request.app[METRICS_KEY].observe_admission(
        endpoint, "allowed" if outcome.allowed else "denied", time.perf_counter() - started, outcome.denial_reason,
        rules,
    )


# ---- preview ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PreviewRequest:
    """Contract §3, plus the optional extension ``priorityClassName`` (preview as if the pod named that class)."""

    obj: dict[str, Any]
    namespace: str
    replicas: int | None
    priority_class: str | None


PREVIEW_REQUEST_FIELDS = ("pod", "namespace", "replicas", "priorityClassName")


def parse_preview_request(body: object) -> PreviewRequest:
    """A ``PreviewRequest``; anything malformed is ``InvalidInput`` (HTTP 400) naming the field."""
    raw = require_object(body, "PreviewRequest")
    unknown = sorted(str(key) for key in raw if key not in PREVIEW_REQUEST_FIELDS)
    if unknown:
        expected = ", ".join(PREVIEW_REQUEST_FIELDS)
        raise InvalidInput(f"unknown field {unknown[0]!r} in PreviewRequest (expected {expected})")
    if raw.get("pod") is None:
        raise InvalidInput("pod is required: a Pod or a workload with a pod template")
    obj = dict(require_object(raw.get("pod"), "pod"))
    replicas = raw.get("replicas")
    if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0):
        raise InvalidInput("replicas must be a non-negative integer")
    if replicas is not None and replicas > MAX_PREVIEW_REPLICAS:
        raise InvalidInput(f"replicas must be at most {MAX_PREVIEW_REPLICAS}")
    meta = obj.get("metadata")
    own_namespace = meta.get("namespace") if isinstance(meta, dict) else None
    namespace = (optional_str(raw.get("namespace"), "namespace")
                 or (own_namespace if isinstance(own_namespace, str) else "") or "default")
    priority_class = optional_str(raw.get("priorityClassName"), "priorityClassName") or None
    return PreviewRequest(obj, namespace, replicas, priority_class)


# A preview simulates replicas one after the other; beyond this a request is more likely a mistake than a plan.
MAX_PREVIEW_REPLICAS = 10_000


async def preview(request: web.Request) -> web.Response:
    """``POST /preview``: authenticate, authorise ``create pods``, predict, redact what the caller may not list."""
    app = request.app
    authenticator = app[AUTHENTICATOR_KEY]
    caller = await authenticator.authenticate(request.headers)
    wanted = parse_preview_request(await read_json_body(request))
    if not await authenticator.is_allowed(caller, "create", "pods", wanted.namespace):
        raise Forbidden(f'Forbidden: user "{caller.display_name}" may not create pods in namespace {wanted.namespace}')
    source = app[SOURCE_KEY]
    if not source.is_ready():
        raise ClusterUnavailable(f"the cluster cache is not ready: {source.readiness_reason() or 'starting'}")
    config = app[CONFIG_KEY].current
    metrics = app[METRICS_KEY]
    started = time.perf_counter()
    try:
        result = await app[PREDICTOR_KEY].preview(
            source.state, wanted.obj, namespace=wanted.namespace, replicas=wanted.replicas,
            priority_class=wanted.priority_class, scheduler=config.scheduler,
            budget_seconds=app[SETTINGS_KEY].preview_budget_seconds)
    except PredictionTimeout:
        metrics.observe_skipped_prediction(PREVIEW, "budget-exceeded")
        raise
    metrics.observe_prediction(PREVIEW, _outcomes(result), time.perf_counter() - started)
    visibility = NamespaceVisibility(authenticator, caller)
    hidden = await visibility.hidden_namespaces(victim_namespaces(result))
    return json_response(redact_preview(result, hidden))


# ---- health -------------------------------------------------------------------------------------
async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    limits = request.app.get(LIMITS_KEY)
    if limits is not None and limits.draining:
        return web.Response(status=503, text="shutting down")
    source = request.app[SOURCE_KEY]
    if source.is_ready():
        return web.Response(text="ok")
    return web.Response(status=503, text=source.readiness_reason() or "not ready")


# ---- application --------------------------------------------------------------------------------
def register_admission_routes(app: web.Application) -> None:
    app.router.add_post(MUTATE_PODS_PATH, mutate_pods)
    app.router.add_post(VALIDATE_PRIORITYCLASSES_PATH, validate_priority_classes)
    app.router.add_post(PREVIEW_PATH, preview)


def register_health_routes(app: web.Application) -> None:
    app.router.add_get(HEALTHZ_PATH, healthz)
    app.router.add_get(READYZ_PATH, readyz)


async def _source_lifecycle(app: web.Application) -> AsyncIterator[None]:
    source = app[SOURCE_KEY]
    await source.start()
    yield
    await source.stop()


async def _config_lifecycle(app: web.Application) -> AsyncIterator[None]:
    async with app[CONFIG_KEY].watching():
        yield


async def freeze_gc_once_ready(source: ClusterSource, poll_seconds: float = 0.1) -> None:
    """After the cache's initial sync, exclude everything alive from garbage collection (``gc.freeze``)."""
    while not source.is_ready():
        await asyncio.sleep(poll_seconds)
    gc.collect()
    gc.freeze()
    log.info("cluster cache synced: %d objects excluded from garbage collection", gc.get_freeze_count())


async def _gc_lifecycle(app: web.Application) -> AsyncIterator[None]:
    task = None
    if app[SETTINGS_KEY].freeze_gc_after_sync:
        task = asyncio.create_task(freeze_gc_once_ready(app[SOURCE_KEY]), name="preemptguard-gc-freeze")
    yield
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def warm_up_predictor_once_ready(app: web.Application, poll_seconds: float = 0.1) -> None:
    """After the cache's initial sync, build the predictor's index in the pool (not in the first admission)."""
    source = app[SOURCE_KEY]
    while not source.is_ready():
        await asyncio.sleep(poll_seconds)
    try:
        await app[PREDICTOR_KEY].warm_up(source.state, app[CONFIG_KEY].current.scheduler)
    except Exception:  # only a warm-up: the first real prediction builds the index instead
        log.exception("predictor warm-up failed")


async def _predictor_lifecycle(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(warm_up_predictor_once_ready(app), name="preemptguard-predictor-warm-up")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    app[PREDICTOR_KEY].shutdown()


def default_authenticator(source: ClusterSource) -> Authenticator:
    """No authentication for a snapshot; TokenReview/SubjectAccessReview through a live source's API client."""
    if hasattr(source, "api_client"):
        return KubernetesAuthenticator(lambda: getattr(source, "api_client", None))
    return NoAuthentication()


def make_app(source: ClusterSource, settings: ServerSettings, *, config: Config | None = None,
             authenticator: Authenticator | None = None) -> web.Application:
    """The HTTPS application. More routes are added with ``app.router`` before start-up; more pod admission
    steps are appended to ``app[POD_STEPS_KEY]``. Starting the app starts the source, the prediction pool and
    the configuration watcher.

    ``config`` defaults to ``settings.config_path`` loaded now (``ConfigError`` on a bad file), else the
    defaults; with a path the file is re-read every ``settings.config_reload_interval`` seconds.
    ``authenticator`` (for /preview) defaults to ``default_authenticator(source)``.
    """
    metrics = WebhookMetrics()
    limits = RequestLimits(settings, metrics.registry)
    app = web.Application(client_max_size=settings.max_body_bytes,
                          middlewares=[limits.guard.middleware(), error_middleware, limits_middleware])
    app[LIMITS_KEY] = limits
    metrics.track_staleness(source.staleness_seconds)
    app[SOURCE_KEY] = source
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = metrics
    app[POD_STEPS_KEY] = []
    if config is None:
        app[CONFIG_KEY] = LiveConfig.from_path(settings.config_path, interval_seconds=settings.config_reload_interval,
                                               metrics=metrics)
    else:
        app[CONFIG_KEY] = LiveConfig(config, settings.config_path, interval_seconds=settings.config_reload_interval,
                                     metrics=metrics)
    app[PREDICTOR_KEY] = PredictionService(settings.prediction_workers,
                                           inline_seconds=settings.inline_prediction_seconds)
    app[AUTHENTICATOR_KEY] = authenticator if authenticator is not None else default_authenticator(source)
    register_admission_routes(app)
    register_health_routes(app)
    app.cleanup_ctx.append(_source_lifecycle)
    app.cleanup_ctx.append(_predictor_lifecycle)
    app.cleanup_ctx.append(_config_lifecycle)
    app.cleanup_ctx.append(_gc_lifecycle)
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

    def begin_drain(self) -> None:
        """/readyz answers 503 from now on; requests are still served (see ``cli.serve``)."""
        self.app[LIMITS_KEY].begin_drain()

    async def stop(self) -> None:
        if self.metrics_runner is not None:
            await self.metrics_runner.cleanup()
        await self.runner.cleanup()
        await self.tls.stop()


def _bound_port(runner: web.AppRunner) -> int:
    address = runner.addresses[-1]
    return int(address[1])


async def listen(site: web.TCPSite, flag: str, host: str, port: int) -> None:
    """Start ``site``; a port that cannot be bound is a configuration error naming the flag behind it."""
    try:
        await site.start()
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise ConfigError(f"{flag} {port}: cannot listen on {host}:{port}: {reason}") from exc


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
    limits = app.get(LIMITS_KEY) or RequestLimits(settings, app[METRICS_KEY].registry)
    guard = limits.guard
    options = runner_options(settings)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, **options)
    await runner.setup()
    metrics_runner: web.AppRunner | None = None
    try:
        await listen(GuardedTCPSite(runner, settings.host, settings.port, guard=guard, ssl_context=tls.context),
                     "--port", settings.host, settings.port)
        https_port = _bound_port(runner)
        metrics_port: int | None = None
        if settings.metrics_port:
            metrics_app = make_metrics_app(app[METRICS_KEY])
            metrics_app.middlewares.append(limits.metrics_guard.middleware())
            metrics_runner = web.AppRunner(metrics_app, handle_signals=False, access_log=None, **options)
            await metrics_runner.setup()
            await listen(GuardedTCPSite(metrics_runner, settings.host, settings.metrics_port,
                                        guard=limits.metrics_guard),
                         "--metrics-port", settings.host, settings.metrics_port)
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
