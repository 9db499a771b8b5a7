"""410 Gone: relist and reconcile (objects deleted while disconnected disappear, none duplicated)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_apiserver import (
    FakeApiServer,
    node,
    pod,
    priority_class,
    seed_cluster,
    wait_for,
    wait_until_consistent,
)

from webhook.cluster.snapshot import ClusterState
from webhook.errors import ApiError
from webhook.kubeapi import KubeClient
from webhook.sources.informer import PODS, RESOURCE_KINDS, Informer, InformerSettings
from webhook.sources.kube_source import KubernetesSource


def _relists(source: KubernetesSource) -> dict[str, int]:
    return {i.kind: i.relists for i in source.informers}


async def test_compacted_history_while_disconnected_relists_and_drops_deleted_objects(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    state = synced_source.state
    before = _relists(synced_source)
    await fake_api.go_down()
    # Changes while the webhook cannot see the cluster: deletions, a re-creation, additions.
    fake_api.delete("Pod", "web-0", "team-a")
    fake_api.delete("Pod", "batch-0", "team-b")
    fake_api.delete("Node", "node-1")
    fake_api.delete("PriorityClass", "high")
    fake_api.create(priority_class("high", 5000))
    fake_api.create(pod("late", "team-a", node_name="node-2", cpu="1"))
    fake_api.compact()
    assert "team-a/web-0" in state.pods  # still the last known state
    await fake_api.come_up()
    await wait_until_consistent(fake_api, state)
    assert "team-a/web-0" not in state.pods and "node-1" not in state.nodes
    assert state.priority_classes["high"].value == 5000
    assert sum(len(pods) for pods in state.pods_by_namespace.values()) == len(state.pods) == 4
    # Every informer reconnects from its old resourceVersion, gets 410 and relists exactly once.
    await wait_for(lambda: all(n >= before[kind] + 1 for kind, n in _relists(synced_source).items()),
                   what="every kind to relist")
    assert _relists(synced_source) == {kind: n + 1 for kind, n in before.items()}
    await wait_until_consistent(fake_api, state)


async def test_error_event_410_mid_stream_relists(fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    state = synced_source.state
    pods = next(i for i in synced_source.informers if i.kind == "Pod")
    await wait_for(lambda: len(fake_api.watches) == len(RESOURCE_KINDS), what="every kind watched")
    fake_api.compact()
    fake_api.delete("Pod", "pending", "team-b")
    fake_api.expire_watches()
    await wait_for(lambda: pods.relists == 2, what="a relist after ERROR 410")
    await wait_until_consistent(fake_api, state)
    assert "team-b/pending" not in state.pods


async def test_http_410_on_watch_relists(tmp_path: Path) -> None:
    async with FakeApiServer(token="t", watch_expired_as_http_status=True) as server:
        seed_cluster(server)
        kubeconfig = server.write_kubeconfig(tmp_path)
        source = KubernetesSource(kubeconfig=str(kubeconfig), settings=InformerSettings(
            backoff_base_seconds=0.01, backoff_cap_seconds=0.05, watch_timeout_seconds=30))
        try:
            await source.start()
            assert await source.wait_until_ready(timeout=5)
            await server.go_down()
            server.delete("Pod", "web-1", "team-a")
            server.create(node("node-9"))
            server.compact()
            await server.come_up()
            await wait_until_consistent(server, source.state)
            await wait_for(lambda: all(i.relists == 2 for i in source.informers), what="every kind to relist")
        finally:
            await source.stop()


async def test_expired_continue_token_falls_back_to_a_full_list(
        fake_api: FakeApiServer, kubeconfig: Path) -> None:
    seed_cluster(fake_api)

    def compact_after_first_page(page: int) -> None:
        if page == 1:
            fake_api.compact()  # the continue token just handed out is now too old

    fake_api.after_list_page = compact_after_first_page
    api_client = await KubeClient.connect(kubeconfig=str(kubeconfig))
    try:
        informer = Informer(api_client, PODS, ClusterState(), InformerSettings(page_size=2))
        objects, version = await informer.list_all()
        assert sorted(o.name for o in objects) == ["batch-0", "done", "pending", "web-0", "web-1"]
        assert version == str(fake_api.resource_version)
        queries = [q for p, q in fake_api.requests if p == "/api/v1/pods" and "watch" not in q]
        assert [("limit" in q, "continue" in q) for q in queries] == [(True, False), (True, True), (False, False)]
    finally:
        await api_client.close()


def test_watch_error_event_other_than_410_raises_the_status() -> None:
    informer = Informer(KubeClient(), PODS, ClusterState())
    event = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                         "code": 500, "reason": "InternalError", "message": "boom"}}
    with pytest.raises(ApiError) as raised:
        informer.apply_event(event)
    assert (raised.value.code, raised.value.reason, raised.value.message, raised.value.expired) == (
        500, "InternalError", "boom", False)
