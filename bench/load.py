"""Load test of ``/mutate/pods`` over TLS on loopback (not a test; bounded: fixed request count, duration cap).

    .venv/bin/python bench/load.py [--nodes 5000] [--pods-per-node 30] [--requests 20000] [--duration 20]
                                   [--connections 8] [--preempt-connections 2] [--snapshot FILE] [--quick]

The webhook runs as ``preempt-guard serve`` in its own process over a generated snapshot (5,000 nodes x 30
pods by default, written once as JSON; ``--snapshot FILE`` keeps and reuses it), with a CA-issued certificate
that the client verifies like the kube-apiserver. This process is the client: keep-alive aiohttp sessions,
N concurrent connections, each sending the next AdmissionReview as soon as the previous answer arrived
(closed loop). A trivial aiohttp TLS server (reads the body, returns a fixed AdmissionReview) runs in a third
process and is measured the same way: the ratio shows what PreemptGuard costs over HTTP+TLS+JSON alone.

Scenarios (every request is a distinct pod with a fresh uid; every answer must be 200, echo the uid and be
allowed; the server's /metrics confirm which prediction each scenario exercised):
* priority-only: pods in a namespace labelled ``preemptguard.io/mode=off`` (Priority plugin + quota only);
* fit: small pods in guarded namespaces (mode warn): the prediction finds a node without preemption;
* preempt: large high-priority pods: the prediction selects victims (fewer connections: predictions are
  CPU-bound in the server's 2-thread pool, more connections only queue).

Targets on one server process: fit >= 1,500 admissions/s with p99 <= 20 ms; preempt p99 <= 60 ms; no error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from clustergen import generate_cluster  # noqa: E402

from webhook.certs.issuance import generate_ca, issue_serving_certificate  # noqa: E402
from webhook.routes import MUTATE_PODS_PATH  # noqa: E402
from webhook.server.eventloop import chosen_event_loop, run_on_event_loop  # noqa: E402
from webhook.server.tls import server_context  # noqa: E402

MODE_OFF_NAMESPACE = "bench-unguarded"
TARGET_FIT_RATE = 1500.0
TARGET_FIT_P99_MS = 20.0
TARGET_PREEMPT_P99_MS = 60.0
UID_MARK = b"@@UID@@"
NAME_MARK = b"@@NAME@@"


# ---- inputs -------------------------------------------------------------------------------------
def write_snapshot(path: Path, nodes: int, pods_per_node: int) -> None:
    objects = generate_cluster(nodes, pods_per_node, seed=nodes)
    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": MODE_OFF_NAMESPACE, "labels": {"preemptguard.io/mode": "off", "tenant": "bench"}}})
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, separators=(",", ":"))
    path.write_text(text, encoding="utf-8")


def pod_object(namespace: str, priority_class: str, cpu_milli: int, memory_mi: int) -> dict[str, Any]:
    """A Deployment-made pod as the API server passes it to a mutating webhook (after defaulting)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": "web-7c9f8d6b5-", "name": NAME_MARK.decode(), "namespace": namespace,
            "labels": {"app": "web", "pod-template-hash": "7c9f8d6b5", "tier": priority_class},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-05-01T10:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c9f8d6b5",
                                 "uid": "5d7bb0a5-0d4e-4c0b-9a39-4b1f2a9c1e11", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "priorityClassName": priority_class,
            "containers": [{
                "name": "app", "image": "registry.example/team/web:1.27.3", "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                "resources": {"requests": {"cpu": f"{cpu_milli}m", "memory": f"{memory_mi}Mi"},
                              "limits": {"memory": f"{memory_mi * 2}Mi"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
                                   "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1,
                                   "failureThreshold": 3},
                "volumeMounts": [{"name": "kube-api-access-x7k2p", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            }],
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
            "schedulerName": "default-scheduler", "enableServiceLinks": True,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300}],
        },
        "status": {},
    }


def review_template(pod: dict[str, Any]) -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": UID_MARK.decode(), "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": NAME_MARK.decode(), "namespace": pod["metadata"]["namespace"], "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                         "uid": "0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                                    "system:authenticated"]},
            "object": pod, "oldObject": None, "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }
    return json.dumps(review, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Scenario:
    name: str
    templates: tuple[bytes, ...]
    connections: int
    expected_prediction: str | None  # the predictions_total outcome every request must add, or None: no prediction
    target: str


def scenarios(connections: int, preempt_connections: int) -> list[Scenario]:
    guarded = [f"team-{i:02d}" for i in range(20)]
    fit = tuple(review_template(pod_object(ns, "standard", cpu, mem))
                for ns in guarded for cpu, mem in ((50, 64), (100, 128), (200, 128)))
    unguarded = tuple(review_template(pod_object(MODE_OFF_NAMESPACE, "standard", cpu, mem))
                      for cpu, mem in ((50, 64), (100, 128), (200, 128)))
    preempt = tuple(review_template(pod_object(ns, "high", cpu, mem))
                    for ns in guarded for cpu, mem in ((2000, 2048), (3000, 4096), (4000, 4096)))
    return [
        Scenario("priority-only", unguarded, connections, None, ""),
        Scenario("fit", fit, connections, "Fits",
                 f">= {TARGET_FIT_RATE:,.0f}/s, p99 <= {TARGET_FIT_P99_MS:g} ms"),
        Scenario("preempt", preempt, preempt_connections, "Preempts", f"p99 <= {TARGET_PREEMPT_P99_MS:g} ms"),
    ]


# ---- servers ------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_trivial_server(port: int, cert: str, key: str) -> None:
    """The baseline: aiohttp over the same TLS settings and the same event loop as ``preempt-guard serve``,
    reading the body, answering a fixed review."""
    from aiohttp import web

    answer = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "response": {"uid": "fixed", "allowed": True}}).encode()

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=answer, content_type="application/json")

    async def serve_forever() -> None:
        app = web.Application()
        app.router.add_post(MUTATE_PODS_PATH, handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=server_context(cert, key)).start()
        await asyncio.Event().wait()  # until SIGTERM

    run_on_event_loop(serve_forever())


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    log_path: Path
    port: int
    metrics_port: int | None = None

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def log_tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_process(args: list[str], log_path: Path, port: int, metrics_port: int | None = None) -> ServerProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=log, stderr=log)
    return ServerProcess(process, log_path, port, metrics_port)


def wait_ready(server: ServerProcess, url: str, context: ssl.SSLContext, timeout: float) -> float:
    started = time.monotonic()
    while True:
        if server.process.poll() is not None:
            raise SystemExit(f"server exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(url, context=context, timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        if time.monotonic() - started > timeout:
            raise SystemExit(f"server not ready after {timeout:.0f}s:\n{server.log_tail()}")
        time.sleep(0.2)


def wait_listening(server: ServerProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            return
        except OSError:
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server not listening:\n{server.log_tail()}") from None
            time.sleep(0.1)


METRIC_LINE = re.compile(r'^(preemptguard_[a-z_]+_total)\{?([^}]*)\}? ([0-9.e+-]+)$')


def scrape(metrics_port: int) -> Counter[str]:
    """The webhook's counters (``name{labels}`` -> value)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values: Counter[str] = Counter()
    for line in text.splitlines():
        match = METRIC_LINE.match(line)
        if match:
            values[f"{match[1]}{{{match[2]}}}"] = float(match[3])  # type: ignore[assignment]
    return values


# ---- client -------------------------------------------------------------------------------------
@dataclass
class Result:
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    warnings: int = 0
    elapsed: float = 0.0
    client_cpu: float = 0.0
    server_cpu: float = 0.0

    @property
    def count(self) -> int:
        return len(self.latencies_ms)

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else float("nan")

    @property
    def rate(self) -> float:
        return self.count / self.elapsed if self.elapsed else 0.0


def bodies(templates: tuple[bytes, ...], prefix: str) -> Iterator[tuple[str, bytes]]:
    """(uid, AdmissionReview body): every pod a distinct name and every review a distinct uid."""
    serial = 0
    while True:
        for template in templates:
            serial += 1
            uid = f"{prefix}-{serial:08d}"
            yield uid, template.replace(UID_MARK, uid.encode()).replace(NAME_MARK, f"web-{serial:07d}".encode())


async def drive(url: str, client: ssl.SSLContext, templates: tuple[bytes, ...], *, connections: int,
                requests: int, duration: float, label: str) -> Result:
    """``requests`` reviews over ``connections`` keep-alive connections (closed loop), at most ``duration`` s."""
    result = Result()
    supply = bodies(templates, label)
    sent = 0
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    connector = aiohttp.TCPConnector(ssl=client, limit=connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def worker() -> None:
            nonlocal sent
            while sent < requests and time.perf_counter() < stop_at:
                sent += 1
                uid, body = next(supply)
                begin = time.perf_counter()
                try:
                    async with session.post(url, data=body, headers=headers) as response:
                        payload = await response.read()
                        status = response.status
                except (aiohttp.ClientError, TimeoutError) as exc:
                    result.errors[type(exc).__name__] += 1
                    continue
                result.latencies_ms.append((time.perf_counter() - begin) * 1000)
                if status != 200:
                    result.errors[f"HTTP {status}"] += 1
                    continue
                answer = json.loads(payload).get("response") or {}
                if answer.get("uid") != uid and answer.get("uid") != "fixed":
                    result.errors["uid mismatch"] += 1
                elif answer.get("allowed") is not True:
                    result.errors["denied"] += 1
                result.warnings += bool(answer.get("warnings"))

        started = time.perf_counter()
        stop_at = started + duration
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        await asyncio.gather(*(worker() for _ in range(connections)))
        result.elapsed = time.perf_counter() - started
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
        result.client_cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    return result


def measure(server: ServerProcess, client: ssl.SSLContext, scenario: Scenario, requests: int, duration: float,
            warmup: int) -> tuple[Result, Counter[str]]:
    """Warm up, then measure; also the server's counter increments during the measured part."""
    url = f"https://127.0.0.1:{server.port}{MUTATE_PODS_PATH}"
    asyncio.run(drive(url, client, scenario.templates, connections=scenario.connections, requests=warmup,
                      duration=duration, label=f"warm-{scenario.name}"))
    before = scrape(server.metrics_port) if server.metrics_port else Counter()
    cpu_before = server.cpu_seconds()
    result = asyncio.run(drive(url, client, scenario.templates, connections=scenario.connections,
                               requests=requests, duration=duration, label=scenario.name))
    result.server_cpu = server.cpu_seconds() - cpu_before
    after = scrape(server.metrics_port) if server.metrics_port else Counter()
    return result, after - before


def line(label: str, result: Result, baseline: Result | None) -> str:
    ratio = f"{baseline.rate / result.rate:5.2f}x" if baseline is not None and result.rate else "    -"
    errors = sum(result.errors.values())
    per_request = result.server_cpu / result.count * 1000 if result.count else float("nan")
    return (f"{label:14s} {result.count:7d} {result.elapsed:6.1f}s {result.rate:8.0f}/s  "
            f"p50 {result.percentile(50):6.2f}  p99 {result.percentile(99):6.2f}  "
            f"max {max(result.latencies_ms, default=0.0):7.2f} ms"
            f"  errors {errors:3d}  server CPU {per_request:5.2f} ms/req  slowdown vs trivial {ratio}")


# ---- main ---------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--requests", type=int, default=20_000, help="measured requests per scenario")
    parser.add_argument("--duration", type=float, default=20.0, help="cap in seconds per scenario")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--preempt-connections", type=int, default=2)
    parser.add_argument("--snapshot", type=Path, help="snapshot file to reuse (written there if missing)")
    parser.add_argument("--quick", action="store_true", help="1,000 nodes, 2,000 requests, 5 s per scenario")
    parser.add_argument("--trivial-server", nargs=3, metavar=("PORT", "CERT", "KEY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.requests, args.duration = min(args.nodes, 1000), min(args.requests, 2000), 5.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.trivial_server:
        port, cert, key = args.trivial_server
        run_trivial_server(int(port), cert, key)
        return 0
    with tempfile.TemporaryDirectory(prefix="preemptguard-load-") as tmp:
        return run(args, Path(tmp))


def run(args: argparse.Namespace, tmp: Path) -> int:
    snapshot = args.snapshot or tmp / "cluster.json"
    if not snapshot.exists():
        began = time.monotonic()
        write_snapshot(snapshot, args.nodes, args.pods_per_node)
        print(f"snapshot: {args.nodes} nodes x {args.pods_per_node} pods written to {snapshot} "
              f"({snapshot.stat().st_size / 2**20:.0f} MiB) in {time.monotonic() - began:.1f}s")
    ca_pem, ca_key = generate_ca("load-ca", 1)
    cert_pem, key_pem = issue_serving_certificate(ca_pem, ca_key, ["localhost", "127.0.0.1"], 1)
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    cert.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    client = ssl.create_default_context(cadata=ca_pem.decode())

    trivial_port, port, metrics_port = free_port(), free_port(), free_port()
    trivial = start_process([str(Path(__file__).resolve()), "--trivial-server", str(trivial_port), str(cert),
                             str(key)], tmp / "trivial.log", trivial_port)
    webhook = start_process(["-m", "webhook.cli", "serve", "--cluster-snapshot", str(snapshot),
                             "--tls-cert", str(cert), "--tls-key", str(key), "--host", "127.0.0.1",
                             "--port", str(port), "--metrics-port", str(metrics_port), "--log-level", "warning"],
                            tmp / "webhook.log", port, metrics_port)
    try:
        return measure_all(args, client, trivial, webhook)
    finally:
        webhook.stop()
        trivial.stop()


def measure_all(args: argparse.Namespace, client: ssl.SSLContext, trivial: ServerProcess,
                webhook: ServerProcess) -> int:
    wait_listening(trivial, 30)
    startup = wait_ready(webhook, f"https://127.0.0.1:{webhook.port}/readyz", client, 600)
    time.sleep(1.0)  # let the post-sync gc.freeze happen before measuring
    print(f"webhook ready in {startup:.1f}s (snapshot load), RSS {webhook.rss_mib():.0f} MiB; "
          f"{os.cpu_count()} CPUs; client in this process, servers in their own, on {chosen_event_loop('auto')}")
    warmup = max(200, args.requests // 20)
    print(f"{'scenario':14s} {'requests':>7s} {'time':>7s} {'rate':>10s}  latency (client-side, ms)   "
          f"(connections: {args.connections}; preempt: {args.preempt_connections})")
    failures: list[str] = []
    results: dict[str, Result] = {}
    for scenario in scenarios(args.connections, args.preempt_connections):
        baseline_scenario = Scenario(f"trivial-{scenario.name}", scenario.templates, scenario.connections, None, "")
        baseline, _ = measure(trivial, client, baseline_scenario, args.requests, args.duration, warmup)
        print(line(f"trivial ({scenario.connections}c)", baseline, None))
        result, delta = measure(webhook, client, scenario, args.requests, args.duration, warmup)
        results[scenario.name] = result
        print(line(scenario.name, result, baseline))
        failures += check(scenario, result, delta)
    print(f"webhook RSS after the run: {webhook.rss_mib():.0f} MiB")
    fit, preempt = results["fit"], results["preempt"]
    verdicts = [
        ("fit rate", fit.rate >= TARGET_FIT_RATE, f"{fit.rate:,.0f}/s (target >= {TARGET_FIT_RATE:,.0f}/s)"),
        ("fit p99", fit.percentile(99) <= TARGET_FIT_P99_MS,
         f"{fit.percentile(99):.2f} ms (target <= {TARGET_FIT_P99_MS:g} ms)"),
        ("preempt p99", preempt.percentile(99) <= TARGET_PREEMPT_P99_MS,
         f"{preempt.percentile(99):.2f} ms (target <= {TARGET_PREEMPT_P99_MS:g} ms)"),
        ("errors", not failures, "none" if not failures else "; ".join(failures)),
    ]
    for name, ok, text in verdicts:
        print(f"  {'MET ' if ok else 'MISS'} {name}: {text}")
    return 0 if all(ok for _, ok, _ in verdicts) else 1


def check(scenario: Scenario, result: Result, delta: Counter[str]) -> list[str]:
    """Errors seen by the client, and predictions that were not the scenario's (from the server's counters)."""
    problems = [f"{scenario.name}: {n} x {kind}" for kind, n in result.errors.items()]
    predictions = {key: value for key, value in delta.items()
                   if key.startswith("preemptguard_predictions_total{") and value}
    made = Counter({re.search(r'outcome="([^"]*)"', k)[1]: v for k, v in predictions.items()})  # type: ignore[index]
    total = sum(made.values())
    if scenario.expected_prediction is None and total:
        problems.append(f"{scenario.name}: unexpected predictions {dict(made)}")
    if scenario.expected_prediction is not None and made[scenario.expected_prediction] < total:
        problems.append(f"{scenario.name}: predictions {dict(made)}, all expected {scenario.expected_prediction}")
    for key, value in delta.items():
        if value and key.startswith(("preemptguard_predictions_skipped_total", "preemptguard_requests_rejected",
                                     "preemptguard_admission_deadline_exceeded")):
            problems.append(f"{scenario.name}: {value:.0f} x {key}")
    return problems


if __name__ == "__main__":
    sys.exit(main())
