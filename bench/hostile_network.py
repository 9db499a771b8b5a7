"""Network attacks of a hostile tenant on ``preempt-guard serve`` (issue: a guardrail a hostile tenant cannot get
around), each measured side by side with the same run without the attack.

    .venv/bin/python bench/hostile_network.py [--attack NAME ...] [--seconds 8] [--quick]

The webhook runs as ``preempt-guard serve`` in its own process over ``examples/cluster.yaml`` (plus one namespace
labelled ``preemptguard.io/mode=off`` for priority-only admissions) with ``guardrails.mode: enforce`` and
``denyCrossTenantPreemption``, over TLS with a CA-issued certificate; with ``--client-ca`` where an attack is about
client certificates. This process plays both the attacker and the API server. While an attack runs, a prober sends
(as the API server) a priority-only admission every 50 ms and the cross-tenant example pod
(``examples/pods/09-preempts-batch.yaml``) every 250 ms, and reports their latency (p50, p99, max) and the guarded
pod's decisions (denied every time is the promise).

Attacks:
* ``big-bodies``: four clients send reviews of a 1.4 MiB pod back to back (and of the largest review the API server
  can send: a 3 MiB JSON create, defaulted);
* ``cert-less``: 1,000 connections without a client certificate held open under ``--client-ca``;
* ``slow-bodies``: 200 connections each sending a review's head and then its body one byte a second (no
  ``--client-ca``);
* ``idle-flood``: 1,000 idle connections held open on the admission port (no ``--client-ca``);
* ``metrics-flood``: 1,000 idle connections to the metrics port from one client; scrapes and probes measured.

Targets (issue #24): a priority-only admission under 1 s p99 while four clients send the largest pods; a client
with the API server's certificate served within 3 s while 1,000 certificate-less connections are held; slow-body
clients deny no admission slot; scrapes keep working under an idle flood. Figures on a busy machine are noisy:
compare the attack with its baseline of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from webhook.certs.issuance import generate_ca, issue_client_certificate, issue_serving_certificate  # noqa: E402
from webhook.routes import METRICS_PATH, MUTATE_PODS_PATH, READYZ_PATH  # noqa: E402

UNGUARDED_NAMESPACE = "bench-unguarded"
BIG_POD_BYTES = int(1.4 * 2**20)
# The API server reads create bodies up to 3 MiB (k8s.io/apiserver pkg/server/config.go, MaxRequestBodyBytes).
LARGEST_CREATE_BYTES = 3 * 2**20 - 4096
CONFIG = {
    "prediction": {"budgetMilliseconds": 2000},
    "guardrails": {"mode": "enforce", "tenantLabel": "tenant", "denyCrossTenantPreemption": True},
}


# ---- inputs ---------------------------------------------------------------------------------------------
def write_inputs(tmp: Path) -> tuple[Path, Path]:
    """The example cluster plus a mode-off namespace, and the enforce configuration."""
    documents = yaml.safe_load((ROOT / "examples" / "cluster.yaml").read_text())
    documents["items"].append({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": UNGUARDED_NAMESPACE, "labels": {"preemptguard.io/mode": "off", "tenant": "bench"}}})
    snapshot, config = tmp / "cluster.json", tmp / "config.yaml"
    snapshot.write_text(json.dumps(documents))
    config.write_text(yaml.safe_dump(CONFIG))
    return snapshot, config


def review(pod: dict[str, Any], namespace: str, uid: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid or str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "requestKind":
            {"group": "", "version": "v1", "kind": "Pod"}, "name": pod["metadata"].get("name", ""),
        "namespace": namespace, "operation": "CREATE",
        "userInfo": {"username": "tenant@example.com", "groups": ["system:authenticated"]},
        "object": pod, "oldObject": None, "dryRun": False}}


def small_pod(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"priorityClassName": "high", "containers": [
                {"name": "app", "image": "registry.example/app:1",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def guarded_pod() -> dict[str, Any]:
    """The cross-tenant example: team-a's pod that would preempt batch's (denied under enforce)."""
    text = (ROOT / "examples" / "pods" / "09-preempts-batch.yaml").read_text()
    return dict(yaml.safe_load(text))


def _entries(total_bytes: int, make: Callable[[int], Any]) -> list[Any]:
    entry = len(json.dumps(make(0), separators=(",", ":"))) + 1
    return [make(i) for i in range(max(1, (total_bytes - 600) // entry))]


def padded_pod(total_bytes: int, namespace: str, shape: str = "env") -> dict[str, Any]:
    """A valid pod of about ``total_bytes`` of JSON, padded in one of the ways an API server accepts: ``env`` (one
    container with many environment variables; etcd stores them in far fewer bytes as protobuf), ``containers``
    (many small containers), ``anti-affinity`` (required terms that match nothing), ``tolerations``."""
    pod = small_pod("padded", namespace)
    spec = pod["spec"]
    if shape == "env":
        spec["containers"][0]["env"] = _entries(total_bytes, lambda i: {"name": f"E{i:06d}", "value": "v" * 48})
    elif shape == "containers":
        spec["containers"] = _entries(total_bytes, lambda i: {
            "name": f"c{i:05d}", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "1m"}}})
    elif shape == "anti-affinity":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _entries(
            total_bytes, lambda i: {"labelSelector": {"matchLabels": {"app": f"nothing-{i:06d}"}},
                                    "topologyKey": "kubernetes.io/hostname"})}}
    elif shape == "tolerations":
        spec["tolerations"] = _entries(total_bytes, lambda i: {"key": f"k{i:06d}", "operator": "Exists",
                                                                "effect": "NoSchedule"})
    else:
        raise ValueError(shape)
    return pod


def encoded(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


# ---- the server -----------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Pki:
    ca_pem: bytes
    cert: Path
    key: Path
    client_ca: Path
    apiserver_cert: Path
    apiserver_key: Path

    @classmethod
    def create(cls, tmp: Path) -> Pki:
        ca_pem, ca_key = generate_ca("hostile-bench-ca", 1)
        cert_pem, key_pem = issue_serving_certificate(ca_pem, ca_key, ["localhost", "127.0.0.1"], 1)
        client_pem, client_key = issue_client_certificate(ca_pem, ca_key, "kube-apiserver", 1)
        files = {name: tmp / name for name in ("tls.crt", "tls.key", "client-ca.crt", "api.crt", "api.key")}
        for name, content in zip(files, (cert_pem, key_pem, ca_pem, client_pem, client_key), strict=True):
            files[name].write_bytes(content)
        return cls(ca_pem, files["tls.crt"], files["tls.key"], files["client-ca.crt"], files["api.crt"],
                   files["api.key"])

    def client_context(self, *, certificate: bool) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        if certificate:
            context.load_cert_chain(str(self.apiserver_cert), str(self.apiserver_key))
        return context


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log: Path

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(tmp: Path, pki: Pki, *, client_ca: bool, extra: list[str] | None = None) -> Server:
    snapshot, config = tmp / "cluster.json", tmp / "config.yaml"
    port, metrics_port = free_port(), free_port()
    args = [sys.executable, "-m", "webhook.cli", "serve", "--cluster-snapshot", str(snapshot),
            "--config", str(config), "--tls-cert", str(pki.cert), "--tls-key", str(pki.key),
            "--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics_port),
            "--log-level", "warning", "--shutdown-grace", "0", *(extra or [])]
    if client_ca:
        args += ["--client-ca", str(pki.client_ca)]
    log = tmp / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out,
                                   stderr=out)
    server = Server(process, port, metrics_port, log)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", metrics_port), timeout=1).close()
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"server not listening:\n{log.read_text()[-2000:]}") from None
            time.sleep(0.2)
    return server


# ---- one HTTP/1.1 exchange on a raw connection (no client library between us and the timing) -----------
async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, path: str,
                   body: bytes = b"") -> tuple[int, bytes]:
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    writer.write(head + body)
    await writer.drain()
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionResetError("closed before an answer")
    status = int(status_line.split()[1])
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return status, await reader.readexactly(length)


@dataclass
class Probe:
    """The API server's side: latencies of priority-only and guarded admissions, and the guarded decisions."""

    priority_only_ms: list[float] = field(default_factory=list)
    guarded_ms: list[float] = field(default_factory=list)
    decisions: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)


async def probe_loop(port: int, context: ssl.SSLContext, kind: str, interval: float, seconds: float,
                     probe: Probe) -> None:
    stop_at = time.monotonic() + seconds
    serial = 0
    while time.monotonic() < stop_at:
        serial += 1
        if kind == "priority-only":
            body = encoded(review(small_pod(f"probe-{serial}", UNGUARDED_NAMESPACE), UNGUARDED_NAMESPACE))
        else:
            body = encoded(review(guarded_pod(), "team-a"))
        began = time.monotonic()
        try:
            # A fresh connection per request: the API server's pool may have to open one during an attack.
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=context), 10)
            try:
                status, payload = await asyncio.wait_for(exchange(reader, writer, "POST", MUTATE_PODS_PATH, body), 10)
            finally:
                writer.close()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError) as exc:
            probe.errors[f"{kind}: {type(exc).__name__}"] += 1
            await asyncio.sleep(interval)
            continue
        elapsed = (time.monotonic() - began) * 1000
        if status != 200:
            probe.errors[f"{kind}: HTTP {status}"] += 1
        elif kind == "priority-only":
            probe.priority_only_ms.append(elapsed)
        else:
            probe.guarded_ms.append(elapsed)
            answer = json.loads(payload)["response"]
            warnings = " ".join(answer.get("warnings") or ())
            probe.decisions["denied" if not answer["allowed"] else
                            "allowed (deadline)" if "did not finish" in warnings else "allowed"] += 1
        await asyncio.sleep(max(0.0, interval - elapsed / 1000))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def describe(label: str, probe: Probe, rss: float) -> str:
    p = probe.priority_only_ms
    g = probe.guarded_ms
    decisions = ", ".join(f"{k} {v}" for k, v in sorted(probe.decisions.items())) or "none"
    errors = ", ".join(f"{k} {v}" for k, v in sorted(probe.errors.items())) or "none"
    return (f"  {label:9s} priority-only n={len(p):3d} p50 {percentile(p, 50):7.1f} p99 {percentile(p, 99):7.1f} "
            f"max {max(p, default=float('nan')):7.1f} ms | guarded n={len(g):2d} p99 {percentile(g, 99):7.1f} ms, "
            f"{decisions} | RSS peak {rss:.0f} MiB | errors: {errors}")


def _attack_process(attack: Callable[[float], Awaitable[None]], seconds: float) -> None:
    asyncio.run(attack(seconds))


async def probed(server: Server, context: ssl.SSLContext, seconds: float,
                 attack: Callable[[float], Awaitable[None]] | None) -> tuple[Probe, float]:
    """Probe for ``seconds`` while ``attack`` runs in a process of its own (its CPU is not the prober's)."""
    probe = Probe()
    peak = server.rss_mib()

    async def sample_rss() -> None:
        nonlocal peak
        while True:
            peak = max(peak, server.rss_mib())
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample_rss())
    attacker = None
    if attack is not None:
        attacker = multiprocessing.get_context("fork").Process(target=_attack_process, args=(attack, seconds + 2.0))
        attacker.start()
        await asyncio.sleep(1.5)  # the attack is under way before probing starts
    try:
        await asyncio.gather(probe_loop(server.port, context, "priority-only", 0.05, seconds, probe),
                             probe_loop(server.port, context, "guarded", 0.25, seconds, probe))
    finally:
        sampler.cancel()
        if attacker is not None:
            attacker.terminate()
            attacker.join()
    return probe, peak


# ---- attacks --------------------------------------------------------------------------------------------
def big_bodies(port: int, context: ssl.SSLContext, body: bytes, clients: int = 4) -> Callable[[float], Awaitable[None]]:
    async def attack(seconds: float) -> None:
        stop_at = time.monotonic() + seconds

        async def client() -> None:
            while time.monotonic() < stop_at:
                try:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
                    try:
                        while time.monotonic() < stop_at:
                            await exchange(reader, writer, "POST", MUTATE_PODS_PATH, body)
                    finally:
                        writer.close()
                except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(client() for _ in range(clients)))

    return attack


# The attacker is one client of its own (another loopback address), as a pod is; the prober plays the API
# server, Prometheus and the kubelet from 127.0.0.1.
ATTACKER_ADDRESS = "127.0.0.2"


def hold_connections(port: int, count: int, context: ssl.SSLContext | None, *,
                     send: bytes = b"", trickle: bytes = b"") -> Callable[[float], Awaitable[None]]:
    """``count`` connections to ``port`` from ``ATTACKER_ADDRESS`` kept open (opened again when the server closes
    them): silent, or sending ``send`` once and then ``trickle`` one byte a second."""
    async def attack(seconds: float) -> None:
        stop_at = time.monotonic() + seconds

        async def one() -> None:
            while time.monotonic() < stop_at:
                try:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", port, ssl=context, local_addr=(ATTACKER_ADDRESS, 0),
                                                server_hostname="localhost" if context else None), 5)
                except (OSError, ssl.SSLError, TimeoutError):
                    await asyncio.sleep(0.2)
                    continue
                try:
                    if send:
                        writer.write(send)
                    for byte in trickle:
                        if reader.at_eof() or time.monotonic() > stop_at:
                            break
                        writer.write(bytes([byte]))
                        await writer.drain()
                        await asyncio.sleep(1.0)
                    while not reader.at_eof() and time.monotonic() < stop_at:
                        await asyncio.wait_for(reader.read(1024), max(0.1, stop_at - time.monotonic()))
                except (OSError, ssl.SSLError, TimeoutError):
                    pass
                finally:
                    writer.transport.abort()

        await asyncio.gather(*(one() for _ in range(count)))

    return attack


def stranger_context() -> ssl.SSLContext:
    """Trusts any server and has no client certificate."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context


async def scrape_loop(port: int, seconds: float, outcomes: Counter[str]) -> None:
    """A scrape and a readiness probe on the metrics port every 250 ms, as Prometheus and the kubelet do."""
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        for path in (METRICS_PATH, READYZ_PATH):
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
                try:
                    status, _ = await asyncio.wait_for(exchange(reader, writer, "GET", path), 2)
                finally:
                    writer.close()
                outcomes[f"{path} {status}"] += 1
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError):
                outcomes[f"{path} failed"] += 1
        await asyncio.sleep(0.25)


def run_connections(attack_of: Callable[[Server, Pki], Callable[[float], Awaitable[None]]], *, certificate: bool,
                    scrapes: bool = False) -> Callable[[Server, Pki, float], list[str]]:
    def run(server: Server, pki: Pki, seconds: float) -> list[str]:
        context = pki.client_context(certificate=certificate)
        lines = []
        for label, attack in (("baseline", None), ("attacked", attack_of(server, pki))):
            outcomes: Counter[str] = Counter()

            async def both(attack: Callable[[float], Awaitable[None]] | None = attack,
                           outcomes: Counter[str] = outcomes) -> tuple[Probe, float]:
                probing = probed(server, context, seconds, attack)
                if not scrapes:
                    return await probing
                result, _ = await asyncio.gather(probing, scrape_loop(server.metrics_port, seconds + 1.5, outcomes))
                return result

            probe, rss = asyncio.run(both())
            said = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            extra = f" | metrics port: {said}" if scrapes else ""
            lines.append(describe(label, probe, rss) + extra)
        return lines

    return run


@dataclass
class Attack:
    name: str
    client_ca: bool
    run: Callable[[Server, Pki, float], list[str]]


def _both(*attacks: Callable[[float], Awaitable[None]]) -> Callable[[float], Awaitable[None]]:
    async def attack(seconds: float) -> None:
        await asyncio.gather(*(one(seconds) for one in attacks))

    return attack


def run_big_bodies(server: Server, pki: Pki, seconds: float) -> list[str]:
    context = pki.client_context(certificate=False)
    lines = []
    baseline, rss = asyncio.run(probed(server, context, seconds, None))
    lines.append(describe("baseline", baseline, rss))
    for shape in SHAPES:
        for label, size in (("1.4 MiB", BIG_POD_BYTES), ("3 MiB", LARGEST_CREATE_BYTES)):
            body = encoded(review(padded_pod(size, "team-a", shape), "team-a"))
            attacked, rss = asyncio.run(probed(server, context, seconds, big_bodies(server.port, context, body)))
            lines.append(describe(label, attacked, rss) + f" ({shape}, review {len(body) / 2**20:.2f} MiB)")
    return lines


SHAPES = ("env", "containers", "anti-affinity", "tolerations")
HELD = 1000


def _slow_body(server: Server, pki: Pki) -> Callable[[float], Awaitable[None]]:
    body = encoded(review(small_pod("slow", "team-a"), "team-a"))
    head = (f"POST {MUTATE_PODS_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return hold_connections(server.port, 200, pki.client_context(certificate=False), send=head, trickle=body)


ATTACKS = {
    "big-bodies": Attack("big-bodies", False, run_big_bodies),
    "cert-less": Attack("cert-less", True, run_connections(
        lambda server, pki: _both(hold_connections(server.port, HELD // 2, None),
                                  hold_connections(server.port, HELD // 2, stranger_context())), certificate=True)),
    "slow-bodies": Attack("slow-bodies", False, run_connections(_slow_body, certificate=False)),
    "idle-flood": Attack("idle-flood", False, run_connections(
        lambda server, pki: hold_connections(server.port, HELD, pki.client_context(certificate=False)),
        certificate=False)),
    "metrics-flood": Attack("metrics-flood", False, run_connections(
        lambda server, pki: hold_connections(server.metrics_port, HELD, None), certificate=False, scrapes=True)),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attack", action="append", choices=sorted(ATTACKS), help="default: every attack")
    parser.add_argument("--seconds", type=float, default=8.0, help="probing time per run (default 8)")
    parser.add_argument("--quick", action="store_true", help="3 s per run")
    args = parser.parse_args(argv)
    seconds = 3.0 if args.quick else args.seconds
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="preemptguard-hostile-") as name:
        tmp = Path(name)
        write_inputs(tmp)
        pki = Pki.create(tmp)
        for attack in (ATTACKS[name] for name in (args.attack or sorted(ATTACKS))):
            print(f"{attack.name}{' (--client-ca)' if attack.client_ca else ''}:")
            server = start_server(tmp, pki, client_ca=attack.client_ca)
            try:
                for line in attack.run(server, pki, seconds):
                    print(line, flush=True)
            finally:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
