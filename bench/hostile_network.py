"""The network attacks of a hostile tenant (issue #24), as definitions ``bench/hostile.py`` runs side by side with
the same run without them (``.venv/bin/python bench/hostile.py --attack NAME``); the tests of tests/hostile reuse
the payloads and the raw HTTP/1.1 exchange.

Each attack is a coroutine function ``attack(seconds) -> str`` that ``bench/hostile.py`` runs in a process of its own
(its CPU is not the prober's), from its own loopback address (``ATTACKER_ADDRESS``, as a pod has one), and whose
result is what the attacker saw:

* ``big_bodies``: clients sending reviews of padded pods back to back (1.4 MiB, and the largest review the API
  server can send: a 3 MiB JSON create, defaulted);
* ``hold_connections``: connections held open, silent (with or without a TLS handshake, with or without a client
  certificate) or sending a request head and then its body one byte a second;
* ``scrape_loop`` (not an attack: what Prometheus and the kubelet see meanwhile).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
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


# ---- certificates ------------------------------------------------------------------------------------
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


# ---- attacks --------------------------------------------------------------------------------------------
AttackRun = Callable[[float], Coroutine[Any, Any, str]]
# The attacker is one client of its own (another loopback address), as a pod is; the prober plays the API
# server, Prometheus and the kubelet from 127.0.0.1.
ATTACKER_ADDRESS = "127.0.0.2"


def said(outcomes: Counter[str]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(outcomes.items())) or "nothing"


def big_bodies(port: int, context: ssl.SSLContext, bodies: list[bytes]) -> AttackRun:
    """One client per body, each sending its review back to back on a connection it keeps."""
    async def attack(seconds: float) -> str:
        stop_at = time.monotonic() + seconds
        outcomes: Counter[str] = Counter()

        async def client(body: bytes) -> None:
            while time.monotonic() < stop_at:
                try:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                                   local_addr=(ATTACKER_ADDRESS, 0))
                    try:
                        while time.monotonic() < stop_at:
                            status, payload = await exchange(reader, writer, "POST", MUTATE_PODS_PATH, body)
                            outcomes[decision_of(status, payload)] += 1
                    finally:
                        writer.close()
                except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
                    outcomes["connection lost"] += 1
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(client(body) for body in bodies))
        return said(outcomes)

    return attack


def decision_of(status: int, payload: bytes) -> str:
    if status != 200:
        return f"HTTP {status}"
    answer = json.loads(payload).get("response") or {}
    return "allowed" if answer.get("allowed") else f"denied {(answer.get('status') or {}).get('code')}"


def hold_connections(port: int, count: int, context: ssl.SSLContext | None, *,
                     send: bytes = b"", trickle: bytes = b"") -> AttackRun:
    """``count`` connections to ``port`` from ``ATTACKER_ADDRESS`` kept open (opened again when the server closes
    them): silent, or sending ``send`` once and then ``trickle`` one byte a second."""
    async def attack(seconds: float) -> str:
        stop_at = time.monotonic() + seconds
        outcomes: Counter[str] = Counter()

        async def one() -> None:
            while time.monotonic() < stop_at:
                try:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", port, ssl=context, local_addr=(ATTACKER_ADDRESS, 0),
                                                server_hostname="localhost" if context else None), 5)
                except (OSError, ssl.SSLError, TimeoutError):
                    outcomes["refused"] += 1
                    await asyncio.sleep(0.2)
                    continue
                outcomes["opened"] += 1
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
                    if reader.at_eof():
                        outcomes["closed by the server"] += 1
                except (OSError, ssl.SSLError):
                    outcomes["closed by the server"] += 1
                except TimeoutError:
                    pass
                finally:
                    writer.transport.abort()

        await asyncio.gather(*(one() for _ in range(count)))
        return said(outcomes)

    return attack


def all_of(*attacks: AttackRun) -> AttackRun:
    async def attack(seconds: float) -> str:
        return "; ".join(await asyncio.gather(*(one(seconds) for one in attacks)))

    return attack


def stranger_context() -> ssl.SSLContext:
    """Trusts any server and has no client certificate."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context


def slow_body_head_and_body() -> tuple[bytes, bytes]:
    """A review's request head, and its body (sent one byte a second by ``hold_connections``)."""
    body = encoded(review(small_pod("slow", "team-a"), "team-a"))
    head = (f"POST {MUTATE_PODS_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head, body


async def scrape_loop(port: int, seconds: float) -> str:
    """A scrape and a readiness probe on the metrics port every 250 ms, as Prometheus and the kubelet do."""
    outcomes: Counter[str] = Counter()
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
    return said(outcomes)


# The padding shapes of big pods (padded_pod), one per attacking client.
SHAPES = ("env", "containers", "anti-affinity", "tolerations")
HELD = 1000
