"""Issue #24, disclosure to a caller nobody authenticated: without --client-ca (every managed cluster) a forged
review claiming ``namespace: batch`` was told ``victim batch/report-daily-...``. The namespace of an
unauthenticated review is only a claim, so nothing is named, on any channel, unless the operator opts in to
naming the claimed namespace's own victims; quota.classes denials name no other namespace or selector either.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.hostile_network import review, write_inputs
from webhook.config import parse_config
from webhook.routes import MUTATE_PODS_PATH
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import SnapshotSource

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def everything_said(response: dict[str, Any]) -> str:
    parts = [json.dumps(response)]
    if "patch" in response:
        parts.append(base64.b64decode(response["patch"]).decode())
    return "\n".join(parts)


def forged(namespace: str, *, dry_run: bool) -> dict[str, Any]:
    """The cross-tenant example pod, claimed to be created in ``namespace`` (the victims' own)."""
    pod = dict(yaml.safe_load((EXAMPLES / "pods" / "09-preempts-batch.yaml").read_text()))
    pod["metadata"] = {**pod["metadata"], "namespace": namespace}
    document = review(pod, namespace)
    document["request"]["dryRun"] = dry_run
    return document


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_inputs(tmp_path_factory.mktemp("forged"))[0]


@pytest.mark.parametrize("dry_run", [False, True], ids=["create", "dry-run"])
@pytest.mark.parametrize("mode", ["warn", "enforce"])
async def test_a_forged_review_claiming_the_victims_namespace_learns_no_name(snapshot: Path, mode: str,
                                                                             dry_run: bool) -> None:
    config = parse_config({"prediction": {"budgetMilliseconds": 5000}, "guardrails": {
        "mode": mode, "tenantLabel": "tenant", "maxVictims": 0}}, "test")
    async with LoopbackWebhook(SnapshotSource(snapshot), config=config) as hook:
        status, answer = await hook.post_json(MUTATE_PODS_PATH, forged("batch", dry_run=dry_run))
    assert status == 200
    said = everything_said(answer["response"])
    assert "report-daily" not in said, said  # the victim batch/report-daily-... (the pod itself is the forger's)
    assert "would preempt 1 pod" in said  # the count is still told


async def test_an_operator_may_name_the_claimed_namespaces_own_victims(snapshot: Path) -> None:
    config = parse_config({"prediction": {"budgetMilliseconds": 5000}, "guardrails": {
        "tenantLabel": "tenant", "unverifiedDisclosure": "namespace"}}, "test")
    async with LoopbackWebhook(SnapshotSource(snapshot), config=config) as hook:
        _, answer = await hook.post_json(MUTATE_PODS_PATH, forged("batch", dry_run=False))
    assert "report-daily" in everything_said(answer["response"])  # the risk the operator accepted


async def test_the_api_servers_own_reviews_keep_naming_the_callers_tenant(snapshot: Path) -> None:
    config = parse_config({"prediction": {"budgetMilliseconds": 5000}, "guardrails": {"tenantLabel": "tenant"}},
                          "test")
    async with LoopbackWebhook(SnapshotSource(snapshot), config=config, as_api_server=True) as hook:
        _, answer = await hook.post_json(MUTATE_PODS_PATH, forged("batch", dry_run=False))
    assert "report-daily" in everything_said(answer["response"])


async def test_a_class_rule_denial_names_no_other_namespace_or_selector(snapshot: Path) -> None:
    config = parse_config({"quota": {"classes": [
        {"match": {"names": ["high"]}, "allowedNamespaces": ["payments-prod"],
         "namespaceSelector": {"matchLabels": {"tier": "gold"}}}]}}, "test")
    async with LoopbackWebhook(SnapshotSource(snapshot), config=config) as hook:
        _, answer = await hook.post_json(MUTATE_PODS_PATH, forged("team-a", dry_run=False))
    response = answer["response"]
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "quota.classes[0]" in message
    for secret in ("payments-prod", "tier", "gold"):
        assert secret not in message
