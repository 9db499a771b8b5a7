"""Disclosure by tenant (docs/interfaces.md §7): the requester hears other tenants' victims as counts only, on
every channel the guardrails produce; ``disclosure: cluster`` names everything; ``auditDetail: full`` puts
full detail into the audit annotations only when callers are authenticated. Where callers are not
authenticated (no --client-ca) the review's namespace is a claim, so nobody is named unless the operator opts
in to naming the claimed namespace's own victims (``unverifiedDisclosure: namespace``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webhook.cluster.model import FrozenMap, Namespace
from webhook.config import GuardrailsConfig, parse_config
from webhook.errors import ConfigError
from webhook.guardrails import evaluate_guardrails
from webhook.guardrails.disclosure import audience_of, redact_preview_document
from webhook.guardrails.policy import AUDIT_PREDICTION
from webhook.identity import UserInfo
from webhook.preemption.preview import build_preview
from webhook.preemption.results import Outcome, PreemptionResult, VictimInfo

OTHER_NAMES = ("bravo-secret-job", "charlie-hidden-db", "team-bravo", "team-charlie")
RESULT = PreemptionResult(
    pod="team-alpha/web", priority=1000, priority_class_name="high", preemption_policy="PreemptLowerPriority",
    outcome=Outcome.PREEMPTS, node="node-7", pdb_violations=2, victims=(
        VictimInfo("team-alpha", "alpha-batch", "node-7", 10, False, 30),
        VictimInfo("team-bravo", "bravo-secret-job", "node-7", 10, True, 30),
        VictimInfo("team-charlie", "charlie-hidden-db", "node-7", 50, True, 30),
    ))
NAMESPACES = {name: Namespace(name, FrozenMap({})) for name in ("team-alpha", "team-bravo", "team-charlie")}


def policy(**guardrails: Any) -> GuardrailsConfig:
    return parse_config({"guardrails": guardrails}, "test").guardrails


def channels(decision: Any) -> list[str]:
    """Everything the decision says to the requester, decoded."""
    texts = [*decision.warnings, decision.denial_message or "", decision.annotation or ""]
    texts += [str(v) for v in decision.audit_annotations.values()]
    return texts


RULES = {"denyCrossTenantPreemption": True, "maxVictims": 1, "maxPdbViolations": 0, "denyVictimPriorityAtLeast": 5}


@pytest.mark.parametrize("mode", ["warn", "enforce"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_other_tenants_are_counts_on_every_channel(mode: str, dry_run: bool) -> None:
    decision = evaluate_guardrails(policy(mode=mode, **RULES), pod_name="web", namespace="team-alpha",
                                   user=UserInfo("dev"), outcome=RESULT, namespaces=NAMESPACES, dry_run=dry_run,
                                   callers_authenticated=True)
    said = "\n".join(channels(decision))
    for name in OTHER_NAMES:
        assert name not in said
    assert "alpha-batch" in said  # the requester's own tenant stays named
    assert "would preempt 3 pods (1 in team-alpha, 2 of other tenants) on node-7 (2 PDB violations)" in said
    assert "and 2 pods of other tenants, 2 PDB violations" in decision.warnings
    assert "denyCrossTenantPreemption: would preempt 2 pods of other tenants" in decision.warnings
    annotation = json.loads(decision.annotation)
    if dry_run:
        (entry,) = annotation["results"]
        assert [v["name"] for v in entry["victims"]] == ["alpha-batch"]
        assert entry["otherTenantVictims"] == {"count": 2, "pdbViolations": 2}
        assert annotation["summary"]["namespacesAffected"] == ["team-alpha"] and annotation["summary"]["victims"] == 3
    else:
        assert annotation == {"outcome": "Preempts", "node": "node-7", "victims": 3,
                              "namespacesAffected": ["team-alpha"], "pdbViolations": 2, "otherTenantVictims": 2}


def test_tenant_label_names_the_whole_tenant() -> None:
    labelled = {name: Namespace(name, FrozenMap({"tenant": "acme" if name != "team-charlie" else "other"}))
                for name in NAMESPACES}
    decision = evaluate_guardrails(policy(tenantLabel="tenant"), pod_name="web", namespace="team-alpha",
                                   user=UserInfo("dev"), outcome=RESULT, namespaces=labelled,
                                   callers_authenticated=True)
    said = "\n".join(channels(decision))
    assert "bravo-secret-job" in said and "team-bravo" in said  # the same tenant (acme)
    assert "charlie-hidden-db" not in said and "team-charlie" not in said and "tenant=other" not in said


@pytest.mark.parametrize("mode", ["warn", "enforce"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_an_unauthenticated_caller_is_told_counts_only(mode: str, dry_run: bool) -> None:
    """Without --client-ca a forged review claiming team-alpha must not learn team-alpha's pods either: nothing
    is named, not even the claimed tenant's label value; the counts and the decision are the same."""
    labelled = {name: Namespace(name, FrozenMap({"tenant": "acme"})) for name in NAMESPACES}
    decision = evaluate_guardrails(policy(mode=mode, tenantLabel="tenant", **RULES), pod_name="web",
                                   namespace="team-alpha", user=UserInfo("dev"), outcome=RESULT,
                                   namespaces=labelled, dry_run=dry_run)
    said = "\n".join(channels(decision))
    for name in (*OTHER_NAMES, "alpha-batch", "acme"):
        assert name not in said
    assert decision.allowed is (mode == "warn")
    annotation = json.loads(decision.annotation)
    summary = annotation["summary"] if dry_run else annotation
    assert summary["namespacesAffected"] == [] and summary["otherTenantVictims"] == 3


def test_an_operator_may_name_the_claimed_namespaces_own_victims_to_unauthenticated_callers() -> None:
    labelled = {name: Namespace(name, FrozenMap({"tenant": "acme"})) for name in NAMESPACES}
    decision = evaluate_guardrails(policy(tenantLabel="tenant", unverifiedDisclosure="namespace", **RULES),
                                   pod_name="web", namespace="team-alpha", user=UserInfo("dev"), outcome=RESULT,
                                   namespaces=labelled)
    said = "\n".join(channels(decision))
    assert "alpha-batch" in said  # the claimed namespace's own victim
    for name in OTHER_NAMES:  # not the rest of its tenant
        assert name not in said


def test_unverified_disclosure_takes_counts_or_namespace() -> None:
    assert policy().unverified_disclosure == "counts"
    with pytest.raises(ConfigError, match="unverifiedDisclosure"):
        policy(unverifiedDisclosure="tenant")


def test_cluster_disclosure_names_everything() -> None:
    decision = evaluate_guardrails(policy(disclosure="cluster", **RULES), pod_name="web", namespace="team-alpha",
                                   user=UserInfo("dev"), outcome=RESULT, namespaces=NAMESPACES)
    said = "\n".join(channels(decision))
    assert all(name in said for name in OTHER_NAMES)


@pytest.mark.parametrize(("authenticated", "full"), [(False, False), (True, True)])
def test_full_audit_detail_only_for_authenticated_callers(authenticated: bool, full: bool) -> None:
    decision = evaluate_guardrails(policy(auditDetail="full"), pod_name="web", namespace="team-alpha",
                                   user=UserInfo("dev"), outcome=RESULT, namespaces=NAMESPACES,
                                   callers_authenticated=authenticated)
    audited = json.loads(decision.audit_annotations[AUDIT_PREDICTION])
    assert audited["namespacesAffected"] == (["team-alpha", "team-bravo", "team-charlie"] if full else [])
    # The pod annotation, readable by whoever reads the pod, never gets the audit detail.
    assert json.loads(decision.annotation)["namespacesAffected"] == (["team-alpha"] if authenticated else [])


def test_redacted_preview_document_keeps_counts() -> None:
    audience = audience_of("team-alpha", NAMESPACES, None, "tenant")
    document = redact_preview_document(build_preview([RESULT]), [RESULT], audience)
    assert document["summary"] == {**build_preview([RESULT])["summary"], "namespacesAffected": ["team-alpha"],
                                   "otherTenantVictims": 2}
    assert all(name not in json.dumps(document) for name in OTHER_NAMES)


def test_config_keys_are_checked() -> None:
    assert policy().disclosure == "tenant" and policy().audit_detail == "tenant"
    with pytest.raises(ConfigError, match=r"guardrails\.disclosure"):
        policy(disclosure="everyone")
