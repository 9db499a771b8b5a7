"""The server's real API calls, recorded by the fake API server, are exactly webhook/rbac.py REQUIRED_PERMISSIONS.

(The certificate job's calls are checked the same way in test_certs_reconcile.py; tests/manifests checks
that the Roles in manifests/ grant exactly these declarations.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fake_kube_api import FakeApiServer

import webhook
from webhook.rbac import REQUIRED_PERMISSIONS, allows
from webhook.sources.informer import InformerSettings
from webhook.sources.kube_source import KubernetesSource

PACKAGE = Path(webhook.__file__).resolve().parent


def seed(fake: FakeApiServer) -> None:
    fake.put("scheduling.k8s.io", "priorityclasses",
             {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
              "value": 1000, "preemptionPolicy": "PreemptLowerPriority"})
    fake.put("", "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})


async def test_server_calls_are_covered_by_and_use_every_declared_permission(
        fake_api: FakeApiServer, api_client: Any) -> None:
    seed(fake_api)
    settings = InformerSettings(watch_timeout_seconds=2, backoff_base_seconds=0.01, backoff_cap_seconds=0.1)
    source = KubernetesSource(api=api_client, settings=settings)
    await source.start()
    try:
        assert await source.wait_until_ready(timeout=20)
        for _ in range(200):  # every informer has opened its watch
            if sum(1 for r in fake_api.requests if r.verb == "watch") >= len(source.informers):
                break
            await asyncio.sleep(0.02)
        assert (await source.get_priority_class("high")) is not None
        assert (await source.get_priority_class("missing")) is None
    finally:
        await source.stop()

    for request in fake_api.requests:
        assert not request.namespace, f"cluster-wide informers only: {request}"
        assert allows(REQUIRED_PERMISSIONS, request.api_group, request.resource, request.verb, request.name), request
    used = {(r.api_group, r.resource, r.verb) for r in fake_api.requests}
    declared = {(p.api_group, p.resource, verb) for p in REQUIRED_PERMISSIONS for verb in p.verbs}
    # TokenReview/SubjectAccessReview are created per /preview caller, not at start-up: they are granted
    # exactly when the package has code that creates them (by raw API path or kubernetes-asyncio's typed client).
    review_calls = {
        ("authentication.k8s.io", "tokenreviews", "create"): ("/apis/authentication.k8s.io/v1/tokenreviews",
                                                              "create_token_review("),
        ("authorization.k8s.io", "subjectaccessreviews", "create"): (
            "/apis/authorization.k8s.io/v1/subjectaccessreviews", "create_subject_access_review("),
    }
    sources = "\n".join(path.read_text() for path in PACKAGE.rglob("*.py") if path.name != "rbac.py")
    reviews_in_code = {call for call, markers in review_calls.items() if any(m in sources for m in markers)}
    assert declared & set(review_calls) == reviews_in_code
    # Events are created per preempted pod, not at start-up (tests/observe/test_attribution_live.py records a
    # replica's every call, Events, Lease and PolicyReports included, against the declarations).
    per_preemption = {("", "events", "create")}
    assert used == declared - set(review_calls) - per_preemption
