"""Kubernetes Events on pods (``serve --events``): a prediction the scheduler did not bear out, told where
``kubectl describe pod`` shows it.

Created through the cluster source's API client (``webhook.kubeapi``) as ``core/v1`` Events of type
``Warning`` (the RBAC: ``create`` on ``events``, webhook/rbac.py ``EVENTS_PERMISSIONS``, granted only by the
overlay and the chart value that turn ``--events`` on). Posting never blocks the informers and never raises:
a failure is logged (at most one warning a minute) and the Event is dropped, as client-go's recorder drops
what it cannot write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from webhook.errors import ApiError
from webhook.kubeapi import KubeClient

log = logging.getLogger(__name__)

MISMATCH_REASON = "PreemptionPredictionMismatch"
COMPONENT = "preemptguard"
REPORTING_CONTROLLER = "preemptguard.io/webhook"
WARNING_INTERVAL_SECONDS = 60.0
# How a create went: created, already there (a fixed name created before), or failed (logged).
EventResult = Literal["created", "exists", "failed"]


def events_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/events"


def pod_event(namespace: str, pod: str, uid: str, reason: str, message: str, *, instance: str,
              now: datetime) -> dict[str, Any]:
    """A ``core/v1`` Event about one pod, as client-go's legacy recorder writes it (tools/record/event.go)."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{pod}.", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod, "uid": uid},
        "reason": reason, "message": message, "type": "Warning", "count": 1,
        "firstTimestamp": stamp, "lastTimestamp": stamp,
        "source": {"component": COMPONENT},
        "reportingComponent": REPORTING_CONTROLLER, "reportingInstance": instance[:128],
    }


def preemption_event_name(pod: str, uid: str) -> str:
    """One name per victim (its pod name and UID), so a second writer of the same Event (a new leader after a
    failover, a relist) gets 409 AlreadyExists instead of a duplicate."""
    return f"{pod[:180]}.preempted.{(uid or 'unknown')[:40]}".lower()


class PodEvents:
    """Posts Events in the background; ``close`` waits a moment for the ones still on their way."""

    def __init__(self, api: KubeClient, *, timeout_seconds: float = 5.0, instance: str | None = None) -> None:
        self.api = api
        self.timeout_seconds = timeout_seconds
        self.instance = instance or socket.gethostname()
        self.posted = 0
        self.failed = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._warned_at = -WARNING_INTERVAL_SECONDS

    def post(self, namespace: str, pod: str, uid: str, reason: str, message: str, *, name: str = "",
             related: dict[str, Any] | None = None, done: Callable[[EventResult], None] | None = None) -> None:
        """Create the Event soon (called from the event loop's thread: the informers, the tick). ``name``: a fixed
        name instead of ``generateName`` (a second create of it is ``exists``); ``related``: the object reference
        of ``related``; ``done`` hears how it went."""
        body = pod_event(namespace, pod, uid, reason, message, instance=self.instance, now=datetime.now(UTC))
        if name:
            body["metadata"] = {"name": name, "namespace": namespace}
        if related is not None:
            body["related"] = related
        task = asyncio.get_running_loop().create_task(self._create(namespace, body, done), name="preemptguard-event")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _create(self, namespace: str, body: dict[str, Any],
                      done: Callable[[EventResult], None] | None = None) -> None:
        result: EventResult = "created"
        try:
            await self.api.post(events_path(namespace), body, timeout=self.timeout_seconds)
        except asyncio.CancelledError:
            raise
        except ApiError as exc:
            if exc.code == 409 and body["metadata"].get("name"):
                result = "exists"
            else:
                result = "failed"
                self.failed += 1
                self._log_failure(namespace, body, exc)
        except Exception as exc:  # an Event is a courtesy: never let it fail anything else
            result = "failed"
            self.failed += 1
            self._log_failure(namespace, body, exc)
        if result == "created":
            self.posted += 1
        if done is not None:
            done(result)

    def _log_failure(self, namespace: str, body: dict[str, Any], exc: Exception) -> None:
        now = time.monotonic()
        level = logging.DEBUG
        if now - self._warned_at >= WARNING_INTERVAL_SECONDS:
            level, self._warned_at = logging.WARNING, now
        log.log(level, "cannot create a %s Event on pod %s/%s (%d failed so far): %s: %s", body["reason"], namespace,
                body["involvedObject"]["name"], self.failed, type(exc).__name__, exc)

    async def close(self, timeout: float = 2.0) -> None:
        if not self._tasks:
            return
        pending = list(self._tasks)
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task
