"""Helpers for the fault tests: admission traffic that records every failure, and cluster churn."""

from __future__ import annotations

import asyncio
import itertools
import random
import ssl
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from fake_apiserver import FakeApiServer, pod

from webhook.routes import MUTATE_PODS_PATH
from webhook.sources.informer import InformerSettings

FAST_INFORMERS = InformerSettings(page_size=50, watch_timeout_seconds=30, backoff_base_seconds=0.02,
                                  backoff_cap_seconds=0.2, connect_timeout_seconds=1.0, request_timeout_seconds=5.0,
                                  watch_read_slack_seconds=5.0)


def pod_review(namespace: str = "team-a", class_name: str = "high") -> dict[str, Any]:
    name = f"load-{uuid.uuid4().hex[:10]}"
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
        "namespace": namespace, "name": name, "userInfo": {"username": "system:serviceaccount:ci:deployer"},
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                   "spec": {"priorityClassName": class_name, "containers": [{"name": "c", "resources": {
                       "requests": {"cpu": "100m", "memory": "64Mi"}}}]}},
        "dryRun": False}}


@dataclass
class Traffic:
    """Admissions sent by ``workers`` concurrent clients until stopped; every failure is recorded."""

    url: str
    client: ssl.SSLContext
    workers: int = 4
    new_connections: bool = False  # a fresh TLS connection per request (as after a rotation)
    answered: int = 0
    failures: list[str] = field(default_factory=list)
    failure_times: list[float] = field(default_factory=list)  # time.monotonic() of each failure
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> Traffic:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self.workers)]
        return self

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _worker(self) -> None:
        try:
            await self._requests()
        except Exception as exc:
            self._fail(f"worker crashed: {type(exc).__name__}: {exc}")

    async def _requests(self) -> None:
        connector = aiohttp.TCPConnector(ssl=self.client, force_close=self.new_connections)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=5)) as session:
            while not self._stop.is_set():
                review = pod_review()
                try:
                    async with session.post(self.url + MUTATE_PODS_PATH, json=review) as response:
                        body = await response.json(content_type=None)
                        answer = body.get("response") or {}
                        if response.status != 200 or answer.get("uid") != review["request"]["uid"]:
                            self._fail(f"HTTP {response.status}: {str(body)[:200]}")
                        elif answer.get("allowed") is not True:
                            self._fail(f"denied: {answer.get('status')}")
                        else:
                            self.answered += 1
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    self._fail(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.005)


    def _fail(self, message: str) -> None:
        self.failures.append(message)
        self.failure_times.append(time.monotonic())


class Churn:
    """Pods created, updated and deleted on the fake API server (also while it is down: seen once back)."""

    def __init__(self, api: FakeApiServer, seed: int = 0) -> None:
        self.api = api
        self.rng = random.Random(seed)
        self.serial = itertools.count()
        self.live: list[str] = []

    def step(self, changes: int = 3) -> None:
        for _ in range(changes):
            roll = self.rng.random()
            if roll < 0.5 or not self.live:
                name = f"churn-{next(self.serial)}"
                self.api.create(pod(name, "team-b", node_name=self.rng.choice(["node-1", "node-2"]),
                                    priority_class_name="low", priority=10))
                self.live.append(name)
            elif roll < 0.8:
                name = self.rng.choice(self.live)
                self.api.update(pod(name, "team-b", node_name="node-2", priority_class_name="low", priority=10,
                                    cpu=f"{self.rng.randrange(50, 500)}m"))
            else:
                self.api.delete("Pod", self.live.pop(self.rng.randrange(len(self.live))), "team-b")


async def run_for(seconds: float, every: float, action: Any) -> int:
    """Call ``action()`` every ``every`` seconds for ``seconds``; how many times it ran."""
    deadline = time.monotonic() + seconds
    count = 0
    while time.monotonic() < deadline:
        result = action()
        if asyncio.iscoroutine(result):
            await result
        count += 1
        await asyncio.sleep(every)
    return count


async def eventually(condition: Any, timeout: float = 10.0) -> bool:
    """Whether ``condition()`` holds within ``timeout`` seconds (polled every 10 ms)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if callable(condition) and condition():
            return True
        await asyncio.sleep(0.01)
    return False
