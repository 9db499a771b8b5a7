"""How ``verify`` decides a preemption from what the API shows, in every release since v1.33 (pure parts): the
victims (marked, deleted, named by a Preempted Event, or hinted by the log), and when the observation is
complete with and without v1.37's "preempting N victims"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import webhook.verify.observe as verify_observe
from webhook.preemption.results import Outcome
from webhook.verify.observe import (
    ALREADY_DELETING,
    ASYNC_FINISHED,
    QUIET_SECONDS,
    QUIET_WITHOUT_EVENTS_SECONDS,
    VICTIM_COUNT,
    PodMarks,
    PreemptionEvidence,
    preempted_by_scheduler,
    preemption_complete,
)

A, B, OLD = "batch/a", "batch/b", "batch/old"


def evidence(**fields: object) -> PreemptionEvidence:
    return PreemptionEvidence(**{k: frozenset(v) if isinstance(v, set) else v for k, v in fields.items()})  # type: ignore[arg-type]


def test_v1_37_waits_for_the_announced_count_including_log_hinted_terminating_victims() -> None:
    seen = evidence(marked={A}, deleted={A}, terminating={A, OLD}, announced=2)
    assert not preemption_complete(seen, quiet_for=60)
    assert preemption_complete(evidence(marked={A}, deleted={A}, terminating={A, OLD}, log_deleting={OLD},
                                        announced=2), quiet_for=0)


def test_a_victim_marked_but_not_yet_deleted_is_in_flight() -> None:
    assert not preemption_complete(evidence(marked={A, B}, deleted={A}, terminating={A}, evented={A}, announced=2),
                                   quiet_for=60)
    assert not preemption_complete(evidence(marked={A}, terminating=set(), log_finished=True), quiet_for=60)


def test_before_v1_37_the_api_alone_decides_once_every_victim_has_its_event_and_nothing_moved() -> None:
    done = evidence(marked={A, B}, deleted={A, B}, terminating={A, B}, evented={A, B})
    assert not preemption_complete(done, quiet_for=QUIET_SECONDS / 2)
    assert preemption_complete(done, quiet_for=QUIET_SECONDS)
    # An Event missing (best effort upstream): a longer quiet period.
    no_event = evidence(marked={A, B}, deleted={A, B}, terminating={A, B}, evented={A})
    assert not preemption_complete(no_event, quiet_for=QUIET_SECONDS)
    assert preemption_complete(no_event, quiet_for=QUIET_WITHOUT_EVENTS_SECONDS)
    assert not preemption_complete(evidence(), quiet_for=600)  # upstream always evicts at least one


def test_an_already_terminating_victim_counts_by_its_event_in_v1_33_and_v1_34() -> None:
    # v1.34 marks it again (if it was not marked) and deletes it again: not newly terminating, but in flight
    # never, since it is terminating; its Event names the preemptor.
    seen = evidence(marked={OLD}, terminating={OLD}, evented={OLD})
    assert seen.victims == {OLD} and not seen.in_flight
    assert preemption_complete(seen, quiet_for=QUIET_SECONDS)


def test_the_logs_finished_line_is_a_hint_that_ends_the_wait_early() -> None:
    assert preemption_complete(evidence(marked={A}, deleted={A}, terminating={A}, log_finished=True), quiet_for=0)


def test_pod_marks_and_the_disruption_target_condition() -> None:
    marked = {"metadata": {"namespace": "batch", "name": "a", "deletionTimestamp": "2025-01-01T00:00:00Z"},
              "status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                         "reason": "PreemptionByScheduler"}]}}
    evicted = {"metadata": {"namespace": "batch", "name": "b"},
               "status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                          "reason": "EvictionByEvictionAPI"}]}}
    assert preempted_by_scheduler(marked) and not preempted_by_scheduler(evicted)
    assert PodMarks.of([marked, evicted]) == PodMarks(frozenset({A}), frozenset({A}))


def test_the_scheduler_log_and_message_are_read_as_upstream_writes_them() -> None:
    # pkg/scheduler/framework/preemption/executor.go (V(2)) and preemption.go (the PostFilter status, v1.37).
    line = ('I1124 22:13:07.030346    2213 executor.go:205] "Victim Pod is already being deleted, skipping the API call'
            ' for it" preemptor="team-a/web-0" node="n1" victim="batch/old"')
    assert ALREADY_DELETING.findall(line) == [("team-a/web-0", "batch/old")]
    finished = ('I1124 22:13:07.1 2213 preemption.go:545] "Async Preemption finished completely" '
                'preemptor="team-a/web-0" node="n1" result="success"')
    assert ASYNC_FINISHED.findall(finished) == ["team-a/web-0"]
    message = "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node " \
              "n1, preempting 2 victims"
    match = VICTIM_COUNT.search(message)
    assert match is not None and match.group(1) == "2"


def test_the_log_is_read_before_the_api_so_a_finished_line_covers_the_listing() -> None:
    """Upstream logs "Async Preemption finished completely" after its last API call: only a listing made after
    reading that line is sure to hold the last victim (seen on v1.36.3: a victim marked 4 ms after the others
    was missed when the pods were listed first)."""
    from webhook.verify import observe

    calls: list[str] = []

    class Log:
        def text(self) -> str:
            calls.append("log")
            return ""

        def already_deleting_victims(self, preemptor: str, text: str | None = None) -> set[str]:
            return set()

        def finished(self, preemptor: str, text: str | None = None) -> bool:
            return False

    class Plane:
        def request(self, method: str, path: str, body: object = None, **options: object) -> tuple[int, object]:
            calls.append(path)
            return 200, {"items": []}

    preemptor = observe.PreemptorRef("team-a", "web", "uid-1", "/api/v1/namespaces/team-a/pods/web", "n1")
    observe.gather_evidence(Plane(), preemptor, PodMarks(), Log(), "")  # type: ignore[arg-type]
    assert calls[0] == "log" and "/api/v1/pods" in calls[1:]


# ---- pods kube-scheduler does not try (issue #26): observe_pod on a plane that answers as the API server ------

class StillPlane:
    """An API server whose created pod never changes: what it stores is what every read returns."""

    def __init__(self, tmp: Path, stored: dict[str, Any]) -> None:
        self.scheduler_log = tmp / "scheduler.log"
        self.stored = stored

    def request(self, method: str, path: str, body: Any = None, query: Any = None) -> tuple[int, Any]:
        if path == "/api/v1/pods":
            return 200, {"items": []}
        return (201 if method == "POST" else 200), self.stored


def created(spec: dict[str, Any], conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": "web", "uid": "u1"}, "spec": spec,
            "status": {"phase": "Pending", "conditions": conditions}}


def observed(plane: StillPlane, monkeypatch: pytest.MonkeyPatch, timeout: float = 5) -> Any:
    monkeypatch.setattr(verify_observe, "NOT_SCHEDULED_SETTLE_SECONDS", 0.2)
    monkeypatch.setattr(verify_observe, "UNSCHEDULABLE_SETTLE_SECONDS", 0.1)
    return verify_observe.observe_pod(plane, {"apiVersion": "v1", "kind": "Pod",  # type: ignore[arg-type]
                                              "metadata": {"namespace": "team-a", "name": "web"}}, timeout=timeout,
                                      scheduler_names=("default-scheduler",))


def test_a_pod_stored_gated_is_observed_gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gated = created({"schedulingGates": [{"name": "g"}], "containers": []},
                    [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                      "message": "Scheduling is blocked due to non-empty scheduling gates"}])
    seen = observed(StillPlane(tmp_path, gated), monkeypatch)
    assert seen.outcome == Outcome.GATED and "scheduling gates" in seen.message


def test_a_pod_no_scheduler_touches_is_not_scheduled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = observed(StillPlane(tmp_path, created({"schedulerName": "other", "containers": []}, [])), monkeypatch)
    assert seen.outcome == Outcome.NOT_SCHEDULED and "no scheduler acted" in seen.message


def test_an_unschedulable_pod_stays_unschedulable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = created({"containers": []}, [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": "0/1 nodes are available"}])
    assert observed(StillPlane(tmp_path, refused), monkeypatch).outcome == Outcome.UNSCHEDULABLE


def test_a_pod_of_the_served_scheduler_is_waited_for_never_taken_for_not_scheduled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy kube-scheduler that has not touched its own pod yet: no NotScheduled, an Error at the timeout."""
    seen = observed(StillPlane(tmp_path, created({"containers": []}, [])), monkeypatch, timeout=0.6)
    assert seen.outcome == "Error" and "no scheduling decision" in seen.message
