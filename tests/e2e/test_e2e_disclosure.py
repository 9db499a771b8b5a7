"""Issue 14 acceptance: as tenant A, create and dry-run-create pods that preempt tenant B's pods, over TLS,
under the default configuration and under tenantLabel; no B pod name and no B namespace name appears anywhere
in the answer (the JSONPatch and the annotations it writes decoded, warnings, status, audit annotations), while
the answer still says how many pods would be preempted. Same-tenant victims stay named."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from e2e_support import admit, config, create_review, namespace, node, pdb, pod, priority_class, settings, state_of

from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import MemorySource

# node-1 is full: two pods of tenant B (namespace bravo-ns, under a PDB allowing no disruption) and one pod of
# tenant A's second namespace (alpha-two; tenant A under tenantLabel only). A 4-CPU pod of alpha-one evicts all.
B_NAMES = ("bravo-ns", "bravo-ledger-0", "bravo-ledger-1")


def cluster() -> list[dict[str, Any]]:
    return [
        priority_class("low", 100, global_default=True), priority_class("high", 1_000_000),
        namespace("alpha-one", tenant="alpha"), namespace("alpha-two", tenant="alpha"),
        namespace("bravo-ns", tenant="bravo"),
        node("node-1", cpu="4"),
        pod("bravo-ledger-0", "bravo-ns", cpu="1500m", node_name="node-1", priority_class_name="low", priority=100,
            labels={"app": "ledger"}),
        pod("bravo-ledger-1", "bravo-ns", cpu="1500m", node_name="node-1", priority_class_name="low", priority=100,
            labels={"app": "ledger"}),
        pod("alpha-report", "alpha-two", cpu="1", node_name="node-1", priority_class_name="low", priority=100),
        pdb("ledger", "bravo-ns", {"app": "ledger"}, allowed=0),
    ]


def everything_said(response: dict[str, Any]) -> str:
    """The whole answer as text, with the base64 JSONPatch and the JSON annotation values decoded."""
    parts = [json.dumps(response)]
    if "patch" in response:
        operations = json.loads(base64.b64decode(response["patch"]))
        parts.append(json.dumps(operations))
        for op in operations:
            value = op.get("value")
            values = value.values() if isinstance(value, dict) else [value]
            parts += [v for v in values if isinstance(v, str)]
    parts += [str(v) for v in response.get("auditAnnotations", {}).values()]
    return "\n".join(parts)


POLICIES = {
    "default": {},
    "tenantLabel": {"tenantLabel": "tenant"},
    "enforce": {"mode": "enforce", "maxVictims": 0, "denyCrossTenantPreemption": True},
    "enforce-tenantLabel": {"mode": "enforce", "maxVictims": 0, "denyCrossTenantPreemption": True,
                            "tenantLabel": "tenant"},
}


@pytest.mark.parametrize("authenticated", [True, False], ids=["client-ca", "unauthenticated"])
@pytest.mark.parametrize("dry_run", [False, True], ids=["create", "dry-run"])
@pytest.mark.parametrize("policy", list(POLICIES))
async def test_tenant_b_is_never_named_to_tenant_a(policy: str, dry_run: bool, authenticated: bool) -> None:
    """Under --client-ca the requester's tenant is named; without it (the namespace is a claim) nobody is."""
    guardrails = POLICIES[policy]
    source = MemorySource(state_of(cluster()))
    async with LoopbackWebhook(source, settings(), config=config({"guardrails": guardrails}),
                               as_api_server=authenticated) as hook:
        response = await admit(hook, create_review(pod("big-job", "alpha-one", cpu="4", priority_class_name="high"),
                                                   dry_run=dry_run))
    said = everything_said(response)
    for name in B_NAMES:
        assert name not in said, (name, said)
    # alpha-two is alpha-one's tenant only under tenantLabel, and named only to an authenticated caller
    same_tenant = "tenantLabel" in guardrails and authenticated
    assert ("alpha-report" in said) is same_tenant
    assert ("alpha-two" in said) is same_tenant
    # Still reports how many pods would be preempted.
    assert "would preempt 3 pods" in said
    assert ("of other tenants" if authenticated else "(names withheld)") in said
    if guardrails.get("mode") == "enforce":
        assert response["allowed"] is False and "3 pods" in response["status"]["message"]
    else:
        assert response["allowed"] is True
        annotation = json.loads(json.loads(base64.b64decode(response["patch"]))[-1]["value"]
                                ["preemptguard.io/prediction"])
        if dry_run:
            (result,) = annotation["results"]
            assert len(result["victims"]) == (1 if same_tenant else 0)
            assert result["otherTenantVictims"] == {"count": 2 if same_tenant else 3, "pdbViolations": 2}
            assert annotation["summary"]["victims"] == 3
        else:
            assert annotation["victims"] == 3 and annotation["otherTenantVictims"] == (2 if same_tenant else 3)


async def test_cluster_disclosure_names_every_victim() -> None:
    source = MemorySource(state_of(cluster()))
    async with LoopbackWebhook(source, settings(), config=config({"guardrails": {"disclosure": "cluster"}})) as hook:
        response = await admit(hook, create_review(pod("big-job", "alpha-one", cpu="4", priority_class_name="high")))
    said = everything_said(response)
    assert all(name in said for name in B_NAMES)
