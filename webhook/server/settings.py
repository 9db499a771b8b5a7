"""The server's typed settings, built once from command-line flags and the environment."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from webhook.routes import DEFAULT_PREVIEW_PORT, LEADER_ELECTION_LEASE

# The kube-apiserver refuses request bodies over 3 MiB; so do we (HTTP 413).
MAX_BODY_BYTES = 3 * 1024 * 1024
LOG_LEVELS = ("debug", "info", "warning", "error")
DEFAULT_PREVIEW_BUDGET_SECONDS = 10.0
DEFAULT_ADMISSION_DEADLINE_SECONDS = 2.5
DEFAULT_ADMISSION_MAX_IN_FLIGHT = 64
DEFAULT_SHUTDOWN_GRACE_SECONDS = 5.0
DEFAULT_OBSERVE_WINDOW_SECONDS = 600.0
DEFAULT_OBSERVE_MAX_PREDICTIONS = 100_000


@dataclass(frozen=True, slots=True)
class ServerSettings:
    host: str = "0.0.0.0"
    port: int = 8443
    metrics_port: int = 9090  # 0 disables the metrics listener
    # POST /preview (and the probes) on an HTTPS listener of its own that asks for no client certificate: under
    # --client-ca the admission port requires one at the handshake, and /preview's callers (people, CI) carry a
    # bearer token instead. None: no such listener (/preview on ``port`` only); 0 binds a free port, as ``port``.
    # ``serve`` defaults it to 8444 under --client-ca (settings_from_args).
    preview_port: int | None = None
    # Cluster source: a snapshot file, a kubeconfig (optionally a context) or in-cluster config.
    cluster_snapshot: Path | None = None
    kubeconfig: Path | None = None
    context: str | None = None
    in_cluster: bool = False
    # TLS: a certificate/key pair re-read on change, or a self-signed certificate for the SANs.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_self_signed: bool = False
    tls_sans: tuple[str, ...] = ()
    tls_reload_interval: float = 1.0
    # Caller authentication (docs/interfaces.md §7): admission paths require a client certificate chaining to
    # this bundle, named one of client_cns when given.
    client_ca: Path | None = None
    client_cns: tuple[str, ...] = ()
    config_path: Path | None = None
    config_reload_interval: float = 2.0  # seconds between checks of the configuration file
    log_level: str = "info"
    log_format: str = "text"  # text | json (webhook/server/logs.py)
    # One info line per denial and per guardrail warning (what the requester was told).
    log_denials: bool = True
    max_body_bytes: int = MAX_BODY_BYTES
    # Predictions run in a dedicated thread pool; /preview gets a larger budget than admission's
    # prediction.budgetMilliseconds (HTTP 503 when exceeded).
    prediction_workers: int = 2
    # /preview runs in a pool of its own, on an index of its own (admission never waits behind a preview).
    preview_workers: int = 1
    # An admission prediction first runs on the event loop for up to this long (most finish in well under a
    # millisecond; handing them to a thread costs more), then moves to the pool (see PredictionService).
    inline_prediction_seconds: float = 0.01
    preview_budget_seconds: float = DEFAULT_PREVIEW_BUDGET_SECONDS
    # Once the cluster cache has synced, move it out of the garbage collector's reach (gc.freeze): a full
    # collection over a large cache holds the GIL for tens of milliseconds, stalling the event loop while a
    # prediction allocates in its thread. On for `preempt-guard serve`; off by default (it is process-wide).
    freeze_gc_after_sync: bool = False
    # Limits (webhook/server/limits.py). Requests in flight per endpoint class, and how long a request may
    # wait for a slot before a fast 429.
    admission_max_in_flight: int = DEFAULT_ADMISSION_MAX_IN_FLIGHT
    admission_queue_seconds: float = 0.1
    preview_max_in_flight: int = 8
    preview_queue_seconds: float = 0.0
    # A pod review still unanswered this long after it arrived is allowed with a warning (fail open), below
    # the webhook's timeoutSeconds (3) so the API server's timeout never fires first.
    admission_deadline_seconds: float = DEFAULT_ADMISSION_DEADLINE_SECONDS
    # Slow clients: TLS handshake, the first request (from the handshake), request line + headers (from the
    # first byte), body; idle keep-alive.
    tls_handshake_timeout: float = 5.0
    first_request_timeout: float = 2.0
    client_header_timeout: float = 5.0
    client_body_timeout: float = 5.0
    keepalive_timeout: float = 60.0
    # Connections (webhook/server/connections.py): over a cap, the oldest connection without a complete request
    # gives way to the newcomer. Per client: the API server needs about one per admission in flight, plus its
    # idle pool.
    max_connections: int = 1000
    max_connections_per_client: int = 200
    # Bodies (webhook/server/bodies.py): bodies up to inline_body_bytes are decoded on the event loop (~0.2 ms);
    # larger ones reserve their length from body_budget_bytes while held, are decoded in a thread of their own,
    # and at most large_reviews_in_flight of them are decided at once (their decoded objects are ~6x their bytes).
    inline_body_bytes: int = 64 * 1024
    body_budget_bytes: int = 48 * 1024 * 1024
    large_reviews_in_flight: int = 2
    # The plain-HTTP metrics listener has limits of its own (connections, requests in flight, header and
    # keep-alive timeouts): nothing done to --metrics-port can take the connections or the time the admission
    # port needs (under failurePolicy: Ignore that would switch guardrails off), and the reverse.
    preview_max_connections: int = 256
    preview_max_connections_per_client: int = 32
    metrics_max_connections: int = 64
    metrics_max_connections_per_client: int = 8
    metrics_max_in_flight: int = 4
    metrics_client_header_timeout: float = 2.0
    metrics_keepalive_timeout: float = 15.0
    # Shutdown (SIGTERM): /readyz answers 503 for shutdown_grace_seconds while requests are still served,
    # then listening stops and in-flight requests get up to shutdown_timeout to finish.
    shutdown_grace_seconds: float = DEFAULT_SHUTDOWN_GRACE_SECONDS
    shutdown_timeout: float = 10.0
    # The event loop (webhook/server/eventloop.py): "auto" is uvloop when installed, else asyncio.
    event_loop: str = "auto"
    # The live observer (docs/interfaces.md §9, webhook/server/observing.py), with a cluster source only: each
    # prediction is followed this long (0 turns observing off), at most this many at once (oldest evicted).
    observe_window_seconds: float = DEFAULT_OBSERVE_WINDOW_SECONDS
    observe_max_predictions: int = DEFAULT_OBSERVE_MAX_PREDICTIONS
    # After a nomination, how long to wait for victims the scheduler did not announce; how often time decides.
    observe_settle_seconds: float = 10.0
    observe_tick_seconds: float = 1.0
    # --events: a Kubernetes Event on each pod whose prediction the scheduler did not bear out.
    events: bool = False
    # --debug-predictions: GET /debug/predictions on the metrics listener (no authentication there: its
    # mismatches name no pod or namespace). Off by default.
    debug_predictions: bool = False
    # What a tenant can read (docs/interfaces.md §7), with a cluster source only; written by the replica that
    # holds the leader-election Lease (--leader-elect, the default; off: this replica always writes).
    leader_elect: bool = True
    leader_elect_namespace: str | None = None  # None: POD_NAMESPACE, the service account's, the context's
    leader_elect_lease: str = LEADER_ELECTION_LEASE  # the chart names it after its release
    leader_lease_seconds: float = 15.0
    leader_renew_deadline_seconds: float = 10.0
    leader_retry_period_seconds: float = 2.0
    # --attribute-preemptions: an Event in each preempted pod's namespace saying who it was preempted for.
    attribute_preemptions: bool = True
    attribution_wait_seconds: float = 30.0
    # --exposure-scan: each namespace's exposure kept current (gauges); --exposure-reports: also written as its
    # PolicyReport (the CRD and RBAC of the optional exposure-reports component).
    exposure_scan: bool = True
    exposure_reports: bool = False
    exposure_interval_seconds: float = 2.0
    exposure_max_duty: float = 0.2
    exposure_writes_per_second: float = 10.0


# A Lease's name is a DNS subdomain (apimachinery's IsDNS1123Subdomain): checked at start-up, not at the first
# create the API server would refuse while every replica campaigns for nothing.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def lease_name(value: str) -> str:
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a Lease name (a DNS subdomain: lower-case letters, "
                                         "digits, '-' and '.', at most 253 characters)")
    return value


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServerSettings:
    """Flags win; ``PREEMPTGUARD_LOG_LEVEL`` and ``PREEMPTGUARD_CONFIG`` fill what the flags leave unset."""
    env = os.environ if environ is None else environ
    log_level = args.log_level or env.get("PREEMPTGUARD_LOG_LEVEL", "info").lower()
    return ServerSettings(
        host=args.host,
        port=args.port,
        metrics_port=args.metrics_port,
        preview_port=preview_port_of(getattr(args, "preview_port", None), getattr(args, "client_ca", None)),
        cluster_snapshot=_path(args.cluster_snapshot),
        kubeconfig=_path(args.kubeconfig),
        context=args.context,
        in_cluster=args.in_cluster,
        tls_cert=_path(args.tls_cert),
        tls_key=_path(args.tls_key),
        tls_self_signed=args.tls_self_signed,
        tls_sans=tuple(args.tls_san or ()),
        client_ca=_path(getattr(args, "client_ca", None)),
        client_cns=tuple(getattr(args, "client_cn", None) or ()),
        config_path=_path(args.config or env.get("PREEMPTGUARD_CONFIG")),
        log_level=log_level if log_level in LOG_LEVELS else "info",
        log_format=getattr(args, "log_format", None) or env.get("PREEMPTGUARD_LOG_FORMAT", "text"),
        log_denials=getattr(args, "log_denials", True) is not False,
        preview_budget_seconds=getattr(args, "preview_timeout", None) or DEFAULT_PREVIEW_BUDGET_SECONDS,
        freeze_gc_after_sync=True,
        admission_max_in_flight=getattr(args, "max_in_flight", None) or DEFAULT_ADMISSION_MAX_IN_FLIGHT,
        admission_deadline_seconds=(getattr(args, "admission_deadline", None)
                                    or DEFAULT_ADMISSION_DEADLINE_SECONDS),
        shutdown_grace_seconds=_non_negative(getattr(args, "shutdown_grace", None), DEFAULT_SHUTDOWN_GRACE_SECONDS),
        event_loop=getattr(args, "event_loop", None) or "auto",
        observe_window_seconds=_non_negative(getattr(args, "observe_window", None), DEFAULT_OBSERVE_WINDOW_SECONDS),
        observe_max_predictions=(DEFAULT_OBSERVE_MAX_PREDICTIONS if getattr(args, "observe_max", None) is None
                                 else args.observe_max),
        events=bool(getattr(args, "events", False)),
        debug_predictions=bool(getattr(args, "debug_predictions", False)),
        leader_elect=getattr(args, "leader_elect", True) is not False,
        leader_elect_namespace=getattr(args, "leader_elect_namespace", None) or None,
        leader_elect_lease=getattr(args, "leader_elect_lease", None) or LEADER_ELECTION_LEASE,
        attribute_preemptions=getattr(args, "attribute_preemptions", True) is not False,
        exposure_scan=getattr(args, "exposure_scan", True) is not False,
        exposure_reports=bool(getattr(args, "exposure_reports", False)),
    )


def preview_port_of(flag: int | None, client_ca: str | None) -> int | None:
    """``--preview-port``: unset, 8444 under --client-ca (the admission port asks every caller for a client
    certificate there) and no listener of its own otherwise; 0 turns it off, as ``--metrics-port 0`` does."""
    if flag is None:
        return DEFAULT_PREVIEW_PORT if client_ca else None
    return flag or None


def _non_negative(value: float | None, default: float) -> float:
    return default if value is None else value
