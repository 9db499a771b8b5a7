"""Predictions off the event loop: dedicated thread pools, a time budget per call, the scheduler profile.

The predictor is CPU-bound pure Python. It runs in thread pools of its own so the event loop keeps answering
health checks and priority-only admissions while a prediction is computed. Admission predictions and
/preview never share anything a preview could hold for long (issue #24: a 10,000-replica preview held the
index lock for 5-8 s and every admission prediction behind it was skipped):

* admission predictions run in ``executor`` (``workers`` threads) on the state's index (``state_index``);
* previews run in ``preview_executor`` (``preview_workers`` threads, one by default), on an index of their own
  (``preview_index``), at most ``preview_workers`` at once; waiting for a slot counts against their budget.

Every call has a budget and a ``Deadline``: when the budget passes the caller gets ``PredictionTimeout`` at
once (a call still waiting for a worker is dropped), and the running computation stops at its next deadline
check. A caller that goes away (the request cancelled) and ``shutdown()`` cancel the deadline, so no thread
outlives its request and the process can exit within its grace period even during the largest preview.

``compute_preview`` mirrors ``scheduler.preemption: disabled`` (the scheduler's PostFilter is off): pods
that do not fit are reported ``Unschedulable`` (they stay Pending) and evict nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from webhook.cluster.model import Pod
from webhook.cluster.release import DEFAULT_RELEASE, parse_release
from webhook.cluster.snapshot import ClusterState
from webhook.config import SchedulerConfig
from webhook.errors import PredictionCancelled, PredictionTimeout
from webhook.preemption.deadline import Deadline
from webhook.preemption.framework.index import index_sync_is_cheap, preview_index, sync_if_cheap
from webhook.preemption.results import (
    DEFAULT_SCORE_WEIGHTS,
    PreemptionArgs,
    PreemptionResult,
    ResourceSpec,
    ScoringArgs,
    ScoringStrategy,
)
from webhook.preemption.simulate import PodQuotaCheck, predict_objects, resource_quota_only, simulate_pods

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# A prediction reads the shared ClusterState while the informers write it on the event loop: a read racing a
# write can fail (e.g. a dict resized during iteration). Such a run is retried on the new state version.
_CONCURRENT_CHANGE_ERRORS = (RuntimeError, KeyError)
_MAX_ATTEMPTS = 3

# False while a large review is admitted (``never_inline``): its pod is predicted in the pool, never on the loop.
_INLINE_ALLOWED = contextvars.ContextVar("preemptguard_inline_prediction_allowed", default=True)


@contextlib.contextmanager
def never_inline() -> Iterator[None]:
    """Within this block (in this task), ``predict`` runs in the pool only: a pod read from a large body may
    carry enough terms that even the start of its prediction, before the predictor's first deadline check,
    would hold the event loop."""
    token = _INLINE_ALLOWED.set(False)
    try:
        yield
    finally:
        _INLINE_ALLOWED.reset(token)


@functools.lru_cache(maxsize=16)  # one per scheduler profile seen (configurations are immutable)
def scoring_args(scheduler: SchedulerConfig) -> ScoringArgs:
    """The profile's Score plugins and arguments: the default profile's weights with ``scheduler.scoreWeights``
    applied (0 removes a plugin), ``scheduler.scoringStrategy`` and ``percentageOfNodesToScore``."""
    changed = dict(scheduler.score_weights)
    weights = tuple((name, changed.get(name, weight)) for name, weight in DEFAULT_SCORE_WEIGHTS
                    if changed.get(name, weight) > 0)
    strategy = scheduler.scoring_strategy
    return ScoringArgs(percentage_of_nodes_to_score=scheduler.percentage_of_nodes_to_score, weights=weights,
                       fit_strategy=ScoringStrategy(strategy.type, tuple(ResourceSpec(n, w) for n, w in
                                                                         strategy.resources), strategy.shape),
                       hard_pod_affinity_weight=scheduler.hard_pod_affinity_weight,
                       ignore_preferred_terms_of_existing_pods=scheduler.ignore_preferred_terms_of_existing_pods)


def preemption_args(scheduler: SchedulerConfig) -> PreemptionArgs:
    """The scheduler profile's DefaultPreemptionArgs with the semantics of ``scheduler.kubernetesVersion``, and
    its scoring."""
    release = parse_release(scheduler.kubernetes_version) if scheduler.kubernetes_version else DEFAULT_RELEASE
    return replace(PreemptionArgs.for_release(
        release,
        min_candidate_nodes_percentage=scheduler.min_candidate_nodes_percentage,
        min_candidate_nodes_absolute=scheduler.min_candidate_nodes_absolute,
        preemption_enabled=scheduler.preemption_enabled,
        scheduler_names=scheduler.scheduler_names,
    ), scoring=scoring_args(scheduler))


def predict_admitted_pod(state: ClusterState, pod: Pod, scheduler: SchedulerConfig,
                         deadline: Deadline | float | None) -> PreemptionResult:
    """The prediction for a pod the Priority plugin has already resolved (no second resolution)."""
    return simulate_pods(state, [pod], preemption_args(scheduler), deadline=deadline)[0]


def predict_object(state: ClusterState, obj: Mapping[str, Any], *, namespace: str | None, replicas: int | None,
                   scheduler: SchedulerConfig, priority_class: str | None = None,
                   deadline: Deadline | float | None = None, for_preview: bool = False,
                   quota_check: PodQuotaCheck = resource_quota_only) -> list[PreemptionResult]:
    """The results for a Pod or workload object (resolved like the Priority plugin, then ``quota_check``) under
    the scheduler profile; ``for_preview``: on the state's preview index (``preview_index``)."""
    return predict_objects(state, [obj], namespace=namespace, replicas=replicas, priority_class=priority_class,
                           args=preemption_args(scheduler), deadline=deadline,
                           index=preview_index(state) if for_preview else None, quota_check=quota_check)


def run_consistently(state: ClusterState, compute: Callable[[], _T], deadline: Deadline | float) -> _T:
    """``compute()``, retried when it failed because the informers changed ``state`` under it."""
    deadline = Deadline.of(deadline)
    for attempt in range(1, _MAX_ATTEMPTS + 1):
        version = state.version
        try:
            return compute()
        except PredictionTimeout:
            raise
        except _CONCURRENT_CHANGE_ERRORS:
            if state.version == version or attempt == _MAX_ATTEMPTS or deadline.seconds_left() == 0:
                raise
            log.debug("cluster state changed during a prediction (attempt %d); retrying", attempt)
    raise AssertionError("unreachable")


class PredictionService:
    """The prediction thread pools: ``await predict(...)`` for admission, ``await preview(...)`` for /preview."""

    def __init__(self, workers: int = 2, *, inline_seconds: float = 0.0, preview_workers: int = 1) -> None:
        if workers < 1 or preview_workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="preemptguard-predict")
        self.preview_executor = ThreadPoolExecutor(max_workers=preview_workers,
                                                   thread_name_prefix="preemptguard-preview")
        self._preview_slots = asyncio.Semaphore(preview_workers)
        # See ``predict``: how long a prediction may run on the event loop before moving to the pool.
        self.inline_seconds = inline_seconds
        self.pooled = 0  # admission predictions submitted to the pool and not yet answered
        self.running: set[Deadline] = set()  # the deadlines of every computation started and not yet answered
        self.stopping = False

    async def run(self, compute: Callable[[Deadline], _T], *, budget_seconds: float,
                  deadline: float | None = None, executor: Executor | None = None) -> _T:
        """``compute(deadline)`` in the pool (``executor``, default the admission pool); ``PredictionTimeout``
        when the budget passes first, ``PredictionCancelled`` once ``shutdown()`` was called.

        ``deadline`` (a ``time.monotonic()`` value) defaults to now + ``budget_seconds``. However this call
        ends (answered, over budget, cancelled by its caller), the computation's ``Deadline`` is cancelled, so
        it stops at its next check if it is still running.
        """
        if self.stopping:
            raise PredictionCancelled("the prediction was cancelled: the server is shutting down")
        stop = Deadline(deadline if deadline is not None else time.monotonic() + budget_seconds)
        pool = executor or self.executor
        admission = pool is self.executor
        self.running.add(stop)
        if admission:
            self.pooled += 1
        try:
            future = asyncio.get_running_loop().run_in_executor(pool, compute, stop)
            return await asyncio.wait_for(future, stop.seconds_left())
        except (TimeoutError, PredictionTimeout) as exc:
            if isinstance(exc, PredictionCancelled):
                raise
            raise PredictionTimeout(f"the prediction did not finish within {budget_seconds:g} s") from exc
        finally:
            stop.cancel("its caller stopped waiting")
            self.running.discard(stop)
            if admission:
                self.pooled -= 1

    async def predict(self, state: ClusterState, pod: Pod, *, scheduler: SchedulerConfig,
                      budget_seconds: float) -> PreemptionResult:
        """The prediction for one admitted pod: first on the calling thread for up to ``inline_seconds``.

        Most admission predictions (pods that fit) take a fraction of a millisecond, less than handing them
        to a thread and back, and threads add no parallelism to pure Python under the GIL. So when the pool
        is idle and the predictor's index needs no rebuild the prediction runs here, bounded by the
        predictor's own deadline checks; one that needs longer (or any while the pool is busy, or while
        the index must be rebuilt, which has no deadline checks) runs in the pool within what is left.
        """
        deadline = time.monotonic() + budget_seconds
        if (self.inline_seconds > 0 and self.pooled == 0 and not self.stopping and _INLINE_ALLOWED.get()
                and index_sync_is_cheap(state)):
            inline_deadline = min(deadline, time.monotonic() + self.inline_seconds)
            result: PreemptionResult | None
            try:
                result = run_consistently(state, lambda: predict_admitted_pod(state, pod, scheduler, inline_deadline),
                                          inline_deadline)
            except PredictionTimeout:
                result = None
            # The budget is as strict as in the pool (where wait_for enforces it): a late answer is no answer.
            if time.monotonic() > deadline:
                raise PredictionTimeout(f"the prediction did not finish within {budget_seconds:g} s")
            if result is not None:
                return result

        def compute(deadline: Deadline) -> PreemptionResult:
            return run_consistently(state, lambda: predict_admitted_pod(state, pod, scheduler, deadline), deadline)

        return await self.run(compute, budget_seconds=budget_seconds, deadline=deadline)

    async def warm_up(self, state: ClusterState, scheduler: SchedulerConfig, budget_seconds: float = 120.0) -> None:
        """One throwaway prediction in the pool, so the predictor's index of ``state`` is built off the loop."""
        probe = Pod(name="preemptguard-warm-up", namespace="default")
        await self.run(lambda deadline: predict_admitted_pod(state, probe, scheduler, deadline),
                       budget_seconds=budget_seconds)

    async def preview(self, state: ClusterState, obj: Mapping[str, Any], *, namespace: str | None,
                      scheduler: SchedulerConfig, budget_seconds: float, replicas: int | None = None,
                      priority_class: str | None = None,
                      quota_check: PodQuotaCheck = resource_quota_only) -> list[PreemptionResult]:
        """The results for a Pod or workload object, for /preview: in the preview pool, on the preview index,
        at most ``preview_workers`` at once; the wait for a slot counts against the budget. ``quota_check``:
        the admission pipeline's quota stage, so only what the caller could create is predicted."""
        deadline = time.monotonic() + budget_seconds
        try:
            await asyncio.wait_for(self._preview_slots.acquire(), budget_seconds)
        except TimeoutError as exc:
            raise PredictionTimeout(
                f"the prediction did not start within {budget_seconds:g} s: other previews are running") from exc

        def compute(deadline: Deadline) -> list[PreemptionResult]:
            return run_consistently(state, lambda: predict_object(
                state, obj, namespace=namespace, replicas=replicas, scheduler=scheduler,
                priority_class=priority_class, deadline=deadline, for_preview=True, quota_check=quota_check), deadline)

        try:
            return await self.run(compute, budget_seconds=budget_seconds, deadline=deadline,
                                  executor=self.preview_executor)
        finally:
            self._preview_slots.release()

    def shutdown(self) -> None:
        """Cancel every running prediction (each stops at its next deadline check) and drop queued ones."""
        self.stopping = True
        for stop in list(self.running):
            stop.cancel("the server is shutting down")
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.preview_executor.shutdown(wait=False, cancel_futures=True)


# How often a live server catches the predictor's indexes up with the watch events (``keep_index_fresh``), and how
# many changed nodes it refreshes per turn of the event loop (~110 us each at 2,000 nodes, ~125 us at 15,000, 30
# pods a node). Every 25 ms in one go (~12 nodes, 1.5 ms), an admission arriving meanwhile waited for all of it;
# every 5 ms, 4 nodes a turn, an admission still refreshed what had come since, 7 nodes (0.7 ms) at its p99 (bench
# probe at 2,000 nodes, 460 pod writes/s); every 1 ms, 1 node a turn, 3 nodes (0.36 ms), and a turn of the loop
# an admission may wait behind is one node.
INDEX_REFRESH_SECONDS = 0.001
INDEX_REFRESH_SLICE_NODES = 1
# Slices per wake-up at most (a backlog larger than this is left to the next wake-up, or to a prediction).
INDEX_REFRESH_SLICES = 16


def catch_up_after_event(state: ClusterState) -> Callable[[], bool]:
    """What a live source calls after each watch event it applies (``KubernetesSource.after_watch_event``): refresh
    that event's node in the predictor's index in the same turn of the event loop (``sync_if_cheap``, one slice).
    Left to ``keep_index_fresh``'s next wake-up (up to 1 ms later, up to 8 events a turn), the event's node was
    refreshed by the admission that came first: at 15,000 nodes under churn its own refresh was 8 nodes, 1.4 ms, at
    its p99, the whole of its excess over idle (instrumented serve, bench/scale.py's cluster)."""
    return functools.partial(sync_if_cheap, state, INDEX_REFRESH_SLICE_NODES)


async def keep_index_fresh(state: ClusterState, interval_seconds: float = INDEX_REFRESH_SECONDS,
                           slice_nodes: int = INDEX_REFRESH_SLICE_NODES) -> None:
    """Forever: every ``interval_seconds``, refresh the nodes the watch changed in the state's built indexes
    (``sync_if_cheap``), ``slice_nodes`` at a time with a turn of the event loop between slices, so an admission
    finds them current instead of paying for every event since the last, and never waits long behind a refresh."""
    while True:
        await asyncio.sleep(interval_seconds)
        for _ in range(INDEX_REFRESH_SLICES):
            if sync_if_cheap(state, slice_nodes):
                break
            await asyncio.sleep(0)
