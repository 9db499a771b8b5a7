"""POST /preview end to end over TLS: snapshot mode (no authentication), malformed bodies, the time budget,
and in-cluster authentication (TokenReview) and authorisation (SubjectAccessReview) through the fake API
server, including the redaction of victims in namespaces the caller may not list pods in."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from e2e_support import config, namespace, node, pod, priority_class, settings, state_of
from fake_apiserver import FakeApiServer

from bench.clustergen import generate_cluster
from webhook.routes import MUTATE_PODS_PATH, PREVIEW_PATH, VALIDATE_PRIORITYCLASSES_PATH
from webhook.server.testing import LoopbackWebhook
from webhook.sources.informer import InformerSettings
from webhook.sources.kube_source import KubernetesSource
from webhook.sources.source import MemorySource, SnapshotSource

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str) -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load((EXAMPLES / "pods" / name).read_text(encoding="utf-8"))
    return manifest


@pytest.fixture(scope="module")
def examples_source() -> SnapshotSource:
    return SnapshotSource(EXAMPLES / "cluster.yaml")


async def test_preview_of_a_pod_and_of_a_deployment_in_snapshot_mode(examples_source: SnapshotSource) -> None:
    async with LoopbackWebhook(examples_source, settings(), config=config({"guardrails": {"disclosure": "cluster"}})
                               ) as hook:
        status, single = await hook.post_json(PREVIEW_PATH, {"pod": example("09-preempts-batch.yaml")})
        status2, two = await hook.post_json(PREVIEW_PATH, {"pod": example("14-deployment-high.yaml"), "replicas": 2})
        status3, default = await hook.post_json(PREVIEW_PATH, {"pod": example("14-deployment-high.yaml"),
                                                               "namespace": "team-c"})
        status4, fits = await hook.post_json(PREVIEW_PATH, {"pod": example("08-small-fits.yaml")})
    assert (status, status2, status3, status4) == (200, 200, 200, 200)
    assert (single["apiVersion"], single["kind"]) == ("preemptguard.io/v1alpha1", "PreemptionPreview")
    (result,) = single["results"]
    assert result["pod"] == "team-a/search-reindex" and result["outcome"] == "Preempts"
    assert result["victims"] and all(v["priority"] < 1_000_000 for v in result["victims"])
    assert single["summary"]["preempting"] == 1 and "redactedNamespaces" not in single
    assert [r["pod"] for r in two["results"]] == ["team-a/recommendations-0", "team-a/recommendations-1"]
    assert [r["pod"] for r in default["results"]] == [f"team-c/recommendations-{i}" for i in range(4)]
    assert fits["results"][0]["outcome"] == "Fits" and fits["results"][0]["victims"] == []


async def test_preview_names_no_other_tenant_without_disclosure_cluster(examples_source: SnapshotSource) -> None:
    """The default disclosure (tenant) holds for /preview too, snapshot mode included: the batch victim of a
    team-a pod is a count, and no namespace of another tenant appears anywhere in the answer."""
    async with LoopbackWebhook(examples_source, settings()) as hook:
        status, single = await hook.post_json(PREVIEW_PATH, {"pod": example("09-preempts-batch.yaml")})
    assert status == 200
    (result,) = single["results"]
    assert result["outcome"] == "Preempts" and result["node"] == "pool-batch-04"
    assert result["victims"] == [] and result["otherTenantVictims"] == {"count": 1, "pdbViolations": 0}
    assert single["summary"]["victims"] == 1 and single["summary"]["otherTenantVictims"] == 1
    assert single["summary"]["namespacesAffected"] == []
    text = json.dumps(single)  # (the node pool-batch-04 is a node, not a namespace)
    assert '"batch"' not in text and "batch/" not in text and "report-daily" not in text


@pytest.mark.parametrize(("body", "message"), [
    (b"{", "not valid JSON"),
    (b"[]", "PreviewRequest: expected an object, got list"),
    (b"{}", "pod is required"),
    (b'{"pod": "web"}', "pod: expected an object, got str"),
    (b'{"pod": {"kind": "Pod"}, "replicas": -1}', "replicas must be a non-negative integer"),
    (b'{"pod": {"kind": "Pod"}, "replicas": true}', "replicas must be a non-negative integer"),
    (b'{"pod": {"kind": "Pod"}, "namespace": 7}', "namespace: expected a string, got int"),
    (b'{"pod": {"kind": "Service", "metadata": {"name": "x"}}}', "unsupported kind 'Service'"),
    (b'{"pod": {"kind": "Pod"}, "replica": 2}', "unknown field 'replica'"),
    (b'{"pod": {"kind": "Pod", "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}}',
     "lots"),
])
async def test_malformed_preview_requests_get_400(examples_source: SnapshotSource, body: bytes, message: str) -> None:
    async with LoopbackWebhook(examples_source, settings()) as hook:
        status, raw = await hook.post(PREVIEW_PATH, body)
    assert status == 400
    error = yaml.safe_load(raw)["error"]
    assert message in error, error


async def test_a_preview_over_its_budget_is_503() -> None:
    source = MemorySource(state_of(generate_cluster(200, 30, seed=3)))
    manifest = pod("wave", "team-00", cpu="3", memory="2Gi", priority_class_name="critical")
    async with LoopbackWebhook(source, settings(preview_budget_seconds=0.05)) as hook:
        status, body = await hook.post_json(PREVIEW_PATH, {"pod": manifest, "replicas": 500})
    assert status == 503
    assert body == {"error": "the prediction did not finish within 0.05 s"}


async def test_preview_needs_a_ready_cache() -> None:
    source = MemorySource(state_of([]), ready=False)
    async with LoopbackWebhook(source, settings()) as hook:
        status, body = await hook.post_json(PREVIEW_PATH, {"pod": pod("p", "default")})
    assert status == 503 and "not ready" in body["error"]


# ---- in cluster: TokenReview, SubjectAccessReview, redaction ---------------------------------------------
WEBHOOK_TOKEN = "webhook-service-account-token"
ALICE, BOB, CAROL = "alice-token-0123456789", "bob-token-0123456789", "carol-token-0123456789"
FAST = InformerSettings(watch_timeout_seconds=30, backoff_base_seconds=0.01, backoff_cap_seconds=0.1)


def contested_cluster() -> list[dict[str, Any]]:
    """node-1 (4 CPUs) holds a team-b and a team-c pod; a 3.5-CPU team-a pod must evict both. The three
    namespaces are one tenant by the label ``tenant`` (with ``tenantLabel: tenant``), else three tenants."""
    return [
        priority_class("low", 10), priority_class("high", 1_000_000),
        namespace("team-a", tenant="shop"), namespace("team-b", tenant="shop"), namespace("team-c", tenant="shop"),
        node("node-1", cpu="4"),
        pod("ledger-0", "team-b", cpu="2", node_name="node-1", priority_class_name="low", priority=10),
        pod("etl-0", "team-c", cpu="1500m", node_name="node-1", priority_class_name="low", priority=10),
    ]


ONE_TENANT = config({"guardrails": {"tenantLabel": "tenant"}})


@pytest.fixture(params=[ONE_TENANT])
async def live_hook(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[LoopbackWebhook,
                                                                                          FakeApiServer]]:
    """The webhook on a fake API server with users alice (creates in team-a, lists team-a and team-c), bob
    (lists everywhere, creates nowhere) and carol (everything); the configuration is the fixture's parameter."""
    async with FakeApiServer(token=WEBHOOK_TOKEN) as fake:
        fake.load(contested_cluster())
        fake.add_user(ALICE, "alice", ["system:authenticated", "team-a-devs"])
        fake.grant("group:team-a-devs", "create", "pods", "team-a")
        fake.grant("alice", "list", "pods", "team-a")
        fake.grant("alice", "list", "pods", "team-c")
        fake.add_user(BOB, "bob")
        fake.grant("bob", "list", "pods", "*")
        fake.add_user(CAROL, "carol", ["system:authenticated", "sre"])
        fake.grant("group:sre", "create", "pods", "*")
        fake.grant("group:sre", "list", "pods", "*")
        source = KubernetesSource(kubeconfig=str(fake.write_kubeconfig(tmp_path)), context="fake", settings=FAST)
        async with LoopbackWebhook(source, settings(), config=request.param) as hook:
            assert await source.wait_until_ready(timeout=10)
            yield hook, fake


def preview_body() -> dict[str, Any]:
    return {"pod": pod("importer", "team-a", cpu="3500m", priority_class_name="high"), "namespace": "team-a"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_preview_without_a_valid_token_is_401(live_hook: tuple[LoopbackWebhook, FakeApiServer]) -> None:
    hook, fake = live_hook
    assert (await hook.post_json(PREVIEW_PATH, preview_body()))[0] == 401
    assert (await hook.post_json(PREVIEW_PATH, preview_body(), headers={"Authorization": "Basic YTpi"}))[0] == 401
    status, body = await hook.post_json(PREVIEW_PATH, preview_body(), headers=bearer("stolen-or-expired"))
    assert status == 401 and body == {"error": "Unauthorized: the bearer token was not accepted"}
    assert [review["token"] for review in fake.token_reviews] == ["stolen-or-expired"]
    assert not fake.access_reviews
    # The webhook spoke to the API server with its own credentials only.
    assert set(fake.authorization_headers) == {f"Bearer {WEBHOOK_TOKEN}"}


async def test_preview_without_create_permission_is_403(live_hook: tuple[LoopbackWebhook, FakeApiServer]) -> None:
    hook, fake = live_hook
    status, body = await hook.post_json(PREVIEW_PATH, preview_body(), headers=bearer(BOB))
    assert status == 403
    assert body == {"error": 'Forbidden: user "bob" may not create pods in namespace team-a'}
    (review,) = fake.access_reviews
    assert review["user"] == "bob" and review["uid"] == "uid-bob"
    assert review["resourceAttributes"] == {"namespace": "team-a", "verb": "create", "group": "",
                                            "resource": "pods"}


async def test_victims_the_caller_may_not_list_are_counted_not_named(
        live_hook: tuple[LoopbackWebhook, FakeApiServer], caplog: pytest.LogCaptureFixture) -> None:
    hook, fake = live_hook
    caplog.set_level(logging.DEBUG)
    status, preview = await hook.post_json(PREVIEW_PATH, preview_body(), headers=bearer(ALICE))
    assert status == 200, preview
    (result,) = preview["results"]
    assert result["outcome"] == "Preempts" and result["node"] == "node-1"
    assert [(v["namespace"], v["name"]) for v in result["victims"]] == [("team-c", "etl-0")]
    assert result["redactedVictims"] == [{"namespace": "team-b", "count": 1, "pdbViolations": 0}]
    assert preview["redactedNamespaces"] == ["team-b"]
    assert preview["summary"]["victims"] == 2
    assert "ledger-0" not in str(preview)
    # One SubjectAccessReview for create, then one per affected namespace, those asked together (in any order).
    asked = [(r["resourceAttributes"]["verb"], r["resourceAttributes"]["namespace"]) for r in fake.access_reviews]
    assert asked[0] == ("create", "team-a") and sorted(asked[1:]) == [("list", "team-b"), ("list", "team-c")]
    assert fake.access_reviews[0]["groups"] == ["system:authenticated", "team-a-devs"]
    assert ALICE not in caplog.text

    status, full = await hook.post_json(PREVIEW_PATH, preview_body(), headers=bearer(CAROL))
    assert status == 200
    assert sorted(v["name"] for v in full["results"][0]["victims"]) == ["etl-0", "ledger-0"]
    assert "redactedVictims" not in full["results"][0] and "redactedNamespaces" not in full


@pytest.mark.parametrize("live_hook", [config()], indirect=True)
async def test_other_tenants_victims_are_counts_and_their_namespaces_never_named(
        live_hook: tuple[LoopbackWebhook, FakeApiServer]) -> None:
    """Without a tenant label each namespace is its own tenant: even carol, who may list pods everywhere, is
    told of team-b's and team-c's victims as a count, with no namespace name (docs/interfaces.md §4, §7)."""
    hook, fake = live_hook
    for token in (ALICE, CAROL):
        status, preview = await hook.post_json(PREVIEW_PATH, preview_body(), headers=bearer(token))
        assert status == 200, preview
        (result,) = preview["results"]
        assert result["outcome"] == "Preempts" and result["node"] == "node-1"
        assert result["victims"] == [] and result["otherTenantVictims"] == {"count": 2, "pdbViolations": 0}
        assert "redactedVictims" not in result and "redactedNamespaces" not in preview
        assert preview["summary"]["victims"] == 2 and preview["summary"]["namespacesAffected"] == []
        text = json.dumps(preview)
        assert all(name not in text for name in ("team-b", "team-c", "ledger-0", "etl-0"))
    # Nothing was left to list-check: only the create SubjectAccessReviews.
    assert {r["resourceAttributes"]["verb"] for r in fake.access_reviews} == {"create"}


# ---- under --client-ca: /preview on a listener of its own ------------------------------------------------
async def test_under_client_ca_a_token_previews_on_the_preview_port_without_a_client_certificate(
        tmp_path: Path) -> None:
    """Under --client-ca the admission port requires a client certificate at the handshake, which a
    `kubectl preempt-preview --webhook-url` user does not have: /preview answers on --preview-port without one,
    authenticated by the bearer token (TokenReview + SubjectAccessReview), while the admission port still refuses
    every certificate-less handshake and the preview port answers no admission path."""
    async with FakeApiServer(token=WEBHOOK_TOKEN) as fake:
        fake.load(contested_cluster())
        fake.add_user(ALICE, "alice", ["system:authenticated", "team-a-devs"])
        fake.grant("group:team-a-devs", "create", "pods", "team-a")
        fake.grant("alice", "list", "pods", "team-a")
        fake.add_user(BOB, "bob")
        source = KubernetesSource(kubeconfig=str(fake.write_kubeconfig(tmp_path)), context="fake", settings=FAST)
        async with LoopbackWebhook(source, settings(preview_port=0), config=ONE_TENANT, as_api_server=True) as hook:
            assert await source.wait_until_ready(timeout=10)
            assert hook.server is not None and hook.server.preview_port not in (None, hook.server.https_port)
            status, preview = await hook.post_preview_listener(PREVIEW_PATH, preview_body(), headers=bearer(ALICE))
            assert status == 200, preview
            (result,) = preview["results"]
            assert result["outcome"] == "Preempts" and result["node"] == "node-1"
            assert preview["redactedNamespaces"] == ["team-b", "team-c"]  # alice lists pods in team-a only
            assert (await hook.post_preview_listener(PREVIEW_PATH, preview_body()))[0] == 401
            assert (await hook.post_preview_listener(PREVIEW_PATH, preview_body(), headers=bearer(BOB)))[0] == 403
            # No way around --client-ca: the preview port answers no admission path, even to a valid token.
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}
            for path in (MUTATE_PODS_PATH, VALIDATE_PRIORITYCLASSES_PATH):
                assert (await hook.post_preview_listener(path, review, headers=bearer(ALICE)))[0] == 404
            # The admission port still fails every handshake without the API server's certificate.
            served = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", hook.server.preview_port))
            anonymous = ssl.create_default_context(cadata=served)
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=anonymous)) as stranger:
                for path, body in ((PREVIEW_PATH, preview_body()), (MUTATE_PODS_PATH, review)):
                    with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
                        async with stranger.post(hook.url(path), json=body, headers=bearer(ALICE)) as response:
                            await response.read()
            # ... and keeps answering the API server's certificate.
            assert (await hook.post_json(PREVIEW_PATH, preview_body(), headers=bearer(ALICE)))[0] == 200
        # One question per caller: alice's answer on the admission port is the one her first preview got, reused
        # within 10 s (docs/interfaces.md §7); the two ports share it as they share the endpoint.
        assert [r["user"] for r in fake.access_reviews if r["resourceAttributes"]["verb"] == "create"] == [
            "alice", "bob"]
