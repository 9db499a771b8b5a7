"""Warning size limits: each warning under 120 characters, all within 4,096, most important first."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.cluster.model import Namespace
from webhook.config import parse_config
from webhook.guardrails import evaluate_guardrails, fit_warnings
from webhook.guardrails.report import API_SERVER_WARNING_LENGTH
from webhook.identity import UserInfo
from webhook.preemption.results import Outcome, PreemptionResult, VictimInfo

NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=253)
VICTIM = st.fixed_dictionaries({
    "namespace": st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=63),
    "name": NAME,
    "node": NAME,
    "priority": st.integers(-(2**31), 2**31 - 1),
    "pdbViolation": st.booleans(),
})


def _preview(victims: list[dict[str, Any]], node: str) -> PreemptionResult:
    typed = tuple(VictimInfo(v["namespace"], v["name"], v["node"], v["priority"], v["pdbViolation"], 30)
                  for v in victims)
    return PreemptionResult(pod="ns/p", priority=0, priority_class_name="", preemption_policy="PreemptLowerPriority",
                            outcome=Outcome.PREEMPTS, node=node, victims=typed,
                            pdb_violations=sum(v.pdb_violation for v in typed))


@settings(max_examples=60, deadline=None)
@given(victims=st.lists(VICTIM, min_size=1, max_size=400), node=NAME, mode=st.sampled_from(["warn", "enforce"]),
       own_namespace=NAME)
def test_every_warning_fits_and_the_total_is_bounded(victims: list[dict[str, Any]], node: str, mode: str,
                                                    own_namespace: str) -> None:
    config = parse_config({"guardrails": {"mode": mode, "denyCrossTenantPreemption": True, "maxVictims": 0,
                                          "maxPdbViolations": 0, "denyVictimPriorityAtLeast": 0,
                                          "tenantLabel": "tenant"}}, "h").guardrails
    namespaces = {own_namespace: Namespace(own_namespace, {"preemptguard.io/mode": "x" * 63})}
    decision = evaluate_guardrails(config, pod_name="p", namespace=own_namespace, user=UserInfo("u"),
                                   outcome=_preview(victims, node), namespaces=namespaces)
    assert decision.warnings
    assert all(0 < len(w) < 120 for w in decision.warnings)
    assert sum(len(w) for w in decision.warnings) <= 4096
    assert all(w.isascii() for w in decision.warnings)
    # Most important first: the violated rules, then the headline.
    rules = [v.rule for v in decision.violations]
    assert [w.split(":")[0] for w in decision.warnings[: len(rules)]] == rules
    headline = decision.warnings[len(rules)]
    assert headline.startswith(f"would preempt {len(victims)} pod")
    pdb = sum(v["pdbViolation"] for v in victims)
    assert headline.endswith(f"({pdb} PDB violation{'s' if pdb != 1 else ''})") if pdb else "PDB" not in headline
    if len(victims) > 200:  # even the shortest victim lines (23 characters) overflow 4,096 then
        assert decision.warnings[-1].startswith("... and ")


@given(st.lists(st.text(min_size=0, max_size=300), max_size=200), st.integers(200, 5000))
def test_fit_warnings_keeps_order_and_limits(candidates: list[str], limit: int) -> None:
    fitted = fit_warnings(candidates, total_limit=limit)
    assert sum(map(len, fitted)) <= limit
    # Each warning within what the API server keeps of one (the scheduler's pending message needs up to 256).
    assert all(len(w) <= API_SERVER_WARNING_LENGTH for w in fitted)
    kept = [w for w in fitted if not w.startswith("... and ")]
    originals = [c for c in candidates if c]
    assert all(o.startswith(k[:-3]) or o == k for k, o in zip(kept, originals, strict=False))
    if len(kept) < len(originals):
        dropped = len(originals) - len(kept)
        assert fitted[-1] == f"... and {dropped} more warning{'s' if dropped != 1 else ''}"


def test_many_long_victims_are_cut_to_the_budget() -> None:
    config = parse_config({"guardrails": {"maxVictims": 10, "disclosure": "cluster"}}, "h").guardrails
    victims = [{"namespace": f"ns-{i % 7}-" + "n" * 50, "name": f"pod-{i}-" + "p" * 240, "node": "node-1",
                "priority": i, "pdbViolation": i % 5 == 0} for i in range(500)]
    decision = evaluate_guardrails(config, pod_name="p", namespace="team-a", user=UserInfo("u"),
                                   outcome=_preview(victims, "node-1" + "x" * 200), namespaces={})
    warnings = decision.warnings
    assert warnings[0].startswith("maxVictims: would preempt 500 pods, at most 10 allowed (")
    assert warnings[1].startswith("would preempt 500 pods (") and warnings[1].endswith("(100 PDB violations)")
    assert all(len(w) < 120 for w in warnings) and sum(map(len, warnings)) <= 4096
    assert warnings[2].startswith("victim ns-0-") and warnings[2].endswith("...")
    shown = len(warnings) - 3
    assert warnings[-1] == f"... and {500 - shown} more warnings"
