"""Preemption attribution, pure (webhook.observe.attribution): the pod changes an informer delivers, in every order
kube-scheduler's asynchronous preemption produces them, attributed once each, and worded for the victim's tenant."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from webhook.cluster.model import Namespace, Pod, PredictionTrace
from webhook.cluster.snapshot import ClusterState
from webhook.guardrails.disclosure import audience_of
from webhook.observe.attribution import (
    EVENT_MESSAGE_LIMIT,
    NO_PREDICTION,
    NOT_PREDICTED,
    PREDICTED,
    PREDICTED_ELSEWHERE,
    Preemption,
    PreemptionAttributor,
    Preemptor,
    attribution_message,
    prediction_verdict,
)

TRACE = PredictionTrace("pid-1", True, "preempting 1 victims", "Preempts", "n1", 1, "warned: maxVictims")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Harness:
    """An attributor fed through a real ClusterState, as the informers feed it."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.clock = Clock()
        self.attributed: list[Preemption] = []
        self.attributor = PreemptionAttributor(
            self.attributed.append, lambda node: self.state.nominated_by_node.get(node, {}).values(),
            wait_seconds=30, clock=self.clock)
        self.state.pod_listener = self.attributor.pod_changed

    def put(self, pod: Pod) -> Pod:
        self.state.upsert(pod)
        return pod


def victim(name: str = "batch", ns: str = "team-b", priority: int = 10, **fields: object) -> Pod:
    return Pod(name=name, namespace=ns, uid=f"uid-{name}", node_name="n1", priority=priority,
               priority_class_name="low", phase="Running", **fields)  # type: ignore[arg-type]


def preemptor(name: str = "web", ns: str = "team-a", priority: int = 1000, **fields: object) -> Pod:
    return Pod(name=name, namespace=ns, uid=f"uid-{name}", priority=priority, priority_class_name="high",
               phase="Pending", trace=TRACE, **fields)  # type: ignore[arg-type]


def marked(pod: Pod) -> Pod:
    return replace(pod, preempted_by_scheduler=True)


def deleting(pod: Pod) -> Pod:
    return replace(pod, preempted_by_scheduler=True, deleting=True)


# The scheduler's writes, each a separate update a watcher sees in some order: the nomination of the preemptor,
# the victim's DisruptionTarget, its deletion (deletionTimestamp), and its removal.
STEPS = ("nominate", "mark", "delete", "remove")


@pytest.mark.parametrize("order", [o for o in itertools.permutations(STEPS)
                                   if o.index("mark") < o.index("delete") < o.index("remove")])
def test_each_order_of_the_scheduler_s_writes_attributes_the_victim_once_to_its_preemptor(
        order: tuple[str, ...]) -> None:
    h = Harness()
    v = h.put(victim())
    p = h.put(preemptor())
    for step in order:
        if step == "nominate":
            h.put(replace(p, nominated_node_name="n1"))
        elif step == "mark":
            v = h.put(marked(v))
        elif step == "delete":
            v = h.put(deleting(v))
        else:
            h.state.delete("Pod", v.key)
    h.clock.now = 100
    h.attributor.tick()
    (found,) = h.attributed
    assert (found.namespace, found.name, found.node, found.priority) == ("team-b", "batch", "n1", 10)
    assert found.preemptor is not None and found.preemptor.key == "team-a/web" and found.preemptor.trace == TRACE
    assert len(h.attributor) == 0


def test_a_mark_never_followed_by_a_deletion_is_no_preemption() -> None:
    h = Harness()
    h.put(replace(preemptor(), nominated_node_name="n1"))
    h.put(marked(victim()))
    h.clock.now = 31
    h.attributor.tick()
    assert h.attributed == [] and len(h.attributor) == 0


def test_no_nomination_in_time_attributes_to_nobody() -> None:
    h = Harness()
    h.put(deleting(victim()))
    h.clock.now = 29
    h.attributor.tick()
    assert h.attributed == []
    h.clock.now = 30
    h.attributor.tick()
    (found,) = h.attributed
    assert found.preemptor is None and found.preemptor_class == "unknown"
    assert prediction_verdict(found) == NO_PREDICTION


def test_the_preemptor_is_the_highest_nominated_pod_above_the_victim() -> None:
    h = Harness()
    for name, priority, ns in (("equal", 10, "team-a"), ("lower", 5, "team-a"), ("b", 500, "team-c"),
                               ("a", 500, "team-a"), ("elsewhere", 9000, "team-a")):
        node = "n2" if name == "elsewhere" else "n1"
        h.put(preemptor(name, ns, priority, nominated_node_name=node))
    h.put(deleting(victim()))
    (found,) = h.attributed
    assert found.preemptor is not None and found.preemptor.key == "team-a/a"  # ties: by namespace/name


def test_relists_and_repeats_attribute_nothing_twice() -> None:
    h = Harness()
    h.put(replace(preemptor(), nominated_node_name="n1"))
    v = h.put(deleting(victim()))
    h.state.replace_kind("Pod", list(h.state.pods.values()))  # a relist: every pod again, unchanged
    h.state.delete("Pod", v.key)
    h.state.upsert(v)  # seen again (a restart's initial list would bring it as (None, pod))
    assert len(h.attributed) == 1


def test_the_trace_as_first_seen_counts_not_a_later_edit_of_the_annotations() -> None:
    h = Harness()
    p = h.put(preemptor())
    forged = replace(TRACE, predicted_outcome="Fits", guardrail_decision="allowed")
    h.put(replace(p, nominated_node_name="n1", trace=forged))
    h.put(deleting(victim()))
    (found,) = h.attributed
    assert found.preemptor is not None and found.preemptor.trace == TRACE


# ---- the words ---------------------------------------------------------------------------------------------------
NAMESPACES = {"team-a": Namespace("team-a", {"tenant": "red"}), "team-b": Namespace("team-b", {"tenant": "blue"}),
              "team-b2": Namespace("team-b2", {"tenant": "blue"})}


def preemption(ns: str = "team-a", trace: PredictionTrace | None = TRACE) -> Preemption:
    return Preemption("team-b", "batch", "uid-batch", "n1", 10, "low",
                      Preemptor(ns, "web", "uid-web", 1000, "high", trace))


def test_another_tenant_s_preemptor_is_a_class_and_a_priority() -> None:
    audience = audience_of("team-b", NAMESPACES, "tenant", "tenant")
    message = attribution_message(preemption(), audience, wait_seconds=30)
    assert message == (
        "Preempted by kube-scheduler on node n1 to make room for a pod of another tenant (PriorityClass high, "
        "priority 1000). PreemptGuard predicted this preemption at admission (prediction pid-1: 1 victim on n1); "
        "guardrail decision: warned: maxVictims.")
    assert "team-a" not in message and "web" not in message


def test_the_victim_s_own_tenant_hears_the_preemptor_named() -> None:
    audience = audience_of("team-b", NAMESPACES, "tenant", "tenant")
    assert "for pod team-b2/web (PriorityClass high, priority 1000) of your tenant." in attribution_message(
        preemption("team-b2"), audience, wait_seconds=30)
    # Without a tenant label each namespace is its own tenant.
    alone = audience_of("team-b", NAMESPACES, None, "tenant")
    assert "a pod of another tenant" in attribution_message(preemption("team-b2"), alone, wait_seconds=30)
    # disclosure: cluster names everyone, and says whose tenant it is.
    everyone = audience_of("team-b", NAMESPACES, "tenant", "cluster")
    assert "pod team-a/web (PriorityClass high, priority 1000) of another tenant" in attribution_message(
        preemption(), everyone, wait_seconds=30)


def test_what_was_predicted_is_said_as_it_was() -> None:
    assert prediction_verdict(preemption()) == PREDICTED
    elsewhere = preemption(trace=replace(TRACE, predicted_node="n7"))
    assert prediction_verdict(elsewhere) == PREDICTED_ELSEWHERE
    fits = preemption(trace=replace(TRACE, predicted_outcome="Fits", predicted_node="n1", predicted_victims=0))
    assert prediction_verdict(fits) == NOT_PREDICTED
    audience = audience_of("team-b", NAMESPACES, "tenant", "tenant")
    assert "PreemptGuard predicted a preemption on node n7 instead (prediction pid-1)" in attribution_message(
        elsewhere, audience, wait_seconds=30)
    assert "did not predict a preemption at admission (prediction pid-1: Fits)" in attribution_message(
        fits, audience, wait_seconds=30)
    assert "made no prediction for that pod" in attribution_message(preemption(trace=None), audience,
                                                                      wait_seconds=30)
    unknown = Preemption("team-b", "batch", "u", "n1", 10, "low", None)
    assert "saw no pod nominated to n1 within 30s" in attribution_message(unknown, audience, wait_seconds=30)
    huge = preemption(trace=replace(TRACE, guardrail_decision="x" * 2000))
    assert len(attribution_message(huge, audience, wait_seconds=30)) == EVENT_MESSAGE_LIMIT
