"""What a LIST costs the informer: the bytes it reads (counted), and no garbage collection while it reads."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from fake_apiserver import FakeApiServer, seed_cluster

from webhook.cluster.snapshot import ClusterState
from webhook.errors import ApiError
from webhook.kubeapi import KubeClient
from webhook.sources.informer import LISTING, PODS, Informer, InformerSettings


def record_list_answers(fake_api: FakeApiServer, monkeypatch: pytest.MonkeyPatch, fail_page: int = 0) -> list[int]:
    """The body size of every LIST answer; page ``fail_page`` (1-based) answers 500 instead."""
    original = fake_api._list
    sizes: list[int] = []

    def recorded(*args: Any) -> web.Response:
        if len(sizes) + 1 == fail_page:
            sizes.append(0)
            return web.json_response({"kind": "Status", "code": 500, "reason": "InternalError"}, status=500)
        response = original(*args)
        assert isinstance(response.body, bytes)
        sizes.append(len(response.body))
        return response

    monkeypatch.setattr(fake_api, "_list", recorded)
    return sizes


async def test_the_bytes_of_every_page_are_counted(fake_api: FakeApiServer, kubeconfig: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seed_cluster(fake_api)
    answers = record_list_answers(fake_api, monkeypatch)
    api = await KubeClient.connect(kubeconfig=str(kubeconfig))
    try:
        informer = Informer(api, PODS, ClusterState(), InformerSettings(page_size=2))
        await informer.list_and_replace()
        first = informer.listed_bytes
        await informer.list_and_replace()
    finally:
        await api.close()
    assert len(answers) == 6  # 5 pods, 2 per page, listed twice
    assert first == sum(answers[:3]) and informer.listed_bytes == sum(answers)


async def test_no_collection_while_a_list_is_read_and_collections_resume_after(
        fake_api: FakeApiServer, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_cluster(fake_api)
    api = await KubeClient.connect(kubeconfig=str(kubeconfig))
    seen: list[bool] = []
    informer = Informer(api, PODS, ClusterState(), InformerSettings(page_size=2))
    convert = informer._convert
    monkeypatch.setattr(informer, "_convert", lambda raw: seen.append(gc.isenabled()) or convert(raw))
    try:
        assert gc.isenabled()
        await informer.list_and_replace()
        assert seen == [False] * 5 and gc.isenabled()

        record_list_answers(fake_api, monkeypatch, fail_page=2)  # the list fails half way
        with pytest.raises(ApiError):
            await informer.list_and_replace()
        assert gc.isenabled() and LISTING.listing == 0
    finally:
        await api.close()


def test_nested_lists_resume_collections_only_when_the_last_ends_and_never_enable_a_disabled_collector() -> None:
    assert gc.isenabled()
    with LISTING:
        with LISTING:
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with LISTING:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


async def test_the_first_list_reads_big_pages_and_a_relist_while_serving_small_ones(
        fake_api: FakeApiServer, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Big pages spare the API server's watch cache its per-page walk while nothing waits on the informer; once
    synced, admissions share its loop, so a relist reads pages that decode quickly."""
    seed_cluster(fake_api)
    answers = record_list_answers(fake_api, monkeypatch)
    api = await KubeClient.connect(kubeconfig=str(kubeconfig))
    try:
        informer = Informer(api, PODS, ClusterState(), InformerSettings(page_size=4, relist_page_size=2))
        await informer.list_and_replace()
        initial = len(answers)
        await informer.list_and_replace()
    finally:
        await api.close()
    assert initial == 2  # 5 pods in pages of 4
    assert len(answers) - initial == 3  # the relist: pages of 2
