"""Admissions go first on the event loop: between two batches of watch events the informers wait while an admission
is in flight on the admission listener (``RequestsInFlight``), for at most ``max_wait_seconds`` a batch, so a request
whose body comes after its head is not made to wait behind a second batch, and a request held open never stops the
watch."""

from __future__ import annotations

import asyncio
import json

from fake_apiserver import FakeApiServer, pod
from faults_support import eventually, pod_review

from webhook.routes import MUTATE_PODS_PATH
from webhook.server.connections import RequestsInFlight
from webhook.server.testing import LoopbackWebhook
from webhook.sources.kube_source import KubernetesSource


async def test_the_watch_waits_for_admissions_in_flight_a_bounded_time_each_batch(
        fake_api: FakeApiServer, hook: LoopbackWebhook) -> None:
    assert hook.server is not None
    assert isinstance(hook.source, KubernetesSource)
    wait = hook.source.between_watch_batches
    assert wait is not None
    in_flight = wait.__self__
    assert isinstance(in_flight, RequestsInFlight) and in_flight.count == 0
    body = json.dumps(pod_review()).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", hook.server.https_port, ssl=hook.client_context)
    try:
        writer.write(f"POST {MUTATE_PODS_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode())
        await writer.drain()
        # The head is in, the body is not: the review is in flight.
        assert await eventually(lambda: in_flight.count == 1)
        # The watch goes on while it is held (a millisecond at most per batch).
        for i in range(3):
            fake_api.create(pod(f"held-{i}", "team-b", node_name="node-2", priority_class_name="low", priority=10))
        assert await eventually(lambda: {f"team-b/held-{i}" for i in range(3)} <= set(hook.source.state.pods))
        assert in_flight.count == 1
        writer.write(body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 10)
        assert status_line.startswith(b"HTTP/1.1 200"), status_line
        assert await eventually(lambda: in_flight.count == 0)
    finally:
        writer.close()


async def test_a_request_is_in_flight_from_its_first_bytes_and_never_counted_twice_or_left_counted(
        hook: LoopbackWebhook) -> None:
    # From its first bytes: reaching the handler takes aiohttp a few turns of the loop, and without this a batch of
    # watch events ran in each. Counted once while it is handled, and no longer once its connection is gone.
    assert hook.server is not None and isinstance(hook.source, KubernetesSource)
    wait = hook.source.between_watch_batches
    assert wait is not None
    in_flight = wait.__self__
    assert isinstance(in_flight, RequestsInFlight)
    body = json.dumps(pod_review()).encode()
    head_rest = f"st: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    for first, rest, status in ((f"POST {MUTATE_PODS_PATH} HTTP/1.1\r\nHo", None, None),
                                (f"POST {MUTATE_PODS_PATH} HTTP/1.1\r\nHo", head_rest, b"HTTP/1.1 200"),
                                ("NOT A REQUEST LINE\r\n\r\n", None, b"HTTP/1.0 400")):
        reader, writer = await asyncio.open_connection("127.0.0.1", hook.server.https_port, ssl=hook.client_context)
        try:
            writer.write(first.encode())
            await writer.drain()
            if status != b"HTTP/1.0 400":  # part of a head: no handler yet, in flight already
                assert await eventually(lambda: in_flight.count == 1)
            if rest is not None:
                writer.write(rest.encode() + body)
                await writer.drain()
            if status is not None:
                status_line = await asyncio.wait_for(reader.readline(), 10)
                assert status_line.startswith(status), status_line
            if status == b"HTTP/1.1 200":  # answered, the connection kept alive: nothing left counted
                assert await eventually(lambda: in_flight.count == 0)
        finally:
            writer.close()
        assert await eventually(lambda: in_flight.count == 0)
