"""Every case of tests/vectors/quota.yaml through the real /mutate/pods over TLS: the vector's
``limitedResources`` as the configuration file, its PriorityClasses, Namespace and ResourceQuotas as the snapshot."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from admission_vectors import apply_json_patch
from e2e_support import admit, patch_operations, settings
from quota_vectors import QuotaVector, load_quota_vectors

from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.sources.source import SnapshotSource

VECTORS = load_quota_vectors()


def review_for(vector: QuotaVector, obj: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = copy.deepcopy(vector.object) if obj is None else obj
    return admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": vector.subresource,
        "name": (obj.get("metadata") or {}).get("name", ""),
        "namespace": vector.namespace,
        "operation": vector.operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": obj,
        "oldObject": vector.old_object,
        "dryRun": False,
    })


def write_files(vector: QuotaVector, directory: Path) -> tuple[Path, Path | None]:
    snapshot = directory / "snapshot.json"
    snapshot.write_text(json.dumps(vector.snapshot_list), encoding="utf-8")
    if vector.config_document is None:
        return snapshot, None
    config = directory / "preemptguard.json"
    config.write_text(json.dumps(vector.config_document), encoding="utf-8")
    return snapshot, config


def test_every_vector_is_exercised() -> None:
    assert len(VECTORS) == 24
    assert sum(1 for v in VECTORS if not v.expect["allowed"]) >= 10


@pytest.mark.parametrize("vector", VECTORS, ids=[v.name.split(" ")[0] for v in VECTORS])
async def test_quota_vector_through_mutate_pods(vector: QuotaVector, tmp_path: Path) -> None:
    snapshot, config_file = write_files(vector, tmp_path)
    # The configuration is loaded from its file, as `preempt-guard serve --config` does.
    async with LoopbackWebhook(SnapshotSource(snapshot), settings(config_path=config_file)) as hook:
        response = await admit(hook, review_for(vector))
    expect = vector.expect
    assert response["allowed"] is expect["allowed"], response.get("status")
    if expect["allowed"]:
        assert "status" not in response
        if vector.operation == "CREATE" and expect.get("priority") is not None:
            mutated = apply_json_patch(vector.object, patch_operations(response))
            assert mutated["spec"]["priority"] == expect["priority"]
        return
    status = response["status"]
    assert expect["message_contains"] in status["message"]
    if expect.get("http_code") is not None:
        assert status["code"] == expect["http_code"]
    if status["code"] == 500:
        # Upstream's plain error: reason Unknown and the bare message.
        assert status["reason"] == "" and " is forbidden: " not in status["message"]
    else:
        name = vector.object["metadata"].get("name") or vector.object["metadata"].get("generateName")
        assert status["reason"] == "Forbidden" and status["message"].startswith(f'pods "{name}" is forbidden: ')
    assert "patch" not in response
