"""Lease-based leader election (``coordination.k8s.io/v1`` Leases): one replica writes what only one may write
(the preemption Events and the exposure PolicyReports), so running several replicas does not multiply them.

This is client-go's algorithm (k8s.io/client-go/tools/leaderelection, ``tryAcquireOrRenew``, ``acquire``,
``renew``, ``release``) written on ``webhook.kubeapi``, the project's one API door. kubernetes-asyncio ships a
``leaderelection`` package, but it does not fit: it sends its requests through the generated
``CoordinationV1Api`` (outside the door, with its own ``ApiException`` instead of ``ApiError``), writes its
acquire and renew times as local time labelled UTC, returns for good once it loses the lease (no re-election)
and cannot release the lease on shutdown. The algorithm is small; the upstream rules it keeps:

- a candidate GETs the Lease; none: it creates one naming itself; held by another whose record it has not seen
  change for ``leaseDurationSeconds`` (measured on its own clock from when it last saw the record change, never
  by comparing timestamps across machines): it takes the Lease over with an update (``leaseTransitions`` + 1),
  which the resourceVersion it read makes atomic (409 Conflict: someone else won);
- the leader renews every ``retry_period``; when it has not renewed within ``renew_deadline`` (< lease duration)
  it stops leading at once, before anyone else can take over;
- on shutdown the leader releases the Lease (an empty holder, a duration of 1 s) so another replica takes over
  without waiting out the lease.

Defaults are kube-scheduler's: lease 15 s, renew deadline 10 s, retry period 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from webhook.errors import ApiError, ClusterUnavailable
from webhook.kubeapi import JsonObject, KubeClient
from webhook.routes import LEADER_ELECTION_LEASE

log = logging.getLogger(__name__)

DEFAULT_LEASE_DURATION_SECONDS = 15.0
DEFAULT_RENEW_DEADLINE_SECONDS = 10.0
DEFAULT_RETRY_PERIOD_SECONDS = 2.0
JITTER_FACTOR = 1.2  # wait.JitterUntil's factor in client-go's acquire loop
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def leases_path(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def micro_time(now: datetime) -> str:
    """``metav1.MicroTime`` as the API serves it: RFC 3339 in UTC with microseconds."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """client-go's ``hostname_<uuid>``: the pod name, and unique across restarts of the same pod."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def default_namespace(api: KubeClient, environ: dict[str, str] | None = None) -> str:
    """Where the Lease lives: ``POD_NAMESPACE`` (the downward API), the service account's namespace in a pod,
    else the kubeconfig context's namespace."""
    environ = dict(os.environ) if environ is None else environ
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    with contextlib.suppress(OSError):
        found = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
        if found:
            return found
    return api.namespace or "default"


@dataclass(frozen=True, slots=True)
class ElectionSettings:
    namespace: str
    identity: str
    name: str = LEADER_ELECTION_LEASE
    lease_duration_seconds: float = DEFAULT_LEASE_DURATION_SECONDS
    renew_deadline_seconds: float = DEFAULT_RENEW_DEADLINE_SECONDS
    retry_period_seconds: float = DEFAULT_RETRY_PERIOD_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_seconds < self.renew_deadline_seconds < self.lease_duration_seconds:
            raise ValueError("leader election needs 0 < retry period < renew deadline < lease duration")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """``LeaderElectionRecord``: what the Lease's spec says."""

    holder: str
    lease_duration_seconds: int
    acquire_time: str
    renew_time: str
    transitions: int

    @classmethod
    def of(cls, lease: JsonObject) -> LeaseRecord:
        spec = lease.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        return cls(str(spec.get("holderIdentity") or ""), duration if isinstance(duration, int) else 0,
                   str(spec.get("acquireTime") or ""), str(spec.get("renewTime") or ""),
                   transitions if isinstance(transitions, int) else 0)

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"holderIdentity": self.holder, "leaseDurationSeconds": self.lease_duration_seconds,
                                "leaseTransitions": self.transitions}
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


class LeaderElector:
    """Campaigns for the Lease until stopped; ``is_leader`` says whether this replica may write now.

    ``on_started_leading``/``on_stopped_leading`` are called on the event loop when that changes.
    """

    def __init__(self, api: KubeClient, settings: ElectionSettings, *,
                 on_started_leading: Callable[[], None] = lambda: None,
                 on_stopped_leading: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.api = api
        self.settings = settings
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self.wall_clock = wall_clock
        self.is_leader = False
        self.transitions_seen = 0  # how often this replica has started leading
        self._observed: LeaseRecord | None = None
        self._observed_raw: JsonObject | None = None
        self._observed_at = 0.0
        self._warned_at = -60.0

    @property
    def path(self) -> str:
        return f"{leases_path(self.settings.namespace)}/{self.settings.name}"

    @property
    def leader(self) -> str:
        """The holder this replica last saw ("" when none)."""
        return self._observed.holder if self._observed is not None else ""

    # ---- the loop ------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Acquire, lead while renewing, and campaign again after losing the Lease; until cancelled."""
        try:
            while True:
                await self._acquire()
                self._set_leader(True)
                await self._renew()
                self._set_leader(False)
        finally:
            self._set_leader(False)

    async def _acquire(self) -> None:
        while not await self.try_acquire_or_renew():
            period = self.settings.retry_period_seconds
            await asyncio.sleep(period + random.uniform(0, period * JITTER_FACTOR))

    async def _renew(self) -> None:
        """Renew every retry period; return once a renewal has not succeeded within the renew deadline."""
        settings = self.settings
        while True:
            deadline = self.clock() + settings.renew_deadline_seconds
            renewed = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settings.renew_deadline_seconds):
                    while not renewed and self.clock() < deadline:
                        renewed = await self.try_acquire_or_renew()
                        if not renewed:
                            await asyncio.sleep(settings.retry_period_seconds)
            if not renewed:
                log.warning("leader election: lost the Lease %s/%s (not renewed within %gs)", settings.namespace,
                            settings.name, settings.renew_deadline_seconds)
                return
            await asyncio.sleep(settings.retry_period_seconds)

    def _set_leader(self, leading: bool) -> None:
        if leading == self.is_leader:
            return
        self.is_leader = leading
        if leading:
            self.transitions_seen += 1
            log.info("leader election: %s leads (Lease %s/%s)", self.settings.identity, self.settings.namespace,
                     self.settings.name)
            self.on_started_leading()
        else:
            self.on_stopped_leading()

    # ---- one attempt (client-go tryAcquireOrRenew) ---------------------------------------------------
    async def try_acquire_or_renew(self) -> bool:
        settings = self.settings
        now = micro_time(self.wall_clock())
        duration = round(settings.lease_duration_seconds)
        mine = LeaseRecord(settings.identity, duration, now, now, 0)
        timeout = settings.retry_period_seconds * 2
        try:
            try:
                lease = await self.api.get(self.path, timeout=timeout)
            except ApiError as exc:
                if exc.code != 404:
                    raise
                created = await self.api.post(leases_path(settings.namespace), {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": settings.name, "namespace": settings.namespace}, "spec": mine.spec()},
                    timeout=timeout)
                self._observe(created, LeaseRecord.of(created))
                return True
            current = LeaseRecord.of(lease)
            if self._observed != current:
                self._observe(lease, current)
            held_by_other = bool(current.holder) and current.holder != settings.identity
            if held_by_other and self._observed_at + current.lease_duration_seconds > self.clock():
                return False
            if current.holder == settings.identity:
                mine = LeaseRecord(settings.identity, duration, current.acquire_time or now, now, current.transitions)
            else:
                mine = LeaseRecord(settings.identity, duration, now, now, current.transitions + 1)
            updated = await self.api.put(self.path, {**lease, "spec": {**(lease.get("spec") or {}), **mine.spec()}},
                                         timeout=timeout)
        except (ApiError, ClusterUnavailable) as exc:
            self._complain(exc)
            return False
        self._observe(updated, LeaseRecord.of(updated))
        return True

    def _observe(self, raw: JsonObject, record: LeaseRecord) -> None:
        self._observed_raw, self._observed, self._observed_at = raw, record, self.clock()

    def _complain(self, exc: Exception) -> None:
        conflict = isinstance(exc, ApiError) and exc.code == 409  # another replica won this round
        now = self.clock()
        level = logging.DEBUG
        if not conflict and now - self._warned_at >= 60.0:
            level, self._warned_at = logging.WARNING, now
        log.log(level, "leader election: Lease %s/%s: %s", self.settings.namespace, self.settings.name, exc)

    async def release(self) -> None:
        """Give the Lease up if this replica holds it (client-go ``release``): an empty holder, a 1 s duration.
        Leading stops first: nothing is written once the release has begun."""
        self._set_leader(False)
        if self._observed is None or self._observed_raw is None or self._observed.holder != self.settings.identity:
            return
        now = micro_time(self.wall_clock())
        record = LeaseRecord("", 1, now, now, self._observed.transitions)
        lease = self._observed_raw
        try:
            released = await self.api.put(self.path, {**lease, "spec": {**(lease.get("spec") or {}), **record.spec()}},
                                          timeout=self.settings.retry_period_seconds * 2)
        except (ApiError, ClusterUnavailable) as exc:
            log.info("leader election: could not release the Lease %s/%s: %s", self.settings.namespace,
                     self.settings.name, exc)
            return
        self._observe(released, LeaseRecord.of(released))
