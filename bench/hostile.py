"""A hostile tenant against ``preempt-guard serve`` under ``enforce`` (issue #24): each attack's effect side by side
with the same run without it (not a test; bounded: every attack is a fixed set of requests or a fixed time).

    .venv/bin/python bench/hostile.py [--attack NAME ...] [--seconds 8] [--list]   (--attack sigterm: the exit time)

For every attack, two fresh server processes on loopback (the example snapshot, ``guardrails.mode: enforce``
with ``denyCrossTenantPreemption``, the shipped budgets and limits, a CA-issued certificate; with ``--client-ca``
and ``--preview-port`` where the attack is about client certificates): one attacked, one left alone, in turns.
While the attack runs, a probe plays the API server (with its client certificate under ``--client-ca``) and
measures what the other tenants get:

* priority-only admissions (a pod in a namespace labelled ``preemptguard.io/mode=off``), back to back: their
  p99 latency;
* the guarded pod (examples/pods/09-preempts-batch.yaml: a team-a pod whose only way in evicts a pod of
  another tenant), every 200 ms: how many of its admissions were denied, as they must be every time, and their
  p99 latency (the API server gives up at 3 s and applies failurePolicy Ignore);
* the server's peak resident memory (``VmHWM``), against the shipped 512 MiB limit.

The attacks are a list (``ATTACKS``) of ``Attack(name, finding, send)``: ``send(target)`` runs the attack and returns
what the attacker was told. The request attacks (huge replica counts, padded constraints, a long preview, the
largest previews) are sent from this process; the network attacks (``bench/hostile_network.py``: big bodies,
connections held certificate-less, idle or trickling, floods of the metrics and preview ports) run for
``--seconds`` in a process of their own, from another loopback address, and the probe opens a fresh connection
per request for them (as the API server must when its pooled ones are gone). Then SIGTERM during the slowest of the
largest previews, against the manifests' grace period, with the shipped flags.

Figures are machine-dependent: compare the two columns of one run, on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import multiprocessing
import os
import resource
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import hostile_network as network  # noqa: E402

EXAMPLES = ROOT / "examples"
GUARDED_POD = EXAMPLES / "pods" / "09-preempts-batch.yaml"
UNGUARDED_NAMESPACE = "bench-unguarded"
ENFORCE = {"guardrails": {"mode": "enforce", "tenantLabel": "tenant", "denyCrossTenantPreemption": True}}
MEMORY_LIMIT_MIB = 512  # manifests/base/deployment.yaml and the chart's values.yaml
# Past this the bench kills the server (by PID) rather than let one run exhaust the machine.
RUNAWAY_MIB = 3 * MEMORY_LIMIT_MIB
MAX_BODY_BYTES = 3 * 1024 * 1024  # what the kube-apiserver (and PreemptGuard) accept
INT32_MAX = 2**31 - 1
JsonDict = dict[str, Any]


# ---- payloads ---------------------------------------------------------------------------------------
def guarded_pod() -> JsonDict:
    """The example pod that can only run by evicting a pod of another tenant (batch, tenant analytics)."""
    manifest: JsonDict = yaml.safe_load(GUARDED_POD.read_text(encoding="utf-8"))
    return manifest


def flood_pod() -> JsonDict:
    """A small high-priority pod of team-c (no ResourceQuota there): each of 10,000 replicas is simulated in full,
    fitting first, then preempting, then pending (about 10 s of work on the example cluster)."""
    pod = guarded_pod()
    pod["metadata"] = {"name": "flood", "namespace": "team-c"}
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    return pod


def unguarded_pod(name: str) -> JsonDict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": UNGUARDED_NAMESPACE},
            "spec": {"priorityClassName": "standard", "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def admission_review(pod: JsonDict, *, dry_run: bool = False,
                     username: str = "system:serviceaccount:team-a:deployer") -> JsonDict:
    """A pod CREATE as the kube-apiserver sends it to /mutate/pods."""
    namespace = pod["metadata"].get("namespace", "default")
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
        "namespace": namespace, "name": pod["metadata"].get("name", ""), "object": pod, "dryRun": dry_run,
        "userInfo": {"username": username, "groups": ["system:serviceaccounts", "system:authenticated"]}}}


def _required_terms(count: int, distinct: bool) -> list[JsonDict]:
    """Required (anti-)affinity terms that select no pod at all (their label key exists nowhere)."""
    return [{"labelSelector": {"matchLabels": {"hostile.example/none": f"v{i if distinct else 0}"}},
             "topologyKey": "kubernetes.io/hostname"} for i in range(count)]


def padded_anti_affinity(pod: JsonDict, terms: int, *, distinct: bool = True) -> JsonDict:
    padded = copy.deepcopy(pod)
    padded["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": _required_terms(terms, distinct)}}
    return padded


def padded_pod_affinity(pod: JsonDict, terms: int, *, distinct: bool = True) -> JsonDict:
    """Pod-affinity terms that only the pod itself matches (a label no other pod has): upstream lets a pod in when
    no pod matches its affinity terms but it matches them itself, so they are no-ops for the scheduler."""
    padded = copy.deepcopy(pod)
    padded["metadata"].setdefault("labels", {})["hostile.example/self"] = "yes"
    padded["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "hostile.example/self", "operator": "In",
                                                 "values": ["yes", f"v{i if distinct else 0}"]}]},
         "topologyKey": "kubernetes.io/hostname"} for i in range(terms)]}}
    return padded


def padded_spread(pod: JsonDict, constraints: int) -> JsonDict:
    """DoNotSchedule spread constraints that select no pod (a skew of 0 everywhere): no-ops."""
    padded = copy.deepcopy(pod)
    padded["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"hostile.example/none": f"v{i}"}}} for i in range(constraints)]
    return padded


def workload(kind: str, pod: JsonDict, count: int, name: str = "flood") -> JsonDict:
    """A workload of ``kind`` asking for ``count`` pods of ``pod``'s template (replicas, or a Job's parallelism)."""
    template = {"metadata": {"labels": {"app": name}, "annotations": pod["metadata"].get("annotations") or {}},
                "spec": pod["spec"]}
    meta = {"name": name, "namespace": pod["metadata"]["namespace"]}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
                "spec": {"replicas": count, "selector": {"matchLabels": {"app": name}}, "template": template}}
    job = {"parallelism": count, "completions": count, "template": template}
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": job}}}


def object_list(items: list[JsonDict]) -> JsonDict:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _body_size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def largest_template(pod: JsonDict, budget: int) -> JsonDict:
    """``pod`` at every complexity limit PreemptGuard accepts (32 anti-affinity terms, 32 spread constraints,
    128 tolerations, 256 host ports), then padded with annotations to ``budget`` bytes of JSON."""
    big = padded_anti_affinity(pod, 32)
    big["spec"]["topologySpreadConstraints"] = padded_spread(pod, 32)["spec"]["topologySpreadConstraints"]
    big["spec"]["tolerations"] = [{"key": f"hostile.example/t{i}", "operator": "Exists"} for i in range(128)]
    big["spec"]["containers"][0]["ports"] = [{"containerPort": 20000 + i, "hostPort": 20000 + i}
                                             for i in range(256)]
    chunk = "x" * 4096
    room = budget - _body_size(big) - 1024
    big["metadata"]["annotations"] = {f"hostile.example/pad-{i}": chunk for i in range(max(0, room // 4130))}
    return big


def largest_template_request() -> JsonDict:
    """A PreviewRequest just under 3 MiB: one pod template at every complexity limit, 10,000 replicas, in team-c
    (no ResourceQuota there: every replica is simulated)."""
    template = largest_template(flood_pod(), MAX_BODY_BYTES - 4096)
    return {"pod": workload("StatefulSet", template, 10_000, "largest"), "namespace": "team-c"}


def largest_list_request() -> JsonDict:
    """A PreviewRequest just under 3 MiB: 10,000 distinct Pods in a List, in team-c."""
    pod = flood_pod()
    bare = _body_size({**pod, "metadata": {"name": "largest-9999", "namespace": "team-c", "annotations": {"p": ""}}})
    padding = "x" * (MAX_BODY_BYTES // 10_000 - 8 - bare)
    items = [{**pod, "metadata": {"name": f"largest-{i}", "namespace": "team-c", "annotations": {"p": padding}}}
             for i in range(10_000)]
    return {"pod": object_list(items), "namespace": "team-c"}


def largest_preview_requests() -> list[tuple[str, JsonDict]]:
    """The largest PreviewRequests a tenant can send that PreemptGuard accepts: 10,000 pods in 3 MiB each."""
    return [("one 3 MiB template at every limit x 10,000 replicas", largest_template_request()),
            ("10,000 distinct pods in a 3 MiB List", largest_list_request())]


# ---- the server ----------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_snapshot(path: Path) -> Path:
    """The example snapshot as JSON (quick to load), plus a namespace the guardrails leave alone."""
    cluster = yaml.safe_load((EXAMPLES / "cluster.yaml").read_text(encoding="utf-8"))
    cluster["items"].append({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": UNGUARDED_NAMESPACE, "labels": {"preemptguard.io/mode": "off", "tenant": "bench"}}})
    path.write_text(json.dumps(cluster), encoding="utf-8")
    return path


def status_kib(pid: int, field_name: str) -> int:
    """A ``/proc/PID/status`` figure in KiB (``VmRSS``: now, ``VmHWM``: the peak since the process started)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise KeyError(field_name)


@dataclass
class Served:
    """``preempt-guard serve`` in its own process on 127.0.0.1, over a CA-issued certificate (``pki``)."""

    process: subprocess.Popen[bytes]
    url: str
    client: ssl.SSLContext  # trusts the server; presents the API server's certificate under --client-ca
    log: Path
    pki: network.Pki | None = None
    port: int = 0
    metrics_port: int = 0
    preview_port: int | None = None  # with --client-ca only

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_mib(self) -> float:
        return status_kib(self.pid, "VmRSS") / 1024

    def peak_rss_mib(self) -> float:
        return status_kib(self.pid, "VmHWM") / 1024

    def terminate(self, timeout: float) -> float:
        """SIGTERM, then the seconds until the process exited (``math.inf`` past ``timeout``: then killed)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return math.inf
        return time.monotonic() - started

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


@contextmanager
def served(snapshot: Path, config: JsonDict, work: Path, *extra: str, client_ca: bool = False,
           ready_timeout: float = 60.0) -> Iterator[Served]:
    """Start ``preempt-guard serve`` on ``snapshot`` with ``config`` (with ``client_ca``: ``--client-ca`` and a
    ``--preview-port``); stopped (by PID) on exit."""
    work.mkdir(parents=True, exist_ok=True)
    config_file = work / "config.yaml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    pki = network.Pki.create(work)
    port, metrics_port = free_port(), free_port()
    preview_port = free_port() if client_ca else None
    log = work / "serve.log"
    command = [sys.executable, "-m", "webhook.cli", "serve", "--cluster-snapshot", str(snapshot),
               "--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--host", "127.0.0.1", "--port", str(port),
               "--metrics-port", str(metrics_port), "--config", str(config_file), *extra]
    if client_ca:
        command += ["--client-ca", str(pki.client_ca), "--preview-port", str(preview_port)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        target = Served(process, f"https://127.0.0.1:{port}", pki.client_context(certificate=client_ca), log, pki,
                        port, metrics_port, preview_port)
        _wait_ready(target, time.monotonic() + ready_timeout)
        yield target
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _wait_ready(target: Served, deadline: float) -> None:
    while time.monotonic() < deadline:
        if target.process.poll() is not None:
            break
        try:
            with urlopen(target, "/readyz") as status:
                if status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"preempt-guard serve not ready:\n{target.log_tail()}")


@contextmanager
def urlopen(target: Served, path: str) -> Iterator[int]:
    import urllib.request

    with urllib.request.urlopen(target.url + path, context=target.client, timeout=2) as response:
        yield int(response.status)


# ---- requests ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """One HTTP exchange: the status, the decoded body and how long it took."""

    status: int
    body: Any
    seconds: float

    @property
    def response(self) -> JsonDict:
        return dict(self.body.get("response") or {}) if isinstance(self.body, dict) else {}

    @property
    def allowed(self) -> bool | None:
        return self.response.get("allowed") if self.status == 200 else None

    @property
    def denial(self) -> str:
        status = self.response.get("status") or {}
        return f"{status.get('code')}: {status.get('message', '')}"


async def post(session: aiohttp.ClientSession, target: Served, path: str, body: object,
               timeout: float = 60.0, headers: dict[str, str] | None = None) -> Answer:
    data = json.dumps(body, separators=(",", ":")).encode()
    started = time.perf_counter()
    async with session.post(target.url + path, data=data, timeout=aiohttp.ClientTimeout(total=timeout),
                            headers={"Content-Type": "application/json", **(headers or {})}) as response:
        raw = await response.read()
    try:
        decoded = json.loads(raw) if raw else None
    except ValueError:
        decoded = raw.decode(errors="replace")
    return Answer(response.status, decoded, time.perf_counter() - started)


def session_for(target: Served, connections: int = 8) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=target.client, limit=connections))


async def admit(session: aiohttp.ClientSession, target: Served, pod: JsonDict, *, timeout: float = 60.0,
                **review: Any) -> Answer:
    return await post(session, target, "/mutate/pods", admission_review(pod, **review), timeout)


# ---- the probe: what everyone else gets while the attack runs --------------------------------------------
@dataclass
class Probe:
    priority_only_seconds: list[float] = field(default_factory=list)
    guarded: list[bool | None] = field(default_factory=list)  # allowed? (None: no answer)
    guarded_seconds: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)  # the probe's own requests that got no answer
    rss_samples_mib: list[float] = field(default_factory=list)
    killed_at_mib: float | None = None  # the server ran away and was killed

    @property
    def p99_ms(self) -> float:
        return percentile(self.priority_only_seconds, 99) * 1000

    @property
    def guarded_p99_ms(self) -> float:
        return percentile(self.guarded_seconds, 99) * 1000

    @property
    def guarded_denied(self) -> int:
        return sum(1 for allowed in self.guarded if allowed is False)


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(len(ordered) * pct / 100) - 1)]


NO_ANSWER = (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError)


async def run_probe(target: Served, stop: asyncio.Event, probe: Probe, guarded_every: float = 0.2, *,
                    fresh_connections: bool = False) -> None:
    """``fresh_connections``: a new TLS connection per request, as the API server must open when an attack has
    closed its pooled ones (else four kept-alive connections)."""
    connector = aiohttp.TCPConnector(ssl=target.client, limit=4, force_close=fresh_connections)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def priority_only() -> None:
            serial = 0
            while not stop.is_set():
                serial += 1
                try:
                    answer = await admit(session, target, unguarded_pod(f"probe-{serial}"), timeout=10)
                    probe.priority_only_seconds.append(answer.seconds)
                except NO_ANSWER as exc:
                    probe.priority_only_seconds.append(10.0)
                    probe.errors[type(exc).__name__] += 1
                await asyncio.sleep(0.005)

        async def guarded() -> None:
            while not stop.is_set():
                try:
                    answer = await admit(session, target, guarded_pod(), timeout=10)
                    probe.guarded.append(answer.allowed)
                    probe.guarded_seconds.append(answer.seconds)
                except NO_ANSWER as exc:
                    probe.guarded.append(None)
                    probe.errors[type(exc).__name__] += 1
                await asyncio.sleep(guarded_every)

        async def memory() -> None:
            while not stop.is_set() and target.process.poll() is None:
                rss = target.rss_mib()
                probe.rss_samples_mib.append(rss)
                if rss > RUNAWAY_MIB:
                    probe.killed_at_mib = rss
                    target.process.kill()
                    stop.set()
                await asyncio.sleep(0.02)

        await asyncio.gather(priority_only(), guarded(), memory())


# ---- attacks ---------------------------------------------------------------------------------------------
Send = Callable[[Served], Coroutine[Any, Any, str]]


@dataclass(frozen=True)
class Attack:
    name: str
    finding: str  # what issue #24 found before the fix
    send: Send  # runs the attack; returns what the attacker was told
    serve_args: tuple[str, ...] = ()
    client_ca: bool = False  # serve with --client-ca (and --preview-port); the probe presents the certificate
    network: bool = False  # a network attack: the probe opens a fresh connection per request


def told(answers: list[Answer]) -> str:
    """``denied 400 x5`` / ``200 x1``: what the attacker's requests got, grouped."""
    counts: dict[str, int] = {}
    for answer in answers:
        if answer.status == 200 and answer.response:
            key = "allowed" if answer.allowed else f"denied {answer.response.get('status', {}).get('code')}"
        else:
            key = f"HTTP {answer.status}"
        counts[key] = counts.get(key, 0) + 1
    slowest = max((a.seconds for a in answers), default=0.0)
    return ", ".join(f"{k} x{n}" for k, n in counts.items()) + f" (slowest {slowest:.2f} s)"


async def _previews(target: Served, bodies: list[JsonDict], timeout: float = 60.0) -> str:
    async with session_for(target) as session:
        return told([await post(session, target, "/preview", body, timeout) for body in bodies])


async def _admissions(target: Served, pods: list[JsonDict]) -> str:
    async with session_for(target) as session:
        return told([await admit(session, target, pod) for pod in pods])


async def huge_statefulset(target: Served) -> str:
    return await _previews(target, [{"pod": workload("StatefulSet", guarded_pod(), INT32_MAX)}])


async def list_of_30_workloads(target: Served) -> str:
    kinds = ("StatefulSet", "Deployment", "Job", "CronJob", "ReplicaSet")
    items = [workload(kinds[i % len(kinds)], guarded_pod(), 10_000, f"flood-{i}") for i in range(30)]
    return await _previews(target, [{"pod": object_list(items)}])


async def anti_affinity_6000(target: Served) -> str:
    return await _admissions(target, [padded_anti_affinity(guarded_pod(), 6000)] * 5)


async def pod_affinity_10000(target: Served) -> str:
    return await _admissions(target, [padded_pod_affinity(guarded_pod(), 10_000)] * 5)


async def spread_10000(target: Served) -> str:
    return await _admissions(target, [padded_spread(guarded_pod(), 10_000)] * 5)


async def preview_10000_replicas(target: Served) -> str:
    return await _previews(target, [{"pod": flood_pod(), "replicas": 10_000}])


async def largest_requests(target: Served) -> str:
    return await _previews(target, [body for _, body in largest_preview_requests()])


# ---- network attacks (bench/hostile_network.py), each in a process of its own for --seconds ----------------
SECONDS = 8.0  # how long a network attack runs (--seconds)


def _run_attack_process(attack: network.AttackRun, seconds: float, results: Any) -> None:
    results.send(asyncio.run(attack(seconds)))


def in_own_process(make: Callable[[Served], network.AttackRun]) -> Send:
    """``send`` for a network attack: ``make(target)`` runs for ``SECONDS`` in a forked process (its CPU and its
    connections are not the prober's); what it saw is what the attacker was told."""
    async def send(target: Served) -> str:
        attack = make(target)
        receiving, sending = multiprocessing.get_context("fork").Pipe(duplex=False)
        process = multiprocessing.get_context("fork").Process(target=_run_attack_process,
                                                              args=(attack, SECONDS, sending))
        process.start()
        try:
            ready = await asyncio.to_thread(receiving.poll, SECONDS + 30)
            return str(receiving.recv()) if ready else "(the attacker did not finish)"
        finally:
            process.terminate()
            await asyncio.to_thread(process.join)

    return send


def big_bodies(size: int) -> Callable[[Served], network.AttackRun]:
    """Four clients, one per padding shape, each sending a review of a ``size``-byte pod back to back."""
    def make(target: Served) -> network.AttackRun:
        bodies = [network.encoded(network.review(network.padded_pod(size, "team-a", shape), "team-a"))
                  for shape in network.SHAPES]
        return network.big_bodies(target.port, target.client, bodies)

    return make


def certificate_less(target: Served) -> network.AttackRun:
    half = network.HELD // 2
    return network.all_of(network.hold_connections(target.port, half, None),  # TCP only: never a ClientHello
                          network.hold_connections(target.port, half, network.stranger_context()))


def slow_bodies(target: Served) -> network.AttackRun:
    head, body = network.slow_body_head_and_body()
    assert target.pki is not None
    return network.hold_connections(target.port, 200, target.pki.client_context(certificate=False), send=head,
                                    trickle=body)


def idle_flood(target: Served) -> network.AttackRun:
    assert target.pki is not None
    return network.hold_connections(target.port, network.HELD, target.pki.client_context(certificate=False))


def preview_flood(target: Served) -> network.AttackRun:
    assert target.preview_port is not None
    return network.hold_connections(target.preview_port, network.HELD, network.stranger_context())


async def metrics_flood(target: Served) -> str:
    """1,000 idle connections to the metrics port from one client, while another scrapes and probes there."""
    flood = in_own_process(lambda t: network.hold_connections(t.metrics_port, network.HELD, None))
    attacker, scrapes = await asyncio.gather(flood(target), network.scrape_loop(target.metrics_port, SECONDS))
    return f"{attacker}; scrapes and probes from another client: {scrapes}"


ATTACKS: list[Attack] = [
    Attack("statefulset-2147483647", "503 after 10 s, its thread kept expanding past 3.6 GiB; SIGTERM ignored",
           huge_statefulset),
    Attack("list-of-30-workloads", "30 x 10,000 pods slipped under the top-level replicas cap", list_of_30_workloads),
    Attack("anti-affinity-6000", "6,000 no-op anti-affinity terms: over budget, so allowed under enforce",
           anti_affinity_6000),
    Attack("pod-affinity-10000", "10,000 no-op pod-affinity terms: over budget, so allowed", pod_affinity_10000),
    Attack("spread-10000", "10,000 no-op spread constraints: over budget, so allowed", spread_10000),
    Attack("preview-10000-replicas", "held the index lock 5-8 s: the guarded pod allowed 8 tries of 8",
           preview_10000_replicas),
    Attack("largest-requests", "(the largest previews a tenant can still send: the memory bound)", largest_requests),
    Attack("big-bodies-1.4mib", "four clients sending 1.4 MiB pods: priority-only admission 3.06 s, the guarded pod "
           "3.67 s, past the API server's 3 s timeout (fail open)", in_own_process(big_bodies(network.BIG_POD_BYTES)),
           network=True),
    Attack("big-bodies-3mib", "(the largest review the API server sends: a 3 MiB create, defaulted)",
           in_own_process(big_bodies(network.LARGEST_CREATE_BYTES)), network=True),
    Attack("certificate-less", "1,000 connections without a certificate under --client-ca locked the API server "
           "out (CERT_OPTIONAL, one global cap)", in_own_process(certificate_less), client_ca=True, network=True),
    Attack("slow-bodies", "64 slow-body connections held every admission slot: 16 of 23 guarded admissions got "
           "429 (allowed by the API server)", in_own_process(slow_bodies), network=True),
    Attack("idle-flood", "(1,000 idle connections on the admission port, the whole cap)", in_own_process(idle_flood),
           network=True),
    Attack("metrics-flood", "200 idle connections to the metrics port blinded every scrape (and the probes)",
           metrics_flood, network=True),
    Attack("preview-flood", "(1,000 TLS connections to the --preview-port listener from one client, under "
           "--client-ca)", in_own_process(preview_flood), client_ca=True, network=True),
]


# ---- the side-by-side run ------------------------------------------------------------------------------
@dataclass
class Outcome:
    rss_peak_mib: float
    p99_ms: float
    guarded_denied: int
    guarded_total: int
    guarded_p99_ms: float
    told: str
    seconds: float


async def measure(target: Served, send: Send | None, idle_seconds: float, *, fresh_connections: bool) -> Outcome:
    """Run ``send`` (or sleep ``idle_seconds``: the baseline) while probing; the probe runs 0.5 s past it."""
    stop = asyncio.Event()
    probe = Probe()
    probing = asyncio.create_task(run_probe(target, stop, probe, fresh_connections=fresh_connections))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    if send is None:
        await asyncio.sleep(idle_seconds)
        result = "-"
    else:
        attack = asyncio.create_task(send(target))
        await asyncio.wait([attack, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        try:
            result = await attack if not stop.is_set() else "-"
        except (aiohttp.ClientError, TimeoutError) as exc:
            result = f"no answer ({type(exc).__name__})"
        if not attack.done():
            attack.cancel()
    seconds = time.monotonic() - started
    await asyncio.sleep(0.5)
    peak = max(probe.rss_samples_mib, default=0.0)
    if target.process.poll() is None:
        peak = target.peak_rss_mib()
    stop.set()
    await probing
    if probe.killed_at_mib is not None:
        result = f"server killed by the bench at {probe.killed_at_mib:.0f} MiB (running away); {result}"
    if probe.errors:
        result += f" [probe got no answer: {network.said(probe.errors)}]"
    return Outcome(peak, probe.p99_ms, probe.guarded_denied, len(probe.guarded), probe.guarded_p99_ms, result, seconds)


def run_attack(attack: Attack, snapshot: Path, work: Path) -> tuple[Outcome, Outcome]:
    fresh = attack.network
    with served(snapshot, ENFORCE, work / f"{attack.name}-attacked", *attack.serve_args,
                client_ca=attack.client_ca) as target:
        attacked = asyncio.run(measure(target, attack.send, 0, fresh_connections=fresh))
    with served(snapshot, ENFORCE, work / f"{attack.name}-alone", *attack.serve_args,
                client_ca=attack.client_ca) as target:
        alone = asyncio.run(measure(target, None, attacked.seconds, fresh_connections=fresh))
    return attacked, alone


GRACE_PERIOD_SECONDS = 30 - 5  # the manifests' terminationGracePeriodSeconds, less their preStop sleep


async def _sigterm_during(target: Served, body: JsonDict) -> float:
    async with session_for(target) as session:
        preview = asyncio.create_task(post(session, target, "/preview", body, 120))
        await asyncio.sleep(1.0)
        exited = await asyncio.to_thread(target.terminate, 2 * GRACE_PERIOD_SECONDS)
        preview.cancel()
        return exited


def sigterm_seconds(snapshot: Path, work: Path) -> tuple[float, float]:
    """Seconds from SIGTERM to exit with the shipped flags: during the slowest largest preview, and idle."""
    with served(snapshot, ENFORCE, work / "sigterm-attacked") as target:
        attacked = asyncio.run(_sigterm_during(target, largest_template_request()))
    with served(snapshot, ENFORCE, work / "sigterm-alone") as target:
        alone = target.terminate(2 * GRACE_PERIOD_SECONDS)
    return attacked, alone


def main(argv: list[str] | None = None) -> int:
    global SECONDS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attack", action="append", default=[], help="run only this attack (repeatable)")
    parser.add_argument("--seconds", type=float, default=SECONDS,
                        help=f"how long each network attack runs (default {SECONDS:g})")
    parser.add_argument("--list", action="store_true", help="list the attacks and exit")
    args = parser.parse_args(argv)
    SECONDS = args.seconds
    if args.list:
        for attack in ATTACKS:
            print(f"{attack.name:24} {attack.finding}")
        return 0
    chosen = [a for a in ATTACKS if not args.attack or a.name in args.attack]
    unknown = set(args.attack) - {a.name for a in ATTACKS} - {"sigterm"}
    if unknown:
        parser.error(f"unknown attack(s): {', '.join(sorted(unknown))} (see --list)")
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the network attackers hold 1,000 connections
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="preemptguard-hostile-") as tmp:
        work = Path(tmp)
        snapshot = write_snapshot(work / "cluster.json")
        print(f"{'attack':24} {'RSS peak MiB':>15} {'admission p99 ms':>18} {'guarded pod denied':>18} "
              f"{'guarded p99 ms':>18}  attacker told")
        print(f"{'':24} {'alone -> attacked':>15} {'alone -> attacked':>18} {'alone -> attacked':>18} "
              f"{'alone -> attacked':>18}")
        for attack in chosen:
            attacked, alone = run_attack(attack, snapshot, work)
            name = attack.name + (" *" if attack.client_ca else "")
            print(f"{name:24} {alone.rss_peak_mib:5.0f} -> {attacked.rss_peak_mib:5.0f} "
                  f"{alone.p99_ms:7.1f} -> {attacked.p99_ms:7.1f} "
                  f"{alone.guarded_denied:>4}/{alone.guarded_total:<3} -> {attacked.guarded_denied:>4}/"
                  f"{attacked.guarded_total:<3} {alone.guarded_p99_ms:7.1f} -> {attacked.guarded_p99_ms:7.1f}  "
                  f"{attacked.told}", flush=True)
        print(f"(* served with --client-ca; memory limit in the manifests: {MEMORY_LIMIT_MIB} MiB; every guarded "
              "admission must be denied)")
        if not args.attack or "sigterm" in args.attack:
            attacked_exit, alone_exit = sigterm_seconds(snapshot, work)
            print(f"SIGTERM to exit, shipped flags: {alone_exit:.1f} s idle -> {attacked_exit:.1f} s during the slowest"
                  f" largest preview (grace period {GRACE_PERIOD_SECONDS} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
