"""get_priority_class: one direct GET for a class the cache does not hold yet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp import web
from fake_apiserver import FakeApiServer, priority_class, wait_until_consistent

from webhook.errors import ClusterUnavailable, ConfigError
from webhook.sources.informer import NODES
from webhook.sources.kube_source import KubernetesSource


async def test_miss_then_hit(fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    assert await synced_source.get_priority_class("brand-new") is None
    assert fake_api.requests[-1][0] == "/apis/scheduling.k8s.io/v1/priorityclasses/brand-new"
    fake_api.create(priority_class("brand-new", 4242))
    found = await synced_source.get_priority_class("brand-new")
    assert found is not None and (found.name, found.value) == ("brand-new", 4242)
    assert synced_source.state.priority_classes["brand-new"] == found
    await wait_until_consistent(fake_api, synced_source.state)


async def test_lookup_does_not_resurrect_a_class_the_watch_saw_deleted(
        fake_api: FakeApiServer, synced_source: KubernetesSource, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = fake_api.get("PriorityClass", "high")
    fake_api.delete("PriorityClass", "high")
    await wait_until_consistent(fake_api, synced_source.state)
    # A slow GET answered before the deletion: the informer has seen a newer resourceVersion.
    original = fake_api._get_one
    monkeypatch.setattr(fake_api, "_get_one",
                        lambda *args: original(*args) if args[1] != "high" else web.json_response(stale))
    found = await synced_source.get_priority_class("high")
    assert found is not None and found.value == 1000
    assert "high" not in synced_source.state.priority_classes


async def test_lookup_without_a_priority_class_informer_still_caches(
        fake_api: FakeApiServer, make_source: Callable[..., KubernetesSource]) -> None:
    fake_api.create(priority_class("only-by-get", 7))
    source = make_source(kinds=[NODES])
    await source.start()
    found = await source.get_priority_class("only-by-get")
    assert found is not None and source.state.priority_classes["only-by-get"] == found


async def test_unreachable_api_server_is_cluster_unavailable(
        fake_api: FakeApiServer, synced_source: KubernetesSource) -> None:
    await fake_api.go_down()
    with pytest.raises(ClusterUnavailable, match="GET priorityclass x"):
        await synced_source.get_priority_class("x")


async def test_lookup_before_start_is_cluster_unavailable(kubeconfig: Path) -> None:
    with pytest.raises(ClusterUnavailable):
        await KubernetesSource(kubeconfig=str(kubeconfig)).get_priority_class("x")


async def test_bad_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load kubeconfig"):
        await KubernetesSource(kubeconfig=str(tmp_path / "missing")).start()
    kubeconfig = FakeApiServer().write_kubeconfig(tmp_path)
    with pytest.raises(ConfigError, match="cannot load kubeconfig"):
        await KubernetesSource(kubeconfig=str(kubeconfig), context="no-such-context").start()
