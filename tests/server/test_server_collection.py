"""The collector beside a live cache (webhook.server.collection.SurvivorFreezer): each full collection's survivors
are frozen, so the next walks only what came since; once the frozen set outgrew its bound, one complete walk frees
what died frozen in reference cycles. The policy against counted stand-ins, then once with the real collector."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import Iterator

import pytest

from webhook.server.app import collect_between_turns_forever, freeze_gc_once_ready
from webhook.server.collection import (
    BACKSTOP_THRESHOLD,
    SurvivorFreezer,
    collect_between_turns,
    collector_threshold,
    finish_complete_walk,
)
from webhook.sources.source import MemorySource


async def cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class Collector:
    """Stand-ins for gc.freeze, gc.unfreeze and gc.get_freeze_count."""

    def __init__(self, frozen: int) -> None:
        self.frozen = frozen
        self.calls: list[str] = []

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def count(self) -> int:
        return self.frozen


def freezer_on(collector: Collector, youngest: int = 2) -> SurvivorFreezer:
    freezer = SurvivorFreezer(1.25, youngest=youngest, check_seconds=0, freeze=collector.freeze,
                              unfreeze=collector.unfreeze, frozen_count=collector.count)
    freezer.baseline = collector.count()
    return freezer


def test_the_survivors_of_full_collections_only_are_frozen() -> None:
    collector = Collector(frozen=1000)
    freezer = freezer_on(collector)
    for generation in (0, 1, 0):
        freezer("stop", {"generation": generation})
    freezer("start", {"generation": 2})
    assert collector.calls == []
    freezer("stop", {"generation": 2})
    assert collector.calls == ["freeze"] and freezer.refreezes == 1


def test_from_generation_0_the_survivors_of_every_collection_are_frozen() -> None:
    collector = Collector(frozen=1000)
    freezer = freezer_on(collector, youngest=0)
    for generation in (0, 1, 0, 2):
        freezer("start", {"generation": generation})
        freezer("stop", {"generation": generation})
    assert collector.calls == ["freeze"] * 4 and freezer.refreezes == 4


def test_from_generation_1_young_collections_are_left_alone() -> None:
    collector = Collector(frozen=1000)
    freezer = freezer_on(collector, youngest=1)
    for generation in (0, 0, 1, 0):
        freezer("stop", {"generation": generation})
    assert collector.calls == ["freeze"]


def test_a_complete_walk_freezes_nothing_until_a_full_collection_which_serve_runs_itself() -> None:
    collector = Collector(frozen=1000)
    freezer = freezer_on(collector, youngest=0)
    collected: list[str] = []

    def collect() -> None:
        collected.append("full")
        freezer("stop", {"generation": 2})

    assert not finish_complete_walk(freezer, collect) and collected == []  # no walk started: nothing to do
    collector.frozen = 1300
    freezer("stop", {"generation": 0})  # past the bound: everything unfrozen
    assert collector.calls == ["unfreeze"] and freezer.walking
    collector.frozen = 0
    for generation in (0, 1, 0):  # young collections during the walk: survivors left for the full one
        freezer("stop", {"generation": generation})
    assert collector.calls == ["unfreeze"]
    collector.frozen = 1050
    assert finish_complete_walk(freezer, collect) and collected == ["full"]
    assert collector.calls == ["unfreeze", "freeze"] and not freezer.walking and freezer.baseline == 1050
    assert not finish_complete_walk(freezer, collect) and collected == ["full"]


def test_what_a_warming_server_builds_after_the_freeze_becomes_the_baseline_at_the_first_check() -> None:
    collector = Collector(frozen=1000)
    now = [0.0]
    freezer = SurvivorFreezer(1.25, youngest=0, check_seconds=60, clock=lambda: now[0], freeze=collector.freeze,
                              unfreeze=collector.unfreeze, frozen_count=collector.count)
    was_enabled = gc.isenabled()
    gc.disable()  # only this test's calls reach the freezer
    try:
        freezer.install()
    finally:
        freezer.uninstall()
        if was_enabled:
            gc.enable()
    assert freezer.baseline == 1000
    collector.frozen = 1700  # the predictor's index and the exposure scan, built after the cache's freeze
    now[0] += 30
    freezer("stop", {"generation": 0})  # no check yet
    now[0] += 30
    freezer("stop", {"generation": 0})  # the first check: the warm server's count is the baseline, no walk
    assert collector.calls == ["freeze", "freeze"] and freezer.baseline == 1700 and freezer.complete_walks == 0
    collector.frozen = 2200  # past 1.25 x the new baseline: leaked cycles
    now[0] += 60
    freezer("stop", {"generation": 0})
    assert collector.calls[-1] == "unfreeze" and freezer.complete_walks == 1


def test_a_generation_that_is_none_is_refused() -> None:
    with pytest.raises(ValueError, match="generation"):
        SurvivorFreezer(youngest=3)


def test_the_frozen_set_is_counted_once_a_minute_at_most() -> None:
    collector = Collector(frozen=1000)
    counted = 0
    now = [0.0]

    def count() -> int:
        nonlocal counted
        counted += 1
        return collector.frozen

    freezer = SurvivorFreezer(1.25, check_seconds=60, clock=lambda: now[0], freeze=collector.freeze,
                              unfreeze=collector.unfreeze, frozen_count=count)
    freezer.baseline = 1000
    for _ in range(8):  # full collections of a small young set come often: counting walks the whole frozen set
        now[0] += 20
        freezer("stop", {"generation": 2})
    assert counted == 2 and collector.calls == ["freeze"] * 8


def test_a_frozen_set_past_its_bound_is_walked_once_completely_then_frozen_again_with_a_new_bound() -> None:
    collector = Collector(frozen=1000)
    freezer = freezer_on(collector)
    collector.frozen = 1250  # within the bound: pods replaced by newer ones, a few cycles
    freezer("stop", {"generation": 2})
    collector.frozen = 1300
    freezer("stop", {"generation": 2})  # past it: unfrozen, the next full collection walks everything
    assert collector.calls == ["freeze", "unfreeze"] and freezer.complete_walks == 1
    collector.frozen = 0
    collector.calls.clear()
    freezer("stop", {"generation": 1})
    assert collector.calls == []
    collector.frozen = 1100  # what survived the complete walk
    freezer("stop", {"generation": 2})
    assert collector.calls == ["freeze"] and freezer.baseline == 1100


@pytest.fixture(params=[2, 0], ids=["full-collections", "every-collection"])
def real_freezer(request: pytest.FixtureRequest) -> Iterator[SurvivorFreezer]:
    """The freezer on the real collector, whose automatic collections are off meanwhile: only the test's own
    ``gc.collect()`` calls run (and call the freezer), in a known order."""
    was_enabled = gc.isenabled()
    gc.disable()
    gc.collect()
    gc.freeze()
    freezer = SurvivorFreezer(1.25, youngest=request.param, check_seconds=0)
    freezer.install()
    try:
        yield freezer
    finally:
        freezer.uninstall()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_with_the_collector_survivors_are_frozen_and_a_complete_walk_frees_cycles_that_died_frozen(
        real_freezer: SurvivorFreezer) -> None:
    kept = [[i] for i in range(1000)]  # tracked objects alive across a full collection
    before = gc.get_freeze_count()
    gc.collect()
    assert gc.get_freeze_count() >= before + len(kept)  # survivors frozen: the next full collection skips them
    cycles = [Node() for _ in range(int(real_freezer.baseline * 0.3) + 10)]
    dead = [weakref.ref(cycle) for cycle in cycles]
    gc.collect()  # the cycles, alive, are frozen with the other survivors: past the bound now
    del cycles
    gc.collect()  # past the bound: nothing frozen any more (the cycles died frozen, still held)
    assert real_freezer.complete_walks == 1 and gc.get_freeze_count() == 0
    assert all(ref() is not None for ref in dead[:10])
    gc.collect()  # the complete walk: the cycles are freed, the survivors frozen again
    assert all(ref() is None for ref in dead)
    assert gc.get_freeze_count() >= len(kept) and real_freezer.baseline >= len(kept)
    del kept


def test_from_generation_0_a_young_collection_freezes_its_survivors_with_the_collector() -> None:
    was_enabled = gc.isenabled()
    gc.disable()
    gc.collect()
    gc.freeze()
    freezer = SurvivorFreezer(1.25, youngest=0, check_seconds=3600)
    freezer.install()
    try:
        kept = [[i] for i in range(1000)]  # young, tracked, alive across a generation-0 collection
        before = gc.get_freeze_count()
        gc.collect(0)
        assert gc.get_freeze_count() >= before + len(kept) and freezer.refreezes == 1
        assert gc.get_count()[0] < 100  # nothing young left for the next collection to walk
        del kept
    finally:
        freezer.uninstall()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


async def test_serve_installs_the_freezer_once_the_cache_has_synced() -> None:
    source = MemorySource(ready=False)
    freezer = SurvivorFreezer()
    task = asyncio.create_task(freeze_gc_once_ready(source, poll_seconds=0.01, freezer=freezer))
    try:
        await asyncio.sleep(0.05)
        assert freezer not in gc.callbacks  # nothing frozen before the initial sync
        source.ready = True
        await asyncio.wait_for(task, 10)
        assert freezer in gc.callbacks and freezer.baseline > 0
    finally:
        freezer.uninstall()
        gc.unfreeze()


def test_between_turns_a_young_collection_runs_unless_a_complete_walk_waits_for_its_full_one() -> None:
    collector = Collector(frozen=1000)
    freezer = freezer_on(collector, youngest=0)
    calls: list[tuple[int, ...]] = []

    def collect(*generation: int) -> None:
        calls.append(generation)
        freezer("stop", {"generation": generation[0] if generation else 2})

    collect_between_turns(freezer, collect)
    assert calls == [(0,)]
    collector.frozen = 2000
    collect_between_turns(freezer, collect)
    assert freezer.walking and calls == [(0,), (0,)]
    collect_between_turns(freezer, collect)
    assert calls == [(0,), (0,), ()]  # the full collection, no young one beside it
    assert not freezer.walking
    collect_between_turns(freezer, collect, enabled=lambda: False)
    assert calls == [(0,), (0,), ()]  # the collector is held off (an informer reading a LIST): no collection


def test_the_collector_threshold_is_raised_meanwhile_and_restored_after() -> None:
    before = gc.get_threshold()
    with collector_threshold(before[0] + 12345):
        assert gc.get_threshold() == (before[0] + 12345, *before[1:])
    assert gc.get_threshold() == before


async def test_serve_collects_young_cycles_between_turns_and_freezes_the_survivors() -> None:
    """With the collector's own threshold raised past what the test allocates, only the collections between turns
    can free these cycles."""
    source = MemorySource(ready=True)
    freezer = SurvivorFreezer(youngest=0, check_seconds=3600)
    before = gc.get_threshold()
    task = asyncio.create_task(collect_between_turns_forever(source, freezer, interval_seconds=0.005))
    try:
        for _ in range(200):
            if freezer in gc.callbacks:
                break
            await asyncio.sleep(0.005)
        assert gc.get_threshold()[0] == BACKSTOP_THRESHOLD
        kept = [[i] for i in range(1000)]
        cycles = [Node() for _ in range(100)]
        dead = [weakref.ref(cycle) for cycle in cycles]
        del cycles
        frozen = gc.get_freeze_count()
        for _ in range(200):
            if all(ref() is None for ref in dead):
                break
            await asyncio.sleep(0.005)
        assert all(ref() is None for ref in dead)
        assert gc.get_freeze_count() >= frozen + len(kept) and freezer.refreezes >= 1
    finally:
        await cancel(task)
        freezer.uninstall()
        gc.unfreeze()
    assert gc.get_threshold() == before
