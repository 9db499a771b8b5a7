"""Fuzz every endpoint of a running ``preempt-guard serve`` with hostile input (not a test; bounded).

    .venv/bin/python bench/fuzz.py [--inputs 100000] [--duration 600] [--connections 4] [--quick]

The server runs in its own process over TLS on a small snapshot; hypothesis draws cases from
tests/fuzz/fuzz_inputs.py (malformed JSON, deep nesting, huge strings and arrays, wrong types, unicode,
broken base64, duplicate keys, wrong methods, unknown paths, hostile headers) and each case is sent with
derived variants (truncated, bytes flipped, re-nested). Prints the count per status, contract violations
(a status outside tests/fuzz's ``allowed_statuses``), the slowest answer, and the server's RSS along the run
(flat memory: no growth after warm-up). Exit status 1 on any violation, hang or unhealthy server after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests" / "fuzz"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from fuzz_inputs import (  # noqa: E402
    FuzzCase,
    allowed_statuses,
    fuzz_cases,
    may_be_cut_off,
    pod_review,
    small_cluster_objects,
    variants,
)

from webhook.certs.issuance import generate_ca, issue_serving_certificate  # noqa: E402

VARIANTS = 8
REQUEST_TIMEOUT = 15.0


class TimeUp(BaseException):
    """Raised inside the hypothesis test to end the run at the duration cap (not a failure)."""


@dataclass
class Tally:
    sent: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    slowest: float = 0.0
    slowest_case: str = ""
    rss_samples: list[tuple[int, float]] = field(default_factory=list)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def send(session: aiohttp.ClientSession, base: str, case: FuzzCase) -> int | str:
    try:
        async with session.request(case.method, base + case.path, data=case.body, headers=case.headers,
                                   skip_auto_headers=("Content-Type",)) as response:
            await response.read()
            return response.status
    except aiohttp.ClientResponseError as exc:  # aiohttp's 400 to HEAD with a body
        return exc.status if case.method == "HEAD" else f"client error {exc.status}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return type(exc).__name__


async def send_all(session: aiohttp.ClientSession, base: str, batch: list[FuzzCase]) -> list[int | str]:
    return list(await asyncio.gather(*(send(session, base, case) for case in batch)))


def run(args: argparse.Namespace, tmp: Path) -> int:
    ca_pem, ca_key = generate_ca("fuzz-ca", 1)
    cert, key = issue_serving_certificate(ca_pem, ca_key, ["localhost", "127.0.0.1"], 1)
    (tmp / "tls.crt").write_bytes(cert)
    (tmp / "tls.key").write_bytes(key)
    (tmp / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                  "items": small_cluster_objects()}))
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    log = (tmp / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "webhook.cli", "serve", "--cluster-snapshot", str(tmp / "cluster.json"),
         "--tls-cert", str(tmp / "tls.crt"), "--tls-key", str(tmp / "tls.key"), "--host", "127.0.0.1",
         "--port", str(port), "--metrics-port", "0", "--log-level", "error", "--shutdown-grace", "0"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=log)
    client = ssl.create_default_context(cadata=ca_pem.decode())
    loop = asyncio.new_event_loop()
    tally = Tally()
    try:
        session = loop.run_until_complete(_session(client, args.connections))
        loop.run_until_complete(_wait_ready(session, base, server))
        rss_start = rss_mib(server.pid)
        started = time.monotonic()
        stop_at = started + args.duration
        examples = math.ceil(args.inputs / VARIANTS)

        @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(case=fuzz_cases(), seed=st.integers(0, 2**32))
        def fuzz(case: FuzzCase, seed: int) -> None:
            if time.monotonic() > stop_at or tally.sent >= args.inputs:
                raise TimeUp
            batch = variants(case, seed, VARIANTS)
            began = time.perf_counter()
            results = loop.run_until_complete(send_all(session, base, batch))
            elapsed = time.perf_counter() - began
            for variant, status in zip(batch, results, strict=True):
                tally.sent += 1
                if isinstance(status, str) and may_be_cut_off(variant):
                    status = "closed (undecodable Content-Encoding)"
                tally.statuses[str(status)] += 1
                if status not in allowed_statuses(variant) and not str(status).startswith("closed"):
                    tally.violations.append(f"{variant.method} {variant.path[:40]} -> {status}: "
                                            f"{variant.body[:120]!r} headers={list(variant.headers)}")
            if elapsed > tally.slowest:
                tally.slowest, tally.slowest_case = elapsed, f"{case.method} {case.path[:40]} ({len(case.body)} B)"
            if tally.sent // 10_000 > len(tally.rss_samples):
                tally.rss_samples.append((tally.sent, rss_mib(server.pid)))
                print(f"  {tally.sent:7d} inputs, {time.monotonic() - started:5.0f}s, server RSS "
                      f"{tally.rss_samples[-1][1]:.0f} MiB", flush=True)

        with contextlib.suppress(TimeUp):
            fuzz()
        elapsed = time.monotonic() - started
        healthy = loop.run_until_complete(_healthy(session, base))
        rss_end = rss_mib(server.pid)
        loop.run_until_complete(session.close())
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        loop.close()
    return report(tally, elapsed, rss_start, rss_end, healthy, server.returncode)


def report(tally: Tally, elapsed: float, rss_start: float, rss_end: float, healthy: bool, exit_code: int) -> int:
    print(f"inputs sent: {tally.sent:,} in {elapsed:.0f}s ({tally.sent / elapsed:,.0f}/s), "
          f"{VARIANTS} per hypothesis example")
    print("answers by status: " + ", ".join(f"{status}: {n:,}" for status, n in sorted(tally.statuses.items())))
    print(f"slowest batch of {VARIANTS}: {tally.slowest * 1000:.0f} ms ({tally.slowest_case})")
    samples = ", ".join(f"{n // 1000}k: {rss:.0f}" for n, rss in tally.rss_samples)
    print(f"server RSS (MiB): start {rss_start:.0f}; {samples}; end {rss_end:.0f}")
    print(f"server healthy after: {healthy}; server exit code after SIGTERM: {exit_code}")
    print(f"contract violations: {len(tally.violations)}")
    for violation in tally.violations[:20]:
        print("  " + violation)
    ok = not tally.violations and healthy and exit_code == 0
    print("RESULT: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


async def _session(client: ssl.SSLContext, connections: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client, limit=connections),
                                 timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT))


async def _wait_ready(session: aiohttp.ClientSession, base: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            async with session.get(base + "/readyz") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("server did not start")
        await asyncio.sleep(0.1)


async def _healthy(session: aiohttp.ClientSession, base: str) -> bool:
    async with session.get(base + "/healthz") as health:
        if health.status != 200:
            return False
    async with session.post(base + "/mutate/pods", json=pod_review("after-fuzz")) as response:
        body = await response.json()
        return response.status == 200 and body["response"]["uid"] == "after-fuzz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--duration", type=float, default=600.0, help="cap in seconds")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="10,000 inputs, 120 s cap")
    args = parser.parse_args(argv)
    if args.quick:
        args.inputs, args.duration = min(args.inputs, 10_000), min(args.duration, 120.0)
    with tempfile.TemporaryDirectory(prefix="preemptguard-fuzz-") as tmp:
        return run(args, Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
