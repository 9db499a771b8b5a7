"""Initial sync and incremental updates through the informers, against the fake API server."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from fake_apiserver import (
    FakeApiServer,
    namespace,
    node,
    pdb,
    pod,
    priority_class,
    quota,
    seed_cluster,
    wait_for,
    wait_until_consistent,
)

from webhook.cluster.model import Pod
from webhook.cluster.reader import pod_from_dict
from webhook.preemption.results import Outcome
from webhook.preemption.simulate import predict_objects, resolve_each
from webhook.sources.kube_source import KubernetesSource


async def test_not_ready_until_every_kind_has_synced(
        fake_api: FakeApiServer, make_source: Callable[..., KubernetesSource]) -> None:
    source = make_source()
    assert not source.is_ready()
    assert source.readiness_reason() == "cluster informers not started"
    await fake_api.go_down()
    await source.start()
    assert not source.is_ready()
    reason = source.readiness_reason()
    for kind in ("PriorityClass", "Namespace", "Node", "Pod", "PodDisruptionBudget", "ResourceQuota"):
        assert kind in reason
    assert not await source.wait_until_ready(timeout=0.3)
    seed_cluster(fake_api)
    await fake_api.come_up()
    assert await source.wait_until_ready(timeout=5)
    assert source.is_ready()
    assert source.readiness_reason() == ""
    await wait_until_consistent(fake_api, source.state)


async def test_initial_sync_paginates_and_watches_with_bookmarks(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    await wait_until_consistent(fake_api, synced_source.state)
    counts = synced_source.state.counts()
    assert {kind: n for kind, n in counts.items() if n} == {
        "PriorityClass": 2, "Namespace": 3, "Node": 2, "Pod": 5, "PodDisruptionBudget": 1, "ResourceQuota": 1}
    pod_lists = [query for path, query in fake_api.requests if path == "/api/v1/pods" and "watch" not in query]
    # page_size=2 over 5 pods: three pages, the later ones with the continue token of the previous one.
    assert [q.get("limit") for q in pod_lists] == ["2", "2", "2"]
    assert "continue" not in pod_lists[0] and all(q.get("continue") for q in pod_lists[1:])
    await wait_for(lambda: any(p == "/api/v1/pods" and "watch" in q for p, q in fake_api.requests), what="a watch")
    watches = [query for path, query in fake_api.requests if path == "/api/v1/pods" and "watch" in query]
    assert watches[0]["allowWatchBookmarks"] == "true"
    assert int(watches[0]["timeoutSeconds"]) >= 30
    assert watches[0]["resourceVersion"] == synced_source.informer_status()["Pod"]["resourceVersion"]


async def test_bearer_token_is_sent_and_never_logged(
        fake_api: FakeApiServer, make_source: Callable[..., KubernetesSource],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    seed_cluster(fake_api)
    source = make_source()
    await source.start()
    assert await source.wait_until_ready(timeout=5)
    fake_api.drop_watches()  # force a warning with the error path too
    await fake_api.go_down()
    await wait_for(lambda: any(r.levelno >= logging.WARNING for r in caplog.records), what="a warning")
    await fake_api.come_up()
    assert fake_api.authorization_headers
    assert set(fake_api.authorization_headers) == {f"Bearer {fake_api.token}"}
    assert fake_api.token and fake_api.token not in caplog.text


async def test_incremental_add_modify_delete_of_every_kind(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    state = synced_source.state
    fake_api.create(priority_class("critical", 100000))
    fake_api.create(namespace("team-c"))
    fake_api.create(node("node-3", cpu="16"))
    fake_api.create(pod("api-0", "team-c", node_name="node-3", cpu="3", priority_class_name="critical",
                        priority=100000))
    fake_api.create(pdb("api", "team-c", {"app": "api-0"}))
    fake_api.create(quota("cpu", "team-c"))
    await wait_until_consistent(fake_api, state)
    assert state.node_usage["node-3"].milli_cpu == 3000
    assert set(state.pods_by_priority_class["critical"]) == {"team-c/api-0"}

    # MODIFIED: a pod moves from node-1 to pending (unbound), a class changes value, a node is cordoned.
    moved = fake_api.get("Pod", "batch-0", "team-b")
    del moved["spec"]["nodeName"]
    moved["status"] = {"phase": "Pending", "nominatedNodeName": "node-2"}
    fake_api.update(moved)
    fake_api.update(priority_class("high", 2000))
    cordoned = node("node-1")
    cordoned["spec"] = {"unschedulable": True}
    fake_api.update(cordoned)
    await wait_until_consistent(fake_api, state)
    assert "team-b/batch-0" not in state.pods_by_node.get("node-1", {})
    assert set(state.nominated_by_node["node-2"]) == {"team-b/batch-0"}
    assert state.priority_classes["high"].value == 2000
    assert state.nodes["node-1"].unschedulable

    # DELETED, every kind.
    fake_api.delete("Pod", "api-0", "team-c")
    fake_api.delete("PodDisruptionBudget", "api", "team-c")
    fake_api.delete("ResourceQuota", "cpu", "team-c")
    fake_api.delete("Node", "node-3")
    fake_api.delete("Namespace", "team-c")
    fake_api.delete("PriorityClass", "critical")
    await wait_until_consistent(fake_api, state)
    assert "node-3" not in state.node_usage
    assert "critical" not in state.pods_by_priority_class


async def test_namespaced_watch_paths_are_served(fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    # The informers watch cluster-wide; the fake must also answer the namespaced path like the real server.
    body = await synced_source.api.get("/api/v1/namespaces/team-a/pods", timeout=5)
    assert body["kind"] == "PodList"
    assert sorted(item["metadata"]["name"] for item in body["items"]) == ["web-0", "web-1"]
    assert all("kind" not in item for item in body["items"])


async def test_bookmark_advances_resource_version(fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    informer = next(i for i in synced_source.informers if i.kind == "Node")
    fake_api.create(pod("other", "default"))  # bumps the global resourceVersion, no Node event
    await wait_until_consistent(fake_api, synced_source.state)
    assert informer.resource_version != str(fake_api.resource_version)
    fake_api.send_bookmarks()
    await wait_for(lambda: informer.resource_version == str(fake_api.resource_version), what="bookmark")


async def test_pod_events_keep_node_usage_incremental(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    state = synced_source.state
    for i in range(20):
        fake_api.create(pod(f"p{i}", "team-a", node_name="node-2", cpu="250m"))
    for i in range(0, 20, 2):
        fake_api.delete("Pod", f"p{i}", "team-a")
    for i in range(1, 20, 4):
        fake_api.update(pod(f"p{i}", "team-a", node_name="node-2", cpu="250m", phase="Failed"))
    await wait_until_consistent(fake_api, state)
    bound = [p for p in state.pods_by_node["node-2"].values() if isinstance(p, Pod)]
    assert state.node_usage["node-2"].milli_cpu == sum(p.requests.milli_cpu for p in bound)
    assert state.node_usage["node-2"].pod_count == len(bound) == 1 + 5


async def test_limit_ranges_and_runtime_classes_are_watched_for_the_admission_chain(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    """/preview in a live cluster applies the namespace's LimitRange and the pod's RuntimeClass (issue #26): the
    informers keep both, and a class the cluster does not hold is refused as the API server refuses it."""
    state = synced_source.state
    assert state.knows("LimitRange") and state.knows("RuntimeClass")
    fake_api.create({"kind": "LimitRange", "apiVersion": "v1", "metadata": {"name": "defaults", "namespace": "team-a"},
                     "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "3"}}]}})
    fake_api.create({"kind": "RuntimeClass", "apiVersion": "node.k8s.io/v1", "metadata": {"name": "kata"},
                     "handler": "kata", "overhead": {"podFixed": {"cpu": "1"}}})
    await wait_until_consistent(fake_api, state)
    assert [r.name for r in state.limit_ranges_in("team-a")] == ["defaults"] and set(state.runtime_classes) == {"kata"}
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new", "namespace": "team-a"},
            "spec": {"priorityClassName": "high", "runtimeClassName": "kata", "containers": [{"name": "c"}]}}
    (admitted,) = predict_objects(state, [bare])
    assert admitted.message.count("Not known") == 0
    (defaulted,) = [p for p in resolve_each(state, [pod_from_dict(bare)]) if isinstance(p, Pod)]
    assert (defaulted.requests.milli_cpu, defaulted.quota.resources.overhead["cpu"].value) == (4000, 1)
    (refused,) = predict_objects(state, [{**bare, "spec": {**bare["spec"], "runtimeClassName": "wasm"}}])
    assert refused.outcome == Outcome.REJECTED and 'RuntimeClass "wasm" not found' in refused.message
    fake_api.delete("RuntimeClass", "kata")
    await wait_until_consistent(fake_api, state)
    (gone,) = predict_objects(state, [bare])
    assert gone.outcome == Outcome.REJECTED and 'RuntimeClass "kata" not found' in gone.message


async def test_a_hook_after_watch_events_is_called_for_each_and_its_failure_stops_no_informer(
        fake_api: FakeApiServer, synced_source: KubernetesSource, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []

    def failing() -> None:
        raise RuntimeError("the predictor's index is broken")

    synced_source.after_watch_event.extend([failing, lambda: seen.append(len(synced_source.state.pods))])
    before = len(synced_source.state.pods)
    with caplog.at_level(logging.ERROR):
        fake_api.create(pod("hooked-0", "team-a"))
        fake_api.create(pod("hooked-1", "team-a"))
        await wait_until_consistent(fake_api, synced_source.state)
    assert seen == [before + 1, before + 2]  # each event, after it is in the state, the failing hook before it
    assert "a hook after a watch event failed" in caplog.text
    assert all(informer.has_synced for informer in synced_source.informers)
