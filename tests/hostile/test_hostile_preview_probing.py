"""Attack: probe other tenants through ``/preview`` and dry runs. Before #24 ``/preview`` predicted with classes
admission would refuse the caller (``system-node-critical`` in team-a), named other tenants' namespaces
(``redactedNamespaces``, ``namespacesAffected``, per-namespace counts: 26 previews mapped every namespace's pods
onto every node) and answered as many probes as anyone sent. Now it applies the admission chain, names no
namespace of another tenant, and answers at most ``prediction.previewsPerMinute`` probes per caller."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from bench.hostile import ENFORCE, EXAMPLES, admission_review, guarded_pod
from webhook.config import parse_config
from webhook.routes import MUTATE_PODS_PATH, PREVIEW_PATH
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import SnapshotSource

SETTINGS = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True)


@pytest.fixture(scope="module")
def source() -> SnapshotSource:
    return SnapshotSource(EXAMPLES / "cluster.yaml")


def config(**extra: Any) -> Any:
    document = {**yaml.safe_load((EXAMPLES / "config.yaml").read_text(encoding="utf-8")), **ENFORCE, **extra}
    return parse_config(document, "test")


def critical_pod() -> dict[str, Any]:
    pod = guarded_pod()
    pod["spec"]["priorityClassName"] = "system-node-critical"
    return pod


async def test_a_preview_predicts_only_what_admission_would_let_the_caller_create(source: SnapshotSource) -> None:
    examples_quota = yaml.safe_load((EXAMPLES / "config.yaml").read_text(encoding="utf-8"))["quota"]
    restricted = config(quota={**examples_quota,
                               "classes": [{"match": {"names": ["high"]}, "allowedNamespaces": ["team-b"]}]})
    async with LoopbackWebhook(source, SETTINGS, config=restricted) as hook:
        answers = [await hook.post_json(PREVIEW_PATH, body) for body in (
            {"pod": critical_pod()},  # limitedResources: no ResourceQuota covers the class in team-a
            {"pod": guarded_pod(), "priorityClassName": "system-node-critical"},
            {"pod": guarded_pod()},  # quota.classes: high is team-b's only
        )]
        admitted = await hook.post_json(MUTATE_PODS_PATH, admission_review(critical_pod()))
    for status, preview in answers:
        assert status == 200
        (result,) = preview["results"]
        assert result["outcome"] == "Rejected" and result["victims"] == [] and result["node"] is None
    assert answers[0][1]["results"][0]["message"] == (
        "insufficient quota to match these scopes: [{PriorityClass In [system-node-critical system-cluster-critical]}]")
    assert answers[1][1]["results"][0]["message"] == answers[0][1]["results"][0]["message"]
    assert "quota.classes[0]" in answers[2][1]["results"][0]["message"]
    # What admission itself says of the same pod.
    assert admitted[1]["response"]["allowed"] is False
    assert answers[0][1]["results"][0]["message"] in admitted[1]["response"]["status"]["message"]


def namespaces_of_other_tenants() -> list[str]:
    cluster = yaml.safe_load((EXAMPLES / "cluster.yaml").read_text(encoding="utf-8"))
    return [o["metadata"]["name"] for o in cluster["items"]
            if o["kind"] == "Namespace" and o["metadata"]["name"] != "team-a"]


def node_names() -> list[str]:
    cluster = yaml.safe_load((EXAMPLES / "cluster.yaml").read_text(encoding="utf-8"))
    return [o["metadata"]["name"] for o in cluster["items"] if o["kind"] == "Node"]


async def test_previews_pinned_to_every_node_name_no_namespace_of_another_tenant(source: SnapshotSource) -> None:
    """The probe of the issue: one preview per node, each evicting all it can there (a class above everyone,
    a pod as big as the node); the answers would map every namespace's pods onto every node."""
    probes = []
    for node in node_names():
        pod = guarded_pod()
        pod["spec"]["priorityClassName"] = "platform"
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        pod["spec"]["tolerations"] = [{"operator": "Exists"}]
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3500m", "memory": "12Gi"}}
        probes.append({"pod": pod, "namespace": "team-a"})
    async with LoopbackWebhook(source, SETTINGS, config=parse_config({**ENFORCE, "prediction": {
            "previewsPerMinute": 0}}, "test")) as hook:
        answers = [await hook.post_json(PREVIEW_PATH, probe) for probe in probes]
    others = namespaces_of_other_tenants()
    preempting = 0
    for status, preview in answers:
        assert status == 200
        text = json.dumps(preview)
        leaked = [ns for ns in others if f'"{ns}"' in text or f"{ns}/" in text]
        assert not leaked, (leaked, text[:300])
        assert "redactedNamespaces" not in preview and "redactedVictims" not in text
        preempting += preview["summary"]["preempting"]
        (result,) = preview["results"]
        hidden = result.get("otherTenantVictims", {}).get("count", 0)
        assert preview["summary"]["victims"] == len(result["victims"]) + hidden  # counts, yes; names, never
    assert preempting >= len(probes) // 2  # the probes did evict (so there was something to leak)


async def test_previews_and_dry_runs_are_rate_limited_per_caller(source: SnapshotSource) -> None:
    limited = parse_config({**ENFORCE, "prediction": {"previewsPerMinute": 5}}, "test")
    async with LoopbackWebhook(source, SETTINGS, config=limited) as hook:
        previews = [await hook.post_json(PREVIEW_PATH, {"pod": guarded_pod()}) for _ in range(6)]
        assert hook.session is not None
        async with hook.session.post(hook.url(PREVIEW_PATH), json={"pod": guarded_pod()}) as response:
            retry_after = response.headers.get("Retry-After")
        dry = [await hook.post_json(MUTATE_PODS_PATH, admission_review(probe(cpu), dry_run=True, username=user))
               for cpu, user in [*((c, "mallory") for c in range(8, 14)), (8, "trudy")]]
        replicas = [await hook.post_json(MUTATE_PODS_PATH, admission_review(
            {**probe(9), "metadata": {**probe(9)["metadata"], "name": f"replica-{i}"}}, dry_run=True,
            username="mallory")) for i in range(10)]
        real = [await hook.post_json(MUTATE_PODS_PATH, admission_review(guarded_pod(), username="mallory"))
                for _ in range(3)]
    assert [status for status, _ in previews] == [200] * 5 + [429]
    assert "at most 5 per minute (prediction.previewsPerMinute)" in previews[-1][1]["error"]
    assert retry_after is not None and 1 <= int(retry_after) <= 12
    codes = [body["response"].get("status", {}).get("code") for _, body in dry]
    assert codes[:5] == [403] * 5  # predicted, and denied by the cross-tenant rule
    assert codes[5] == 429 and codes[6] == 403  # mallory is out of previews, trudy is not
    assert all(body["response"]["status"]["code"] == 403 for _, body in real)  # real creates are not limited
    # The same pod again (a workload's replicas, as the plugin dry-runs them) is no new probe: not charged.
    assert all(body["response"]["status"]["code"] == 403 for _, body in replicas)


def probe(cpu: int) -> dict[str, Any]:
    """The guarded pod asking for ``cpu`` CPUs: each a different probe."""
    pod = guarded_pod()
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": str(cpu), "memory": "16Gi"}}
    return pod

