"""The aiohttp application: routes, middleware, lifecycles, and the listeners (HTTPS admission; HTTPS ``/preview``
without client certificates, ``--preview-port``; plain-HTTP metrics).

HTTP concerns only. The handlers (``webhook.server.handlers``) read and bound bodies and hand pod reviews to
the admission pipeline (``webhook.admission.pipeline.PodAdmission``), which is wired here with its
collaborators: the cluster source, the prediction service and the metrics observer.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from webhook.admission.pipeline import PodAdmission, PodStep
from webhook.config import Config, LiveConfig
from webhook.errors import ConfigError
from webhook.prediction.service import PredictionService, catch_up_after_event, keep_index_fresh
from webhook.routes import HEALTHZ_PATH, MUTATE_PODS_PATH, PREVIEW_PATH, READYZ_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.auth import Authenticator, KubernetesAuthenticator, NoAuthentication
from webhook.server.client_auth import client_certificate_middleware
from webhook.server.collection import (
    BACKSTOP_THRESHOLD,
    YOUNG_COLLECTION_SECONDS,
    SurvivorFreezer,
    collect_between_turns,
    collector_threshold,
)
from webhook.server.connections import GuardedTCPSite
from webhook.server.events import PodEvents
from webhook.server.handlers import (
    AUTHENTICATOR_KEY,
    CONFIG_KEY,
    METRICS_KEY,
    PIPELINE_KEY,
    PREDICTOR_INDEXED_KEY,
    PREDICTOR_KEY,
    PREVIEW_RATE_KEY,
    SETTINGS_KEY,
    SOURCE_KEY,
    error_middleware,
    healthz,
    mutate_pods,
    preview,
    readiness,
    readyz,
    validate_priority_classes,
)
from webhook.server.limits import (
    LIMITS_KEY,
    RequestLimits,
    limits_middleware,
    metrics_gate_middleware,
    runner_options,
)
from webhook.server.metrics import AdmissionMetrics, WebhookMetrics, make_metrics_app
from webhook.server.observing import PredictionObserver, not_observing, observer_lifecycle
from webhook.server.ratelimit import CallerRateLimit
from webhook.server.settings import ServerSettings
from webhook.server.tenants import TenantServices
from webhook.server.tls import ServingTLS, serving_tls
from webhook.sources.kube_source import KubernetesSource
from webhook.sources.source import ClusterSource
from webhook.tasks import cancel_and_wait, running_in_background

log = logging.getLogger(__name__)

__all__ = ["CONFIG_KEY", "METRICS_KEY", "OBSERVER_KEY", "PIPELINE_KEY", "SOURCE_KEY", "TENANTS_KEY", "RunningServer",
           "make_app", "start_server"]

OBSERVER_KEY = web.AppKey("prediction_observer", PredictionObserver)
TENANTS_KEY = web.AppKey("tenant_services", TenantServices)


# ---- application --------------------------------------------------------------------------------
def register_admission_routes(app: web.Application) -> None:
    app.router.add_post(MUTATE_PODS_PATH, mutate_pods)
    app.router.add_post(VALIDATE_PRIORITYCLASSES_PATH, validate_priority_classes)
    app.router.add_post(PREVIEW_PATH, preview)


def register_health_routes(app: web.Application) -> None:
    app.router.add_get(HEALTHZ_PATH, healthz)
    app.router.add_get(READYZ_PATH, readyz)


# What the /preview listener's application shares with the admission application it serves beside.
_PREVIEW_APP_KEYS: tuple[web.AppKey[Any], ...] = (
    SOURCE_KEY, SETTINGS_KEY, METRICS_KEY, CONFIG_KEY, PREDICTOR_KEY, PREDICTOR_INDEXED_KEY, AUTHENTICATOR_KEY,
    PREVIEW_RATE_KEY, LIMITS_KEY)


def make_preview_app(app: web.Application) -> web.Application:
    """``POST /preview``, ``/healthz`` and ``/readyz`` of the admission application ``app``, for the listener of
    ``--preview-port``: its own connection guard, then the same errors, body intake, slots and per-caller rate
    as ``/preview`` on ``--port`` (the same objects: one budget, one rate). Nothing else answers there: an
    AdmissionReview sent to it is a 404, so that listener is no way around ``--client-ca``. Its lifecycle is
    ``app``'s; this application starts and stops nothing."""
    limits = app[LIMITS_KEY]
    preview_app = web.Application(client_max_size=app[SETTINGS_KEY].max_body_bytes,
                                  middlewares=[limits.preview_guard.middleware(), error_middleware, limits_middleware])
    for key in _PREVIEW_APP_KEYS:
        preview_app[key] = app[key]
    preview_app.router.add_post(PREVIEW_PATH, preview)
    register_health_routes(preview_app)
    return preview_app


async def _source_lifecycle(app: web.Application) -> AsyncIterator[None]:
    source = app[SOURCE_KEY]
    await source.start()
    yield
    await source.stop()


async def _authenticator_lifecycle(app: web.Application) -> AsyncIterator[None]:
    yield
    await app[AUTHENTICATOR_KEY].close()


async def _config_lifecycle(app: web.Application) -> AsyncIterator[None]:
    async with app[CONFIG_KEY].watching():
        yield


async def freeze_gc_once_ready(source: ClusterSource, poll_seconds: float = 0.1,
                               freezer: SurvivorFreezer | None = None) -> None:
    """After the cache's initial sync, exclude everything alive from garbage collection (``gc.freeze``); then, with
    a ``freezer`` (a live cluster, whose cache keeps changing), install it: the survivors of later collections are
    frozen too."""
    while not source.is_ready():
        await asyncio.sleep(poll_seconds)
    gc.collect()
    gc.freeze()
    log.info("cluster cache synced: %d objects excluded from garbage collection", gc.get_freeze_count())
    if freezer is not None:
        freezer.install()


async def collect_between_turns_forever(source: ClusterSource, freezer: SurvivorFreezer,
                                        interval_seconds: float = YOUNG_COLLECTION_SECONDS) -> None:
    """Once the cache has synced and the freezer is installed: the collections between turns of the event loop
    (``collect_between_turns``), the collector's own threshold raised to a backstop meanwhile (collection.py)."""
    await freeze_gc_once_ready(source, freezer=freezer)
    with collector_threshold(BACKSTOP_THRESHOLD):
        while True:
            await asyncio.sleep(interval_seconds)
            collect_between_turns(freezer)


async def _gc_lifecycle(app: web.Application) -> AsyncIterator[None]:
    task = None
    freezer = None
    if app[SETTINGS_KEY].freeze_gc_after_sync:
        source = app[SOURCE_KEY]
        if source.api is None:  # a snapshot never changes: one freeze once ready is all
            task = asyncio.create_task(freeze_gc_once_ready(source), name="preemptguard-gc-freeze")
        else:
            freezer = SurvivorFreezer(youngest=0)
            task = asyncio.create_task(collect_between_turns_forever(source, freezer),
                                       name="preemptguard-gc-between-turns")
    yield
    await cancel_and_wait(task)
    if freezer is not None:
        freezer.uninstall()


async def warm_up_predictor_once_ready(app: web.Application, poll_seconds: float = 0.1) -> None:
    """After the cache's initial sync, build the predictor's index in the pool (not in the first admission); /readyz
    answers 200 only once it is built (or its build failed: the first real prediction then builds it)."""
    source = app[SOURCE_KEY]
    while not source.is_ready():
        await asyncio.sleep(poll_seconds)
    try:
        await app[PREDICTOR_KEY].warm_up(source.state, app[CONFIG_KEY].current.scheduler)
    except Exception:  # only a warm-up: the first real prediction builds the index instead
        log.exception("predictor warm-up failed")
    finally:
        app[PREDICTOR_INDEXED_KEY].set()


async def _predictor_lifecycle(app: web.Application) -> AsyncIterator[None]:
    async with running_in_background(warm_up_predictor_once_ready(app), name="preemptguard-predictor-warm-up"):
        if app[SOURCE_KEY].api is None:  # a snapshot never changes: nothing to keep fresh
            yield
        else:
            source = app[SOURCE_KEY]
            live = source if isinstance(source, KubernetesSource) else None  # a live cluster's informers
            catch_up = catch_up_after_event(source.state)
            if live is not None:
                live.after_watch_event.append(catch_up)
                # Admissions go first: the informers wait between two watch batches while any is in flight.
                live.between_watch_batches = app[LIMITS_KEY].guard.in_flight.wait_for_none
            try:
                async with running_in_background(keep_index_fresh(source.state), name="preemptguard-index-refresh"):
                    yield
            finally:
                if live is not None:
                    live.after_watch_event.remove(catch_up)
                    live.between_watch_batches = None
    app[PREDICTOR_KEY].shutdown()


async def _stop_body_decoder(app: web.Application) -> None:
    app[LIMITS_KEY].intake.decoder.shutdown()


def default_authenticator(source: ClusterSource) -> Authenticator:
    """No authentication for a snapshot; TokenReview/SubjectAccessReview through a live source's API client."""
    if source.api is not None:
        return KubernetesAuthenticator(source.api)
    return NoAuthentication()


async def _observer_lifecycle(app: web.Application) -> AsyncIterator[None]:
    async for _ in observer_lifecycle(app[OBSERVER_KEY]):
        yield


def make_observer(source: ClusterSource, settings: ServerSettings, metrics: WebhookMetrics,
                  live: LiveConfig) -> PredictionObserver | None:
    """The live observer of docs/interfaces.md §9: with a live source and a non-zero --observe-window only."""
    if source.api is None or settings.observe_window_seconds <= 0:
        return None
    events = PodEvents(source.api) if settings.events else None
    return PredictionObserver(source, metrics, lambda: live.current, settings, events=events)


async def _tenants_lifecycle(app: web.Application) -> AsyncIterator[None]:
    async for _ in app[TENANTS_KEY].lifecycle():
        yield


def make_tenant_services(source: ClusterSource, settings: ServerSettings, metrics: WebhookMetrics,
                         live: LiveConfig) -> TenantServices | None:
    """Preemption attribution and the exposure scan (docs/interfaces.md §7): with a live source only."""
    if source.api is None or not (settings.attribute_preemptions or settings.exposure_scan):
        return None
    return TenantServices(source, source.api, settings, metrics, lambda: live.current)


def make_app(source: ClusterSource, settings: ServerSettings, *, config: Config | None = None,
             authenticator: Authenticator | None = None, pod_steps: list[PodStep] | None = None) -> web.Application:
    """The HTTPS application. More routes are added with ``app.router`` before start-up; ``pod_steps`` are
    extra pod admission stages run after the quota (``app[PIPELINE_KEY].steps``). Starting the app starts the
    source, the prediction pool and the configuration watcher.

    ``config`` defaults to ``settings.config_path`` loaded now (``ConfigError`` on a bad file), else the
    defaults; with a path the file is re-read every ``settings.config_reload_interval`` seconds.
    ``authenticator`` (for /preview) defaults to ``default_authenticator(source)``.
    """
    metrics = WebhookMetrics()
    limits = RequestLimits(settings, metrics.registry)
    middlewares = [limits.guard.middleware(), error_middleware]
    if settings.client_ca is not None:
        middlewares.append(client_certificate_middleware(settings.client_cns))
    app = web.Application(client_max_size=settings.max_body_bytes, middlewares=[*middlewares, limits_middleware])
    app[LIMITS_KEY] = limits
    metrics.track_staleness(source.staleness_seconds)
    informer_status = getattr(source, "informer_status", None)
    if callable(informer_status):  # a live cluster's informers (webhook.sources.kube_source)
        metrics.track_informers(informer_status)
    app[SOURCE_KEY] = source
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = metrics
    if config is None:
        app[CONFIG_KEY] = LiveConfig.from_path(settings.config_path, interval_seconds=settings.config_reload_interval,
                                               on_reload=metrics.record_config_reload)
    else:
        app[CONFIG_KEY] = LiveConfig(config, settings.config_path, interval_seconds=settings.config_reload_interval,
                                     on_reload=metrics.record_config_reload)
    app[PREDICTOR_KEY] = PredictionService(settings.prediction_workers,
                                           inline_seconds=settings.inline_prediction_seconds,
                                           preview_workers=settings.preview_workers)
    app[PREDICTOR_INDEXED_KEY] = asyncio.Event()
    app[AUTHENTICATOR_KEY] = authenticator if authenticator is not None else default_authenticator(source)
    live = app[CONFIG_KEY]
    observer = make_observer(source, settings, metrics, live)
    app[PREVIEW_RATE_KEY] = CallerRateLimit(lambda: live.current.prediction.previews_per_minute)
    app[PIPELINE_KEY] = PodAdmission(source, app[PREDICTOR_KEY], AdmissionMetrics(metrics), lambda: live.current,
                                     list(pod_steps or ()), callers_authenticated=settings.client_ca is not None,
                                     follower=observer, probe_limit=app[PREVIEW_RATE_KEY])
    register_admission_routes(app)
    register_health_routes(app)
    app.cleanup_ctx.append(_source_lifecycle)
    app.cleanup_ctx.append(_authenticator_lifecycle)  # after the source: its refreshes end before the client closes
    if observer is not None:
        app[OBSERVER_KEY] = observer
        # After the source: its cleanup runs first, counting what is left before the informers stop.
        app.cleanup_ctx.append(_observer_lifecycle)
    tenants = make_tenant_services(source, settings, metrics, live)
    if tenants is not None:
        app[TENANTS_KEY] = tenants
        app.cleanup_ctx.append(_tenants_lifecycle)  # after the source: its cleanup runs before the source stops
    app.cleanup_ctx.append(_predictor_lifecycle)
    app.cleanup_ctx.append(_config_lifecycle)
    app.on_cleanup.append(_stop_body_decoder)
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
    preview_runner: web.AppRunner | None = None
    preview_port: int | None = None  # the bound --preview-port, when /preview has a listener of its own

    def begin_drain(self) -> None:
        """/readyz answers 503 from now on; requests are still served (see ``webhook.server.command.serve``)."""
        self.app[LIMITS_KEY].begin_drain()

    async def stop(self) -> None:
        """Stop listening everywhere first, then let each listener's requests in flight finish (previews and
        scrapes beside admissions), and only then stop the admission application, whose cleanup stops the
        source and the prediction pools those requests use."""
        others = [r for r in (self.preview_runner, self.metrics_runner) if r is not None]
        for runner in (*others, self.runner):
            for site in list(runner.sites):
                await site.stop()
        await asyncio.gather(*(runner.cleanup() for runner in others))
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
    """Serve ``app`` over TLS on ``settings.host:port``, its ``/preview`` over TLS without client certificates on
    ``preview_port`` (None = off) and metrics over HTTP on ``metrics_port`` (0 = off).

    Port 0 in ``settings.port`` (or ``preview_port``) binds a free port (see ``RunningServer.https_port``,
    ``preview_port``). ``tls`` defaults to what the settings ask for (files re-read on change, or self-signed).
    """
    tls = tls or serving_tls(
        cert_file=settings.tls_cert, key_file=settings.tls_key, self_signed=settings.tls_self_signed,
        sans=settings.tls_sans, reload_interval=settings.tls_reload_interval, client_ca=settings.client_ca,
    )
    app[METRICS_KEY].track_serving_certificate(lambda: tls.not_after)
    limits = app.get(LIMITS_KEY) or RequestLimits(settings, app[METRICS_KEY].registry)
    guard = limits.guard
    options = runner_options(settings)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, **options)
    await runner.setup()
    metrics_runner: web.AppRunner | None = None
    preview_runner: web.AppRunner | None = None
    try:
        await listen(GuardedTCPSite(runner, settings.host, settings.port, guard=guard, ssl_context=tls.context),
                     "--port", settings.host, settings.port)
        https_port = _bound_port(runner)
        preview_port: int | None = None
        if settings.preview_port is not None:
            preview_runner = web.AppRunner(make_preview_app(app), handle_signals=False, access_log=None, **options)
            await preview_runner.setup()
            await listen(GuardedTCPSite(preview_runner, settings.host, settings.preview_port,
                                        guard=limits.preview_guard, ssl_context=tls.anonymous_context),
                         "--preview-port", settings.host, settings.preview_port)
            preview_port = _bound_port(preview_runner)
        metrics_port: int | None = None
        if settings.metrics_port:
            observer = app.get(OBSERVER_KEY)
            summary = None
            if settings.debug_predictions:
                summary = observer.document if observer is not None else not_observing
            metrics_app = make_metrics_app(app[METRICS_KEY], summary, readiness=lambda: readiness(app))
            metrics_app.middlewares.append(limits.metrics_guard.middleware())
            metrics_app.middlewares.append(metrics_gate_middleware(limits.metrics_gate))
            metrics_runner = web.AppRunner(metrics_app, handle_signals=False, access_log=None,
                                           **runner_options(settings, metrics=True))
            await metrics_runner.setup()
            await listen(GuardedTCPSite(metrics_runner, settings.host, settings.metrics_port,
                                        guard=limits.metrics_guard),
                         "--metrics-port", settings.host, settings.metrics_port)
            metrics_port = _bound_port(metrics_runner)
        await tls.start()
    except BaseException:
        for started in (preview_runner, metrics_runner):
            if started is not None:
                await started.cleanup()
        await runner.cleanup()
        await tls.stop()
        raise
    log.info("serving admission on https://%s:%d", settings.host, https_port)
    if preview_port is not None:
        log.info("serving /preview without client certificates on https://%s:%d", settings.host, preview_port)
    return RunningServer(app, tls, runner, metrics_runner, https_port, metrics_port, preview_runner, preview_port)
