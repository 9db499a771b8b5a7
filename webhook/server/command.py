"""``preempt-guard serve``: its flags, their checks, the cluster source they choose, and the server's run until
SIGTERM (dispatched by ``webhook.cli``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
from typing import cast

from webhook.config import Config, load_config_or_defaults
from webhook.errors import ConfigError
from webhook.routes import DEFAULT_PREVIEW_PORT
from webhook.server.app import make_app, start_server
from webhook.server.eventloop import EVENT_LOOPS, run_on_event_loop
from webhook.server.logs import LOG_FORMATS, LogFormat, configure_logging
from webhook.server.settings import (
    DEFAULT_ADMISSION_DEADLINE_SECONDS,
    DEFAULT_ADMISSION_MAX_IN_FLIGHT,
    DEFAULT_OBSERVE_MAX_PREDICTIONS,
    DEFAULT_OBSERVE_WINDOW_SECONDS,
    DEFAULT_PREVIEW_BUDGET_SECONDS,
    DEFAULT_SHUTDOWN_GRACE_SECONDS,
    LOG_LEVELS,
    ServerSettings,
    lease_name,
    settings_from_args,
)
from webhook.sources.loader import collections_paused
from webhook.sources.source import ClusterSource, SnapshotSource

log = logging.getLogger("webhook.server")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("cluster source (default: in-cluster in a pod, else the current kubeconfig)")
    exclusive = source.add_mutually_exclusive_group()
    exclusive.add_argument("--cluster-snapshot", metavar="FILE", help="serve from a cluster snapshot file")
    exclusive.add_argument("--kubeconfig", metavar="PATH", help="watch the cluster of this kubeconfig")
    exclusive.add_argument("--in-cluster", action="store_true", help="watch the cluster this pod runs in")
    source.add_argument("--context", metavar="NAME", help="kubeconfig context (with --kubeconfig)")
    tls = parser.add_argument_group("TLS")
    tls.add_argument("--tls-cert", metavar="FILE", help="serving certificate (PEM), re-read when it changes")
    tls.add_argument("--tls-key", metavar="FILE", help="private key (PEM) of --tls-cert")
    tls.add_argument("--tls-self-signed", action="store_true",
                     help="generate a self-signed certificate for localhost, 127.0.0.1 and every --tls-san")
    tls.add_argument("--tls-san", metavar="NAME", action="append", default=[],
                     help="extra subject alternative name (DNS name or IP); repeatable")
    tls.add_argument("--client-ca", metavar="FILE",
                     help="require a client certificate signed by a CA of this PEM bundle on the admission paths "
                          "(what kube-apiserver presents through its AdmissionConfiguration kubeconfig)")
    tls.add_argument("--client-cn", metavar="NAME", action="append", default=[],
                     help="with --client-ca: the client certificate's CN or a SAN must be one of these; repeatable")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=8443, help="HTTPS port (default 8443)")
    parser.add_argument("--metrics-port", type=int, default=9090, help="plain-HTTP /metrics port; 0 disables")
    parser.add_argument("--preview-port", type=int, default=None, metavar="PORT",
                        help="HTTPS port for POST /preview that asks for no client certificate (bearer tokens "
                             f"authenticate its callers); default {DEFAULT_PREVIEW_PORT} with --client-ca, else "
                             "none (/preview is on --port); 0 disables")
    parser.add_argument("--config", metavar="FILE",
                        help="PreemptGuard configuration file (YAML), re-read when it changes")
    parser.add_argument("--preview-timeout", type=float, metavar="SECONDS", default=None,
                        help=f"time budget of one POST /preview (default {DEFAULT_PREVIEW_BUDGET_SECONDS:g})")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=None, help="log level (default info)")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=None,
                        help="text, or json: one JSON object per line (default text; env PREEMPTGUARD_LOG_FORMAT)")
    parser.add_argument("--log-denials", action=argparse.BooleanOptionalAction, default=True,
                        help="log each denial and guardrail warning at info level (default on)")
    limits = parser.add_argument_group("limits")
    limits.add_argument("--max-in-flight", type=int, metavar="N", default=None,
                        help=f"admission requests handled at once before a fast 429 (default "
                             f"{DEFAULT_ADMISSION_MAX_IN_FLIGHT})")
    limits.add_argument("--admission-deadline", type=float, metavar="SECONDS", default=None,
                        help="answer a pod review allowed-with-warning when undecided this long after it arrived "
                             f"(default {DEFAULT_ADMISSION_DEADLINE_SECONDS:g}; keep below the webhook timeoutSeconds)")
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default=None,
                        help="event loop implementation (default auto: uvloop when installed, else asyncio)")
    limits.add_argument("--shutdown-grace", type=float, metavar="SECONDS", default=None,
                        help="on SIGTERM, report not ready and keep serving this long before stopping "
                             f"(default {DEFAULT_SHUTDOWN_GRACE_SECONDS:g})")
    observe = parser.add_argument_group("observed outcomes (with a cluster source)")
    observe.add_argument("--observe-window", type=float, metavar="SECONDS", default=None,
                         help="follow each prediction made at pod creation this long for what the scheduler then does "
                              f"(default {DEFAULT_OBSERVE_WINDOW_SECONDS:g}; 0 turns observing off)")
    observe.add_argument("--observe-max", type=int, metavar="N", default=None,
                         help="follow at most this many predictions at once; the oldest is counted unobserved "
                              f"(default {DEFAULT_OBSERVE_MAX_PREDICTIONS})")
    observe.add_argument("--debug-predictions", action="store_true",
                         help="serve GET /debug/predictions on the metrics port: the verdicts and latest mismatches, "
                              "naming no pod or namespace (off by default: that port has no authentication)")
    tenants = parser.add_argument_group("what tenants can read (with a cluster source; docs/interfaces.md §7)")
    tenants.add_argument("--attribute-preemptions", action=argparse.BooleanOptionalAction, default=True,
                         help="create an Event (reason PreemptedByScheduler) in the namespace of each pod "
                              "kube-scheduler preempts, naming the preemptor only to its own tenant (default on; needs "
                              "create on events)")
    tenants.add_argument("--exposure-scan", action=argparse.BooleanOptionalAction, default=True,
                         help="keep each namespace's exposure to preemption current in the preemptguard_exposure_* "
                              "metrics (default on)")
    tenants.add_argument("--exposure-reports", action="store_true",
                         help="also write it as the PolicyReport preemptguard-exposure in each namespace (needs the "
                              "wgpolicyk8s.io CRD and its RBAC: the exposure-reports component)")
    tenants.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                         help="only the replica holding the Lease preemptguard writes those Events and reports "
                              "(default on; needs get, create and update on leases)")
    tenants.add_argument("--leader-elect-lease", metavar="NAME", type=lease_name,
                         help="name of the Lease (default preemptguard; the chart names it after its release, so "
                              "two releases in one namespace elect apart)")
    tenants.add_argument("--leader-elect-namespace", metavar="NAMESPACE",
                         help="namespace of the Lease (default: POD_NAMESPACE, else the pod's or the context's)")
    observe.add_argument("--events", action="store_true",
                         help="create a Kubernetes Event (reason PreemptionPredictionMismatch) on each pod whose "
                              "prediction the scheduler did not bear out (needs create on events)")


def validate_serve_settings(settings: ServerSettings) -> None:
    if settings.tls_self_signed and (settings.tls_cert or settings.tls_key):
        raise ConfigError("--tls-self-signed cannot be combined with --tls-cert/--tls-key")
    if not settings.tls_self_signed and not (settings.tls_cert and settings.tls_key):
        raise ConfigError("TLS needs both --tls-cert and --tls-key, or --tls-self-signed")
    if settings.log_format not in LOG_FORMATS:
        raise ConfigError(f"--log-format must be one of {', '.join(LOG_FORMATS)}, got {settings.log_format!r}")
    if settings.client_cns and settings.client_ca is None:
        raise ConfigError("--client-cn needs --client-ca")
    if settings.context and settings.cluster_snapshot:
        raise ConfigError("--context applies to a kubeconfig, not to --cluster-snapshot")
    ports = (("--port", settings.port), ("--metrics-port", settings.metrics_port),
             ("--preview-port", settings.preview_port or 0))
    for flag, port in ports:
        if not 0 <= port <= 65535:
            raise ConfigError(f"{flag} must be between 0 and 65535, got {port}")
    if settings.preview_port and settings.preview_port in (settings.port, settings.metrics_port):
        other = "--port" if settings.preview_port == settings.port else "--metrics-port"
        raise ConfigError(f"--preview-port {settings.preview_port} is also {other}: give /preview a port of its own "
                          "(or 0 to serve it on --port only)")
    if settings.preview_budget_seconds <= 0:
        raise ConfigError(f"--preview-timeout must be positive, got {settings.preview_budget_seconds:g}")
    if settings.admission_max_in_flight < 1:
        raise ConfigError(f"--max-in-flight must be at least 1, got {settings.admission_max_in_flight}")
    if settings.admission_deadline_seconds <= 0:
        raise ConfigError(f"--admission-deadline must be positive, got {settings.admission_deadline_seconds:g}")
    if settings.shutdown_grace_seconds < 0:
        raise ConfigError(f"--shutdown-grace must not be negative, got {settings.shutdown_grace_seconds:g}")
    if settings.observe_window_seconds < 0:
        raise ConfigError(f"--observe-window must not be negative, got {settings.observe_window_seconds:g}")
    if settings.observe_max_predictions < 1:
        raise ConfigError(f"--observe-max must be at least 1, got {settings.observe_max_predictions}")


def make_source(settings: ServerSettings) -> ClusterSource:
    """The snapshot file, or a live cluster (imported lazily: offline use needs no Kubernetes client)."""
    if settings.cluster_snapshot is not None:
        if not settings.freeze_gc_after_sync:
            return SnapshotSource(settings.cluster_snapshot, require_cluster=True)
        # A snapshot is synced once loaded: frozen at once (see freeze_gc_after_sync), the cluster is not walked by
        # the collections the first allocations after the load start, several seconds at 15,000 nodes before
        # /readyz could answer (bench/snapshot.py).
        with collections_paused():
            snapshot = SnapshotSource(settings.cluster_snapshot, require_cluster=True)
            gc.freeze()
        return snapshot
    from webhook.sources.kube_source import KubernetesSource

    in_cluster = settings.in_cluster or (settings.kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ)
    kubeconfig = str(settings.kubeconfig) if settings.kubeconfig is not None else None
    source: ClusterSource = KubernetesSource(kubeconfig=kubeconfig, context=settings.context, in_cluster=in_cluster)
    return source


async def serve(settings: ServerSettings, config: Config | None = None) -> None:
    """Run until SIGTERM/SIGINT, then drain: report not ready (/readyz 503) while still serving for
    ``shutdown_grace_seconds`` (so the Service stops sending new requests here), stop accepting, let in-flight
    requests finish (up to ``shutdown_timeout``), stop the source. A second signal skips the rest of the grace."""
    config = config if config is not None else load_config_or_defaults(settings.config_path)
    source = make_source(settings)
    server = await start_server(make_app(source, settings, config=config), settings)
    log.info("configuration %s: guardrails mode %s, prediction budget %d ms", config.source,
             config.guardrails.mode, config.prediction.budget_milliseconds)
    signals = asyncio.Queue[int]()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, signals.put_nowait, sig)
    try:
        received = await signals.get()
        server.begin_drain()
        log.info("%s: not ready; serving for %gs more before stopping", signal.Signals(received).name,
                 settings.shutdown_grace_seconds)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(signals.get(), settings.shutdown_grace_seconds)
    finally:
        log.info("shutting down: no new connections; finishing requests in flight")
        await server.stop()


def run_serve(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    validate_serve_settings(settings)
    configure_logging(settings.log_level, cast(LogFormat, settings.log_format))
    config = load_config_or_defaults(settings.config_path)  # a bad file: exit 2 with one line
    run_on_event_loop(serve(settings, config), settings.event_loop)
    return 0
