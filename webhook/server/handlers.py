"""The HTTP handlers: bodies read and bounded, JSON in and out, errors mapped to statuses once.

Decisions come from ``webhook.admission`` (the pod pipeline, PriorityClass validation) and the prediction
service; ``error_middleware`` maps the ``PreemptGuardError`` tree to HTTP statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from aiohttp import web

from webhook.admission.decision import AdmissionDecision
from webhook.admission.pipeline import PodAdmission, UnreadReason, pod_quota_check
from webhook.admission.pod import PodReview, is_pod_admission, read_pod_review
from webhook.admission.priorityclasses import admit_priority_class
from webhook.admission.review import (
    AdmissionRequest,
    build_admission_response,
    decode_json,
    parse_admission_review,
    peek_admission_request,
)
from webhook.cluster.jsonfields import json_required_object, json_str
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
from webhook.prediction.service import PredictionService, never_inline
from webhook.preemption.preview import build_preview
from webhook.server.auth import Authenticator, NamespaceVisibility, redact_preview, victim_namespaces
from webhook.server.bodies import HEAD_BYTES, ClientGone
from webhook.server.limits import BODY, LIMITS_KEY, UNREAD, RequestLimits
from webhook.server.logs import log_decision
from webhook.server.metrics import MUTATE_PODS, PREVIEW, WebhookMetrics
from webhook.server.ratelimit import CallerRateLimit, retry_after_header
from webhook.server.settings import ServerSettings
from webhook.sources.source import ClusterSource

log = logging.getLogger(__name__)

SOURCE_KEY = web.AppKey("source", ClusterSource)
SETTINGS_KEY = web.AppKey("settings", ServerSettings)
METRICS_KEY = web.AppKey("metrics", WebhookMetrics)
CONFIG_KEY = web.AppKey("config", LiveConfig)
PREDICTOR_KEY = web.AppKey("predictor", PredictionService)
# Set once the predictor's index of the synced cache is built (``webhook.server.app.warm_up_predictor_once_ready``):
# before that an admission would build it within its own budget or, past it, go without a prediction (enforce then
# decides by onUnpredictable), so /readyz waits for it, as for the informers.
PREDICTOR_INDEXED_KEY = web.AppKey("predictor_indexed", asyncio.Event)
AUTHENTICATOR_KEY = web.AppKey("authenticator", Authenticator)
PIPELINE_KEY = web.AppKey("pod_admission", PodAdmission)
# Per-caller rate of /preview requests and dry-run pod admissions (prediction.previewsPerMinute).
PREVIEW_RATE_KEY = web.AppKey("preview_rate", CallerRateLimit)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_T = TypeVar("_T")


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
    except ClientGone as exc:  # nobody to answer, and no fault of ours: counted, logged at debug only
        log.debug("%s %s: %s", request.method, request.path, exc)
        response = error_response(exc.http_status, str(exc))
    except PreemptGuardError as exc:
        response = error_response(exc.http_status, str(exc))
    except web.HTTPRequestEntityTooLarge:
        response = error_response(413, f"request body exceeds {request.app[SETTINGS_KEY].max_body_bytes} bytes")
    except web.HTTPException as exc:
        metrics.record_request(endpoint, exc.status)
        raise
    except asyncio.CancelledError:
        raise
    except Exception:  # a bug: logged loudly, never a hang or a dropped connection
        log.exception("unexpected error handling %s %s", request.method, request.path)
        response = error_response(500, "internal error")
    metrics.record_request(endpoint, response.status)
    return response


def _endpoint_label(request: web.Request) -> str:
    route = request.match_info.route.resource
    return route.canonical if route is not None else "unmatched"


# ---- admission ----------------------------------------------------------------------------------
async def read_body(request: web.Request) -> bytes:
    """The body ``limits_middleware`` received whole; read here only where no limits are installed."""
    body = request.get(BODY)
    if body is not None:
        return body
    limit = request.app[SETTINGS_KEY].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise BodyTooLarge(f"request body of {request.content_length} bytes exceeds {limit} bytes")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise BodyTooLarge(f"request body exceeds {limit} bytes") from exc


async def decoded(request: web.Request, body: bytes, work: Callable[[], _T]) -> _T:
    """``work()`` (decoding ``body``): on the event loop for a small body, in the decoder thread for a large one."""
    limits = request.app.get(LIMITS_KEY)
    if limits is None or not limits.is_large(body):
        return work()
    return await limits.intake.decoder.run(work)


async def read_json_body(request: web.Request) -> object:
    """The decoded JSON body (off the event loop when large)."""
    body = await read_body(request)
    return await decoded(request, body, lambda: decode_json(body))


def read_review(body: bytes) -> tuple[AdmissionRequest, PodReview | None]:
    """The typed review, and for a pod the pod read once: everything a body costs to read, in one call."""
    review = parse_admission_review(decode_json(body))
    return review, read_pod_review(review) if is_pod_admission(review) else None


async def read_admission_review(request: web.Request) -> AdmissionRequest:
    body = await read_body(request)
    return await decoded(request, body, lambda: parse_admission_review(decode_json(body)))


def admission_response(uid: str, decision: AdmissionDecision) -> web.Response:
    return json_response(build_admission_response(uid, decision))


async def mutate_pods(request: web.Request) -> web.Response:
    started = time.perf_counter()
    unread = request.get(UNREAD)
    if unread is not None:
        review, decision = judge_unread(request, *unread)
    else:
        review, decision = await admit_pod_within_deadline(request, await read_body(request))
    _record(request, review, MUTATE_PODS, decision, started)
    return admission_response(review.uid, decision)


def judge_unread(request: web.Request, head: bytes, problem: PreemptGuardError) -> tuple[AdmissionRequest,
                                                                                          AdmissionDecision]:
    """A pod review whose body was not read whole (over the size limit, or no memory for it now), judged by the
    fields before its object; a body without them keeps its 413/503."""
    review = peek_admission_request(head)
    if review is None:
        raise problem
    reason: UnreadReason = "too-large" if isinstance(problem, BodyTooLarge) else "overloaded"
    log.warning("pod review %s (%s/%s) not read whole (%s): %s", review.uid, review.namespace,
                review.name or "", reason, problem)
    return review, request.app[PIPELINE_KEY].admit_unread(review, reason)


async def admit_pod_within_deadline(request: web.Request, body: bytes) -> tuple[AdmissionRequest, AdmissionDecision]:
    """The review and the pipeline's outcome; once the admission deadline (limits.py) has passed, the pipeline's
    answer for an undecided review (a denial under enforce when its pod might preempt someone, else
    allowed-with-warning): the deadline covers decoding too, which runs off the event loop for a large body so it
    can fire."""
    pipeline = request.app[PIPELINE_KEY]
    limits = request.app.get(LIMITS_KEY)
    if limits is None:
        review, pod = read_review(body)
        return review, await pipeline.admit(review, pod)
    review_read: list[tuple[AdmissionRequest, PodReview | None]] = []
    try:
        async with asyncio.timeout(max(0.0, limits.admission_time_left(request))):
            async with _large_review_slot(limits, body):
                review, pod = await decoded(request, body, lambda: read_review(body))
                review_read.append((review, pod))
                return review, await pipeline.admit(review, pod)
    except TimeoutError:
        found, pod = review_read[0] if review_read else (peek_admission_request(body[:HEAD_BYTES]), None)
        if found is None:  # still unread, and no review head to answer with: not from an API server
            raise InvalidInput("request is not an AdmissionReview with its request.uid first") from None
        limits.metrics.deadline_exceeded.inc()
        decision = pipeline.undecided(found, limits.settings.admission_deadline_seconds, pod)
        log.warning("pod review %s not decided within the admission deadline: %s", found.uid,
                    "allowed without checks" if decision.allowed else "denied (onUnpredictable)")
        return found, decision


@contextlib.asynccontextmanager
async def _large_review_slot(limits: RequestLimits, body: bytes) -> AsyncIterator[None]:
    """Hold one of the ``large_reviews_in_flight`` slots while a large review is decoded and decided (its pod
    predicted in the pool only)."""
    if not limits.is_large(body):
        yield
        return
    async with limits.large_reviews:
        with never_inline():
            yield


async def validate_priority_classes(request: web.Request) -> web.Response:
    review = await read_admission_review(request)
    started = time.perf_counter()
    decision = admit_priority_class(review, request.app[SOURCE_KEY].state.priority_classes)
    _record(request, review, "validate_priorityclasses", decision, started)
    return admission_response(review.uid, decision)


def _record(request: web.Request, review: AdmissionRequest, endpoint: str, decision: AdmissionDecision,
             started: float) -> None:
    seconds = time.perf_counter() - started
    rules = decision.denied_by or (("priority",) if not decision.allowed else ())
    request.app[METRICS_KEY].record_admission(
        endpoint, "allowed" if decision.allowed else "denied", seconds, decision.denial_reason, rules)
    if request.app[SETTINGS_KEY].log_denials:
        log_decision(review, decision, seconds)


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
    raw = json_required_object(body, "PreviewRequest")
    unknown = sorted(str(key) for key in raw if key not in PREVIEW_REQUEST_FIELDS)
    if unknown:
        expected = ", ".join(PREVIEW_REQUEST_FIELDS)
        raise InvalidInput(f"unknown field {unknown[0]!r} in PreviewRequest (expected {expected})")
    if raw.get("pod") is None:
        raise InvalidInput("pod is required: a Pod or a workload with a pod template")
    obj = dict(json_required_object(raw.get("pod"), "pod"))
    replicas = raw.get("replicas")
    if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0):
        raise InvalidInput("replicas must be a non-negative integer")
    if replicas is not None and replicas > MAX_PREVIEW_REPLICAS:
        raise InvalidInput(f"replicas must be at most {MAX_PREVIEW_REPLICAS}")
    meta = obj.get("metadata")
    own_namespace = meta.get("namespace") if isinstance(meta, dict) else None
    namespace = (json_str(raw.get("namespace"), "namespace")
                 or (own_namespace if isinstance(own_namespace, str) else "") or "default")
    priority_class = json_str(raw.get("priorityClassName"), "priorityClassName") or None
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
        metrics.record_skipped_prediction(PREVIEW, "budget-exceeded")
        raise
    metrics.record_prediction(PREVIEW, [r.outcome for r in results], time.perf_counter() - started)
    policy = config.guardrails
    audience = audience_of(wanted.namespace, state.namespaces, policy.tenant_label, policy.disclosure)
    document = redact_preview_document(build_preview(results), results, audience)
    visibility = NamespaceVisibility(authenticator, caller)
    hidden = await visibility.hidden_namespaces(victim_namespaces(document))
    return json_response(redact_preview(document, hidden))


# ---- health -------------------------------------------------------------------------------------
async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def readiness(app: web.Application) -> tuple[int, str]:
    """``/readyz``'s status and text for the admission application ``app`` (served on both listeners)."""
    limits = app.get(LIMITS_KEY)
    if limits is not None and limits.draining:
        return 503, "shutting down"
    source = app[SOURCE_KEY]
    if not source.is_ready():
        return 503, source.readiness_reason() or "not ready"
    indexed = app.get(PREDICTOR_INDEXED_KEY)
    if indexed is not None and not indexed.is_set():
        return 503, "building the predictor's index"
    return 200, "ok"


async def readyz(request: web.Request) -> web.Response:
    status, text = readiness(request.app)
    return web.Response(status=status, text=text)
