"""Each guardrail rule in both modes, the per-namespace mode label, and every kind of exemption, end to end
over TLS through /mutate/pods (see guardrail_cluster.py for the cluster and the expected preemption)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_support import (
    ADMIN,
    DEVELOPER,
    admit,
    config,
    create_review,
    prediction_annotation,
    settings,
    state_of,
)
from guardrail_cluster import guardrail_cluster, preemptor

from webhook.guardrails import RULES as ALL_RULES
from webhook.guardrails.report import MAX_WARNING_LENGTH
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import MemorySource

# rule -> (its configuration, what the denial message must say about the predicted preemption: by default to
# team-a, whose tenant holds none of the victims, so they are counts; with disclosure: cluster, named)
RULES: dict[str, tuple[dict[str, Any], list[str], list[str]]] = {
    "denyCrossTenantPreemption": (
        {"tenantLabel": "tenant", "denyCrossTenantPreemption": True},
        ["would preempt 2 pods of other tenants, but its own tenant is tenant=red"],
        ["2 pods of other tenants", "2 in team-b", "tenant=blue", "its own tenant is tenant=red"]),
    "maxPdbViolations": (
        {"maxPdbViolations": 1}, ["2 PodDisruptionBudgets of other tenants (at most 1 allowed)"],
        ["2 PodDisruptionBudgets in team-b", "at most 1 allowed"]),
    "maxVictims": (
        {"maxVictims": 2}, ["would preempt 3 pods (3 of other tenants), at most 2 allowed"],
        ["would preempt 3 pods", "2 in team-b", "1 in team-a2", "at most 2 allowed"]),
    "denyVictimPriorityAtLeast": (
        {"denyVictimPriorityAtLeast": 5000}, ["2 pods with priority 5000 or higher (2 of other tenants"],
        ["2 pods with priority 5000 or higher", "2 in team-b"]),
}
DISCLOSURES = ["tenant", "cluster"]


def hook_for(policy: dict[str, Any]) -> LoopbackWebhook:
    source = MemorySource(state_of(guardrail_cluster()))
    # As the API server (--client-ca): callers are authenticated, so the requester's tenant is named.
    return LoopbackWebhook(source, settings(), config=config({"guardrails": policy}), as_api_server=True)


def assert_warning_limits(warnings: list[str]) -> None:
    assert all(len(w) <= MAX_WARNING_LENGTH for w in warnings)
    assert sum(len(w) for w in warnings) <= 4096


@pytest.mark.parametrize("disclosure", DISCLOSURES)
@pytest.mark.parametrize("rule", list(RULES))
async def test_rule_warns_in_warn_mode(rule: str, disclosure: str) -> None:
    policy, _, _ = RULES[rule]
    async with hook_for({"mode": "warn", "disclosure": disclosure, **policy}) as hook:
        response = await admit(hook, create_review(preemptor()))
    assert response["allowed"] is True and "status" not in response
    warnings = response["warnings"]
    assert warnings[0].startswith(f"{rule}: ")
    assert [w for w in warnings if w.startswith("would preempt 3 pods")], warnings
    assert_warning_limits(warnings)
    audit = response["auditAnnotations"]
    assert audit["guardrail-decision"] == "warned" and audit["guardrail-mode"] == "warn"
    assert audit["guardrail-violations"] == rule
    compact = json.loads(prediction_annotation(response) or "null")
    if disclosure == "cluster":
        assert compact == {"outcome": "Preempts", "node": "node-1", "victims": 3,
                           "namespacesAffected": ["team-a2", "team-b"], "pdbViolations": 2}
        return
    # team-a2 is team-a's tenant only under tenantLabel (both red)
    same = ["team-a2"] if "tenantLabel" in policy else []
    assert compact == {"outcome": "Preempts", "node": "node-1", "victims": 3, "namespacesAffected": same,
                       "pdbViolations": 2, "otherTenantVictims": 3 - len(same)}
    assert "team-b" not in json.dumps(response) and "payments-" not in json.dumps(response)


@pytest.mark.parametrize("disclosure", DISCLOSURES)
@pytest.mark.parametrize("rule", list(RULES))
async def test_rule_denies_in_enforce_mode(rule: str, disclosure: str) -> None:
    policy, tenant_phrases, cluster_phrases = RULES[rule]
    phrases = cluster_phrases if disclosure == "cluster" else tenant_phrases
    async with hook_for({"mode": "enforce", "disclosure": disclosure, **policy}) as hook:
        response = await admit(hook, create_review(preemptor()))
    assert response["allowed"] is False and "patch" not in response
    status = response["status"]
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    message = status["message"]
    assert message.startswith('pods "big-job" is forbidden: PreemptGuard guardrail denied the predicted preemption')
    assert f"{rule}: " in message and "on node node-1" in message
    for phrase in phrases:
        assert phrase in message, (phrase, message)
    assert "To be exempted, ask a cluster admin" in message and "guardrails.exempt" in message
    assert response["warnings"][0].startswith(f"{rule}: ")
    assert response["auditAnnotations"]["guardrail-decision"] == "denied"
    if disclosure == "tenant":
        assert "team-b" not in json.dumps(response) and "payments-" not in json.dumps(response)


async def test_rules_that_hold_allow_without_rule_warnings() -> None:
    policy = {"mode": "enforce", "tenantLabel": "tenant", "maxVictims": 3, "maxPdbViolations": 2,
              "denyVictimPriorityAtLeast": 5001}
    async with hook_for(policy) as hook:
        response = await admit(hook, create_review(preemptor()))
        # The same pod preempting only its own tenant: team-a2 shares tenant red with team-a.
        same_tenant = await admit(hook, create_review(preemptor("team-a2")))
    assert response["allowed"] is True
    assert not [w for w in response["warnings"] if w.split(":")[0] in RULES]
    assert response["auditAnnotations"]["guardrail-decision"] == "allowed"
    assert same_tenant["allowed"] is True


async def test_namespace_label_overrides_the_configured_mode() -> None:
    async with hook_for({"mode": "warn", "maxVictims": 2}) as hook:
        strict = await admit(hook, create_review(preemptor("team-a-strict")))
        relaxed = await admit(hook, create_review(preemptor("team-a-relaxed")))
        default = await admit(hook, create_review(preemptor("team-a")))
    assert strict["allowed"] is False and strict["status"]["code"] == 403
    assert "label namespace team-a-strict with preemptguard.io/mode=warn" in strict["status"]["message"]
    # off: no prediction at all on a real create, so no warnings and no annotation.
    assert relaxed["allowed"] is True and "warnings" not in relaxed and prediction_annotation(relaxed) is None
    assert relaxed["auditAnnotations"] == {"guardrail-decision": "off", "guardrail-mode": "off"}
    assert default["allowed"] is True and default["warnings"][0].startswith("maxVictims: ")
    async with hook_for({"mode": "enforce", "maxVictims": 2}) as hook:
        warned = await admit(hook, create_review(preemptor("team-a-warn")))
        relaxed = await admit(hook, create_review(preemptor("team-a-relaxed")))
        denied = await admit(hook, create_review(preemptor("team-a")))
    assert warned["allowed"] is True and warned["auditAnnotations"]["guardrail-mode"] == "warn"
    assert relaxed["allowed"] is True and "warnings" not in relaxed
    assert denied["allowed"] is False


SERVICE_ACCOUNT = {"username": "system:serviceaccount:team-a:deployer", "groups": ["system:serviceaccounts"]}
OTHER_ACCOUNT = {"username": "system:serviceaccount:team-a:builder", "groups": ["system:serviceaccounts"]}


@pytest.mark.parametrize(("exempt", "user", "exemption"), [
    ({"namespaces": ["team-a"]}, ADMIN, "namespace team-a"),
    ({"users": ["dev@example.com"]}, DEVELOPER, "user dev@example.com"),
    ({"groups": ["developers"]}, DEVELOPER, "group developers"),
    ({"serviceAccounts": ["team-a/deployer"]}, SERVICE_ACCOUNT, "service account team-a/deployer"),
    ({"serviceAccounts": ["team-a/*"]}, OTHER_ACCOUNT, "service account team-a/builder"),
], ids=["namespace", "user", "group", "service-account", "service-account-wildcard"])
async def test_exemptions_allow_what_enforce_would_deny(exempt: dict[str, Any], user: dict[str, Any],
                                                        exemption: str) -> None:
    policy: dict[str, Any] = {"mode": "enforce", "maxVictims": 2, "exempt": exempt}
    async with hook_for(policy) as hook:
        exempted = await admit(hook, create_review(preemptor(), user=user))
        # The same pod, by someone the exemption does not name, in a namespace it does not name.
        other = await admit(hook, create_review(preemptor("team-a2"), user={"username": "mallory",
                                                                              "groups": ["system:authenticated"]}))
    assert exempted["allowed"] is True
    assert exempted["warnings"][0].startswith("maxVictims: ")
    assert f"guardrails not enforced: the request is exempt ({exemption})" in exempted["warnings"]
    assert exempted["auditAnnotations"]["guardrail-exemption"] == exemption
    assert other["allowed"] is False


def test_rule_table_covers_every_guardrail_rule() -> None:
    assert set(RULES) == set(ALL_RULES)
