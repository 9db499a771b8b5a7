"""Predictions off the event loop: a small dedicated thread pool, a time budget per call, the scheduler profile.

The predictor is CPU-bound pure Python. It runs in its own ``ThreadPoolExecutor`` so the event loop keeps
answering health checks and priority-only admissions while a prediction is computed. Every call has a budget:
when it passes, the caller gets ``PredictionTimeout`` at once (a call still waiting for a worker is dropped;
a running one stops at the predictor's ``deadline``, raising ``PredictionTimeout`` in its thread). At most
``workers - 1`` previews run at a time, so one worker always remains for admission predictions.

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
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from webhook.cluster.model import Pod
from webhook.cluster.snapshot import ClusterState
from webhook.config import SchedulerConfig
from webhook.errors import PredictionTimeout
from webhook.preemption.index import index_sync_is_cheap
from webhook.preemption.results import PreemptionArgs, PreemptionResult
from webhook.preemption.simulate import predict_objects, simulate_pods

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
def preemption_args(scheduler: SchedulerConfig) -> PreemptionArgs:
    return PreemptionArgs(
        min_candidate_nodes_percentage=scheduler.min_candidate_nodes_percentage,
        min_candidate_nodes_absolute=scheduler.min_candidate_nodes_absolute,
        preemption_enabled=scheduler.preemption_enabled,
    )


def predict_admitted_pod(state: ClusterState, pod: Pod, scheduler: SchedulerConfig,
                         deadline: float | None) -> PreemptionResult:
    """The prediction for a pod the Priority plugin has already resolved (no second resolution)."""
    return simulate_pods(state, [pod], preemption_args(scheduler), deadline=deadline)[0]


def predict_object(state: ClusterState, obj: Mapping[str, Any], *, namespace: str | None, replicas: int | None,
                   scheduler: SchedulerConfig, priority_class: str | None = None,
                   deadline: float | None = None) -> list[PreemptionResult]:
    """The results for a Pod or workload object (resolved like the Priority plugin) under the scheduler profile."""
    return predict_objects(state, [obj], namespace=namespace, replicas=replicas, priority_class=priority_class,
                           args=preemption_args(scheduler), deadline=deadline)


def run_consistently(state: ClusterState, compute: Callable[[], _T], deadline: float) -> _T:
    """``compute()``, retried when it failed because the informers changed ``state`` under it."""
    for attempt in range(1, _MAX_ATTEMPTS + 1):
        version = state.version
        try:
            return compute()
        except PredictionTimeout:
            raise
        except _CONCURRENT_CHANGE_ERRORS:
            if state.version == version or attempt == _MAX_ATTEMPTS or time.monotonic() >= deadline:
                raise
            log.debug("cluster state changed during a prediction (attempt %d); retrying", attempt)
    raise AssertionError("unreachable")


class PredictionService:
    """The prediction thread pool: ``await predict(...)`` for admission, ``await preview(...)`` for /preview."""

    def __init__(self, workers: int = 2, *, inline_seconds: float = 0.0) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="preemptguard-predict")
        self._preview_slots = asyncio.Semaphore(max(1, workers - 1))
        # See ``predict``: how long a prediction may run on the event loop before moving to the pool.
        self.inline_seconds = inline_seconds
        self.pooled = 0  # predictions submitted to the pool and not yet answered

    async def run(self, compute: Callable[[float], _T], *, budget_seconds: float,
                  deadline: float | None = None) -> _T:
        """``compute(deadline)`` in the pool; ``PredictionTimeout`` when the budget passes first.

        ``deadline`` (a ``time.monotonic()`` value) defaults to now + ``budget_seconds``.
        """
        deadline = deadline if deadline is not None else time.monotonic() + budget_seconds
        future = asyncio.get_running_loop().run_in_executor(self.executor, compute, deadline)
        timed_out = PredictionTimeout(f"the prediction did not finish within {budget_seconds:g} s")
        self.pooled += 1
        try:
            return await asyncio.wait_for(future, max(0.0, deadline - time.monotonic()))
        except (TimeoutError, PredictionTimeout) as exc:
            raise timed_out from exc
        finally:
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
        if self.inline_seconds > 0 and self.pooled == 0 and _INLINE_ALLOWED.get() and index_sync_is_cheap(state):
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

        def compute(deadline: float) -> PreemptionResult:
            return run_consistently(state, lambda: predict_admitted_pod(state, pod, scheduler, deadline), deadline)

        return await self.run(compute, budget_seconds=budget_seconds, deadline=deadline)

    async def warm_up(self, state: ClusterState, scheduler: SchedulerConfig, budget_seconds: float = 120.0) -> None:
        """One throwaway prediction in the pool, so the predictor's index of ``state`` is built off the loop."""
        probe = Pod(name="preemptguard-warm-up", namespace="default")
        await self.run(lambda deadline: predict_admitted_pod(state, probe, scheduler, deadline),
                       budget_seconds=budget_seconds)

    async def preview(self, state: ClusterState, obj: Mapping[str, Any], *, namespace: str | None,
                      scheduler: SchedulerConfig, budget_seconds: float, replicas: int | None = None,
                      priority_class: str | None = None) -> list[PreemptionResult]:
        """The results for a Pod or workload object, for /preview: at most ``workers - 1`` at once; the wait
        for a slot counts against the budget."""
        deadline = time.monotonic() + budget_seconds
        try:
            await asyncio.wait_for(self._preview_slots.acquire(), budget_seconds)
        except TimeoutError as exc:
            raise PredictionTimeout(
                f"the prediction did not start within {budget_seconds:g} s: other previews are running") from exc

        def compute(deadline: float) -> list[PreemptionResult]:
            return run_consistently(state, lambda: predict_object(
                state, obj, namespace=namespace, replicas=replicas, scheduler=scheduler,
                priority_class=priority_class, deadline=deadline), deadline)

        try:
            return await self.run(compute, budget_seconds=budget_seconds, deadline=deadline)
        finally:
            self._preview_slots.release()

    def shutdown(self) -> None:
        """Drop queued predictions; a running one finishes (or stops at its deadline) in the background."""
        self.executor.shutdown(wait=False, cancel_futures=True)
