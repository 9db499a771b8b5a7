"""Guardrail policy: rules, modes, per-namespace override, exemptions, reporting."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webhook.admission.review import parse_admission_review
from webhook.cluster.model import FrozenMap, Namespace
from webhook.config import GuardrailsConfig, parse_config
from webhook.guardrails import Unpredictable, effective_mode, evaluate_guardrails, prediction_skipped
from webhook.guardrails.policy import AUDIT_DECISION, AUDIT_PREDICTION, AUDIT_VIOLATIONS
from webhook.identity import UserInfo
from webhook.preemption.preview import build_preview
from webhook.preemption.results import Outcome, PreemptionResult, VictimInfo
from webhook.routes import MODE_LABEL


def victim(namespace: str, name: str, priority: int = 100, pdb: bool = False, node: str = "node-7") -> VictimInfo:
    return VictimInfo(namespace, name, node, priority, pdb, 30)


def preview(*victims: VictimInfo, outcome: str = Outcome.PREEMPTS, node: str | None = "node-7",
            message: str = "") -> PreemptionResult:
    return PreemptionResult(pod="team-a/web-0", priority=1000, priority_class_name="high",
                            preemption_policy="PreemptLowerPriority", outcome=outcome, node=node, victims=victims,
                            pdb_violations=sum(v.pdb_violation for v in victims), candidate_nodes=1,
                            expected_delay_seconds=30, message=message)


def policy(**guardrails: Any) -> GuardrailsConfig:
    return parse_config({"guardrails": guardrails}, "test").guardrails


def namespaces(**labels: dict[str, str]) -> dict[str, Namespace]:
    return {name: Namespace(name, FrozenMap(value)) for name, value in labels.items()}


NS = namespaces(**{"team-a": {}, "team-b": {}, "team-c": {}})
ALICE = UserInfo("alice", groups=("devs", "system:authenticated"))


def decide(config: GuardrailsConfig, prev: PreemptionResult | None, *, namespace: str = "team-a",
           user: UserInfo = ALICE, ns: dict[str, Namespace] | None = None, dry_run: bool = False) -> Any:
    return evaluate_guardrails(config, pod_name="web-0", namespace=namespace, user=user, outcome=prev,
                               namespaces=NS if ns is None else ns, dry_run=dry_run)


THREE_IN_B = preview(victim("team-b", "b1", pdb=True), victim("team-b", "b2"), victim("team-b", "b3"))


def test_summary_warning_and_annotation() -> None:
    decision = decide(policy(disclosure="cluster"), THREE_IN_B)
    assert decision.allowed and decision.decision == "allowed" and decision.violations == ()
    assert decision.warnings[0] == "would preempt 3 pods in team-b on node-7 (1 PDB violation)"
    # Victims follow, PDB violators first.
    assert decision.warnings[1:] == ("victim team-b/b1 (priority 100, PDB violation)",
                                     "victim team-b/b2 (priority 100)", "victim team-b/b3 (priority 100)")
    assert json.loads(decision.annotation) == {"outcome": "Preempts", "node": "node-7", "victims": 3,
                                               "namespacesAffected": ["team-b"], "pdbViolations": 1}
    assert " " not in decision.annotation
    assert decision.audit_annotations[AUDIT_DECISION] == "allowed"
    assert json.loads(decision.audit_annotations[AUDIT_PREDICTION])["victims"] == 3


def test_dry_run_annotation_is_the_full_preview() -> None:
    prev = preview(victim("team-b", "b1"))
    assert json.loads(decide(policy(disclosure="cluster"), prev, dry_run=True).annotation) == build_preview([prev])


def test_fits_and_unschedulable() -> None:
    fits = decide(policy(maxVictims=0), preview(outcome="Fits", node="node-1"))
    assert fits.allowed and fits.warnings == () and fits.violations == ()
    assert json.loads(fits.annotation)["outcome"] == "Fits"
    pending = decide(policy(), preview(outcome="Unschedulable", node=None, message="0/3 nodes are available"))
    assert pending.warnings == ("no node fits this pod even after preemption; it would stay Pending: "
                                "0/3 nodes are available",)


RULE_CASES = [
    ({"denyCrossTenantPreemption": True}, preview(victim("team-a", "a1")), None),
    ({"denyCrossTenantPreemption": True}, preview(victim("team-a", "a1"), victim("team-b", "b1"),
                                                  victim("team-c", "c1"), victim("team-b", "b2")),
     "denyCrossTenantPreemption"),
    ({"maxVictims": 2}, preview(victim("team-b", "b1"), victim("team-b", "b2")), None),
    ({"maxVictims": 2}, THREE_IN_B, "maxVictims"),
    ({"maxPdbViolations": 1}, preview(victim("team-b", "b1", pdb=True)), None),
    ({"maxPdbViolations": 0}, preview(victim("team-b", "b1", pdb=True)), "maxPdbViolations"),
    ({"denyVictimPriorityAtLeast": 1000}, preview(victim("team-b", "b1", priority=999)), None),
    ({"denyVictimPriorityAtLeast": 1000}, preview(victim("team-b", "b1", priority=1000)), "denyVictimPriorityAtLeast"),
]


@pytest.mark.parametrize(("rules", "prev", "violated"), RULE_CASES)
def test_each_rule_in_both_modes(rules: dict[str, Any], prev: PreemptionResult, violated: str | None) -> None:
    warned = decide(policy(mode="warn", **rules), prev)
    enforced = decide(policy(mode="enforce", **rules), prev)
    assert warned.allowed
    if violated is None:
        assert enforced.allowed and enforced.violations == () and warned.decision == "allowed"
        return
    assert warned.decision == "warned" and [v.rule for v in warned.violations] == [violated]
    assert warned.warnings[0].startswith(f"{violated}: ")
    assert not enforced.allowed and enforced.decision == "denied" and enforced.denied_rules == (violated,)
    assert enforced.status_code == 403 and enforced.status_reason == "Forbidden"
    message = enforced.denial_message
    assert message.startswith('pods "web-0" is forbidden: PreemptGuard guardrail')
    assert violated in message and "guardrails.exempt" in message and f"{MODE_LABEL}=warn" in message
    assert enforced.audit_annotations[AUDIT_VIOLATIONS] == violated


def test_denial_names_counts_and_namespaces() -> None:
    prev = preview(victim("team-a", "a1"), victim("team-b", "b1"), victim("team-c", "c1"), victim("team-b", "b2"))
    decision = decide(policy(mode="enforce", denyCrossTenantPreemption=True, maxVictims=3, disclosure="cluster"),
                      prev)
    assert decision.denied_rules == ("denyCrossTenantPreemption", "maxVictims")
    message = decision.denial_message
    assert "would preempt 3 pods of other tenants (2 in team-b, 1 in team-c" in message
    assert "would preempt 4 pods (2 in team-b, 1 in team-a, 1 in team-c), at most 3 allowed" in message
    assert "on node node-7" in message and "add namespace team-a" in message


def test_tenant_label_groups_namespaces() -> None:
    ns = namespaces(**{"team-a": {"tenant": "acme"}, "team-b": {"tenant": "acme"}, "team-c": {"tenant": "other"},
                       "loose": {}})
    config = policy(mode="enforce", denyCrossTenantPreemption=True, tenantLabel="tenant", disclosure="cluster")
    assert decide(config, preview(victim("team-b", "b1")), ns=ns).allowed
    denied = decide(config, preview(victim("team-b", "b1"), victim("team-c", "c1")), ns=ns)
    assert not denied.allowed and "tenant=other" in denied.denial_message
    assert "would preempt 1 pod of other tenants (1 in team-c; tenant tenant=other)" in denied.denial_message
    # An unlabelled namespace is its own tenant.
    assert not decide(config, preview(victim("loose", "l1")), ns=ns).allowed


@pytest.mark.parametrize(("global_mode", "label", "expected"), [
    ("warn", "enforce", "enforce"), ("enforce", "warn", "warn"), ("enforce", "off", "off"),
    ("off", "enforce", "enforce"), ("warn", "bogus", "warn"), ("enforce", None, "enforce"),
])
def test_namespace_label_overrides_mode(global_mode: str, label: str | None, expected: str) -> None:
    labels = {MODE_LABEL: label} if label is not None else {}
    ns = {**NS, "team-a": Namespace("team-a", FrozenMap(labels))}
    config = policy(mode=global_mode, maxVictims=0)
    assert effective_mode(config, labels) == expected
    decision = decide(config, preview(victim("team-b", "b1")), ns=ns)
    assert decision.mode == expected
    assert decision.allowed is (expected != "enforce")
    if expected == "off":
        assert decision.warnings == () and decision.decision == "off"
        assert json.loads(decision.annotation)["victims"] == 1
    if label == "bogus":
        assert any(f"{MODE_LABEL}=bogus is not off, warn or enforce" in w for w in decision.warnings)


EXEMPT = {"namespaces": ["kube-system"], "users": ["root-admin"], "groups": ["system:masters"],
          "serviceAccounts": ["ci/deployer", "platform/*"]}


@pytest.mark.parametrize(("namespace", "user", "exemption"), [
    ("kube-system", ALICE, "namespace kube-system"),
    ("team-a", UserInfo("root-admin"), "user root-admin"),
    ("team-a", UserInfo("bob", groups=("devs", "system:masters")), "group system:masters"),
    ("team-a", UserInfo("system:serviceaccount:ci:deployer"), "service account ci/deployer"),
    ("team-a", UserInfo("system:serviceaccount:platform:argo"), "service account platform/argo"),
    ("team-a", UserInfo("system:serviceaccount:ci:other"), None),
    ("team-a", UserInfo("ci/deployer"), None),
    ("team-a", ALICE, None),
])
def test_exemptions(namespace: str, user: UserInfo, exemption: str | None) -> None:
    config = policy(mode="enforce", maxVictims=0, exempt=EXEMPT)
    decision = decide(config, preview(victim("team-b", "b1")), namespace=namespace, user=user)
    assert decision.exemption == exemption
    if exemption is None:
        assert not decision.allowed
        return
    assert decision.allowed and decision.decision == "exempt"
    assert decision.warnings[0].startswith("maxVictims: ")
    assert f"guardrails not enforced: the request is exempt ({exemption})" in decision.warnings


def test_user_info_from_admission_request() -> None:
    def user_of(info: Any) -> UserInfo:
        return parse_admission_review({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"kind": "Pod"}, "resource": {"resource": "pods"}, "operation": "CREATE",
            "userInfo": info}}).user_info

    user = user_of({"username": "system:serviceaccount:ci:deployer", "uid": "1",
                    "groups": ["system:serviceaccounts", "system:serviceaccounts:ci"]})
    assert user.service_account == ("ci", "deployer")
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:ci")
    assert user_of(None) == UserInfo()
    assert UserInfo("alice").service_account is None


@pytest.mark.parametrize(("reason", "text"), [
    ("budget-exceeded", "did not finish within the 250 ms budget"),
    ("cache-not-ready", "the cluster cache is not ready yet"),
    ("deadline-exceeded", "did not decide within its admission deadline"),
])
def test_no_prediction_allows_with_a_warning_where_nothing_is_enforced(reason: Any, text: str) -> None:
    for allowing in (policy(mode="warn", maxVictims=0), policy(mode="enforce", onUnpredictable="allow")):
        decision = prediction_skipped(allowing, namespace="team-a", namespaces=NS, reason=reason,
                                      budget_milliseconds=250)
        assert decision.allowed and decision.decision == "skipped" and decision.annotation is None
        assert len(decision.warnings) == 1 and text in decision.warnings[0]
        assert decision.warnings[0].startswith("PreemptGuard made no preemption prediction")
    never = prediction_skipped(policy(mode="enforce"), namespace="team-a", namespaces=NS, reason=reason,
                               budget_milliseconds=250, may_preempt=False)
    assert never.allowed and text in never.warnings[0]
    off = prediction_skipped(policy(mode="off", onUnpredictable="deny"), namespace="team-a", namespaces=NS,
                             reason=reason, budget_milliseconds=250)
    assert off.allowed and off.warnings == ()


@pytest.mark.parametrize("reason", ["budget-exceeded", "cache-not-ready", "error", "too-complex", "deadline-exceeded"])
def test_no_prediction_under_enforce_is_denied_saying_why_and_how_to_get_through(reason: Any) -> None:
    decision = prediction_skipped(policy(mode="enforce"), namespace="team-a", namespaces=NS,
                                  reason=Unpredictable(reason, "spec.tolerations: 200 distinct tolerations"),
                                  budget_milliseconds=250, pod_name="web")
    assert not decision.allowed and decision.decision == "denied" and decision.denied_rules == ("onUnpredictable",)
    assert decision.denial_message is not None
    assert decision.denial_message.startswith('pods "web" is forbidden: PreemptGuard could not predict whether')
    assert "onUnpredictable: deny" in decision.denial_message and "To get it through" in decision.denial_message
    assert "guardrails.exempt" in decision.denial_message  # how to be exempted
    expected = (400, "BadRequest") if reason == "too-complex" else (403, "Forbidden")
    assert (decision.status_code, decision.status_reason) == expected
    if reason == "too-complex":
        assert "spec.tolerations: 200 distinct tolerations" in decision.denial_message
    exempt = prediction_skipped(policy(mode="enforce", exempt={"users": ["alice"]}), namespace="team-a",
                                namespaces=NS, reason=reason, budget_milliseconds=250, user=UserInfo("alice"))
    assert exempt.allowed and exempt.decision == "exempt"


def test_a_long_pending_reason_is_kept_up_to_the_api_servers_256_characters() -> None:
    message = "0/500 nodes are available: " + ", ".join(f"{n} node(s) had untolerated taint(s)" for n in range(20))
    pending = decide(policy(), preview(outcome="Unschedulable", node=None, message=message))
    (warning,) = pending.warnings
    assert len(warning) == 256 and warning.endswith("...")
    assert warning.startswith("no node fits this pod even after preemption; it would stay Pending: 0/500 nodes")
