"""Preemption attribution end to end (docs/interfaces.md §7): two PreemptGuard replicas on the fake API server,
the test playing kube-scheduler (nominate the preemptor, mark its victim DisruptionTarget/PreemptionByScheduler,
delete it). Exactly one Event per victim, written by the replica holding the Lease, naming the preemptor only to
its own tenant; a failover neither loses nor doubles one."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer, namespace, pod
from observe_support import TOKEN, Live, Scheduler, manifest, replica, seed, until

from webhook.cli import main
from webhook.rbac import (
    EXPOSURE_REPORTS_PERMISSIONS,
    LEADER_ELECTION_PERMISSIONS,
    REQUIRED_PERMISSIONS,
    allows,
)
from webhook.routes import GUARDRAIL_DECISION_ANNOTATION, PREDICTION_ID_ANNOTATION
from webhook.server.app import TENANTS_KEY
from webhook.server.handlers import METRICS_KEY
from webhook.server.leaderelection import micro_time
from webhook.server.tenants import TenantServices

FAST_ELECTION = {"leader_lease_seconds": 3.0, "leader_renew_deadline_seconds": 2.0,
                 "leader_retry_period_seconds": 0.2, "exposure_interval_seconds": 0.2}
# Tenants by the namespaces' label "tenant" (seed: team-a red, team-b and team-b2 blue).
CONFIG = "guardrails:\n  mode: warn\n  tenantLabel: tenant\n"


@pytest.fixture
async def fake() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(token=TOKEN) as server:
        seed(server)
        server.create(namespace("team-b2", tenant="blue"))
        server.create(pod("batch-c", "team-b2", node_name="n1", cpu="100m", priority_class_name="low", priority=10))
        yield server


def tenants(live: Live) -> TenantServices:
    return live.app[TENANTS_KEY]  # type: ignore[no-any-return]


def preemptions_counted(live: Live) -> float:
    registry = live.app[METRICS_KEY].registry
    total = 0.0
    for metric in registry.collect():
        if metric.name == "preemptguard_preemptions":
            total += sum(s.value for s in metric.samples if s.name.endswith("_total"))
    return total


@contextlib.asynccontextmanager
async def two_replicas(fake: FakeApiServer, tmp_path: Path, **extra: Any) -> AsyncIterator[tuple[Live, Live]]:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    settings: dict[str, Any] = {**FAST_ELECTION, "config_path": path, **extra}
    async with replica(fake, tmp_path, **settings) as first, replica(fake, tmp_path, **settings) as second:
        await until(lambda: tenants(first).leading() or tenants(second).leading(), "a leader")
        yield first, second


def leader_of(replicas: tuple[Live, Live]) -> tuple[Live, Live]:
    first, second = replicas
    return (first, second) if tenants(first).leading() else (second, first)


def preempted_events(fake: FakeApiServer) -> list[dict[str, Any]]:
    return [e for e in fake.events if e["reason"] == "PreemptedByScheduler"]


async def test_a_preemption_by_another_tenant_is_one_event_that_names_no_other_tenant(
        fake: FakeApiServer, tmp_path: Path) -> None:
    async with two_replicas(fake, tmp_path) as replicas:
        leader, follower = leader_of(replicas)
        assert not tenants(follower).leading()
        created = await follower.create(manifest("web", "1"))  # the follower admits it: the trace is on the pod
        annotations = created["metadata"]["annotations"]
        assert annotations[GUARDRAIL_DECISION_ANNOTATION] == "allowed"
        scheduler = Scheduler(fake)
        scheduler.refuse("web", nominate="n1", victims=1)
        scheduler.mark("batch-a")  # team-b (tenant blue) preempted by team-a (tenant red)
        await until(lambda: len(preempted_events(fake)) == 1, "the Event")
        await asyncio.sleep(0.5)  # nothing else arrives (the follower writes nothing)
        (event,) = preempted_events(fake)
        assert event["involvedObject"]["namespace"] == "team-b" and event["involvedObject"]["name"] == "batch-a"
        assert event["metadata"]["namespace"] == "team-b" and event["type"] == "Warning"
        message = event["message"]
        assert "team-a" not in message and "web" not in message and "related" not in event
        assert "a pod of another tenant (PriorityClass high, priority 1000)" in message
        assert annotations[PREDICTION_ID_ANNOTATION] in message and "predicted this preemption" in message
        assert "guardrail decision: allowed" in message
        assert preemptions_counted(leader) == 1 and preemptions_counted(follower) == 0


async def test_a_preemption_within_one_tenant_names_the_preemptor(fake: FakeApiServer, tmp_path: Path) -> None:
    async with two_replicas(fake, tmp_path) as replicas:
        leader, _ = leader_of(replicas)
        await leader.create(manifest("job", "1", ns="team-b2"))  # tenant blue preempts tenant blue
        scheduler = Scheduler(fake)
        scheduler.refuse("job", ns="team-b2", nominate="n1", victims=1)
        scheduler.mark("batch-a")
        await until(lambda: len(preempted_events(fake)) == 1, "the Event")
        (event,) = preempted_events(fake)
        assert "pod team-b2/job (PriorityClass high, priority 1000) of your tenant" in event["message"]
        assert event["related"]["name"] == "job" and event["related"]["namespace"] == "team-b2"


async def test_a_failover_neither_loses_nor_doubles_an_event(fake: FakeApiServer, tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as first_stack, contextlib.AsyncExitStack() as second_stack:
        first = await first_stack.enter_async_context(replica(fake, tmp_path, **FAST_ELECTION))
        second = await second_stack.enter_async_context(replica(fake, tmp_path, **FAST_ELECTION))
        await until(lambda: tenants(first).leading() or tenants(second).leading(), "a leader")
        (_, leader_stack), (follower, _) = sorted(
            ((first, first_stack), (second, second_stack)), key=lambda pair: not tenants(pair[0]).leading())
        await follower.create(manifest("web", "1"))
        scheduler = Scheduler(fake)
        scheduler.refuse("web", nominate="n1", victims=1)
        scheduler.mark("batch-a")
        await until(lambda: len(preempted_events(fake)) == 1, "the first Event")
        # The leader shuts down and releases the Lease: the follower takes over at once and writes again what it
        # attributed while following (refused as existing, so not counted twice).
        await leader_stack.aclose()
        await until(lambda: tenants(follower).leading(), "the follower to lead", timeout=10)
        await asyncio.sleep(0.3)
        assert len(preempted_events(fake)) == 1 and preemptions_counted(follower) == 0
        # A victim of the new term: one Event, from the new leader.
        await follower.create(manifest("web2", "1"))
        scheduler.refuse("web2", nominate="n1", victims=1)
        scheduler.mark("batch-b")
        await until(lambda: len(preempted_events(fake)) == 2, "the second Event")
        assert preemptions_counted(follower) == 1


async def test_without_leader_election_each_replica_writes_but_the_event_name_dedupes(
        fake: FakeApiServer, tmp_path: Path) -> None:
    async with replica(fake, tmp_path, leader_elect=False) as first, \
            replica(fake, tmp_path, leader_elect=False) as second:
        await first.create(manifest("web", "1"))
        scheduler = Scheduler(fake)
        scheduler.refuse("web", nominate="n1", victims=1)
        scheduler.mark("batch-a")
        await until(lambda: preemptions_counted(first) + preemptions_counted(second) == 1, "one count")
        await asyncio.sleep(0.3)
        assert len(preempted_events(fake)) == 1
        assert preemptions_counted(first) + preemptions_counted(second) == 1


# ---- the exposure scan on the leader --------------------------------------------------------------
async def test_the_leader_writes_each_namespace_s_policy_report_and_rewrites_only_what_changes(
        fake: FakeApiServer, tmp_path: Path) -> None:
    fake.policy_report_crd = True
    async with two_replicas(fake, tmp_path, exposure_reports=True) as replicas:
        leader, follower = leader_of(replicas)
        await until(lambda: {ns for ns, _ in fake.policy_reports} >= {"team-a", "team-b", "team-b2"}, "the reports")
        report = fake.policy_reports[("team-b", "preemptguard-exposure")]
        bands = {r["properties"]["priority"]: r for r in report["results"] if r["rule"] == "preemptible-pods"}
        assert bands["2000"]["result"] == "pass" and bands["2000"]["properties"]["preemptingClasses"] == ""
        band = bands["10"]
        assert band["result"] == "warn" and band["properties"]["runningPods"] == "2"
        # low (10) is preempted by high (1000) and top (2000), which every tenant may use: tenant red only.
        assert band["properties"]["preemptingClasses"] == "top,high"
        assert "otherTenants=1 ownTenant=true" in band["properties"]["class.high"]
        assert "team-a" not in str(report) and "'red'" not in str(report)  # no other tenant's namespace or name
        writes = fake.policy_report_writes
        await asyncio.sleep(1.0)  # several scan intervals: nothing changed, nothing rewritten
        assert fake.policy_report_writes == writes
        # A new class above everything: every report changes within the interval.
        fake.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "vip"},
                     "value": 5000, "preemptionPolicy": "PreemptLowerPriority"})
        await until(lambda: "vip" in str(fake.policy_reports[("team-b", "preemptguard-exposure")]), "vip", timeout=10)
        gauges = {s.labels["pod_namespace"]: s.value for m in leader.app[METRICS_KEY].registry.collect()
                  if m.name == "preemptguard_exposure_preemptible_by_other_tenants_pods" for s in m.samples}
        assert gauges["team-b"] == 3  # vip outranks top too: keep joins the two batch pods
        assert not [m for m in follower.app[METRICS_KEY].registry.collect()
                    if m.name == "preemptguard_exposure_running_pods" and m.samples]


def rbac_request(method: str, path: str, query: dict[str, str]) -> tuple[str, str, str, str, str]:
    """(group, resource, verb, name, namespace) of a request, as the API server's authorizer sees it."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else "")
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
    if method == "GET":
        verb = "watch" if query.get("watch") in ("1", "true") else ("get" if name else "list")
    return group, resource, verb, name, namespace


async def test_every_call_of_a_replica_with_everything_on_is_declared(fake: FakeApiServer, tmp_path: Path) -> None:
    """The replica's real calls (informers, Lease, Events, PolicyReports) are what webhook/rbac.py declares, and the
    Lease is touched in its own namespace only (a Role)."""
    fake.policy_report_crd = True
    async with two_replicas(fake, tmp_path, exposure_reports=True, leader_elect_namespace="preemptguard") as replicas:
        leader, _ = leader_of(replicas)
        await leader.create(manifest("web", "1"))
        scheduler = Scheduler(fake)
        scheduler.refuse("web", nominate="n1", victims=1)
        scheduler.mark("batch-a")
        await until(lambda: len(preempted_events(fake)) == 1 and fake.policy_report_writes >= 3, "the writes")
    seen = {rbac_request(*call) for call in fake.calls}
    cluster = REQUIRED_PERMISSIONS + EXPOSURE_REPORTS_PERMISSIONS
    for group, resource, verb, name, where in seen:
        if resource == "leases":
            assert where == "preemptguard" and allows(LEADER_ELECTION_PERMISSIONS, group, resource, verb, name)
        else:
            assert allows(cluster, group, resource, verb, name), (group, resource, verb, name, where)
    used = {(g, r, v) for g, r, v, _, _ in seen}
    assert {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")} <= used
    assert {("", "events", "create"), ("wgpolicyk8s.io", "policyreports", "list"),
            ("wgpolicyk8s.io", "policyreports", "patch")} <= used


async def test_releases_with_their_own_lease_names_elect_apart(fake: FakeApiServer, tmp_path: Path) -> None:
    """Two releases in one namespace (the chart passes --leader-elect-lease=<fullname>) each have a leader:
    one shared Lease would leave one release with no replica writing its Events."""
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    common: dict[str, Any] = {**FAST_ELECTION, "config_path": path, "leader_elect_namespace": "preemptguard"}
    async with replica(fake, tmp_path, **common, leader_elect_lease="release-a") as first, \
            replica(fake, tmp_path, **common, leader_elect_lease="release-b") as second:
        await until(lambda: tenants(first).leading() and tenants(second).leading(), "both releases leading")
    names = {rbac_request(*call)[3] for call in fake.calls if rbac_request(*call)[1] == "leases"}
    assert names >= {"release-a", "release-b"} and "preemptguard" not in names


def test_a_lease_name_that_is_no_dns_subdomain_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--leader-elect-lease", "Release_A"])
    assert exited.value.code == 2


def gauge(live: Live, name: str) -> float:
    registry = live.app[METRICS_KEY].registry
    return sum(s.value for m in registry.collect() if m.name == name for s in m.samples if s.name == name)


async def test_replicas_that_campaign_and_do_not_lead_say_so_to_the_no_leader_alert(
        fake: FakeApiServer, tmp_path: Path) -> None:
    """PreemptGuardNoLeader reads sum(preemptguard_leader_election) > 0 and sum(preemptguard_leader) == 0: a Lease
    held by a holder that is not one of the replicas (a stuck renewal elsewhere) leaves both campaigning, neither
    leading; once it expires one leads. Without leader election a replica leads and does not campaign."""
    now = datetime.datetime.now(datetime.UTC)
    fake.leases[("preemptguard", "preemptguard")] = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "preemptguard", "namespace": "preemptguard", "resourceVersion": "1"},
        "spec": {"holderIdentity": "a-replica-of-another-version", "leaseDurationSeconds": 3,
                 "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}}
    settings: dict[str, Any] = {**FAST_ELECTION, "leader_elect_namespace": "preemptguard"}
    async with replica(fake, tmp_path, **settings) as first, replica(fake, tmp_path, **settings) as second:
        await asyncio.sleep(0.5)
        assert [gauge(r, "preemptguard_leader_election") for r in (first, second)] == [1, 1]
        assert [gauge(r, "preemptguard_leader") for r in (first, second)] == [0, 0]
        await until(lambda: tenants(first).leading() or tenants(second).leading(), "a leader", timeout=10)
        assert gauge(first, "preemptguard_leader") + gauge(second, "preemptguard_leader") == 1
    assert gauge(first, "preemptguard_leader_election") == 0  # released on shutdown
    async with replica(fake, tmp_path, leader_elect=False) as alone:
        assert (gauge(alone, "preemptguard_leader_election"), gauge(alone, "preemptguard_leader")) == (0, 1)
