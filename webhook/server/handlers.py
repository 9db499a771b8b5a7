"""The HTTP handlers: bodies read and bounded, JSON in and out, errors mapped to statuses once.

Decisions come from ``webhook.admission`` (the pod pipeline, PriorityClass validation) and the prediction
service; ``error_middleware`` maps the ``PreemptGuardError`` tree to HTTP statuses.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from webhook.admission.outcome import AdmissionOutcome
from webhook.admission.pipeline import PodAdmission, pod_quota_check
from webhook.admission.priorityclasses import admit_priority_class
from webhook.admission.review import (
    AdmissionRequest,
    build_admission_response,
    decode_json,
    optional_str,
    parse_admission_review,
    require_object,
)
from webhook.cluster.source import ClusterSource
from webhook.config import LiveConfig
from webhook.errors import (
    BodyTooLarge,
    ClusterUnavailable,
    Forbidden,
    InvalidInput,
    PredictionTimeout,
    PreemptGuardError,
    RateLimited,
)
from webhook.guardrails.disclosure import audience_of, redact_preview_document
from webhook.identity import UserInfo
from webhook.prediction.service import PredictionService
from webhook.preemption.preview import build_preview
from webhook.server.auth import Authenticator, NamespaceVisibility, redact_preview, victim_namespaces
from webhook.server.limits import LIMITS_KEY
from webhook.server.logs import log_decision
from webhook.server.metrics import MUTATE_PODS, PREVIEW, WebhookMetrics
from webhook.server.ratelimit import CallerRateLimit, retry_after_header
from webhook.server.settings import ServerSettings

log = logging.getLogger(__name__)

SOURCE_KEY = web.AppKey("source", ClusterSource)
SETTINGS_KEY = web.AppKey("settings", ServerSettings)
METRICS_KEY = web.AppKey("metrics", WebhookMetrics)
CONFIG_KEY = web.AppKey("config", LiveConfig)
PREDICTOR_KEY = web.AppKey("predictor", PredictionService)
AUTHENTICATOR_KEY = web.AppKey("authenticator", Authenticator)
PIPELINE_KEY = web.AppKey("pod_admission", PodAdmission)
# Per-caller rate of /preview requests and dry-run pod admissions (prediction.previewsPerMinute).
PREVIEW_RATE_KEY = web.AppKey("preview_rate", CallerRateLimit)

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
    except RateLimited as exc:
        response = error_response(exc.http_status, str(exc))
        response.headers["Retry-After"] = retry_after_header(exc.retry_after)
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


async def mutate_pods(request: web.Request) -> web.Response:
    review = await read_admission_review(request)
    started = time.perf_counter()
    outcome = await admit_pod_within_deadline(request, review)
    _observe(request, review, MUTATE_PODS, outcome, started)
    return admission_response(review.uid, outcome)


async def validate_priority_classes(request: web.Request) -> web.Response:
    review = await read_admission_review(request)
    started = time.perf_counter()
    outcome = admit_priority_class(review, request.app[SOURCE_KEY].state.priority_classes)
    _observe(request, review, "validate_priorityclasses", outcome, started)
    return admission_response(review.uid, outcome)


async def admit_pod_within_deadline(request: web.Request, review: AdmissionRequest) -> AdmissionOutcome:
    """The pipeline's outcome; once the admission deadline (limits.py) has passed, the pipeline's answer for an
    undecided review (a denial under enforce when the pod might preempt someone), else allowed-with-warning."""
    pipeline = request.app[PIPELINE_KEY]
    limits = request.app.get(LIMITS_KEY)
    if limits is None:
        return await pipeline.admit(review)
    try:
        async with asyncio.timeout(max(0.0, limits.admission_time_left(request))):
            return await pipeline.admit(review)
    except TimeoutError:
        denial = pipeline.undecided(review)
        if denial is not None:
            log.warning("pod review %s not decided within the admission deadline: denied (onUnpredictable)",
                        review.uid)
            limits.metrics.deadline_exceeded.inc()
            return denial
        log.warning("pod review %s not decided within the admission deadline: allowed without checks", review.uid)
        return limits.deadline_outcome()


def _observe(request: web.Request, review: AdmissionRequest, endpoint: str, outcome: AdmissionOutcome,
             started: float) -> None:
    seconds = time.perf_counter() - started
    rules = outcome.denied_by or (("priority",) if not outcome.allowed else ())
    request.app[METRICS_KEY].observe_admission(
        endpoint, "allowed" if outcome.allowed else "denied", seconds, outcome.denial_reason, rules)
    if request.app[SETTINGS_KEY].log_denials:
        log_decision(review, outcome, seconds)


# ---- preview ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PreviewRequest:
    """docs/interfaces.md §3, plus the extension ``priorityClassName`` (preview as if the pod named that class)."""

    obj: dict[str, Any]
    namespace: str
    replicas: int | None
    priority_class: str | None


PREVIEW_REQUEST_FIELDS = ("pod", "namespace", "replicas", "priorityClassName")
# A preview simulates replicas one after the other; beyond this a request is more likely a mistake than a plan.
MAX_PREVIEW_REPLICAS = 10_000


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


def probe_caller(caller: UserInfo, request: web.Request) -> str:
    """Whose rate a /preview counts against: the authenticated user, else (no authentication, snapshot mode)
    the client's address."""
    return caller.username or f"anonymous@{request.remote or ''}"


async def preview(request: web.Request) -> web.Response:
    """``POST /preview``: authenticate, rate-limit per caller, authorise ``create pods``, predict through the
    admission pipeline's quota stage, and disclose: other tenants' victims as counts, and in the caller's own
    tenant the victims of namespaces the caller may not list as counts per namespace."""
    app = request.app
    authenticator = app[AUTHENTICATOR_KEY]
    caller = await authenticator.authenticate(request.headers)
    config = app[CONFIG_KEY].current
    rate = app.get(PREVIEW_RATE_KEY)
    wait = rate.take(probe_caller(caller, request)) if rate is not None else None
    if wait is not None:
        raise RateLimited(f"too many previews from {caller.display_name}: at most "
                          f"{config.prediction.previews_per_minute} per minute (prediction.previewsPerMinute); "
                          f"retry in {retry_after_header(wait)} s", retry_after=wait)
    wanted = parse_preview_request(await read_json_body(request))
    if not await authenticator.is_allowed(caller, "create", "pods", wanted.namespace):
        raise Forbidden(f'Forbidden: user "{caller.display_name}" may not create pods in namespace {wanted.namespace}')
    source = app[SOURCE_KEY]
    if not source.is_ready():
        raise ClusterUnavailable(f"the cluster cache is not ready: {source.readiness_reason() or 'starting'}")
    state = source.state
    metrics = app[METRICS_KEY]
    started = time.perf_counter()
    try:
        results = await app[PREDICTOR_KEY].preview(
            state, wanted.obj, namespace=wanted.namespace, replicas=wanted.replicas,
            priority_class=wanted.priority_class, scheduler=config.scheduler,
            budget_seconds=app[SETTINGS_KEY].preview_budget_seconds,
            quota_check=pod_quota_check(config.quota, state))
    except PredictionTimeout:
        metrics.observe_skipped_prediction(PREVIEW, "budget-exceeded")
        raise
    metrics.observe_prediction(PREVIEW, [r.outcome for r in results], time.perf_counter() - started)
    policy = config.guardrails
    audience = audience_of(wanted.namespace, state.namespaces, policy.tenant_label, policy.disclosure)
    document = redact_preview_document(build_preview(results), results, audience)
    visibility = NamespaceVisibility(authenticator, caller)
    hidden = await visibility.hidden_namespaces(victim_namespaces(document))
    return json_response(redact_preview(document, hidden))


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
