"""A LIST slower than the history the API server keeps: the WATCH opens from the LIST's resourceVersion as soon as
the first page names it, holds its events until the LIST is in, and the informer syncs with one LIST, current.

(bench/scale.py's replica restarted under 500 writes/s at 15,000 nodes listed for ~105 s; the watch cache's history
was shorter, every WATCH opened after the LIST was refused 410 and the informer listed again, forever.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from fake_apiserver import FakeApiServer, Resource, fresh_state, pod, state_differences, wait_for, wait_until_consistent

from webhook.cluster.snapshot import ClusterState
from webhook.kubeapi import KubeClient
from webhook.sources.informer import PODS, Informer, InformerSettings

TOKEN = "slow-list-token"
SETTINGS = InformerSettings(page_size=4, watch_timeout_seconds=30, backoff_base_seconds=0.01,
                            backoff_cap_seconds=0.05, connect_timeout_seconds=1.0, request_timeout_seconds=5.0,
                            watch_read_slack_seconds=5.0)


@pytest.fixture
async def short_history() -> AsyncIterator[FakeApiServer]:
    """A server that keeps the last 3 events only, with 40 pods on 10 pages of 4, each page answered in 30 ms."""
    async with FakeApiServer(token=TOKEN, history_limit=3) as server:
        server.load(pod(f"p-{i}", f"ns-{i % 3}", node_name=f"node-{i % 5}") for i in range(40))
        server.list_delay_seconds = 0.03
        yield server


@contextlib.asynccontextmanager
async def running_pod_informer(server: FakeApiServer, tmp_path: Path) -> AsyncIterator[Informer]:
    """A started pod informer of ``server`` (into a fresh state), stopped at the end of the block."""
    api = await KubeClient.connect(kubeconfig=str(server.write_kubeconfig(tmp_path)))
    informer = Informer(api, PODS, ClusterState(), SETTINGS)
    try:
        informer.start()
        yield informer
    finally:
        await informer.stop()
        await api.close()


async def _write_randomly(server: FakeApiServer, seed: int, every: float) -> None:
    """Creates, updates (a label, a node) and deletes pods, one write per ``every`` seconds, until cancelled."""
    rng = random.Random(seed)
    made = 0
    while True:
        names = sorted(server.objects["pods"])
        choice = rng.random()
        if choice < 0.4 or not names:
            made += 1
            server.create(pod(f"new-{made}", f"ns-{made % 3}", node_name=f"node-{made % 5}"))
        else:
            namespace, name = rng.choice(names).split("/")
            if choice < 0.7:
                changed = server.get("Pod", name, namespace)
                changed["metadata"]["labels"] = {"turn": str(made)}
                changed["spec"]["nodeName"] = f"node-{rng.randrange(5)}"
                server.update(changed)
            else:
                server.delete("Pod", name, namespace)
        await asyncio.sleep(every)


async def test_a_list_slower_than_the_history_syncs_once_while_the_writes_go_on(
        short_history: FakeApiServer, tmp_path: Path) -> None:
    server = short_history
    writer = asyncio.create_task(_write_randomly(server, seed=29, every=0.005))
    try:
        async with running_pod_informer(server, tmp_path) as informer:
            await wait_for(lambda: informer.has_synced, timeout=5, what="the pod informer to sync")
            # ~60 writes during the 0.3 s LIST, 3 kept: a WATCH opened after the LIST would be refused (410).
            await asyncio.sleep(1.0)
            assert not writer.done()
            writer.cancel()
            await wait_until_consistent(server, informer.state)
            assert informer.relists == 1
            assert server.resource_version > 100  # the writes did go on throughout
            watches = [query for _, path, query in server.calls if path == "/api/v1/pods" and "watch" in query]
            assert len(watches) == 1
    finally:
        writer.cancel()


async def test_synced_means_the_writes_made_during_the_list_are_applied(
        short_history: FakeApiServer, tmp_path: Path) -> None:
    """The first /readyz answers for a state as current as the WATCH: the pods written while the LIST was read
    (one on a page already read deleted, one on a page not yet read changed, one new) are in at sync."""
    server = short_history

    def write_during_the_second_page(page: int) -> None:
        if page == 2:
            server.delete("Pod", "p-0", "ns-0")
            changed = server.get("Pod", "p-39", "ns-0")
            changed["metadata"]["labels"] = {"changed": "during-the-list"}
            server.update(changed)
            server.create(pod("during-the-list", "ns-1", node_name="node-1"))

    server.before_list_page = write_during_the_second_page
    async with running_pod_informer(server, tmp_path) as informer:
        await asyncio.wait_for(informer.synced.wait(), timeout=5)
        pods = informer.state.pods
        assert "ns-0/p-0" not in pods and "ns-1/during-the-list" in pods
        assert pods["ns-0/p-39"].labels == {"changed": "during-the-list"}
        assert state_differences(fresh_state(server), informer.state) == []
        assert informer.resource_version == str(server.resource_version)


async def test_a_list_started_over_at_another_version_watches_from_that_one(
        short_history: FakeApiServer, tmp_path: Path) -> None:
    """The continue token expires mid-LIST, so the LIST starts over unpaginated at a newer resourceVersion: the
    WATCH opened from the first page's version is dropped (its events predate the new LIST) for one from the new."""
    server = short_history

    def compact_after_the_first_page(page: int) -> None:
        if page == 1:
            server.create(pod("between", "ns-2", node_name="node-2"))
            server.delete("Pod", "p-1", "ns-1")
            server.compact()  # the continue token just handed out is now too old

    server.after_list_page = compact_after_the_first_page
    first_version = str(server.resource_version)
    async with running_pod_informer(server, tmp_path) as informer:
        await asyncio.wait_for(informer.synced.wait(), timeout=5)
        await wait_until_consistent(server, informer.state)
        lists = [query for _, path, query in server.calls if path == "/api/v1/pods" and "watch" not in query]
        assert [("continue" in q, "limit" in q) for q in lists] == [(False, True), (True, True), (False, False)]
        def watch_versions() -> list[str]:
            return [q["resourceVersion"] for _, path, q in server.calls if path == "/api/v1/pods" and "watch" in q]

        new_version = str(server.resource_version)
        await wait_for(lambda: new_version in watch_versions(), what="a WATCH from the new LIST's version")
        assert watch_versions() == [first_version, new_version]
        assert informer.relists == 1
        server.create(pod("after", "ns-0", node_name="node-0"))
        await wait_until_consistent(server, informer.state)


async def test_a_list_without_a_resource_version_opens_no_watch_before_it_is_in(
        short_history: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A WATCH without a resourceVersion starts with every object again (a server that names no version is not
    asked for that while the LIST is read): the WATCH opens once the LIST is in, as client-go's reflector does."""
    server = short_history
    original = server._list

    def without_a_version(request: web.Request, resource: Resource, namespace: str | None) -> web.Response:
        response = original(request, resource, namespace)
        assert isinstance(response.body, bytes)
        body = json.loads(response.body)
        body["metadata"].pop("resourceVersion", None)
        return web.json_response(body)

    monkeypatch.setattr(server, "_list", without_a_version)
    async with running_pod_informer(server, tmp_path) as informer:
        await asyncio.wait_for(informer.synced.wait(), timeout=5)
        await wait_for(lambda: any("watch" in q for _, path, q in server.calls if path == "/api/v1/pods"),
                       what="the WATCH")
        kinds = ["watch" if "watch" in q else "list" for _, path, q in server.calls if path == "/api/v1/pods"]
        assert kinds == ["list"] * 10 + ["watch"]
        assert len(informer.state.pods) == 40
