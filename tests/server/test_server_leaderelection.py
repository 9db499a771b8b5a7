"""Leader election on a Lease (webhook.server.leaderelection), client-go's rules on the fake API server's
coordination.k8s.io/v1 Leases (optimistic concurrency by resourceVersion): one leader at a time, a takeover only
after the lease has gone unrenewed for its whole duration on the candidate's own clock, at once after a release,
and a leader that cannot renew stops leading before anyone may take over."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources"))

from fake_apiserver import FakeApiServer

from webhook.kubeapi import KubeClient
from webhook.server.leaderelection import ElectionSettings, LeaderElector, micro_time

NAMESPACE = "preemptguard"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[FakeApiServer, KubeClient]]:
    async with FakeApiServer() as fake:
        client = KubeClient(kubeconfig=str(fake.write_kubeconfig(tmp_path)), context="fake")
        await client.open()
        try:
            yield fake, client
        finally:
            await client.close()


def elector(client: KubeClient, identity: str, clock: Clock, **timing: float) -> LeaderElector:
    settings = ElectionSettings(NAMESPACE, identity, **timing)  # type: ignore[arg-type]
    return LeaderElector(client, settings, clock=clock)


def lease(fake: FakeApiServer) -> dict[str, object]:
    return dict(fake.leases[(NAMESPACE, "preemptguard")]["spec"])


async def test_the_first_candidate_creates_the_lease_and_the_second_waits_out_its_whole_duration(
        api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, client = api
    clock = Clock()
    first, second = elector(client, "a", clock), elector(client, "b", clock)
    assert await first.try_acquire_or_renew()
    spec = lease(fake)
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0
    assert not await second.try_acquire_or_renew()  # held, and b has just seen it
    clock.now += 14.9
    assert not await second.try_acquire_or_renew()
    assert await first.try_acquire_or_renew()  # a renews: the record changes, b's wait starts when b sees it
    clock.now += 14.9
    assert not await second.try_acquire_or_renew()  # b sees the renewal only now
    clock.now += 14.9
    assert not await second.try_acquire_or_renew()
    clock.now += 0.2  # 15.1 s since b saw a's last renewal
    assert await second.try_acquire_or_renew()
    spec = lease(fake)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


async def test_a_renewal_keeps_the_acquire_time_and_a_takeover_sets_it(api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, client = api
    clock = Clock()
    first = elector(client, "a", clock)
    assert await first.try_acquire_or_renew()
    acquired = lease(fake)["acquireTime"]
    await asyncio.sleep(0.01)
    assert await first.try_acquire_or_renew()
    assert lease(fake)["acquireTime"] == acquired and lease(fake)["renewTime"] != acquired
    assert str(acquired).endswith("Z") and len(str(acquired)) == len("2025-06-02T09:30:00.000000Z")


async def test_a_released_lease_is_taken_at_once(api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, client = api
    clock = Clock()
    first, second = elector(client, "a", clock), elector(client, "b", clock)
    assert await first.try_acquire_or_renew()
    first.is_leader = True
    assert not await second.try_acquire_or_renew()
    await first.release()
    assert not first.is_leader and lease(fake)["holderIdentity"] == "" and lease(fake)["leaseDurationSeconds"] == 1
    assert await second.try_acquire_or_renew()  # an empty holder: no wait
    await first.release()  # a replica that does not hold the lease releases nothing
    assert lease(fake)["holderIdentity"] == "b"


async def test_two_candidates_racing_for_the_same_version_get_one_winner(
        api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, client = api
    clock = Clock()
    first, second = elector(client, "a", clock), elector(client, "b", clock)
    assert await first.try_acquire_or_renew()
    clock.now += 100  # a stopped renewing long ago: both b and c may take over, only one update can win
    third = elector(client, "c", clock)
    await second.try_acquire_or_renew(), await third.try_acquire_or_renew()  # each observes the record
    clock.now += 100
    results = await asyncio.gather(second.try_acquire_or_renew(), third.try_acquire_or_renew())
    assert sorted(results) == [False, True]
    assert lease(fake)["holderIdentity"] in ("b", "c")


async def test_the_loop_leads_renews_and_steps_down_when_it_cannot_renew(
        api: tuple[FakeApiServer, KubeClient]) -> None:
    fake, client = api
    events: list[str] = []
    settings = ElectionSettings(NAMESPACE, "a", lease_duration_seconds=1.5, renew_deadline_seconds=1.0,
                                retry_period_seconds=0.1)
    leader = LeaderElector(client, settings, on_started_leading=lambda: events.append("start"),
                           on_stopped_leading=lambda: events.append("stop"))
    task = asyncio.create_task(leader.run())
    try:
        for _ in range(100):
            if leader.is_leader:
                break
            await asyncio.sleep(0.02)
        assert leader.is_leader and events == ["start"]
        renewed = lease(fake)["renewTime"]
        await asyncio.sleep(0.3)
        assert lease(fake)["renewTime"] != renewed
        # Someone else holds it now (an operator's edit, a split brain): a's update conflicts until its deadline.
        fake.edit_lease(NAMESPACE, "preemptguard", {
            "holderIdentity": "z", "leaseDurationSeconds": 15, "renewTime": micro_time(datetime.now(UTC)),
            "leaseTransitions": 9})
        for _ in range(150):
            if not leader.is_leader:
                break
            await asyncio.sleep(0.02)
        assert not leader.is_leader and events == ["start", "stop"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_the_timing_must_leave_the_leader_time_to_step_down() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        ElectionSettings(NAMESPACE, "a", lease_duration_seconds=10, renew_deadline_seconds=10)
