"""PredictionTracker: each prediction decided once from pod changes, on a fake clock (docs/interfaces.md §9)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from webhook.cluster.model import Pod, PredictionTrace
from webhook.cluster.snapshot import ClusterState
from webhook.observe.compare import ERROR, Observed, Predicted, Verdict
from webhook.observe.tracker import (
    DEFAULT_UNSCHEDULABLE_SETTLE_SECONDS,
    VICTIM_MEMORY_SECONDS,
    Decision,
    PredictionRecord,
    PredictionTracker,
)
from webhook.preemption.results import Outcome

PREEMPTING = "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node n1, "


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    """A tracker on a ClusterState (as the server wires it), with the decisions it made."""

    def __init__(self, **options: float) -> None:
        self.clock = Clock()
        self.decisions: list[Decision] = []
        self.tracker = PredictionTracker(self.decisions.append, clock=self.clock, **options)  # type: ignore[arg-type]
        self.state = ClusterState()
        self.state.pod_listener = self.tracker.pod_changed

    def predict(self, pid: str, predicted: Predicted, *, name: str = "web", priority: int = 1000) -> None:
        self.tracker.follow(PredictionRecord(pid, "team-a", name, priority, predicted))

    def upsert(self, pod: Pod) -> None:
        self.state.upsert(pod)

    def delete(self, pod: Pod) -> None:
        self.state.delete("Pod", pod.key)

    def later(self, seconds: float) -> None:
        self.clock.now += seconds
        self.tracker.tick()

    @property
    def verdicts(self) -> list[Verdict]:
        return [d.comparison.verdict for d in self.decisions]


def preemptor(pid: str = "p1", *, name: str = "web", node: str = "", nominated: str = "", refused: bool = False,
              message: str = "", uid: str = "u-web") -> Pod:
    trace = None if node else PredictionTrace(pid, refused or bool(nominated), message)
    return Pod(name=name, namespace="team-a", uid=uid, node_name=node, priority=1000, nominated_node_name=nominated,
               trace=trace)


def victim(name: str, node: str = "n1", *, priority: int = 10, ns: str = "batch") -> Pod:
    return Pod(name=name, namespace=ns, node_name=node, priority=priority)


def marked(pod: Pod) -> Pod:
    return replace(pod, preempted_by_scheduler=True)


def deleting(pod: Pod) -> Pod:
    return replace(pod, deleting=True)


PREEMPTS_N1 = Predicted(Outcome.PREEMPTS, "n1", ("batch/a", "batch/b"), ("n1",))


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    for pod in (victim("a"), victim("b"), victim("c"), victim("x", "n2")):
        harness.upsert(pod)
    return harness


def test_fits_agrees_when_bound_without_a_nomination(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.FITS, "n1"))
    h.upsert(preemptor())
    h.upsert(preemptor(node="n2"))
    (decision,) = h.decisions
    assert decision.comparison.verdict == Verdict.AGREE and decision.observed.node == "n2"
    assert decision.pod == "web" and decision.uid == "u-web" and len(h.tracker) == 0


@pytest.mark.parametrize("victims_first", [True, False], ids=["marked-before-nomination", "marked-after"])
def test_preempts_agrees_once_the_announced_victims_are_seen(h: Harness, victims_first: bool) -> None:
    h.predict("p1", PREEMPTS_N1)
    h.upsert(preemptor())
    nominate = preemptor(nominated="n1", message=PREEMPTING + "preempting 2 victims")
    if victims_first:  # upstream's executor marks a victim before the nomination is written (the real order seen)
        h.upsert(marked(victim("a")))
        h.upsert(nominate)
        assert not h.decisions
        h.upsert(marked(victim("b")))
    else:
        h.upsert(nominate)
        h.upsert(marked(victim("b")))
        h.upsert(deleting(marked(victim("b"))))  # the same victim again: counted once
        assert not h.decisions
        h.upsert(marked(victim("a")))
    (decision,) = h.decisions
    assert decision.observed.outcome == Outcome.PREEMPTS and decision.observed.victims == ("batch/a", "batch/b")
    assert decision.comparison.verdict == Verdict.AGREE
    h.upsert(preemptor(node="n1"))  # the binding afterwards counts nothing more
    assert len(h.decisions) == 1


def test_preempts_is_decided_at_the_binding_or_after_the_settle_time_without_an_announcement(h: Harness) -> None:
    h.predict("p1", PREEMPTS_N1)
    h.predict("p2", PREEMPTS_N1, name="api")
    h.upsert(preemptor())
    h.upsert(preemptor("p2", name="api"))
    h.upsert(preemptor(nominated="n1"))
    h.upsert(marked(victim("a")))
    h.upsert(deleting(victim("b")))  # deleted while the preemptor is nominated on its node: a victim
    h.upsert(preemptor(node="n1"))
    assert h.decisions[0].comparison.verdict == Verdict.AGREE
    h.upsert(preemptor("p2", name="api", nominated="n2"))
    h.later(9)
    assert len(h.decisions) == 1
    h.later(1.5)
    assert h.decisions[1].observed == Observed(Outcome.PREEMPTS, "n2", (), "")
    assert h.decisions[1].comparison.verdict == Verdict.NODE_DIFFERS


def test_other_victims_on_the_predicted_node_differ(h: Harness) -> None:
    h.predict("p1", PREEMPTS_N1)
    h.upsert(preemptor(nominated="n1", message=PREEMPTING + "preempting 1 victims"))
    h.upsert(marked(victim("c")))
    (decision,) = h.decisions
    assert decision.comparison.verdict == Verdict.VICTIMS_DIFFER and decision.observed.victims == ("batch/c",)


def test_a_tied_node_with_as_many_victims_agrees() -> None:
    h = Harness()
    h.predict("p1", Predicted(Outcome.PREEMPTS, "n1", ("batch/a",), ("n1", "n2")))
    h.upsert(victim("x", "n2"))
    h.upsert(preemptor(nominated="n2", message=PREEMPTING + "preempting 1 victims"))
    h.upsert(marked(victim("x", "n2")))
    assert h.verdicts == [Verdict.AGREE]


def test_unschedulable_is_decided_after_the_settle_time_unless_nominated_first(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.UNSCHEDULABLE))
    h.predict("p2", Predicted(Outcome.UNSCHEDULABLE), name="api")
    h.upsert(preemptor(refused=True, message="0/2 nodes are available: 2 Insufficient cpu."))
    h.upsert(preemptor("p2", name="api", refused=True))
    h.later(0.5)
    h.upsert(preemptor("p2", name="api", nominated="n1", message=PREEMPTING + "preempting 1 victims"))
    h.upsert(marked(victim("a")))
    h.later(0.6)
    assert [(d.record.prediction_id, d.observed.outcome, d.comparison.verdict) for d in h.decisions] == [
        ("p2", Outcome.PREEMPTS, Verdict.OUTCOME_DIFFERS), ("p1", Outcome.UNSCHEDULABLE, Verdict.AGREE)]
    assert "2 Insufficient cpu" in h.decisions[1].observed.message


def test_predicted_fits_but_another_pod_took_the_room_first(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.FITS, "n1"))
    h.upsert(Pod(name="rival", namespace="team-b", node_name="n1", priority=5000))  # bound first
    h.upsert(preemptor(nominated="n1", message=PREEMPTING + "preempting 1 victims"))
    h.upsert(marked(victim("a")))
    (decision,) = h.decisions
    assert decision.comparison.verdict == Verdict.OUTCOME_DIFFERS
    assert "predicted Fits, observed Preempts on n1" in decision.comparison.why


def test_unobserved_when_the_window_ends_first() -> None:
    h = Harness(window_seconds=60)
    h.predict("p1", Predicted(Outcome.FITS, "n1"))
    h.later(30)
    h.predict("p2", Predicted(Outcome.FITS, "n1"))
    h.later(30)
    assert h.verdicts == [Verdict.UNOBSERVED] and h.decisions[0].record.prediction_id == "p1"
    assert h.decisions[0].observed.outcome == ERROR and "60s window" in h.decisions[0].observed.message
    assert len(h.tracker) == 1


def test_the_preemptor_deleted_before_it_is_scheduled_is_unobserved(h: Harness) -> None:
    h.predict("p1", PREEMPTS_N1)
    h.upsert(preemptor())
    h.delete(preemptor())
    assert h.verdicts == [Verdict.UNOBSERVED] and "deleted before it was scheduled" in h.decisions[0].observed.message


def test_a_victim_deleted_by_someone_else_before_any_nomination_is_not_a_scheduler_victim(h: Harness) -> None:
    h.predict("p1", PREEMPTS_N1)
    h.upsert(preemptor())
    h.delete(victim("a"))  # someone else's doing: the room it leaves is what the scheduler then meets
    h.upsert(deleting(victim("b")))
    h.upsert(preemptor(node="n1"))
    (decision,) = h.decisions
    assert decision.observed.outcome == Outcome.FITS and decision.comparison.verdict == Verdict.OUTCOME_DIFFERS


def test_higher_priority_pods_and_terminal_ones_are_never_victims(h: Harness) -> None:
    h.upsert(victim("vip", priority=5000))
    h.upsert(replace(victim("done"), phase="Succeeded"))
    h.predict("p1", PREEMPTS_N1)
    h.upsert(preemptor(nominated="n1"))
    h.upsert(marked(victim("vip", priority=5000)))
    h.delete(replace(victim("done"), phase="Succeeded"))
    h.upsert(marked(victim("a")))
    h.upsert(preemptor(node="n1"))
    assert h.decisions[0].observed.victims == ("batch/a",)


def test_marks_without_a_nomination_are_forgotten(h: Harness) -> None:
    h.predict("p1", PREEMPTS_N1)
    h.upsert(marked(victim("a")))  # some other scheduler's preemption, long before
    h.later(VICTIM_MEMORY_SECONDS + 1)
    h.upsert(preemptor(nominated="n1", message=PREEMPTING + "preempting 1 victims"))
    h.upsert(marked(victim("b")))
    assert h.decisions[0].observed.victims == ("batch/b",)


def test_marks_older_than_the_prediction_are_not_its_victims(h: Harness) -> None:
    h.upsert(marked(victim("a")))
    h.later(1)
    h.predict("p1", PREEMPTS_N1)
    h.upsert(preemptor(nominated="n1"))
    h.upsert(preemptor(node="n1"))
    assert h.decisions[0].observed.victims == ()


def test_unknown_prediction_ids_are_ignored_never_counted(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.FITS, "n1"))
    h.upsert(preemptor("another-replica", name="other"))
    h.upsert(preemptor("another-replica", name="other", node="n1"))
    assert h.decisions == [] and len(h.tracker) == 1


def test_a_relist_counts_nothing_twice(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.FITS, "n1"))
    h.predict("p2", PREEMPTS_N1, name="api")
    h.upsert(preemptor("p2", name="api", nominated="n1"))
    pods = list(h.state.pods.values())
    h.state.replace_kind("Pod", pods)  # the informer relists: every pod again, unchanged
    assert h.decisions == []
    h.upsert(preemptor(node="n1"))  # p1 was never seen pending, yet its binding is its decision
    assert h.verdicts == []  # a bound pod carries no trace: p1 is unknown until the window ends
    h.state.replace_kind("Pod", [*pods, preemptor("p2", name="api", node="n1")])
    h.state.replace_kind("Pod", [*pods, preemptor("p2", name="api", node="n1")])
    assert h.verdicts == [Verdict.VICTIMS_DIFFER]


def test_closing_counts_what_is_left_unobserved(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.FITS, "n1"))
    h.predict("p2", PREEMPTS_N1, name="api")
    h.upsert(preemptor("p2", name="api", nominated="n1"))
    h.tracker.close()
    assert h.verdicts == [Verdict.UNOBSERVED, Verdict.UNOBSERVED] and len(h.tracker) == 0
    h.upsert(preemptor("p2", name="api", node="n1"))
    assert len(h.decisions) == 2


def test_the_oldest_is_evicted_and_counted_when_the_tracker_is_full() -> None:
    h = Harness(max_predictions=2)
    for pid in ("p1", "p2", "p3"):
        h.predict(pid, Predicted(Outcome.FITS, "n1"))
    assert [d.record.prediction_id for d in h.decisions] == ["p1"] and h.verdicts == [Verdict.UNOBSERVED]
    assert [r.prediction_id for r in h.tracker] == ["p2", "p3"]


def test_nothing_followed_means_nothing_to_do() -> None:
    h = Harness()
    h.upsert(marked(victim("a")))
    h.later(1)
    h.predict("p1", PREEMPTS_N1)
    h.upsert(preemptor(nominated="n1"))
    h.later(11)
    assert h.decisions[0].observed.victims == ()


# ---- pods kube-scheduler does not try now (issue #26) --------------------------------------------------------

def test_gated_agrees_when_the_pod_is_stored_with_its_gates(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.GATED))
    h.upsert(replace(preemptor(), scheduling_gates=("example.com/quota",)))
    (decision,) = h.decisions
    assert decision.comparison.verdict == Verdict.AGREE and decision.observed.outcome == Outcome.GATED
    assert "example.com/quota" in decision.observed.message


def test_gated_differs_when_the_pod_comes_without_gates_and_preempts(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.GATED))
    h.upsert(preemptor(nominated="n1", message=PREEMPTING + "preempting 0 victims"))
    h.later(10)
    assert h.verdicts == [Verdict.OUTCOME_DIFFERS] and h.decisions[0].observed.outcome == Outcome.PREEMPTS


def test_a_ungated_prediction_of_a_gated_pod_differs(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.FITS, "n1"))
    h.upsert(replace(preemptor(), scheduling_gates=("g",)))
    assert h.verdicts == [Verdict.OUTCOME_DIFFERS] and h.decisions[0].observed.outcome == Outcome.GATED


def test_not_scheduled_agrees_at_the_window_end_or_at_another_schedulers_binding() -> None:
    h = Harness(window_seconds=60)
    h.predict("p1", Predicted(Outcome.NOT_SCHEDULED))
    h.predict("p2", Predicted(Outcome.NOT_SCHEDULED), name="job")
    h.upsert(preemptor())
    h.upsert(preemptor("p2", name="job", uid="u-job"))
    h.upsert(preemptor("p2", name="job", uid="u-job", node="n3"))
    h.later(60)
    assert h.verdicts == [Verdict.AGREE, Verdict.AGREE]
    assert [d.observed.outcome for d in h.decisions] == [Outcome.NOT_SCHEDULED] * 2
    assert h.decisions[0].observed.node == "n3" and "60s window" in h.decisions[1].observed.message


def test_not_scheduled_differs_when_kube_scheduler_refuses_the_pod(h: Harness) -> None:
    h.predict("p1", Predicted(Outcome.NOT_SCHEDULED))
    h.upsert(preemptor(refused=True, message="0/1 nodes are available"))
    h.later(DEFAULT_UNSCHEDULABLE_SETTLE_SECONDS)
    assert h.verdicts == [Verdict.OUTCOME_DIFFERS] and h.decisions[0].observed.outcome == Outcome.UNSCHEDULABLE


def test_a_bounded_tick_decides_at_most_its_share_and_says_when_more_are_due() -> None:
    """A burst of admissions whose pods were never created ends its window all at once: the server decides them a
    slice per turn of its event loop (webhook.server.observing), never the whole burst in one go."""
    h = Harness(window_seconds=60)
    for i in range(250):
        h.predict(f"p{i}", Predicted(Outcome.FITS, "n1"), name=f"web-{i}")
    h.clock.now += 61
    assert h.tracker.tick(max_decisions=100) is True and len(h.decisions) == 100
    assert h.tracker.tick(max_decisions=100) is True and len(h.decisions) == 200
    assert h.tracker.tick(max_decisions=100) is False and len(h.decisions) == 250
    assert set(h.verdicts) == {Verdict.UNOBSERVED} and len(h.tracker) == 0
    assert [d.record.prediction_id for d in h.decisions] == [f"p{i}" for i in range(250)]  # oldest first
