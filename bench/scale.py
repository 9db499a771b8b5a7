"""The biggest clusters, live against a real kube-apiserver (issue 29; not a test).

    .venv/bin/python bench/scale.py [--nodes 1000 5000 15000] [--pods-per-node 30] [--samples 1000]
                                    [--churn-seconds 40] [--replicas 2] [--apiserver-memory-limit 9GiB] [--no-isolate]
                                    [--rounds 4] [--no-snapshot-path] [--snapshot-rounds 3] [--json FILE]
                                    [--quick]

For each size, in one run:

1. etcd (``--quota-backend-bytes`` 16 GiB, ``--unsafe-no-fsync``) and kube-apiserver of ``$PREEMPTGUARD_KUBE_BIN`` (else
   conformance/bin) start on loopback (webhook/verify/controlplane.py; no scheduler: nothing binds here).
   kube-apiserver runs with ``GOMEMLIMIT`` (``--apiserver-memory-limit``, default 9GiB; a Go runtime knob: its
   garbage collector runs before the heap doubles, nothing else changes) and every other flag at its default
   (watch cache on, WatchList and pagination as upstream serves them).
2. The cluster of bench/clustergen.py (N nodes, 30·N bound pods, PDBs), shaped as the API server returns it
   (bench/kubectl_dump.py, plus pod conditions and container statuses), is created through the API by
   conformance/cmd/scaleload (Go, client-go, protobuf, 48 requests in flight), each object's status written through
   the status subresource. Its own throughput is recorded. The API server then holds and serves the objects: the
   lists are paginated by it, from its watch cache, in its JSON. The run then waits until kube-apiserver idles
   (under 0.25 core over 2 s: its own pod informer has taken every pod too), and records how long that took.
3. ``preempt-guard serve --kubeconfig`` starts: seconds to ``/readyz`` (every informer listed and the predictor's
   index built) and the bytes the informers listed (``preemptguard_informer_listed_bytes_total``); seconds to the
   first admission that carries a prediction; RSS when ready, peak RSS, RSS per pod; seconds to the end of the
   exposure scan's first pass (every pod matched against its namespace's PDBs, in slices of the event loop at a
   fifth of its time: a start-up transient like the lists; the latencies below are measured after it).
4.-6. take turns: ``--rounds`` windows each (default 4: a quarter of the samples and of the churn's seconds a
   window, idle, ConfigMap churn, pod churn, idle, ...), each phase's figures over all its windows, so that the
   ratios between phases are not also how the shared machine drifted in the minutes between them.
4. Once kube-apiserver idles again (as after the load; its CPU during the probes is a row), latency p50/p99 of
   ``POST /preview`` (bearer token: a TokenReview and SubjectAccessReviews, their answers reused 10 s as in a
   cluster) and ``POST /mutate/pods`` (an AdmissionReview, as the API server sends it) for a pod that fits, one
   that preempts and one that cannot be placed; every answer is checked for that outcome.
5. The same while scaleload churns ConfigMaps (create, update, delete, ~1 KiB each, the LagPoller below polling
   /metrics) at 500 writes/s: no replica watches them, so the API server, etcd and the load generator are as busy
   next door as under the pod churn and none of their events reaches the webhook. On this 2-core machine the
   control plane's CPU shares the last-level cache and the memory bus with the webhook's: a process that only
   hammered a large dict there raised the idle preempt p99 from 0.98 to 1.99 ms (throwaway probe, 15,000 nodes);
   bench/neighbour.py times the machine's part alone: the same Python work, no webhook, idle and under either churn.
   The pod churn's p99s over these (``churn / ConfigMap churn``) are what the webhook's own handling of the events
   costs its admissions; the issue's target is the pod churn's p99 over idle.
6. The same while scaleload churns pods (create, update, delete, bound to random nodes) at 500 writes/s, with the
   informer lag: for every acknowledged write, from the moment the API server answered it (carrying the
   write's resourceVersion) until the webhook's ``preemptguard_informer_resource_version{kind="Pod"}``, polled
   every 100 ms, reached that resourceVersion (resolution: the poll interval; each poll asks for that series
   alone, ``?name[]=``: the whole /metrics text is 2-3 ms of the webhook's event loop). Beside it, ``scaleload
   watch`` (a client-go watch of every pod that does nothing with an event) times each event's arrival: the same
   lag measured on a bare watch is the API server's own part of it. Then higher rates,
   doubling, until the lag p99 passes 2 s or the API server no longer delivers the rate: the highest rate kept up with.
7. Admissions per second at saturation: 8 connections closed-loop, pods that fit, predictions on (the client
   runs in this process: on 2 cores it takes CPU from the server, so this is the system's figure).
8. High availability (``--replicas N``, default 2): N-1 more replicas against the same API server: each one's
   RSS, the API server's CPU per second of churn and its RSS with 1 and with N replicas watching; then one
   replica is stopped and restarted while 500 writes/s stream in: seconds to ready again, and its lag once ready.
9. The snapshot path (``--no-snapshot-path`` skips it) on the same cluster as ``kubectl get -o json`` prints it:
   ``serve --cluster-snapshot`` ready, RSS, preview p99 (bench/snapshot.py), and ``kubectl preempt-preview
   --snapshot-cache`` cached; each the median of ``--snapshot-rounds`` starts (default 3; the previews' p99 over
   every round's samples pooled): one start's ready spread over 12.6-18.3 s at 15,000 nodes in eight runs.

Every process started is stopped by PID and the etcd data directory is removed after each size. Free memory is
watched: below 4 GiB available the run stops, saying in which phase and the RSS of etcd, kube-apiserver, the loader
and each replica then; their peaks are rows of the table. The load average before and after each size is
printed: figures taken while other jobs run are noisy. One table follows, with the growth from the smallest to
the largest size, and the issue's targets checked on the largest size.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import contextlib
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from kubectl_dump import kubectl_objects  # noqa: E402

from webhook.routes import MUTATE_PODS_PATH, PREDICTION_ANNOTATION, READYZ_PATH  # noqa: E402
from webhook.verify.controlplane import ControlPlane, kube_bin_dir, stop_process  # noqa: E402

PREVIEW_PATH = "/preview"
MIN_AVAILABLE_GIB = 4.0
ETCD_QUOTA_BYTES = 16 * 2**30
# kube-apiserver's GOMEMLIMIT: above its live heap at 15,000 nodes, below what 24 GB leave it beside etcd, two
# replicas and the 4 GiB floor (see ``apiserver_env``).
APISERVER_MEMORY_LIMIT = "9GiB"
LAG_POLL_SECONDS = 0.1
# The restart under churn: churn writes timed for the restarted replica's lag once it is ready, and the longest the
# churn may go on (wait_ready's own limit, and then some).
RESTART_LAG_SECONDS = 15.0
RESTART_CHURN_CAP_SECONDS = 1200.0
KINDS = ("fit", "preempt", "unschedulable")
OUTCOME = {"fit": "Fits", "preempt": "Preempts", "unschedulable": "Unschedulable"}
Figures = dict[str, Any]


# ---- the cluster, as the loader reads it -------------------------------------------------------------------------
def api_object(raw: dict[str, Any], stored: bool = False) -> dict[str, Any]:
    """A generated object (as kubectl prints it) as a client creates it: no server-set metadata, and for a pod no
    ``spec.priority`` (the Priority admission plugin sets it from the class and refuses a pod that brings one);
    a running pod's conditions and container statuses (with their actual resources), as a v1.37 kubelet writes
    them. ``stored``: as it is written into etcd past admission (uid, creation time and priority kept)."""
    meta = raw["metadata"]
    for key in ("resourceVersion",) if stored else ("resourceVersion", "uid", "creationTimestamp"):
        meta.pop(key, None)
    if raw["kind"] == "Pod":
        spec, status = raw["spec"], raw["status"]
        if not stored:
            spec.pop("priority", None)
        started = status["startTime"]
        status["conditions"] = [{"type": kind, "status": "True", "lastTransitionTime": started}
                                for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                             "PodScheduled")]
        container = spec["containers"][0]
        status["containerStatuses"] = [{
            "name": container["name"], "image": container["image"], "ready": True, "started": True,
            "restartCount": 0, "imageID": f"{container['image']}@sha256:{'2' * 64}",
            "containerID": f"containerd://{'3' * 64}", "state": {"running": {"startedAt": started}},
            # What a v1.33+ kubelet reports for a running container (in-place resize): its actual resources.
            **({"resources": json.loads(json.dumps(container["resources"]))} if "resources" in container else {})}]
    return raw


def ndjson(nodes: int, pods_per_node: int, stored: bool = False) -> Iterator[bytes]:
    for raw in kubectl_objects(nodes, pods_per_node):
        yield json.dumps(api_object(raw, stored), separators=(",", ":")).encode() + b"\n"


# ---- processes ---------------------------------------------------------------------------------------------------
def loader_binary(kube_bin: Path, workdir: Path) -> Path:
    """scaleload from the release's directory (conformance/build puts it there), else built now (Go's cache makes
    a rebuild take seconds)."""
    found = kube_bin / "scaleload"
    if os.access(found, os.X_OK):
        return found
    out = workdir / "scaleload"
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -trimpath"}
    subprocess.run(["go", "build", "-o", str(out), "./cmd/scaleload"], cwd=ROOT / "conformance", env=env, check=True)
    return out


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


# /proc/stat's per-CPU columns after the name (proc(5)), in clock ticks.
_STAT_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_ticks(cpus: set[int], stat: str | None = None) -> dict[str, int]:
    """The clock ticks of ``cpus`` by /proc/stat column, summed. ``steal`` is the time the hypervisor ran something
    else while this machine's CPU had work: the neighbour no pinning inside the machine can keep away."""
    text = Path("/proc/stat").read_text() if stat is None else stat
    found = dict.fromkeys(_STAT_COLUMNS, 0)
    for line in text.splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            for column, value in zip(_STAT_COLUMNS, values, strict=False):
                found[column] += int(value)
    return found


class PhaseUse:
    """What one phase's windows cost besides the webhook, summed over its windows, per second of them:
    kube-apiserver's CPU, and on the webhook's CPUs the time stolen by the hypervisor and the kernel's interrupt
    work (irq + softirq: the loopback's packets)."""

    def __init__(self, api_pid: int, cpus: set[int]) -> None:
        self.api_pid, self.cpus = api_pid, cpus
        self.seconds = self.api_cpu = 0.0
        self.ticks = dict.fromkeys(_STAT_COLUMNS, 0)

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        api_cpu, began, ticks = cpu_seconds(self.api_pid), time.monotonic(), cpu_ticks(self.cpus)
        try:
            yield
        finally:
            self.api_cpu += cpu_seconds(self.api_pid) - api_cpu
            self.seconds += time.monotonic() - began
            for column, value in cpu_ticks(self.cpus).items():
                self.ticks[column] += value - ticks[column]

    def api_cores(self) -> float:
        return self.api_cpu / self.seconds if self.seconds > 0 else float("nan")

    def webhook_cpu(self, prefix: str) -> Figures:
        per_tick = 1 / os.sysconf("SC_CLK_TCK") / self.seconds if self.seconds > 0 else float("nan")
        return {f"{prefix} steal": self.ticks["steal"] * per_tick,
                f"{prefix} interrupts": (self.ticks["irq"] + self.ticks["softirq"]) * per_tick}


def available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return float("inf")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class MemoryGuard:
    """Stops the run (by PID, every process registered) when the machine's available memory falls below the floor.
    Every second it also samples the RSS of every process registered under a name (etcd, kube-apiserver, scaleload,
    each replica): the peak per name is a figure, and where the memory went is printed when the floor trips."""

    def __init__(self, floor_gib: float = MIN_AVAILABLE_GIB) -> None:
        self.floor = floor_gib
        self.tripped = ""
        self.processes: list[subprocess.Popen[bytes]] = []
        self.names: dict[int, str] = {}
        self.peaks: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.phase = ""
        self.lowest = float("inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _sample(self) -> dict[str, float]:
        found: dict[str, float] = {}
        for process in list(self.processes):
            name = self.names.get(process.pid)
            if name is None or process.poll() is not None:
                continue
            try:
                found[name] = memory_mib(process.pid)[0]
            except (OSError, KeyError):
                continue
        return found

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            available = available_gib()
            self.lowest = min(self.lowest, available)
            self.last = self._sample()
            for name, rss in self.last.items():
                self.peaks[name] = max(self.peaks.get(name, 0.0), rss)
            if available < self.floor and not self.tripped:
                where = ", ".join(f"{name} {rss:,.0f} MiB" for name, rss in sorted(self.last.items()))
                self.tripped = (f"available memory {available:.1f} GiB < {self.floor:g} GiB during {self.phase or '-'}"
                                f" ({where}): stopping")
                print(f"!! {self.tripped}", file=sys.stderr, flush=True)
                for process in list(self.processes):
                    if process.poll() is None:
                        process.send_signal(signal.SIGKILL)

    def enter(self, phase: str) -> None:
        """Name the phase now running (in the message when the floor trips) and print the memory at its start."""
        self.phase = phase
        where = ", ".join(f"{name} {rss:,.0f}" for name, rss in sorted(self._sample().items()))
        print(f"   [{phase}] {available_gib():.1f} GiB available; RSS MiB: {where or '-'}", flush=True)

    def reset_peaks(self) -> None:
        self.peaks.clear()
        self.names.clear()

    def check(self) -> None:
        if self.tripped:
            raise SystemExit(self.tripped)

    def close(self) -> None:
        self._stop.set()


GUARD: MemoryGuard | None = None


class Cores:
    """Where processes run once the webhook is ready (``--isolate``, on machines of 2+ CPUs): the control plane and
    the churn generator on the last CPU, the webhook's replicas and the probing client on the first, as a webhook
    runs in a cluster on other machines than the API server. Without it, the 500 writes/s the API server handles
    and the load generator take the webhook's CPU, and the latencies under churn measure the sharing, not the
    webhook (bench/scale.py at 1,000 nodes: serve got half a core while churning). The lists before /readyz run
    unpinned. Other jobs on the machine are not pinned: they still share both."""

    def __init__(self) -> None:
        count = os.cpu_count() or 1
        self.active = False
        self.webhook = {0}
        self.control = {count - 1}

    def pin(self, pid: int, cpus: set[int]) -> None:
        """Every thread of ``pid`` (threads made later inherit the creator's set)."""
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task.name), cpus)

    def control_plane(self) -> Callable[[], None] | None:
        """A ``preexec_fn`` pinning a new process to the control plane's CPU (None when not isolating)."""
        cpus = self.control
        return (lambda: os.sched_setaffinity(0, cpus)) if self.active else None

    def webhook_side(self) -> Callable[[], None] | None:
        cpus = self.webhook
        return (lambda: os.sched_setaffinity(0, cpus)) if self.active else None

    def isolate(self, plane_pids: list[int], replicas: list[Replica]) -> None:
        if (os.cpu_count() or 1) < 2:
            return
        self.active = True
        for pid in plane_pids:
            self.pin(pid, self.control)
        for replica in replicas:
            self.pin(replica.process.pid, self.webhook)
        os.sched_setaffinity(0, self.webhook)  # this thread: the prober (and the threads it starts)

    def release(self) -> None:
        if self.active:
            self.active = False
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


CORES = Cores()


def phase(name: str) -> None:
    if GUARD is not None:
        GUARD.enter(name)


def watched(process: subprocess.Popen[bytes], name: str = "") -> subprocess.Popen[bytes]:
    """Register ``process`` with the memory guard (killed when the floor trips; its RSS sampled under ``name``)."""
    if GUARD is not None:
        GUARD.processes.append(process)
        if name:
            GUARD.names[process.pid] = name
    return process


@dataclass
class Replica:
    """One ``preempt-guard serve --kubeconfig`` process."""

    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log: Path
    started: float

    def stop(self) -> None:
        stop_process(self.process, 30)

    def rss(self) -> tuple[float, float]:
        return memory_mib(self.process.pid)

    def metrics(self, names: tuple[str, ...] = (), prefix: str = "preemptguard_informer_") -> dict[str, float]:
        """The series starting with ``prefix``; with ``names``, only those are asked for (``?name[]=``): the whole
        text costs the webhook's event loop 2-3 ms at 15,000 nodes, the Pod informer's resourceVersion alone
        a fraction of that."""
        connection = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=10)
        query = "?" + "&".join(f"name[]={name}" for name in names) if names else ""
        try:
            connection.request("GET", "/metrics" + query)
            text = connection.getresponse().read().decode()
        finally:
            connection.close()
        values: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith(prefix):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def wait_first_exposure_scan(self, timeout: float = 600) -> float:
        """Seconds from start until the exposure scan has counted every namespace once (its first pass ends): until
        then it shares the event loop with admissions (a fifth of it, in 1 ms slices)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            passes = self.metrics(("preemptguard_exposure_scan_duration_seconds_count",), "preemptguard_exposure_")
            if not passes:
                return float("nan")  # no exposure scan in this server
            if max(passes.values()) >= 1:
                return time.monotonic() - self.started
            time.sleep(0.2)
        raise SystemExit(f"{self.log.name}: no exposure scan pass within {timeout:g}s")

    def wait_ready(self, timeout: float = 900) -> float:
        context = insecure_context()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"serve exited with {self.process.returncode}: {tail(self.log)}")
            if GUARD is not None:
                GUARD.check()
            try:
                connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=5)
                connection.request("GET", READYZ_PATH)
                if connection.getresponse().status == 200:
                    return time.monotonic() - self.started
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"serve not ready after {timeout:g}s: {tail(self.log)}")


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def insecure_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def start_replica(kubeconfig: Path, workdir: Path, name: str, tree: Path = ROOT) -> Replica:
    """``preempt-guard serve --kubeconfig`` of the checkout ``tree`` (this one, or bench/churn_ab.py's baseline)."""
    from webhook.verify.controlplane import free_port

    config = workdir / "preemptguard.yaml"
    config.write_text("prediction:\n  previewsPerMinute: 0\n", encoding="utf-8")  # the bench is one caller
    port, metrics_port = free_port(), free_port()
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--kubeconfig", str(kubeconfig), "--tls-self-signed",
             "--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics_port), "--config", str(config),
             "--log-level", "warning"],
            stdout=out, stderr=subprocess.STDOUT, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
            preexec_fn=CORES.webhook_side())
    return Replica(watched(process, name), port, metrics_port, log, time.monotonic())


# ---- probes ------------------------------------------------------------------------------------------------------
def probe_pod(kind: str, serial: int) -> dict[str, Any]:
    """A pending pod that fits, must preempt, or cannot be placed on the generated cluster (16-CPU nodes requested
    to 88-99%). The one that cannot be placed asks more CPU than any node has, so no preemption can place it
    (still searched for: the resources are not unresolvable); 12 CPUs of class standard preempted batch pods on
    some node of 15,000."""
    cls, cpu, mem = {"fit": ("standard", 50, 64), "preempt": ("high", (2000, 3000, 4000)[serial % 3], 2048),
                     "unschedulable": ("standard", 17000, 1024)}[kind]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"probe-{kind}-{serial}", "namespace": f"team-{serial % 20:02d}",
                         "labels": {"app": "probe"}},
            "spec": {"priorityClassName": cls, "containers": [{
                "name": "c", "image": "registry.example/probe:1",
                "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}]}}


def admission_review(pod: dict[str, Any], uid: str) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"], "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                     "groups": ["system:serviceaccounts", "system:authenticated"]},
        "object": pod, "oldObject": None, "dryRun": False}}


def predicted_outcome(answer: dict[str, Any]) -> str:
    """The outcome in the ``preemptguard.io/prediction`` annotation of an admission response's patch."""
    response = answer.get("response") or {}
    if response.get("allowed") is not True:
        return f"denied: {response.get('status')}"
    annotation: object = None
    for op in json.loads(base64.b64decode(response.get("patch") or "W10=")):
        value = op.get("value")
        if op.get("path") == "/metadata/annotations" and isinstance(value, dict):
            annotation = value.get(PREDICTION_ANNOTATION)
        elif op.get("path") == "/metadata/annotations/" + PREDICTION_ANNOTATION.replace("/", "~1"):
            annotation = value
    return str(json.loads(annotation).get("outcome")) if isinstance(annotation, str) else "no prediction"


class Prober:
    """``POST /preview`` and ``POST /mutate/pods`` over one keep-alive TLS connection, each answer checked."""

    def __init__(self, replica: Replica, token: str) -> None:
        self.replica = replica
        self.token = token
        self.serial = 0
        self.tolerate_missing = False  # under churn: an admission past its budget counts, it does not stop the run
        self.missing = 0
        self.connection = http.client.HTTPSConnection("127.0.0.1", replica.port, context=insecure_context(),
                                                      timeout=60)

    def warm_up(self, endpoint: str, kind: str, seconds: float = 120.0) -> None:
        """Calls until the answer carries a prediction (``/readyz`` waits for the informers and the predictor's
        index, so the first call should carry one; an answer without one would be a readiness bug, shown in
        the "start to the first admission with a prediction" row)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.call(endpoint, kind)
                return
            except SystemExit as exc:
                if "no prediction" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def call(self, endpoint: str, kind: str) -> float:
        """One request; its latency in ms (SystemExit when the answer is not the expected outcome)."""
        self.serial += 1
        pod = probe_pod(kind, self.serial)
        if endpoint == "preview":
            path, body = PREVIEW_PATH, {"pod": pod}
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        else:
            path, body = MUTATE_PODS_PATH, admission_review(pod, f"probe-{self.serial}")
            headers = {"Content-Type": "application/json"}
        data = json.dumps(body).encode()
        began = time.perf_counter()
        self.connection.request("POST", path, body=data, headers=headers)
        response = self.connection.getresponse()
        payload = response.read()
        elapsed = (time.perf_counter() - began) * 1000
        answer = json.loads(payload) if payload else {}
        if response.status != 200:
            raise SystemExit(f"{path} {kind}: HTTP {response.status} {payload[:300]!r}")
        outcome = answer["results"][0]["outcome"] if endpoint == "preview" else predicted_outcome(answer)
        if outcome == "no prediction" and self.tolerate_missing:
            self.missing += 1  # allowed without a prediction once its budget ran out: its latency still counts
            return elapsed
        if outcome != OUTCOME[kind]:
            raise SystemExit(f"{path} {kind}: predicted {outcome}, expected {OUTCOME[kind]}: {payload[:300]!r}")
        return elapsed

    def close(self) -> None:
        self.connection.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


Latencies = dict[tuple[str, str], list[float]]  # (endpoint, pod kind) -> ms


class Probing(Protocol):
    """What ``latency_figures`` asks of a prober (``Prober``)."""

    def warm_up(self, endpoint: str, kind: str) -> None: ...

    def call(self, endpoint: str, kind: str) -> float: ...


def latency_figures(prober: Probing, samples: int, until: Callable[[], bool] | None = None,
                    found: Latencies | None = None) -> Figures:
    """p50/p99 per endpoint and pod kind: ``samples`` each, round-robin (or until ``until()`` says stop). With
    ``found`` (the latencies of a phase's earlier windows) this window's are added to it, and the percentiles are
    over them all."""
    found = {} if found is None else found
    for key in ((e, k) for e in ("mutate", "preview") for k in KINDS):
        found.setdefault(key, [])
    for endpoint, kind in found:  # warm-up: the first prediction of a kind builds its orderings
        prober.warm_up(endpoint, kind)
    rounds = 0
    while (rounds < samples) if until is None else not until():
        for (endpoint, kind), values in found.items():
            values.append(prober.call(endpoint, kind))
        rounds += 1
    return latency_percentiles(found)


def latency_percentiles(found: Latencies) -> Figures:
    figures: Figures = {}
    for (endpoint, kind), values in found.items():
        figures[f"{endpoint} {kind} p50"] = percentile(values, 50)
        figures[f"{endpoint} {kind} p99"] = percentile(values, 99)
    figures["probe samples"] = len(found[("mutate", KINDS[0])])
    return figures


# ---- churn and informer lag --------------------------------------------------------------------------------------
class LagPoller:
    """Polls the replicas' Pod informer resourceVersion every ``LAG_POLL_SECONDS`` (wall clock, as scaleload's)."""

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self.samples: dict[int, tuple[list[int], list[int]]] = {id(r): ([], []) for r in replicas}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LagPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        key = 'preemptguard_informer_resource_version{kind="Pod"}'
        while not self._stop.wait(LAG_POLL_SECONDS):
            for replica in self.replicas:
                try:
                    rv = int(replica.metrics(("preemptguard_informer_resource_version",)).get(key, 0))
                except (OSError, http.client.HTTPException, ValueError):
                    continue
                times, rvs = self.samples[id(replica)]
                times.append(time.time_ns())
                rvs.append(max(rv, rvs[-1]) if rvs else rv)

    def lags(self, replica: Replica, records: list[dict[str, int]], after_ns: int = 0) -> list[float]:
        """Seconds from each write's acknowledgement to the first poll that saw its resourceVersion applied
        (inf: never seen); only writes acknowledged after ``after_ns``."""
        times, rvs = self.samples[id(replica)]
        return lags_seen(times, rvs, records, after_ns)


def lags_seen(times: list[int], rvs: list[int], records: list[dict[str, int]], after_ns: int = 0) -> list[float]:
    """Seconds from each write's acknowledgement to the first time (``times``, Unix ns) a resourceVersion at least
    its own was seen (``rvs``, not decreasing); 0 when seen before the writer had its answer (a watch can deliver
    the event first); inf: never seen. Only writes acknowledged after ``after_ns``."""
    lags = []
    for record in records:
        if record["ack"] < after_ns:
            continue
        i = bisect.bisect_left(rvs, record["rv"])
        # Seen before the answer: lag 0, not the next sighting after the answer (the churn's last write has none).
        lags.append(max(0, times[i] - record["ack"]) / 1e9 if i < len(times) else float("inf"))
    return lags


class BareWatch:
    """``scaleload watch`` beside the webhook: every pod event's arrival at a client-go watch that does nothing with
    it. Held against the churn's writes as the webhook's gauge is, it splits the informer's lag: what the API
    server takes to deliver an event, and what the webhook takes after that."""

    def __init__(self, loader: Path, kubeconfig: Path, out: Path) -> None:
        self.loader, self.kubeconfig, self.out = loader, kubeconfig, out
        self.process: subprocess.Popen[bytes] | None = None
        self.summary: dict[str, int] = {}

    def __enter__(self) -> BareWatch:
        self.process = watched(subprocess.Popen(
            [str(self.loader), "watch", "-kubeconfig", str(self.kubeconfig), "-out", str(self.out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=CORES.control_plane()))
        assert self.process.stderr is not None
        line = self.process.stderr.readline()  # "watching from RV": the watch is open before the churn starts
        if not line.startswith(b"scaleload: watching from"):
            raise SystemExit(f"scaleload watch: {line.decode()}{self.process.stderr.read().decode()[-2000:]}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            stdout, _ = self.process.communicate(timeout=30)
            self.summary = json.loads(stdout or b"{}")

    def lags(self, records: list[dict[str, int]], after_ns: int = 0) -> list[float]:
        """The churn's writes (acknowledged after ``after_ns``) against the arrivals (read once the watch has
        stopped)."""
        times: list[int] = []
        rvs: list[int] = []
        for line in self.out.read_text().splitlines():
            arrival = json.loads(line)
            times.append(arrival["at"])
            rvs.append(max(arrival["rv"], rvs[-1]) if rvs else arrival["rv"])
        return lags_seen(times, rvs, records, after_ns)


def run_churn(loader: Path, kubeconfig: Path, nodes: int, rate: float, seconds: float, out: Path,
              prefix: str, resource: str = "pods",
              ) -> tuple[subprocess.Popen[bytes], Callable[[], tuple[Figures, list[dict[str, int]]]]]:
    """Start scaleload churn (of pods, or of ConfigMaps no replica watches); the callable waits for it and returns its
    summary and its write records."""
    process = watched(subprocess.Popen(
        [str(loader), "churn", "-kubeconfig", str(kubeconfig), "-rate", str(rate), "-duration", f"{seconds}s",
         "-nodes", str(nodes), "-prefix", prefix, "-out", str(out), "-resource", resource],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=CORES.control_plane()))

    def finish() -> tuple[Figures, list[dict[str, int]]]:
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"scaleload churn failed: {stderr.decode()[-2000:]}")
        records = [json.loads(line) for line in out.read_text().splitlines() if line]
        return json.loads(stdout), records

    return process, finish


@dataclass
class ChurnPool:
    """One churn phase's windows: the probes' latencies, the lags of the first replica and of the bare watch, and
    each window's achieved rate, so the figures are over every window."""

    latencies: Latencies = field(default_factory=dict)
    lags: list[float] = field(default_factory=list)
    delivered: list[float] = field(default_factory=list)
    achieved: list[float] = field(default_factory=list)
    missing: int = 0
    watches: int = 0
    dropped: int = 0
    errors: int = 0


def churn_phase(loader: Path, kubeconfig: Path, nodes: int, rate: float, seconds: float, replicas: list[Replica],
                workdir: Path, prefix: str, prober: Prober | None = None, samples: int = 0,
                pool: ChurnPool | None = None) -> Figures:
    """Churn at ``rate`` for ``seconds`` while (optionally) probing latencies; the lag of the first replica, and of
    a bare watch beside it (the API server's own part). With ``pool`` (a phase's earlier windows) the figures are
    over its windows and this one."""
    pool = ChurnPool() if pool is None else pool
    with LagPoller(replicas) as poller, BareWatch(loader, kubeconfig, workdir / f"{prefix}-watch.ndjson") as bare:
        process, finish = run_churn(loader, kubeconfig, nodes, rate, seconds, workdir / f"{prefix}.ndjson", prefix)
        figures: Figures = {}
        if prober is not None:
            prober.tolerate_missing, prober.missing = True, 0
            try:
                figures = latency_figures(prober, samples, until=lambda: process.poll() is not None,
                                          found=pool.latencies)
            finally:
                prober.tolerate_missing = False
            pool.missing += prober.missing
            figures["without prediction"] = pool.missing
        summary, records = finish()
        last = max((r["rv"] for r in records), default=0)
        deadline = time.monotonic() + 15  # let every replica catch up with the last write (or show it cannot)
        while time.monotonic() < deadline and any(
                (poller.samples[id(r)][1] or [0])[-1] < last for r in replicas):
            time.sleep(LAG_POLL_SECONDS)
    pool.lags += poller.lags(replicas[0], records)
    pool.delivered += bare.lags(records)
    pool.achieved.append(summary["achieved"])
    pool.watches += bare.summary.get("watches", 0)
    pool.dropped += summary["dropped"]
    pool.errors += summary["errors"]
    lags, delivered = pool.lags, pool.delivered
    figures.update({"bare watch lag p50": percentile(delivered, 50), "bare watch lag p99": percentile(delivered, 99),
                    "bare watch lag max": max(delivered or [0]), "bare watch opened": pool.watches})
    # Windows of equal length: the phase's rate is their mean.
    figures.update({"churn target": rate, "churn achieved": sum(pool.achieved) / len(pool.achieved),
                    "churn dropped": pool.dropped, "churn errors": pool.errors,
                    "lag p50": percentile(lags, 50), "lag p99": percentile(lags, 99), "lag max": max(lags or [0])})
    return figures


def unwatched_churn_phase(loader: Path, kubeconfig: Path, nodes: int, rate: float, seconds: float,
                          workdir: Path, prober: Prober, samples: int, pool: ChurnPool | None = None,
                          prefix: str = "unwatched") -> Figures:
    """Latencies while the control plane churns ConfigMaps at ``rate`` (no replica watches them, the LagPoller's
    /metrics polls as under churn): what the webhook's p99s become with the API server, etcd and the load generator
    as busy next door as under the pod churn, none of its events reaching the webhook. On this 2-core machine they
    share the last-level cache and memory with the webhook's CPU; the pod churn's p99s over these are what the
    webhook's own handling of 500 events/s costs its admissions. With ``pool``, over its windows and this one (only
    its latencies, achieved rates and admissions without prediction are used)."""
    pool = ChurnPool() if pool is None else pool
    with LagPoller([prober.replica]):
        # A prefix per window: scaleload keeps its last objects (its pool), and names them prefix-N.
        process, finish = run_churn(loader, kubeconfig, nodes, rate, seconds, workdir / f"{prefix}.ndjson",
                                    prefix, resource="configmaps")
        prober.tolerate_missing, prober.missing = True, 0
        try:
            figures = latency_figures(prober, samples, until=lambda: process.poll() is not None,
                                      found=pool.latencies)
        finally:
            prober.tolerate_missing = False
        pool.missing += prober.missing
        summary, _ = finish()
    pool.achieved.append(summary["achieved"])
    return {**{f"unwatched {k}": v for k, v in figures.items()}, "unwatched without prediction": pool.missing,
            "unwatched achieved": sum(pool.achieved) / len(pool.achieved)}


# ---- saturation ----------------------------------------------------------------------------------------------------
async def _saturate(port: int, connections: int, seconds: float) -> tuple[int, int]:
    import aiohttp

    bodies = [json.dumps(admission_review(probe_pod("fit", i), f"sat-{i}")).encode() for i in range(200)]
    done = errors = 0
    stop_at = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(ssl=insecure_context(), limit=connections)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:

        async def worker(offset: int) -> None:
            nonlocal done, errors
            i = offset
            while time.monotonic() < stop_at:
                i += connections
                async with session.post(f"https://127.0.0.1:{port}{MUTATE_PODS_PATH}", data=bodies[i % len(bodies)],
                                        headers={"Content-Type": "application/json"}) as response:
                    payload = await response.read()
                ok = response.status == 200 and predicted_outcome(json.loads(payload)) == "Fits"
                done += ok
                errors += not ok

        await asyncio.gather(*(worker(i) for i in range(connections)))
    return done, errors


def saturation(replica: Replica, seconds: float, connections: int = 8) -> Figures:
    """Closed-loop admissions; with ``--isolate`` the client runs on the control plane's (idle) CPU, not on the
    webhook's."""
    if CORES.active:
        os.sched_setaffinity(0, CORES.control)
    try:
        asyncio.run(_saturate(replica.port, connections, 1.0))  # warm-up
        began = time.monotonic()
        done, errors = asyncio.run(_saturate(replica.port, connections, seconds))
    finally:
        if CORES.active:
            os.sched_setaffinity(0, CORES.webhook)
    return {"admissions/s at saturation": done / (time.monotonic() - began), "saturation errors": errors}


# ---- one size ----------------------------------------------------------------------------------------------------
def load_cluster(loader: Path, plane: ControlPlane, nodes: int, pods_per_node: int, via: str) -> Figures:
    """Load the cluster (``via`` "api": create + status through the API; "etcd": nodes and pods straight into etcd)
    and wait until the API server's watch cache serves every pod."""
    command = [str(loader), "load", "-kubeconfig", str(plane.kubeconfig())]
    if via == "etcd":
        command += ["-etcd", f"http://127.0.0.1:{plane.etcd_port}"]
    process = watched(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE), "scaleload")
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    began = time.monotonic()
    try:
        for line in ndjson(nodes, pods_per_node, stored=via == "etcd"):
            process.stdin.write(line)
        process.stdin.close()
    except BrokenPipeError:
        pass
    out, err = process.stdout.read(), process.stderr.read()
    process.wait()
    if process.returncode != 0:
        raise SystemExit(f"scaleload load failed ({process.returncode}): {err.decode()[-2000:]}")
    summary = json.loads(out)
    pods = summary["kinds"]["Pod"]
    expected = nodes * pods_per_node
    while served_pods(plane) < expected:  # the API server's watch cache has every pod (etcd writes come by watch)
        time.sleep(0.2)
    return {"load via": via, "load seconds": time.monotonic() - began, "load objects": summary["objects"],
            "load objects/s": summary["objectsPerSecond"], "load requests/s": summary["requestsPerSecond"],
            "load pods/s": pods["objects"] / pods["seconds"]}


def served_pods(plane: ControlPlane) -> int:
    """How many pods the API server serves (a consistent list: from its watch cache once that has caught up)."""
    status, body = plane.request("GET", "/api/v1/pods", query={"limit": "1"}, timeout=120)
    if status != 200:
        raise SystemExit(f"list pods: {status} {str(body)[:300]}")
    return len(body["items"]) + int(body["metadata"].get("remainingItemCount") or 0)


def apiserver_pid(plane: ControlPlane) -> int:
    return next(c.process.pid for c in plane.components if c.name == "kube-apiserver")


def settle(pid: int, window: float = 2.0, idle_cores: float = 0.25, timeout: float = 300) -> float:
    """Seconds until ``pid`` uses under ``idle_cores`` over ``window``: the cluster is "held" by the API server.

    Objects written straight into etcd reach the watch cache first (served_pods sees them) and kube-apiserver's own
    pod informer (ServiceAccount token checks) later: profiled at 15,000 nodes, it was still taking 450,000 watch
    events a minute after the load while serve listed, and the two shared the cores."""
    began = time.monotonic()
    last = cpu_seconds(pid)
    while time.monotonic() - began < timeout:
        time.sleep(window)
        now = cpu_seconds(pid)
        if (now - last) / window < idle_cores:
            break
        last = now
    return time.monotonic() - began


def apiserver_env(args: argparse.Namespace) -> dict[str, str]:
    """Go runtime knobs for kube-apiserver (no semantic change): a soft memory limit, so its garbage collector runs
    before the heap doubles (GOGC=100) instead of after. At 5,000 nodes its live heap was 1.8-2.3 GB (the watch
    cache's pods, and its own informer's pods for ServiceAccount token checks: two copies, as in every cluster)
    while its RSS reached 5.3 GB."""
    return {"GOMEMLIMIT": args.apiserver_memory_limit} if args.apiserver_memory_limit else {}


def measure_size(args: argparse.Namespace, nodes: int, kube_bin: Path, workdir: Path) -> Figures:
    figures: Figures = {"nodes": nodes, "pods": nodes * args.pods_per_node, "loadavg before": load_average()}
    print(f"\n== {nodes:,} nodes, {nodes * args.pods_per_node:,} pods (load average {figures['loadavg before']}; "
          f"{available_gib():.1f} GiB available)", flush=True)
    loader = loader_binary(kube_bin, workdir)
    plane = ControlPlane(workdir / f"plane-{nodes}", kube_bin, with_scheduler=False,
                         extra_etcd_args=["--quota-backend-bytes", str(ETCD_QUOTA_BYTES)],
                         component_env={"kube-apiserver": apiserver_env(args)})
    replicas: list[Replica] = []
    try:
        if GUARD is not None:
            GUARD.reset_peaks()
        plane.start()
        for component in plane.components:
            watched(component.process, component.name)
        via = args.load_via if args.load_via != "auto" else ("api" if nodes <= 1000 else "etcd")
        phase(f"load via {via}")
        figures.update(load_cluster(loader, plane, nodes, args.pods_per_node, via))
        print(f"loaded {figures['load objects']:,} objects via {via} in {figures['load seconds']:.0f}s "
              f"({figures['load objects/s']:,.0f} objects/s, {figures['load requests/s']:,.0f} requests/s)", flush=True)
        kubeconfig, token = plane.kubeconfig(), plane.tokens["admin"]
        api_pid = apiserver_pid(plane)
        phase("API server settles")
        figures["apiserver settle seconds"] = settle(api_pid)
        figures["apiserver RSS, loaded"] = memory_mib(api_pid)[0]

        phase("serve lists")
        api_cpu = cpu_seconds(api_pid)
        first = start_replica(kubeconfig, workdir, "replica-0")
        replicas.append(first)
        figures["ready"] = first.wait_ready()
        # Whose CPU the time to ready is: the webhook's (list decode, conversion, index) or the API server's.
        figures["CPU to ready"] = cpu_seconds(first.process.pid)
        figures["apiserver CPU to ready"] = cpu_seconds(api_pid) - api_cpu
        rss, peak = first.rss()
        metrics = first.metrics()
        figures.update({"RSS ready": rss, "RSS peak at ready": peak,
                        "RSS per pod": rss * 2**20 / figures["pods"],
                        "listed MB": sum(v for k, v in metrics.items() if k.startswith(
                            "preemptguard_informer_listed_bytes_total")) / 1e6})
        print(f"ready in {figures['ready']:.1f}s, {figures['listed MB']:.0f} MB listed, RSS {rss:.0f} MiB", flush=True)

        if args.isolate:
            CORES.isolate([c.process.pid for c in plane.components], replicas)
        figures["isolated"] = CORES.active
        webhook_cpus = CORES.webhook if CORES.active else set(range(os.cpu_count() or 1))
        prober = Prober(first, token)
        prober.warm_up("mutate", "fit")
        figures["predicting"] = time.monotonic() - first.started
        phase("first exposure scan")
        # Idle means steady: the exposure scan's first pass (every pod matched against its namespace's PDBs) is a
        # start-up transient like the lists, timed in its own row.
        figures["exposure scanned"] = first.wait_first_exposure_scan()
        # Idle, ConfigMap churn next door and pod churn take turns, ``--rounds`` windows each, and each phase's
        # figures are over all its windows: the targets hold one phase's p99 against another's, and one window
        # each, minutes apart, also measured how the shared machine drifted between them (the idle p99s of one
        # admission path spread over 3.25-6.52 ms in eight runs at 15,000 nodes, the ConfigMap control's ratio
        # to idle over x0.66-1.80).
        idle, unwatched = PhaseUse(api_pid, webhook_cpus), PhaseUse(api_pid, webhook_cpus)
        churned = PhaseUse(api_pid, webhook_cpus)
        # The idle windows pooled, and apart: the first (before any churn) and those a minute after a pod churn.
        idle_found: Latencies = {}
        idle_apart: tuple[Latencies, Latencies] = ({}, {})
        idle_missing = 0
        unwatched_pool, churn_pool = ChurnPool(), ChurnPool()
        rounds = args.rounds
        window_samples, window_seconds = max(1, args.samples // rounds), args.churn_seconds / rounds
        churn: Figures = {}
        for turn in range(1, rounds + 1):
            phase(f"idle latencies ({turn}/{rounds})")
            # Idle means the control plane too: having served the lists (1.2 GB at 15,000 nodes) or a churn,
            # kube-apiserver could still be busy next door. Its CPU meanwhile is a row (0.02 cores at every size
            # of the run on f7e2b5c).
            settled = settle(api_pid)
            if turn == 1:
                figures["apiserver settle before idle"] = settled
            # An admission past its budget (allowed without a prediction) is counted, its latency kept, as under
            # churn: at 15,000 nodes one idle preempt probe of hundreds did, and stopping there lost every later
            # figure.
            prober.tolerate_missing, prober.missing = True, 0
            window: Latencies = {}
            try:
                with idle.window():
                    latency_figures(prober, window_samples, found=window)
            finally:
                prober.tolerate_missing = False
            idle_missing += prober.missing
            for key, values in window.items():
                idle_found.setdefault(key, []).extend(values)
                idle_apart[turn > 1].setdefault(key, []).extend(values)

            phase(f"unwatched churn ({turn}/{rounds})")
            with unwatched.window():
                figures.update(unwatched_churn_phase(loader, kubeconfig, nodes, args.churn_rate, window_seconds,
                                                     workdir, prober, window_samples, unwatched_pool,
                                                     f"unwatched-{turn}"))

            phase(f"churn ({turn}/{rounds})")
            with churned.window():
                churn = churn_phase(loader, kubeconfig, nodes, args.churn_rate, window_seconds, [first], workdir,
                                    f"churn-base-{turn}", prober, window_samples, churn_pool)
        figures["latency rounds"] = rounds
        figures["idle without prediction"] = idle_missing
        figures.update(latency_percentiles(idle_found))
        for name, found in zip(("first idle", "idle after churn"), idle_apart, strict=True):
            if found:
                figures.update({f"{name} {k}": v for k, v in latency_percentiles(found).items()
                                if k.startswith("mutate")})
        figures["apiserver CPU/s, idle"] = idle.api_cores()
        figures["apiserver CPU/s, unwatched"] = unwatched.api_cores()
        figures["apiserver CPU/s, 1 replica"] = churned.api_cores()
        for prefix, use in (("idle", idle), ("unwatched", unwatched), ("churn", churned)):
            figures.update(use.webhook_cpu(f"webhook CPU, {prefix}"))
        print(f"idle latencies measured; unwatched churn: {figures['unwatched achieved']:.0f} writes/s", flush=True)
        figures.update({f"churn {k}" if not k.startswith(("churn", "lag")) else k: v for k, v in churn.items()})
        print(f"churn at {args.churn_rate:g}/s: lag p99 {churn['lag p99']:.2f}s", flush=True)
        for kind in KINDS:
            figures[f"own churn {kind} ratio"] = (figures[f"churn mutate {kind} p99"]
                                                  / figures[f"unwatched mutate {kind} p99"])

        kept = args.churn_rate if churn["churn achieved"] >= 0.9 * args.churn_rate else churn["churn achieved"]
        limit = "not reached" if kept == args.churn_rate else \
            f"API server: {churn['churn achieved']:.0f} writes/s at most"
        rate = args.churn_rate * 2
        while rate <= args.max_churn_rate and kept == args.churn_rate and churn["lag p99"] <= 2:
            step = churn_phase(loader, kubeconfig, nodes, rate, args.sweep_seconds, [first], workdir,
                               f"churn-{int(rate)}")
            print(f"churn at {rate:g}/s: achieved {step['churn achieved']:.0f}/s, lag p99 {step['lag p99']:.2f}s",
                  flush=True)
            if step["churn achieved"] < 0.9 * rate:
                limit = f"API server: {step['churn achieved']:.0f} writes/s at most"
                kept = max(kept, step["churn achieved"]) if step["lag p99"] <= 2 else kept
                break
            if step["lag p99"] > 2:
                limit = f"informer: lag p99 {step['lag p99']:.1f}s at {rate:g}/s"
                break
            kept = rate
            rate *= 2
        figures["highest churn rate kept up with"] = kept
        figures["churn limit"] = limit

        phase("saturation")
        figures.update(saturation(first, args.saturation_seconds))
        prober.close()
        print(f"saturation: {figures['admissions/s at saturation']:.0f} admissions/s", flush=True)

        if args.replicas > 1:
            phase("replicas")
            figures.update(high_availability(args, loader, plane, replicas, workdir, nodes))
        figures["Pod relists"] = first.metrics().get('preemptguard_informer_relists_total{kind="Pod"}', 0) - 1
        figures["RSS peak"] = first.rss()[1]
        figures["apiserver RSS"] = memory_mib(api_pid)[0]
        phase("end")
        if GUARD is not None:
            figures.update({f"{name} RSS peak": rss for name, rss in GUARD.peaks.items()})
    except BaseException:
        for replica in replicas:
            print(f"--- {replica.log.name} (tail)\n{tail(replica.log, 2000)}", file=sys.stderr, flush=True)
        raise
    finally:
        CORES.release()
        for replica in replicas:
            replica.stop()
        plane.stop()
        shutil.rmtree(plane.workdir, ignore_errors=True)
    figures["loadavg after"] = load_average()
    if args.snapshot_path:
        figures.update(snapshot_path(nodes, workdir, args.samples, args.snapshot_rounds))
    return figures


def high_availability(args: argparse.Namespace, loader: Path, plane: ControlPlane, replicas: list[Replica],
                      workdir: Path, nodes: int) -> Figures:
    """N replicas on one API server: their memory, the API server's load, and a restart under churn."""
    kubeconfig, api_pid = plane.kubeconfig(), apiserver_pid(plane)
    figures: Figures = {"replicas": args.replicas}
    for i in range(1, args.replicas):
        replica = start_replica(kubeconfig, workdir, f"replica-{i}")
        replicas.append(replica)
        replica.wait_ready()
    figures["RSS per replica"] = max(r.rss()[0] for r in replicas)
    figures["apiserver RSS, N replicas"] = memory_mib(api_pid)[0]
    before, began = cpu_seconds(api_pid), time.monotonic()
    churn = churn_phase(loader, kubeconfig, nodes, args.churn_rate, args.churn_seconds, replicas, workdir, "churn-ha")
    figures["apiserver CPU/s, N replicas"] = (cpu_seconds(api_pid) - before) / (time.monotonic() - began)
    figures["lag p99, N replicas"] = churn["lag p99"]

    # A replica restarts while pods churn: it lists everything again, then watches from the list's resourceVersion.
    # The churn goes on until the restarted replica is ready and RESTART_LAG_SECONDS more, so writes remain to time
    # its lag once ready (a duration guessed ahead ended first at 15,000 nodes: ready after 220 s, lag p99 nan).
    restarted = replicas[-1]
    with LagPoller([replicas[0]]) as _:
        churn_process, finish = run_churn(loader, kubeconfig, nodes, args.churn_rate, RESTART_CHURN_CAP_SECONDS,
                                          workdir / "churn-restart.ndjson", "churn-restart")
        time.sleep(2)
        restarted.stop()
        fresh = start_replica(kubeconfig, workdir, "replica-restarted")
        replicas[-1] = fresh
        figures["restart ready under churn"] = fresh.wait_ready()
        ready_ns = time.time_ns()
        bare_out = workdir / "churn-restart-watch.ndjson"
        with LagPoller([fresh]) as poller, BareWatch(loader, kubeconfig, bare_out) as bare:
            time.sleep(RESTART_LAG_SECONDS)
            churn_process.terminate()  # scaleload ends the churn on SIGTERM and prints its summary
            summary, records = finish()
            last = max((r["rv"] for r in records), default=0)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and (poller.samples[id(fresh)][1] or [0])[-1] < last:
                time.sleep(LAG_POLL_SECONDS)
        lags = poller.lags(fresh, records, after_ns=ready_ns + int(1e9))
        figures["restart lag p99 once ready"] = percentile(lags, 99)
        # The same writes at a bare watch opened when the replica was ready: the API server's own part.
        figures["restart bare watch lag p99"] = percentile(bare.lags(records, after_ns=ready_ns + int(1e9)), 99)
        figures["restart churn achieved"] = summary["achieved"]
    return figures


def snapshot_path(nodes: int, workdir: Path, samples: int, rounds: int) -> Figures:
    """bench/snapshot.py's serve and plugin measurements on this size's cluster, as kubectl prints it: the median of
    ``rounds`` starts of each (its ``merge_rounds``: never the best run; the previews pooled)."""
    import snapshot as snapshot_bench

    dump = snapshot_bench.ensure_dump(workdir, nodes)
    pod_file = workdir / "probe-pod.json"
    pod_file.write_text(json.dumps(snapshot_bench.probe_pod("preempt", 0)), encoding="utf-8")
    try:
        serve = snapshot_bench.merge_rounds(
            [snapshot_bench.measure_serve(ROOT, dump, samples) for _ in range(rounds)])
        snapshot_bench.clear_cache(dump)
        snapshot_bench.measure_plugin(ROOT, dump, pod_file, cache=True)  # writes the cache
        cached = snapshot_bench.merge_rounds(
            [snapshot_bench.measure_plugin(ROOT, dump, pod_file, cache=True) for _ in range(rounds)])
    finally:
        snapshot_bench.clear_cache(dump)
        dump.unlink(missing_ok=True)
    return {"snapshot ready": serve["ready"], "snapshot RSS": serve["rss"],
            "snapshot preempt p99": serve["preempt p99"], "snapshot unschedulable p99": serve["unschedulable p99"],
            "plugin cached": cached["wall"], "snapshot rounds": rounds}


# ---- the table ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    key: str
    label: str
    unit: str = ""
    digits: int = 1
    target: Callable[[Figures], str] | None = None
    grows: bool = True


def _under(limit: float, unit: str) -> Callable[[Figures], str]:
    return lambda f: f"<= {limit:g} {unit}".strip()


def _within(base: str, factor: float) -> Callable[[Figures], str]:
    return lambda f: f"<= {factor:g} x {f.get(base, float('nan')):.2f} ms"


ROWS: tuple[Row, ...] = (
    Row("pods", "pods", digits=0, grows=False),
    Row("load objects/s", "loader: objects/s", digits=0),
    Row("load requests/s", "loader: requests/s (API calls or etcd txns)", digits=0),
    Row("load seconds", "loader: seconds to hold the cluster", "s", 0),
    Row("apiserver settle seconds", "then until kube-apiserver idles (< 0.25 core)", "s", 0),
    Row("listed MB", "informers: bytes listed", "MB", 0),
    Row("ready", "serve --kubeconfig: start to /readyz", "s", 1, _under(60, "s")),
    Row("CPU to ready", "  its CPU until then", "s", 1),
    Row("apiserver CPU to ready", "  kube-apiserver's CPU meanwhile", "s", 1),
    Row("predicting", "start to the first admission with a prediction", "s", 1),
    Row("exposure scanned", "start to the exposure scan's first pass done", "s", 1),
    Row("apiserver settle before idle", "then until kube-apiserver idles again", "s", 0),
    Row("RSS ready", "RSS when ready", "MiB", 0, _under(1024, "MiB")),
    Row("RSS peak", "RSS peak (whole run)", "MiB", 0),
    Row("RSS per pod", "RSS per pod (ready)", "B", 0),
    *(Row(f"{e} {k} {q}", f"{e} {k} {q}", "ms", 2,
          ({"fit": _under(5, "ms"), "preempt": _under(20, "ms"), "unschedulable": _under(20, "ms")}[k]
           if e == "mutate" and q == "p99" else None))
      for e in ("mutate", "preview") for k in KINDS for q in ("p50", "p99")),
    *(Row(f"{name} mutate {k} p99", f"{label}: mutate {k} p99", "ms", 2)
      for name, label in (("first idle", "idle, first window alone"), ("idle after churn", "idle, windows after churn"))
      for k in KINDS),
    Row("idle without prediction", "idle: admissions past budget (no prediction)", digits=0),
    Row("churn achieved", "churn: pod writes/s achieved (target 500)", "/s", 0, grows=False),
    *(Row(f"churn {e} {k} p99", f"churn: {e} {k} p99", "ms", 2,
          _within(f"{e} {k} p99", 1.5) if e == "mutate" else None)
      for e in ("mutate", "preview") for k in KINDS),
    Row("churn without prediction", "churn: admissions past budget (no prediction)", digits=0),
    Row("unwatched achieved", "ConfigMap churn next door: writes/s", "/s", 0, grows=False),
    *(Row(f"unwatched {e} {k} p99", f"ConfigMap churn next door: {e} {k} p99", "ms", 2)
      for e in ("mutate", "preview") for k in KINDS),
    *(Row(f"own churn {k} ratio", f"churn / ConfigMap churn: mutate {k} p99", "x", 2, grows=False)
      for k in KINDS),
    Row("lag p50", "churn: informer lag p50", "s", 2),
    Row("Pod relists", "Pod informer relists after its first list", digits=0),
    Row("lag p99", "churn: informer lag p99", "s", 2, _under(2, "s")),
    Row("lag max", "churn: informer lag max", "s", 2),
    Row("churn bare watch lag p99", "churn: a bare watch's lag p99 (API server's part)", "s", 2),
    Row("churn bare watch lag max", "churn: a bare watch's lag max", "s", 2),
    Row("churn bare watch opened", "churn: watches the bare watch opened", digits=0),
    Row("highest churn rate kept up with", "highest churn rate kept up with", "/s", 0),
    Row("admissions/s at saturation", "admissions/s at saturation (fits)", "/s", 0),
    Row("apiserver RSS", "kube-apiserver RSS", "MiB", 0),
    Row("kube-apiserver RSS peak", "kube-apiserver RSS peak", "MiB", 0),
    Row("etcd RSS peak", "etcd RSS peak", "MiB", 0),
    Row("scaleload RSS peak", "loader RSS peak", "MiB", 0),
    Row("apiserver CPU/s, idle", "kube-apiserver CPU during the idle latencies", "cores", 2),
    Row("apiserver CPU/s, unwatched", "kube-apiserver CPU during ConfigMap churn", "cores", 2),
    Row("apiserver CPU/s, 1 replica", "kube-apiserver CPU during churn, 1 replica", "cores", 2),
    Row("apiserver CPU/s, N replicas", "kube-apiserver CPU during churn, N replicas", "cores", 2),
    *(Row(f"webhook CPU, {key} {what}", f"webhook CPU {text}, {label}", "cores", 3)
      for what, text in (("steal", "stolen"), ("interrupts", "in irq+softirq"))
      for key, label in (("idle", "idle"), ("unwatched", "ConfigMap churn"), ("churn", "pod churn"))),
    Row("RSS per replica", "RSS per replica (N replicas)", "MiB", 0),
    Row("lag p99, N replicas", "informer lag p99, N replicas", "s", 2),
    Row("restart ready under churn", "replica restarted under churn: ready", "s", 1),
    Row("restart lag p99 once ready", "replica restarted: lag p99 once ready", "s", 2),
    Row("restart bare watch lag p99", "replica restarted: a bare watch's lag p99 meanwhile", "s", 2),
    Row("snapshot rounds", "snapshot: starts of each (their median below)", digits=0, grows=False),
    Row("snapshot ready", "snapshot: serve --cluster-snapshot ready", "s", 1, _under(15, "s")),
    Row("snapshot RSS", "snapshot: RSS ready", "MiB", 0, _under(600, "MiB")),
    Row("snapshot preempt p99", "snapshot: /preview preempt p99", "ms", 2, _under(10, "ms")),
    Row("plugin cached", "snapshot: plugin --snapshot-cache", "s", 2, _under(3, "s")),
)


def value_of(target: str) -> float:
    """The bound a target's text states: "<= 60 s" is 60, "<= 1.5 x 6.28 ms" is 9.42."""
    words = target.split()
    if len(words) == 5 and words[2] == "x":
        return float(words[1]) * float(words[3])
    return float(words[-2])


def report(results: list[Figures]) -> list[str]:
    """Print the table; return the targets missed on the largest size (checked only there)."""
    sizes = [f"{r['nodes']:,} nodes" for r in results]
    growth = len(results) > 1
    header = f"{'measurement':48s}" + "".join(f"{s:>15s}" for s in sizes)
    header += f"{'growth':>9s}" if growth else ""
    print("\n" + header + "   target (largest size)")
    largest = results[-1]
    missed: list[str] = []
    for row in ROWS:
        if all(r.get(row.key) is None for r in results):
            continue
        cells = []
        for r in results:
            value = r.get(row.key)
            cells.append(f"{'-':>15s}" if value is None else f"{value:>{15 - len(row.unit) - 1},.{row.digits}f} "
                         f"{row.unit}" if row.unit else f"{value:>15,.{row.digits}f}")
        line = f"{row.label:48s}" + "".join(cells)
        if growth:
            first, last = results[0].get(row.key), largest.get(row.key)
            line += f"{last / first:>8.1f}x" if row.grows and first and last is not None else f"{'':>9s}"
        if row.target is not None and largest.get(row.key) is not None:
            target = row.target(largest)
            ok = largest[row.key] <= value_of(target)
            line += f"   {'MET ' if ok else 'MISS'} {target}"
            if not ok:
                missed.append(f"{row.label}: {largest[row.key]:.2f} (target {target})")
        print(line)
    if growth:
        first, last = results[0].get("mutate preempt p50"), largest.get("mutate preempt p50")
        if first and last:
            ok = last / first <= 4
            print(f"{'growth of the preempt p50 (mutate)':48s}{last / first:>8.1f}x   {'MET ' if ok else 'MISS'} <= 4x")
            if not ok:
                missed.append(f"preempt p50 growth {last / first:.1f}x (target <= 4x)")
    for r in results:
        print(f"{r['nodes']:,} nodes: load average before {r['loadavg before']}, after {r.get('loadavg after')}; "
              f"highest churn kept up with {r.get('highest churn rate kept up with', 0):.0f}/s "
              f"(limit: {r.get('churn limit', '-')})")
    return missed


def main(argv: list[str] | None = None) -> int:
    global GUARD
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000, 15000])
    parser.add_argument("--pods-per-node", type=int, default=30)
    # A p99 of 200 samples is their second largest: the idle p99s of the same admission path moved by 30 % between
    # two runs. 1,000 idle samples (the tenth largest) take ~25 s a size; 40 s of churn gives ~600 a kind.
    parser.add_argument("--samples", type=int, default=1000, help="idle requests per endpoint and pod kind")
    parser.add_argument("--churn-rate", type=float, default=500.0)
    parser.add_argument("--churn-seconds", type=float, default=40.0)
    parser.add_argument("--sweep-seconds", type=float, default=10.0, help="per rate when looking for the highest")
    parser.add_argument("--max-churn-rate", type=float, default=8000.0)
    parser.add_argument("--saturation-seconds", type=float, default=10.0)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--load-via", choices=("auto", "api", "etcd"), default="auto",
                        help="api: create + status through the API; etcd: nodes and pods straight into etcd "
                             "(the API server then serves them); auto: api up to 1,000 nodes, etcd above")
    parser.add_argument("--apiserver-memory-limit", default=APISERVER_MEMORY_LIMIT,
                        help="GOMEMLIMIT of kube-apiserver ('' for none; default %(default)s)")
    parser.add_argument("--no-isolate", dest="isolate", action="store_false",
                        help="keep the webhook on the same CPUs as the API server and the churn (see Cores)")
    parser.add_argument("--no-snapshot-path", dest="snapshot_path", action="store_false")
    parser.add_argument("--rounds", type=int,
                        help="windows each of the idle, ConfigMap churn and pod churn latencies, taking turns "
                             "(default 4; 1 with --quick)")
    parser.add_argument("--snapshot-rounds", type=int, default=3,
                        help="starts of serve and of the cached plugin on the snapshot path (their median is shown)")
    parser.add_argument("--kube-bin", type=Path, help="etcd and kube-apiserver (default: $PREEMPTGUARD_KUBE_BIN)")
    parser.add_argument("--workdir", type=Path, help="where etcd's data goes (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    parser.add_argument("--report", type=Path, nargs="+", metavar="JSON",
                        help="print the table of sizes measured before (their --json files, in order) and exit")
    parser.add_argument("--quick", action="store_true",
                        help="50 samples, 5 s of churn, no sweep beyond 1,000/s, one snapshot round")
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.churn_seconds, args.sweep_seconds, args.snapshot_rounds = 50, 5.0, 4.0, 1
        args.max_churn_rate, args.saturation_seconds = 1000.0, 3.0
    args.rounds = args.rounds or (1 if args.quick else 4)
    if args.report:
        saved = [figures for path in args.report for figures in json.loads(path.read_text(encoding="utf-8"))]
        missed = report(sorted(saved, key=lambda figures: figures["nodes"]))
        return 1 if missed else 0
    kube_bin = kube_bin_dir(args.kube_bin)
    GUARD = MemoryGuard()
    results: list[Figures] = []
    stopped = ""
    with tempfile.TemporaryDirectory(prefix="preemptguard-scale-", dir=args.workdir) as tmp:
        try:
            for nodes in args.nodes:
                try:
                    results.append(measure_size(args, nodes, kube_bin, Path(tmp)))
                except SystemExit as exc:
                    if not results:
                        raise
                    # A later size failed (out of memory, a wrong answer): the sizes measured so far are still
                    # printed (exit 1).
                    stopped = f"{nodes:,} nodes not measured: {GUARD.tripped or exc}"
                    break
                GUARD.check()
        finally:
            GUARD.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"\nlowest available memory during the run: {GUARD.lowest:.1f} GiB; {os.cpu_count()} CPUs")
    print(f"kube-apiserver: GOMEMLIMIT={args.apiserver_memory_limit or '(none)'}; etcd: --quota-backend-bytes "
          f"{ETCD_QUOTA_BYTES}, --unsafe-no-fsync")
    if args.isolate and (os.cpu_count() or 1) >= 2:
        print(f"once ready: kube-apiserver, etcd and the churn on CPU {CORES.control}, the replicas and the prober on "
              f"CPU {CORES.webhook} (--no-isolate: shared)")
    missed = report(results)
    if stopped:
        print(stopped)
    return 1 if missed or stopped else 0


if __name__ == "__main__":
    sys.exit(main())

