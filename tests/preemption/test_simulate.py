"""simulate.py: the fast predictor equals the slow reference on random small clusters (and its invariants hold),
deadlines, one outcome per pod, pods bound by ``spec.nodeName``, and a scheduler profile without preemption."""

from __future__ import annotations

import dataclasses
import time
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings

from webhook.cluster.model import PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER, Pod, Resources
from webhook.cluster.reader import pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.errors import PredictionTimeout, PreemptGuardError
from webhook.preemption.plugins.defaultpreemption.default_preemption import NOT_ELIGIBLE_NEVER
from webhook.preemption.preview import preview_objects
from webhook.preemption.results import Outcome, PreemptionArgs
from webhook.preemption.simulate import PREEMPTION_DISABLED, predict_pods, replica_pods, simulate_pods

from .clusters import bound_item, cluster, node_item, pod_manifest
from .reference import Reference, importance, reference_predict
from .support import args_of, as_dict, ladder_cluster, scenarios


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(roomy=True))
def test_placement_equals_reference_on_roomy_clusters(scenario: tuple[ClusterState, list[Pod], dict[str, Any]]) -> None:
    """Where the pod fits on several nodes, the Score plugins pick its node (and the tied ones) as the reference's
    per-node transcription of upstream's plugins does, under drawn profiles (strategies, weights, a plugin off)."""
    state, pods, options = scenario
    fast = [as_dict(r) for r in simulate_pods(state, pods, args_of(options))]
    assert fast == reference_predict(state, pods, **options)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(roomy=True, twins=True))
def test_ties_equal_reference_on_twin_clusters(scenario: tuple[ClusterState, list[Pod], dict[str, Any]]) -> None:
    """Twin nodes tie on every Score plugin (about two in three drawn Fits tie): the node and every tied node
    (``tiedNodes``, upstream's selectHost picks among them at random) are the reference's, replica after replica."""
    state, pods, options = scenario
    fast = [as_dict(r) for r in simulate_pods(state, pods, args_of(options))]
    assert fast == reference_predict(state, pods, **options)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_fast_predictor_equals_reference(scenario: tuple[ClusterState, list[Pod], dict[str, Any]]) -> None:
    state, pods, options = scenario
    version = state.version
    args = args_of(options)
    fast = [as_dict(r) for r in simulate_pods(state, pods, args)]
    slow = reference_predict(state, pods, **options)
    assert fast == slow
    assert state.version == version  # the shared state is never mutated

    first = simulate_pods(state, pods[:1], args)[0]
    if first.outcome != Outcome.PREEMPTS:
        return
    assert first.node is not None
    pod = pods[0]
    assert all(v.priority < pod.effective_priority for v in first.victims)
    ref = Reference(state, **options)
    victim_keys = {f"{v.namespace}/{v.name}" for v in first.victims}
    without = {k: v for k, v in ref.world.items() if k not in victim_keys}
    assert ref.filter(pod, first.node, without, ref.world) is None, "removing the victims must make the pod fit"
    # No victim could have been reprieved: replay the greedy order (PDB-violating group first, each by
    # importance). Each victim must fail to fit with exactly the pods reprieved before it; for pods without
    # required pod affinity (monotone in the pods present) that also means it fails with all of them.
    node = first.node
    lower = sorted((p for p, n in ref.world.values() if n == node and p.effective_priority < pod.effective_priority),
                   key=importance)
    flags = ref.pdb_flags(lower)
    world = {k: v for k, v in ref.world.items() if k not in {p.key for p in lower}}
    for group in (True, False):
        for candidate, bad in zip(lower, flags, strict=True):
            if bad != group:
                continue
            trial = {**world, candidate.key: (candidate, node)}
            fits = ref.filter(pod, node, trial, ref.world) is None
            assert fits != (candidate.key in victim_keys), f"{candidate.key}: reprieve disagrees with the victims"
            if fits:
                world = trial
            elif not pod.pod_affinity:
                back = {**without, candidate.key: (candidate, node)}
                assert ref.filter(pod, node, back, ref.world) is not None, f"victim {candidate.key} could be reprieved"


# ---- deadlines --------------------------------------------------------------------------------------------

def test_a_deadline_in_the_past_raises_prediction_timeout() -> None:
    state = ladder_cluster(40)
    pod = Pod("new", "default", priority=10, requests=Resources(milli_cpu=500, memory=100))
    with pytest.raises(PredictionTimeout):
        simulate_pods(state, [pod], deadline=time.monotonic() - 1)
    with pytest.raises(PredictionTimeout):
        predict_pods(state, [dataclasses.replace(pod, priority=None)], deadline=time.monotonic() - 1)
    assert issubclass(PredictionTimeout, PreemptGuardError)
    # A generous deadline changes nothing, and the index lock was released by the failed calls.
    assert simulate_pods(state, [pod], deadline=time.monotonic() + 60) == simulate_pods(state, [pod])
    assert simulate_pods(state, [pod])[0].outcome == "Preempts"


def test_a_deadline_passing_during_a_multi_replica_prediction_raises() -> None:
    state = ladder_cluster(600)
    pod = Pod("new", "default", priority=10, requests=Resources(milli_cpu=500, memory=100))
    simulate_pods(state, [pod])  # build the index first
    checks = 0
    real = time.monotonic

    def clock() -> float:
        nonlocal checks
        checks += 1
        return real() + (3600 if checks > 3 else 0)  # time "passes" after a few deadline checks

    with mock.patch.object(time, "monotonic", clock), pytest.raises(PredictionTimeout):
        simulate_pods(state, [dataclasses.replace(pod, name=f"new{i}") for i in range(3)], deadline=real() + 60)


# ---- one rejected pod does not reject the batch -------------------------------------------------------------

def test_each_pod_gets_its_own_outcome_and_a_rejected_pod_takes_no_place() -> None:
    state = cluster(node_item("n1", cpu="2"))
    fits = pod_manifest("fits", cpu="1500m")
    unknown = pod_manifest("unknown", cpu="1500m", cls="gold")
    results = preview_objects(state, [unknown, fits])["results"]
    assert [(r["pod"], r["outcome"]) for r in results] == [("team-a/unknown", Outcome.REJECTED),
                                                           ("team-a/fits", Outcome.FITS)]
    assert "no PriorityClass with name gold was found" in results[0]["message"]
    assert results[1]["message"] == preview_objects(state, [fits])["results"][0]["message"]


def test_rejections_keep_their_own_messages_in_order() -> None:
    state = cluster(node_item("n1"))
    pods = [pod_from_dict(pod_manifest(f"p{i}", cls=cls)) for i, cls in enumerate(["gold", "high", "silver", "low"])]
    results = predict_pods(state, pods)
    assert [r.outcome for r in results] == [Outcome.REJECTED, Outcome.FITS, Outcome.REJECTED, Outcome.FITS]
    assert ["gold" in results[0].message, "silver" in results[2].message] == [True, True]
    assert [r.pod for r in results] == [f"team-a/p{i}" for i in range(4)]


# ---- spec.nodeName: the scheduler never handles the pod -----------------------------------------------------

NODE_NAME_CLUSTER = node_item("n1", cpu="2") + node_item("n2", cpu="2") + bound_item("batch-1", "n1", cpu="1500m")


def test_a_pod_bound_by_node_name_that_fits_there_fits_there() -> None:
    (result,) = preview_objects(cluster(NODE_NAME_CLUSTER), [pod_manifest(cpu="1", nodeName="n2")])["results"]
    assert (result["outcome"], result["node"], result["victims"]) == (Outcome.FITS, "n2", [])


def test_a_pod_bound_by_node_name_that_does_not_fit_is_never_preempted_for() -> None:
    (result,) = preview_objects(cluster(NODE_NAME_CLUSTER), [pod_manifest(cpu="1", nodeName="n1")])["results"]
    assert (result["outcome"], result["node"], result["victims"]) == (Outcome.UNSCHEDULABLE, None, [])
    assert "kubelet will reject it" in result["message"] and "Insufficient cpu" in result["message"]
    assert "evict" not in result["message"]


def test_a_critical_pod_bound_by_node_name_may_make_the_kubelet_evict() -> None:
    (result,) = preview_objects(cluster(NODE_NAME_CLUSTER),
                                [pod_manifest(cpu="1", cls="system-node-critical", nodeName="n1")])["results"]
    assert result["outcome"] == Outcome.UNSCHEDULABLE
    assert "kubelet will reject it" in result["message"] and "kubelet may instead evict pods" in result["message"]


def test_a_pod_bound_to_a_missing_node() -> None:
    (result,) = preview_objects(cluster(NODE_NAME_CLUSTER), [pod_manifest(nodeName="gone")])["results"]
    assert result["outcome"] == Outcome.UNSCHEDULABLE and "node gone does not exist" in result["message"]


def test_the_kubelet_ignores_cordons_and_no_schedule_taints_but_not_no_execute() -> None:
    cordoned = node_item("c1", extra="unschedulable: true, taints: [{key: k, effect: NoSchedule}]")
    draining = node_item("d1", extra="taints: [{key: k, effect: NoExecute}]")
    state = cluster(cordoned + draining)
    assert preview_objects(state, [pod_manifest(nodeName="c1")])["results"][0]["outcome"] == Outcome.FITS
    (result,) = preview_objects(state, [pod_manifest(nodeName="d1")])["results"]
    assert result["outcome"] == Outcome.UNSCHEDULABLE and "NoExecute" in result["message"]


def test_a_bound_pod_holds_its_place_for_the_next_replica() -> None:
    state = cluster(NODE_NAME_CLUSTER)
    pods = [pod_manifest("a", cpu="1500m", nodeName="n2"), pod_manifest("b", cpu="1500m", nodeName="n2")]
    results = preview_objects(state, pods)
    assert [r["outcome"] for r in results["results"]] == [Outcome.FITS, Outcome.UNSCHEDULABLE]


# ---- a scheduler profile without preemption ------------------------------------------------------------------

def _stays_pending_as_if_never(state: ClusterState, pods: list[Pod], args: PreemptionArgs) -> list[Any]:
    """What PreemptGuard reported for ``scheduler.preemption: disabled`` before the predictor composed it itself:
    every pod simulated with preemptionPolicy Never, then its own policy restored and, for a pod that stays
    Pending only because it may not preempt, the reason replaced by the profile's."""
    never = [dataclasses.replace(pod, preemption_policy=PREEMPT_NEVER) for pod in pods]
    reported = []
    for result, pod in zip(simulate_pods(state, never, args), pods, strict=True):
        policy = pod.preemption_policy or PREEMPT_LOWER_PRIORITY
        if result.outcome != Outcome.UNSCHEDULABLE or policy == PREEMPT_NEVER:
            reported.append(dataclasses.replace(result, preemption_policy=policy))
        else:
            message = result.message.replace(f"preemption: {NOT_ELIGIBLE_NEVER}", PREEMPTION_DISABLED)
            reported.append(dataclasses.replace(result, preemption_policy=policy, message=message,
                                                preemption_status=""))
    return reported


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_preemption_disabled_equals_the_never_policy_with_the_profiles_reason(
        scenario: tuple[ClusterState, list[Pod], dict[str, Any]]) -> None:
    state, pods, options = scenario
    args = PreemptionArgs(pdb_stop_at_first_violation=options["stop_at_first"], preemption_enabled=False)
    disabled = simulate_pods(state, pods, args)
    assert disabled == _stays_pending_as_if_never(state, pods, args)
    assert all(not r.victims and r.outcome != Outcome.PREEMPTS for r in disabled)


def test_preemption_disabled_composes_its_own_message() -> None:
    state = cluster(node_item("n1", cpu="2") + bound_item("batch-1", "n1", cpu="1500m"))
    args = PreemptionArgs(preemption_enabled=False)
    (result,) = predict_pods(state, [pod_from_dict(pod_manifest(cpu="1"))], args=args)
    assert (result.outcome, result.preemption_policy, result.preemption_status) == (
        Outcome.UNSCHEDULABLE, PREEMPT_LOWER_PRIORITY, "")
    assert result.message == ("0/1 nodes are available: 1 Insufficient cpu. preemption: disabled in the scheduler"
                              " profile (scheduler.preemption: disabled), so the pod would stay Pending.")
    never = pod_from_dict(pod_manifest(cpu="1", preemptionPolicy=PREEMPT_NEVER, priority=1000, cls=None))
    (result,) = simulate_pods(state, [never], args)
    assert result.preemption_status == "preemption: not eligible due to preemptionPolicy=Never."
    (result,) = predict_pods(state, [pod_from_dict(pod_manifest(cpu="1"))])
    assert result.outcome == Outcome.PREEMPTS


def test_replicas_get_distinct_names_and_uids() -> None:
    pod = Pod("web", "team-a", uid="u", priority=1)
    assert [(p.name, p.uid) for p in replica_pods(pod, 3)] == [("web-0", "u-0"), ("web-1", "u-1"), ("web-2", "u-2")]
    assert replica_pods(pod, 1) == [pod]
    assert [p.uid for p in replica_pods(dataclasses.replace(pod, uid=""), 2)] == ["", ""]


def test_replicas_over_the_namespace_quota_are_rejected_as_the_api_server_would() -> None:
    """The ResourceQuota admission plugin runs after the Priority plugin at create, each admitted replica charged
    before the next (tests/vectors/real_scheduler/quota-exceeded-is-rejected, found by preempt-guard verify)."""
    quota = """
- apiVersion: v1
  kind: ResourceQuota
  metadata: {name: compute, namespace: team-a}
  spec: {hard: {requests.cpu: "3"}}
  status: {hard: {requests.cpu: "3"}, used: {requests.cpu: "1"}}
"""
    state = cluster(node_item("n1", cpu="8") + quota)
    results = preview_objects(state, [pod_manifest(cpu="1")], replicas=3)["results"]
    assert [r["outcome"] for r in results] == ["Fits", "Fits", "Rejected"]
    assert results[2]["message"] == ('pods "web-2" is forbidden: exceeded quota: compute, requested: '
                                     "requests.cpu=1, used: requests.cpu=3, limited: requests.cpu=3")
    # another namespace is not charged
    other = {**pod_manifest(cpu="1"), "metadata": {"name": "web", "namespace": "team-b"}}
    assert {r["outcome"] for r in preview_objects(state, [other], replicas=3)["results"]} == {"Fits"}
