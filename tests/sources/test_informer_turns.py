"""The informers share the event loop with the admissions: a burst of watch events and the reconcile of a LIST are
applied a bounded batch at a time, with a turn of the loop between batches (an admission never waits behind a
whole burst or a whole relist). Counted in turns of the loop, not timed."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import orjson
import pytest
from fake_apiserver import pod

from webhook.cluster.model import ClusterObject
from webhook.cluster.snapshot import ClusterState
from webhook.kubeapi import ApiAnswer, KubeClient
from webhook.server.connections import RequestsInFlight
from webhook.sources import informer as informer_module
from webhook.sources.informer import PODS, Informer, InformerSettings


class TurnCounter:
    """A task that counts the turns of the event loop it gets."""

    def __init__(self) -> None:
        self.turns = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.turns += 1
            await asyncio.sleep(0)

    async def __aenter__(self) -> TurnCounter:
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class BurstApi:
    """The two calls an informer makes: a LIST of ``listed`` pods in one page, and a watch whose stream hands over
    ``burst`` ADDED events at once, as one read of a busy stream does (no await between them)."""

    def __init__(self, listed: int = 0, burst: int = 0) -> None:
        self.listed = [pod(f"listed-{i}", "team-a", node_name="n1") for i in range(listed)]
        self.burst = burst

    async def request(self, method: str, path: str, **_: Any) -> ApiAnswer:
        for i, item in enumerate(self.listed):
            item["metadata"]["resourceVersion"] = str(i + 1)
        return ApiAnswer(200, orjson.dumps({"metadata": {"resourceVersion": "100"}, "items": self.listed}))

    @contextlib.asynccontextmanager
    async def watch(self, path: str, **_: Any) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        async def events() -> AsyncIterator[dict[str, Any]]:
            for i in range(self.burst):
                raw = pod(f"burst-{i}", "team-a", node_name="n1")
                raw["metadata"]["resourceVersion"] = str(1000 + i)
                yield {"type": "ADDED", "object": raw}

        yield events()


def informer_on(api: BurstApi, state: ClusterState) -> Informer:
    return Informer(cast(KubeClient, api), PODS, state, InformerSettings(watch_timeout_seconds=1))


def turns_at_each_write(state: ClusterState, counter: TurnCounter, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The loop's turn count at every pod write to ``state``."""
    seen: list[int] = []
    upsert = state.upsert

    def recorded(obj: ClusterObject) -> None:
        seen.append(counter.turns)
        upsert(obj)

    monkeypatch.setattr(state, "upsert", recorded)
    return seen


async def test_a_burst_of_watch_events_is_applied_a_bounded_batch_per_turn_of_the_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = ClusterState()
    api = BurstApi(burst=10 * informer_module._WATCH_BATCH_EVENTS)
    informer = informer_on(api, state)
    async with TurnCounter() as counter:
        writes = turns_at_each_write(state, counter, monkeypatch)
        await informer.watch_once()
    assert len(state.pods) == api.burst and informer.resource_version == str(1000 + api.burst - 1)
    # Never more than a batch of events between two turns of the loop.
    batches = [writes.count(turn) for turn in sorted(set(writes))]
    assert len(batches) >= 10 and max(batches) <= informer_module._WATCH_BATCH_EVENTS


async def test_a_list_is_reconciled_into_the_state_a_bounded_slice_per_turn_of_the_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = ClusterState()
    stale = pod("gone", "team-a", node_name="n1")
    state.upsert(PODS.convert(stale))
    api = BurstApi(listed=5 * informer_module._REPLACE_BATCH)
    informer = informer_on(api, state)
    async with TurnCounter() as counter:
        writes = turns_at_each_write(state, counter, monkeypatch)
        await informer.list_and_replace()
    assert sorted(state.pods) == sorted(f"team-a/listed-{i}" for i in range(len(api.listed)))  # the stale one gone
    batches = [writes.count(turn) for turn in sorted(set(writes))]
    assert len(batches) >= 5 and max(batches) <= informer_module._REPLACE_BATCH


async def test_after_each_watch_event_its_hook_runs_in_the_same_turn_and_counts_toward_the_batch_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` refreshes the predictor's index in this hook (``catch_up_after_event``): an admission in the next
    turn finds the event's node current, and the refresh is part of the batch an admission may wait behind."""
    state = ClusterState()
    api = BurstApi(burst=12)
    monkeypatch.setattr(informer_module, "_WATCH_BATCH_SECONDS", 0.001)
    async with TurnCounter() as counter:
        writes = turns_at_each_write(state, counter, monkeypatch)
        hooked: list[tuple[int, int]] = []

        def hook() -> None:
            hooked.append((counter.turns, len(state.pods)))
            began = time.perf_counter()
            while time.perf_counter() - began < 0.002:  # longer than a batch may take
                pass

        informer = Informer(cast(KubeClient, api), PODS, state, InformerSettings(watch_timeout_seconds=1),
                            after_event=hook)
        await informer.watch_once()
    assert [turn for turn, _ in hooked] == writes  # each event's hook in its event's turn of the loop
    assert [count for _, count in hooked] == list(range(1, api.burst + 1))  # after the event is in the state
    assert len(set(writes)) == api.burst  # the hook's time ended each batch: one event a turn


async def test_a_request_that_comes_during_a_batch_reaches_its_handler_before_the_next_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp hands a request to its handler two turns after its bytes are read (the connection's task woken, then
    the request's own task created): a burst of watch events must let both turns run before its next batch, so an
    admission waits behind at most the batch that was running when it came."""
    state = ClusterState()
    api = BurstApi(burst=6)
    monkeypatch.setattr(informer_module, "_WATCH_BATCH_SECONDS", 0.0)  # one event a batch
    loop = asyncio.get_running_loop()
    seen_by_handler: list[tuple[int, int]] = []

    def request_arrives(applied: int) -> None:  # the turn that reads its bytes (``data_received``)
        loop.call_soon(loop.call_soon, lambda: seen_by_handler.append((applied, len(state.pods))))

    def hook() -> None:
        if len(state.pods) in (1, 3):
            loop.call_soon(request_arrives, len(state.pods))

    informer = Informer(cast(KubeClient, api), PODS, state, InformerSettings(watch_timeout_seconds=1),
                        after_event=hook)
    await informer.watch_once()
    assert len(state.pods) == api.burst
    assert seen_by_handler == [(1, 1), (3, 3)]  # no batch applied between a request's bytes and its handler


async def test_between_batches_the_informer_waits_while_a_request_is_in_flight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` hands the informers its admission listener's ``RequestsInFlight.wait_for_none``: a request that is
    suspended (its body still coming) resumes before any further batch of watch events."""
    state = ClusterState()
    api = BurstApi(burst=6)
    monkeypatch.setattr(informer_module, "_WATCH_BATCH_SECONDS", 0.0)  # one event a batch
    in_flight = RequestsInFlight(max_wait_seconds=10.0)
    applied_while_in_flight: list[int] = []
    requests: list[asyncio.Task[None]] = []

    async def request() -> None:
        in_flight.began()
        try:
            for _ in range(20):  # suspended for many turns of the loop, as a body read waiting for its bytes
                applied_while_in_flight.append(len(state.pods))
                await asyncio.sleep(0)
        finally:
            in_flight.ended()

    def hook() -> None:
        if len(state.pods) == 2:
            requests.append(asyncio.ensure_future(request()))

    informer = Informer(cast(KubeClient, api), PODS, state, InformerSettings(watch_timeout_seconds=1),
                        after_event=hook, between_batches=in_flight.wait_for_none)
    await asyncio.wait_for(informer.watch_once(), 5)  # woken when the request ends, not at the 10 s bound
    await asyncio.gather(*requests)
    assert len(state.pods) == api.burst
    assert applied_while_in_flight == [2] * 20  # no event applied until the request was answered


async def test_a_request_held_open_slows_the_watch_by_a_bounded_wait_a_batch_but_never_stops_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = ClusterState()
    api = BurstApi(burst=6)
    monkeypatch.setattr(informer_module, "_WATCH_BATCH_SECONDS", 0.0)
    in_flight = RequestsInFlight(max_wait_seconds=0.02)
    in_flight.began()  # never ends during the watch (a client sending its body a byte at a time)
    informer = Informer(cast(KubeClient, api), PODS, state, InformerSettings(watch_timeout_seconds=1),
                        between_batches=in_flight.wait_for_none)
    began = time.monotonic()
    await asyncio.wait_for(informer.watch_once(), 5)
    elapsed = time.monotonic() - began
    assert len(state.pods) == api.burst
    assert elapsed >= (api.burst - 1) * 0.02  # it did wait, a batch at a time
    assert not in_flight._waiters  # no waiter left behind
    in_flight.ended()
    began = time.monotonic()
    await in_flight.wait_for_none()  # none in flight: no wait
    assert time.monotonic() - began < 0.01
