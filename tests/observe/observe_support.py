"""The live observer end to end: the real app over TLS on a KubernetesSource watching the fake API server,
pod reviews sent as the API server sends them, the patched pods created, and kube-scheduler's part played by
the test (bind, nominate, mark ``DisruptionTarget``, delete) through the fake's watch streams."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fake_apiserver import FakeApiServer, namespace, node, pod, priority_class

from webhook.observe.compare import Verdict
from webhook.routes import MUTATE_PODS_PATH
from webhook.server.app import OBSERVER_KEY
from webhook.server.handlers import METRICS_KEY
from webhook.server.observing import PredictionObserver
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.sources.informer import InformerSettings
from webhook.sources.kube_source import KubernetesSource

TOKEN = "observe-token"
FAST = InformerSettings(page_size=50, watch_timeout_seconds=30, backoff_base_seconds=0.01, backoff_cap_seconds=0.1,
                        connect_timeout_seconds=1.0, request_timeout_seconds=5.0, watch_read_slack_seconds=5.0)
SETTINGS = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True, observe_settle_seconds=0.5,
                          observe_tick_seconds=0.05)
PREEMPTING = "0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node"


def seed(fake: FakeApiServer) -> None:
    """n1 (2 CPU) holds two low-priority pods of team-b; n2 (4 CPU) is full with a pod nothing may preempt.

    A 1-CPU ``high`` pod of team-a is predicted to preempt team-b/batch-a on n1; 100m fits on n1; 3 CPU fits
    nowhere. team-a and team-b are different tenants."""
    for obj in (priority_class("low", 10), priority_class("high", 1000), priority_class("top", 2000),
                namespace("team-a", tenant="red"), namespace("team-b", tenant="blue"),
                node("n1", cpu="2"), node("n2", cpu="4"),
                pod("batch-a", "team-b", node_name="n1", cpu="1200m", priority_class_name="low", priority=10),
                pod("batch-b", "team-b", node_name="n1", cpu="600m", priority_class_name="low", priority=10),
                pod("keep", "team-b", node_name="n2", cpu="4", priority_class_name="top", priority=2000)):
        fake.create(obj)


def manifest(name: str, cpu: str, ns: str = "team-a", class_name: str = "high") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"priorityClassName": class_name,
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}}


def apply_patch(obj: Mapping[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add``/``replace`` as the API server applies the webhook's patch."""
    patched = copy.deepcopy(dict(obj))
    for op in operations:
        assert op["op"] in ("add", "replace"), op
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        target = patched
        for token in tokens[:-1]:
            target = target.setdefault(token, {})
        target[tokens[-1]] = op["value"]
    return patched


class Live:
    """One webhook replica on the fake API server; the test is the scheduler."""

    def __init__(self, fake: FakeApiServer, hook: LoopbackWebhook) -> None:
        self.fake = fake
        self.hook = hook

    @property
    def app(self) -> Any:
        assert self.hook.server is not None
        return self.hook.server.app

    @property
    def observer(self) -> PredictionObserver:
        return self.app[OBSERVER_KEY]  # type: ignore[no-any-return]

    def verdicts(self) -> dict[str, float]:
        registry = self.app[METRICS_KEY].registry
        return {str(v): registry.get_sample_value("preemptguard_prediction_observed_total", {"verdict": str(v)})
                for v in Verdict}

    async def admit(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
        """The review's response and the pod as the API server would store it (patched)."""
        meta = obj["metadata"]
        review = admission_review({
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
            "namespace": meta["namespace"], "name": meta["name"], "object": obj, "dryRun": dry_run,
            "userInfo": {"username": "dev", "groups": ["system:authenticated"]}})
        status, body = await self.hook.post_json(MUTATE_PODS_PATH, review)
        assert status == 200 and body["response"]["allowed"], body
        response = body["response"]
        operations = json.loads(base64.b64decode(response["patch"])) if response.get("patch") else []
        return response, apply_patch(obj, operations)

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Admit ``obj`` and create the patched pod: what `kubectl create` does through the API server."""
        _, patched = await self.admit(obj)
        return self.fake.create(patched)

    async def wait_for(self, expected: Mapping[str, float], timeout: float = 10.0) -> dict[str, float]:
        """Wait until the verdict counters are ``expected`` (the others 0)."""
        want = {str(v): float(expected.get(str(v), 0)) for v in Verdict}
        deadline = time.monotonic() + timeout
        while (got := self.verdicts()) != want:
            if time.monotonic() > deadline:
                raise AssertionError(f"verdicts {got}, expected {want}")
            await asyncio.sleep(0.02)
        return got

    async def followed(self, count: int, timeout: float = 10.0) -> None:
        """Wait until the replica follows ``count`` predictions."""
        deadline = time.monotonic() + timeout
        while len(self.observer.tracker) != count:
            if time.monotonic() > deadline:
                raise AssertionError(f"following {len(self.observer.tracker)}, expected {count}")
            await asyncio.sleep(0.02)


# ---- kube-scheduler's part ----------------------------------------------------------------------
class Scheduler:
    """What kube-scheduler writes, as the API server then streams it to every watcher."""

    def __init__(self, fake: FakeApiServer) -> None:
        self.fake = fake

    def get(self, name: str, ns: str) -> dict[str, Any]:
        return self.fake.get("Pod", name, ns)

    def bind(self, name: str, node_name: str, ns: str = "team-a") -> None:
        obj = self.get(name, ns)
        obj["spec"]["nodeName"] = node_name
        obj["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
        self.fake.update(obj)

    def refuse(self, name: str, ns: str = "team-a", *, nominate: str = "", victims: int | None = None) -> None:
        """PodScheduled=False/Unschedulable, with a nomination when preempting (one status update upstream)."""
        obj = self.get(name, ns)
        message = "0/2 nodes are available: 2 Insufficient cpu."
        if victims is not None:
            message = f"{PREEMPTING} {nominate}, preempting {victims} victims"
        obj["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}
        if nominate:
            obj["status"]["nominatedNodeName"] = nominate
        self.fake.update(obj)

    def mark(self, name: str, ns: str = "team-b") -> None:
        """The victim's DisruptionTarget condition, then its graceful deletion (deletionTimestamp)."""
        obj = self.get(name, ns)
        obj["status"] = {**obj.get("status", {}), "conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": "default-scheduler: preempting to accommodate a higher priority pod"}]}
        self.fake.update(obj)
        obj = self.get(name, ns)
        obj["metadata"]["deletionTimestamp"] = "2025-06-02T09:30:00Z"
        self.fake.update(obj)

    def delete(self, name: str, ns: str = "team-b") -> None:
        self.fake.delete("Pod", name, ns)


@contextlib.asynccontextmanager
async def replica(fake: FakeApiServer, tmp_path: Path, **settings: Any) -> AsyncIterator[Live]:
    """One PreemptGuard replica (its own informers) on ``fake``, synced."""
    source = KubernetesSource(kubeconfig=str(fake.write_kubeconfig(tmp_path)), context="fake", settings=FAST)
    async with LoopbackWebhook(source, replace(SETTINGS, **settings)) as hook:
        assert await source.wait_until_ready(timeout=10)
        yield Live(fake, hook)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
