"""The live observer end to end (docs/interfaces.md §9): PreemptGuard on the fake API server, the test playing
kube-scheduler (bind, nominate, mark DisruptionTarget, delete). One test per verdict, then the churn cases,
each through the metric ``preemptguard_prediction_observed_total{verdict}`` and the log line."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fake_apiserver import FakeApiServer, pod
from observe_support import TOKEN, Live, Scheduler, free_port, manifest, replica, seed, until

from webhook.rbac import EVENTS_PERMISSIONS, REQUIRED_PERMISSIONS, allows
from webhook.routes import DEBUG_PREDICTIONS_PATH, PREDICTION_ID_ANNOTATION
from webhook.server.logs import FIELDS


@pytest.fixture
async def fake() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(token=TOKEN) as server:
        seed(server)
        yield server


@pytest.fixture
async def live(fake: FakeApiServer, tmp_path: Path) -> AsyncIterator[Live]:
    async with replica(fake, tmp_path) as running:
        yield running


@pytest.fixture
def scheduler(fake: FakeApiServer) -> Scheduler:
    return Scheduler(fake)


def mismatch_logs(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [getattr(r, FIELDS) for r in caplog.records if r.name == "webhook.observe" and hasattr(r, FIELDS)]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="webhook.observe")


# ---- one test per verdict -------------------------------------------------------------------------
async def test_fits_agree(live: Live, scheduler: Scheduler, caplog: pytest.LogCaptureFixture) -> None:
    created = await live.create(manifest("small", "100m"))
    assert created["metadata"]["annotations"][PREDICTION_ID_ANNOTATION]
    scheduler.bind("small", "n1")
    await live.wait_for({"agree": 1})
    assert mismatch_logs(caplog) == [] and len(live.observer.tracker) == 0


async def test_preempts_agree_with_victims_marked_around_the_nomination(live: Live, scheduler: Scheduler,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    await live.create(manifest("web", "1"))
    scheduler.refuse("web", nominate="n1", victims=1)
    scheduler.mark("batch-a")
    scheduler.delete("batch-a")  # its kubelet is done with it
    scheduler.bind("web", "n1")
    await live.wait_for({"agree": 1})
    assert mismatch_logs(caplog) == []


async def test_node_differs(live: Live, scheduler: Scheduler, caplog: pytest.LogCaptureFixture) -> None:
    await live.create(manifest("web", "1"))
    scheduler.refuse("web", nominate="n2")  # no announced count: decided after the settle time
    await live.wait_for({"node_differs": 1})
    (fields,) = mismatch_logs(caplog)
    assert fields["verdict"] == "node_differs" and fields["pod"] == "web" and fields["namespace"] == "team-a"
    assert fields["predicted"]["node"] == "n1" and fields["observed"]["node"] == "n2"
    assert "the scheduler nominated n2; predicted n1" in fields["why"]


async def test_victims_differ_names_only_the_preemptor_s_tenant(live: Live, scheduler: Scheduler,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    await live.create(manifest("web", "1"))
    scheduler.mark("batch-b")
    scheduler.refuse("web", nominate="n1", victims=2)
    scheduler.mark("batch-a")
    await live.wait_for({"victims_differ": 1})
    (fields,) = mismatch_logs(caplog)
    # team-b is another tenant than team-a: its victims are counts, its names nowhere.
    assert fields["predicted"]["victims"] == [] and fields["predicted"]["otherTenantVictims"] == 1
    assert fields["observed"]["victims"] == [] and fields["observed"]["otherTenantVictims"] == 2
    assert "team-b" not in str(fields) and "batch" not in caplog.text


async def test_outcome_differs(live: Live, scheduler: Scheduler, caplog: pytest.LogCaptureFixture) -> None:
    await live.create(manifest("huge", "3"))  # predicted Unschedulable
    scheduler.bind("huge", "n2")
    await live.wait_for({"outcome_differs": 1})
    (fields,) = mismatch_logs(caplog)
    assert (fields["predicted"]["outcome"], fields["observed"]["outcome"]) == ("Unschedulable", "Fits")


async def test_unobserved_when_the_window_ends(fake: FakeApiServer, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    async with replica(fake, tmp_path, observe_window_seconds=0.5) as live:
        await live.create(manifest("gated", "100m"))  # never scheduled (a scheduling gate, say)
        await live.wait_for({"unobserved": 1})
    (fields,) = mismatch_logs(caplog)
    assert fields["observed"]["outcome"] == "Error" and "0.5s window" in fields["observed"]["message"]


async def test_unschedulable_agrees_and_dry_runs_are_not_followed(live: Live, scheduler: Scheduler) -> None:
    _, patched = await live.admit(manifest("huge", "3"), dry_run=True)
    assert PREDICTION_ID_ANNOTATION not in patched["metadata"]["annotations"]
    await live.create(manifest("huge", "3"))
    scheduler.refuse("huge")
    await live.wait_for({"agree": 1})


# ---- churn ----------------------------------------------------------------------------------------
async def test_the_preemptor_deleted_before_it_is_scheduled(live: Live, scheduler: Scheduler) -> None:
    await live.create(manifest("web", "1"))
    scheduler.delete("web", "team-a")
    await live.wait_for({"unobserved": 1})


async def test_a_victim_deleted_by_someone_else_then_the_pod_simply_fits(live: Live, scheduler: Scheduler) -> None:
    await live.create(manifest("web", "1"))
    scheduler.delete("batch-a")  # not the scheduler's doing: no DisruptionTarget, no nomination yet
    scheduler.bind("web", "n1")  # the room was there: the scheduler preempted nobody
    await live.wait_for({"outcome_differs": 1})


async def test_another_pod_takes_the_room_first(live: Live, scheduler: Scheduler, fake: FakeApiServer,
                                                caplog: pytest.LogCaptureFixture) -> None:
    await live.create(manifest("small", "100m"))  # predicted to fit on n1
    fake.create(pod("rival", "team-b", node_name="n1", cpu="200m", priority_class_name="top", priority=2000))
    scheduler.refuse("small")  # n1 is full now: what the scheduler then does is the observation
    await live.wait_for({"outcome_differs": 1})
    (fields,) = mismatch_logs(caplog)
    assert (fields["predicted"]["outcome"], fields["observed"]["outcome"]) == ("Fits", "Unschedulable")


async def test_a_relist_counts_nothing_twice(live: Live, scheduler: Scheduler, fake: FakeApiServer) -> None:
    await live.create(manifest("web", "1"))
    await live.create(manifest("small", "100m"))
    scheduler.bind("small", "n1")
    scheduler.refuse("web", nominate="n1")
    scheduler.mark("batch-a")
    await live.wait_for({"agree": 1})
    pods = next(i for i in live.hook.source.informers if i.kind == "Pod")  # type: ignore[attr-defined]
    relists = pods.relists
    fake.compact()
    fake.expire_watches()  # 410: the informer lists everything again
    await until(lambda: pods.relists > relists, "a relist")
    scheduler.bind("web", "n1")
    await live.wait_for({"agree": 2})
    assert len(live.observer.tracker) == 0


async def test_a_restart_counts_what_it_followed_as_unobserved_and_ignores_other_replicas_pods(
        fake: FakeApiServer, scheduler: Scheduler, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with replica(fake, tmp_path) as first, replica(fake, tmp_path) as second:
        await first.create(manifest("web", "1"))
        await first.followed(1)
        await second.create(manifest("small", "100m"))
    # Both stopped (a restart, a rollout) before the scheduler decided: counted unobserved, each by its own.
    assert first.verdicts()["unobserved"] == 1 and second.verdicts()["unobserved"] == 1
    assert len(mismatch_logs(caplog)) == 2
    async with replica(fake, tmp_path) as restarted:
        await restarted.create(manifest("other", "100m"))
        scheduler.bind("web", "n1")
        scheduler.bind("small", "n1")  # predictions of the replicas that are gone: unknown ids, never counted
        scheduler.bind("other", "n1")
        await restarted.wait_for({"agree": 1})


async def test_debug_predictions_on_the_metrics_listener(fake: FakeApiServer, scheduler: Scheduler,
                                                         tmp_path: Path) -> None:
    async with replica(fake, tmp_path, metrics_port=free_port(), debug_predictions=True) as live:
        await live.create(manifest("web", "1"))
        await live.create(manifest("small", "100m"))
        scheduler.bind("small", "n1")
        scheduler.refuse("web", nominate="n1", victims=2)
        scheduler.mark("batch-a")
        scheduler.mark("batch-b")
        await live.wait_for({"agree": 1, "victims_differ": 1})
        assert live.hook.server is not None and live.hook.server.metrics_port is not None
        url = f"http://127.0.0.1:{live.hook.server.metrics_port}{DEBUG_PREDICTIONS_PATH}"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200
            summary = await response.json()
    assert summary["verdicts"] == {"agree": 1, "node_differs": 0, "victims_differ": 1, "outcome_differs": 0,
                                   "unobserved": 0}
    assert summary["observing"] is True and summary["following"] == 0 and summary["agreement"] == 0.5
    (mismatch,) = summary["recentMismatches"]
    assert mismatch["verdict"] == "victims_differ" and mismatch["observed"]["otherTenantVictims"] == 2
    # Nobody authenticated its reader: no pod or namespace named, not even the preemptor's.
    assert "pod" not in mismatch and "namespace" not in mismatch
    assert "team-b" not in str(mismatch) and "team-a" not in str(mismatch) and "web" not in str(mismatch)


async def test_debug_predictions_is_off_by_default(fake: FakeApiServer, tmp_path: Path) -> None:
    async with replica(fake, tmp_path, metrics_port=free_port()) as live:
        assert live.hook.server is not None
        url = f"http://127.0.0.1:{live.hook.server.metrics_port}{DEBUG_PREDICTIONS_PATH}"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 404


async def test_events_on_the_pod_with_events(fake: FakeApiServer, scheduler: Scheduler, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    async with replica(fake, tmp_path, events=True) as live:
        created = await live.create(manifest("web", "1"))
        scheduler.refuse("web", nominate="n2")
        await live.wait_for({"node_differs": 1})
        await until(lambda: bool(fake.events), "the Event")
        (event,) = fake.events
        assert event["reason"] == "PreemptionPredictionMismatch" and event["type"] == "Warning"
        assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "web",
                                           "uid": created["metadata"]["uid"]}
        assert event["message"].startswith("PreemptGuard predicted Preempts on n1 evicting 1 pod of other tenants;")
        # Refused (no RBAC for events): logged, never raised; the verdict is counted all the same.
        fake.event_status = 403
        await live.create(manifest("huge", "3"))
        scheduler.bind("huge", "n2")
        await live.wait_for({"node_differs": 1, "outcome_differs": 1})
        events = live.observer.events
        assert events is not None
        await until(lambda: events.failed == 1, "the refused Event")
    assert "cannot create a PreemptionPredictionMismatch Event on pod team-a/huge" in caplog.text
    assert len(fake.events) == 1
    # The one call --events adds is what webhook/rbac.py declares for it, and only for it.
    assert {path for path, _ in fake.requests if path.endswith("/events")} == {"/api/v1/namespaces/team-a/events"}
    assert allows(EVENTS_PERMISSIONS, "", "events", "create")
    assert allows(REQUIRED_PERMISSIONS, "", "events", "create")  # granted always since the preemption Events


async def test_without_events_no_event_is_created(live: Live, scheduler: Scheduler, fake: FakeApiServer) -> None:
    await live.create(manifest("web", "1"))
    scheduler.refuse("web", nominate="n2")
    await live.wait_for({"node_differs": 1})
    assert fake.events == [] and live.observer.events is None
