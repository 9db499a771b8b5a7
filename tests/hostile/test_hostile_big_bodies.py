"""Issue #24, big bodies: four clients sending 1.4 MiB pods held the event loop (decoding, reading the pod and the
start of its prediction ran on it), so a priority-only admission took 3 s and the 2.5 s admission deadline could
not fire. Large bodies are now read, decoded and predicted off the loop; a pod review too large to read at all
is answered from its head instead of a 413 the API server would turn into an admission.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench.hostile_network import (
    LARGEST_CREATE_BYTES,
    UNGUARDED_NAMESPACE,
    encoded,
    guarded_pod,
    padded_pod,
    review,
    small_pod,
    write_inputs,
)
from webhook.cluster.snapshot import ClusterState
from webhook.config import load_config
from webhook.routes import MUTATE_PODS_PATH
from webhook.server import handlers
from webhook.server.settings import MAX_BODY_BYTES, ServerSettings
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import MemorySource, SnapshotSource


def settings(**overrides: Any) -> ServerSettings:
    return ServerSettings(**{"host": "127.0.0.1", "port": 0, "metrics_port": 0, "tls_self_signed": True,
                             **overrides})


async def test_a_large_review_is_decoded_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded_on: list[bool] = []
    read_review = handlers.read_review

    def recording(body: bytes) -> Any:
        decoded_on.append(threading.current_thread() is threading.main_thread())
        return read_review(body)

    monkeypatch.setattr(handlers, "read_review", recording)
    async with LoopbackWebhook(MemorySource(ClusterState())) as hook:
        small = review(small_pod("small", "team-a"), "team-a")
        large = review(padded_pod(200_000, "team-a"), "team-a")
        for body in (small, large):
            status, answer = await hook.post_json(MUTATE_PODS_PATH, body)
            assert status == 200 and answer["response"]["uid"] == body["request"]["uid"]
    assert decoded_on == [True, False]  # the small one inline (cheaper), the large one in the decoder thread


async def test_the_deadline_fires_while_a_large_review_is_still_being_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review whose reading outlasts the admission deadline is answered at the deadline (with the uid from its
    head), and small reviews are answered meanwhile: the loop was never held."""
    read_review = handlers.read_review

    def slow(body: bytes) -> Any:
        if len(body) > 100_000:
            time.sleep(3.0)  # as long as reading a padded pod took on a busy machine
        return read_review(body)

    monkeypatch.setattr(handlers, "read_review", slow)
    async with LoopbackWebhook(MemorySource(ClusterState()), settings(admission_deadline_seconds=0.8)) as hook:
        large = review(padded_pod(200_000, "team-a"), "team-a")
        started = time.monotonic()
        pending = asyncio.create_task(hook.post_json(MUTATE_PODS_PATH, large))
        await asyncio.sleep(0.2)
        small_started = time.monotonic()
        status, _ = await hook.post_json(MUTATE_PODS_PATH, review(small_pod("small", "team-a"), "team-a"))
        assert status == 200 and time.monotonic() - small_started < 0.5
        status, answer = await pending
        assert time.monotonic() - started < 2.0  # the deadline (0.8 s), not the 3 s read
        assert status == 200 and answer["response"]["uid"] == large["request"]["uid"]
        assert answer["response"]["auditAnnotations"].get("deadline-exceeded") == "0.8s"


async def test_a_pod_review_over_the_size_limit_is_answered_not_refused() -> None:
    """The API server reads create bodies up to 3 MiB and defaults the pod before calling webhooks, so a review
    can exceed PreemptGuard's 3 MiB. A 413 would be failurePolicy's (Ignore: admitted unchecked); the review is
    answered as a pod that could not be predicted, with its uid."""
    async with LoopbackWebhook(MemorySource(ClusterState())) as hook:
        oversized = review(padded_pod(MAX_BODY_BYTES + 50_000, "team-a"), "team-a")
        status, answer = await hook.post_json(MUTATE_PODS_PATH, oversized)
        assert status == 200
        response = answer["response"]
        assert response["uid"] == oversized["request"]["uid"]
        assert response["auditAnnotations"]["prediction-skipped"] == "too-large"


def _flood(port: int, body: bytes, seconds: float) -> None:
    """Four clients sending ``body`` back to back, from a process of their own (their CPU is not the prober's)."""
    import ssl

    from bench.hostile_network import exchange

    async def client() -> None:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        stop_at = time.monotonic() + seconds
        while time.monotonic() < stop_at:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
                while time.monotonic() < stop_at:
                    await exchange(reader, writer, "POST", MUTATE_PODS_PATH, body)
                writer.close()
            except (OSError, asyncio.IncompleteReadError):
                await asyncio.sleep(0.05)

    async def four() -> None:
        await asyncio.gather(*(client() for _ in range(4)))

    asyncio.run(four())


async def test_priority_only_admissions_stay_fast_while_four_clients_send_big_pods(tmp_path: Path) -> None:
    """The measured bound (bench/hostile.py --attack big-bodies-3mib prints the figures): before the fix a
    priority-only admission took over 2 s, and the guarded pod past the API server's 3 s timeout, while four
    clients sent the largest pods the API server accepts (3 MiB, padded with anti-affinity terms); the target is
    1 s at p99 on a quiet machine, asserted here with room for a busy one."""
    snapshot, config_file = write_inputs(tmp_path)
    source = SnapshotSource(snapshot)
    async with LoopbackWebhook(source, config=load_config(config_file)) as hook:
        assert hook.server is not None
        body = encoded(review(padded_pod(LARGEST_CREATE_BYTES, "team-a", "anti-affinity"), "team-a"))
        assert len(body) <= MAX_BODY_BYTES
        attacker = multiprocessing.get_context("spawn").Process(target=_flood,
                                                                args=(hook.server.https_port, body, 8.0))
        attacker.start()
        try:
            await asyncio.sleep(2.0)
            latencies: list[float] = []
            guarded: list[tuple[float, Any]] = []
            for i in range(20):
                started = time.monotonic()
                probe = review(small_pod(f"p{i}", UNGUARDED_NAMESPACE), UNGUARDED_NAMESPACE)
                status, _ = await hook.post_json(MUTATE_PODS_PATH, probe)
                assert status == 200
                latencies.append(time.monotonic() - started)
                if i % 5 == 0:
                    started = time.monotonic()
                    status, answer = await hook.post_json(MUTATE_PODS_PATH, review(guarded_pod(), "team-a"))
                    guarded.append((time.monotonic() - started, answer["response"]))
                await asyncio.sleep(0.1)
        finally:
            attacker.terminate()
            attacker.join()
    # Most answers stay quick and none nears the API server's 3 s timeout (before the fix: 3.06 s). The bound is on
    # the median and the maximum, not on every answer under 1.5 s: on 2 busy cores the first answers while the
    # attacker's process warms up took up to 1.9 s (seen in the full suite), which is no regression.
    assert statistics.median(latencies) < 0.5 and max(latencies) < 2.9, sorted(latencies)
    # Answered before the API server's 3 s timeout (before the fix: 5 s, so failurePolicy Ignore admitted it),
    # and denied every time: enforce holds during the attack.
    assert all(seconds < 2.9 for seconds, _ in guarded), guarded
    assert [response["allowed"] for _, response in guarded] == [False] * 4, guarded
