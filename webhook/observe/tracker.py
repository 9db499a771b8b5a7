"""Each prediction followed through the pod changes the informers deliver, and decided exactly once.

``PredictionTracker.follow`` remembers a prediction made at a non-dry-run CREATE under the random id the
admission patch writes (``preemptguard.io/prediction-id``); ``pod_changed`` is the cluster state's pod
listener (``ClusterState.pod_listener``), so everything is observed from the informers, with no API call:

- the preemptor is the pending pod whose ``PredictionTrace`` carries the id (``webhook.cluster.model``);
- ``Fits``: it is bound (``spec.nodeName``) without a nomination first;
- ``Preempts``: ``status.nominatedNodeName`` set together with ``PodScheduled=False``/``Unschedulable`` (the one
  status update of pkg/scheduler/schedule_one.go, handleSchedulingFailure); the victims are the lower-priority
  pods on that node that get ``DisruptionTarget``/``PreemptionByScheduler`` (``Pod.preempted_by_scheduler``), or
  are deleted while the preemptor is nominated there. Upstream evicts them asynchronously
  (pkg/scheduler/framework/preemption/executor.go): some are marked before the nomination is written, some
  after, so marks wait ``VICTIM_MEMORY_SECONDS`` for a nomination on their node. The observation is decided
  once the victims the scheduler announced (``preempting N victims`` in the condition's message) are all seen,
  at the binding, at the pod's deletion, or ``settle_seconds`` after the nomination;
- ``Unschedulable``: ``PodScheduled=False``/``Unschedulable`` and still no nomination
  ``unschedulable_settle_seconds`` later (as ``preempt-guard verify`` waits, webhook/verify/observe.py);
- ``unobserved``: the window ended first, the preemptor was deleted before the scheduler decided anything, the
  tracker was full (oldest evicted first) or closed (shutdown: predictions are not kept across restarts).

A pod whose id this tracker does not hold (another replica's prediction, one from before a restart) is
ignored, never counted. Relists arrive as unchanged pods and change nothing. The clock is injected.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from webhook.cluster.model import Pod
from webhook.observe.compare import ERROR, Comparison, Observed, Predicted, compare
from webhook.preemption.results import Outcome, PreemptionResult

DEFAULT_WINDOW_SECONDS = 600.0
DEFAULT_MAX_PREDICTIONS = 100_000
DEFAULT_SETTLE_SECONDS = 10.0
DEFAULT_UNSCHEDULABLE_SETTLE_SECONDS = 1.0
# How long a scheduler-marked victim waits for the nomination of its preemptor on the same node.
VICTIM_MEMORY_SECONDS = 30.0
# The PostFilter status upstream writes into the preemptor's PodScheduled condition
# (pkg/scheduler/framework/preemption/preemption.go): "... found a potential placement for pod on node n1,
# preempting 2 victims".
VICTIM_COUNT = re.compile(r"preempting (\d+) victims")


def announced_victims(message: str) -> int | None:
    """How many victims the scheduler says it preempts, when its message says so."""
    found = VICTIM_COUNT.search(message)
    return int(found.group(1)) if found is not None else None


@dataclass(frozen=True, slots=True)
class PredictionRecord:
    """One prediction as it is followed: which pod (namespace and name or generateName at admission, its
    resolved priority) and what was predicted, in the terms ``compare`` reads."""

    prediction_id: str
    namespace: str
    name: str
    priority: int
    predicted: Predicted


def predicted_of(result: PreemptionResult) -> Predicted:
    return Predicted(result.outcome, result.node, tuple(f"{v.namespace}/{v.name}" for v in result.victims),
                     tuple(result.tied_nodes), result.sampled)


@dataclass(frozen=True, slots=True)
class Decision:
    """A prediction decided: what kube-scheduler did (``observed``) and the verdict."""

    record: PredictionRecord
    pod: str  # the pod's name as created (the admission name when it was never seen)
    uid: str  # "" when the pod was never seen
    observed: Observed
    comparison: Comparison
    seconds: float  # from the prediction to the decision


@dataclass(slots=True, eq=False)
class _Followed:
    record: PredictionRecord
    since: float
    pod: str = ""
    uid: str = ""
    nominated: str = ""  # the first nomination's node
    nominated_at: float = 0.0
    announced: int | None = None
    refused_at: float | None = None  # PodScheduled=False/Unschedulable without a nomination
    message: str = ""
    victims: tuple[str, ...] = ()  # rare, so no list per followed pod

    def has_all_victims(self) -> bool:
        return self.announced is not None and len(self.victims) >= self.announced


@dataclass(frozen=True, slots=True)
class _Mark:
    """A pod marked ``DisruptionTarget``/``PreemptionByScheduler`` before any followed pod was nominated on its node."""

    at: float
    victim: str
    priority: int


class PredictionTracker:
    """Predictions followed until decided; ``on_decided`` hears each one exactly once (on the caller's thread)."""

    def __init__(self, on_decided: Callable[[Decision], None], *, window_seconds: float = DEFAULT_WINDOW_SECONDS,
                 max_predictions: int = DEFAULT_MAX_PREDICTIONS, settle_seconds: float = DEFAULT_SETTLE_SECONDS,
                 unschedulable_settle_seconds: float = DEFAULT_UNSCHEDULABLE_SETTLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if window_seconds <= 0 or max_predictions < 1:
            raise ValueError("the window must be positive and at least one prediction must fit")
        self.on_decided = on_decided
        self.window_seconds = window_seconds
        self.max_predictions = max_predictions
        self.settle_seconds = settle_seconds
        self.unschedulable_settle_seconds = unschedulable_settle_seconds
        self.clock = clock
        # Oldest first (insertion order): the window and the count evict from the front.
        self._following: dict[str, _Followed] = {}
        self._nominated: dict[str, list[_Followed]] = {}  # node -> followed pods nominated there, undecided
        self._refused: dict[str, _Followed] = {}  # id -> refused without a nomination, undecided
        self._marks: dict[str, deque[_Mark]] = {}  # node -> victims marked before a nomination

    def __len__(self) -> int:
        return len(self._following)

    def __iter__(self) -> Iterator[PredictionRecord]:
        return (followed.record for followed in self._following.values())

    # ---- feeding ----------------------------------------------------------------------------------
    def follow(self, record: PredictionRecord) -> None:
        """Follow a prediction from now on; when the tracker is full the oldest one is decided ``unobserved``."""
        while len(self._following) >= self.max_predictions:
            oldest = next(iter(self._following.values()))
            self._unobserved(oldest, f"more than {self.max_predictions} predictions followed at once")
        self._following[record.prediction_id] = _Followed(record, self.clock())

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """The cluster state's pod listener: (None, pod) added, (pod, pod') changed, (pod, None) deleted."""
        if not self._following:
            return  # nothing followed: no victim can matter either
        trace = (new.trace if new is not None else None) or (old.trace if old is not None else None)
        if trace is not None:  # a pending pod PreemptGuard predicted (bound ones carry no trace)
            followed = self._following.get(trace.prediction_id)
            if followed is not None:
                self._preemptor_changed(followed, new)
            return
        if new is not None:
            if new.preempted_by_scheduler and new.node_name and not (old is not None and old.preempted_by_scheduler):
                self._victim_marked(new)
            elif new.deleting and new.node_name and not (old is not None and old.deleting):
                self._victim_deleted(new)
        elif old is not None and old.node_name and not old.deleting and not old.preempted_by_scheduler:
            self._victim_deleted(old)

    def tick(self, max_decisions: int | None = None) -> bool:
        """Decide what time decides: settled nominations and refusals, the window's end; forget stale marks. With
        ``max_decisions``, stop after that many (each is rendered and reported: a burst of admissions whose pods were
        never created ends its window in one tick); True when it stopped there and more are due."""
        now = self.clock()
        budget = max_decisions if max_decisions is not None else -1
        while self._following:
            if budget == 0:
                return True
            oldest = next(iter(self._following.values()))
            if now - oldest.since < self.window_seconds:
                break
            budget -= 1
            if oldest.record.predicted.outcome == Outcome.NOT_SCHEDULED and oldest.refused_at is None:
                # Another scheduler's pod: kube-scheduler neither nominated it nor refused it all along.
                self._decide(oldest, Observed(Outcome.NOT_SCHEDULED, message=(
                    f"kube-scheduler did not act on the pod within the {self.window_seconds:g}s window")))
                continue
            self._unobserved(oldest, f"no scheduling decision seen within the {self.window_seconds:g}s window")
        for nominated in [f for on_node in self._nominated.values() for f in on_node]:
            if now - nominated.nominated_at >= self.settle_seconds:
                if budget == 0:
                    return True
                budget -= 1
                self._decide_preemption(nominated, "")
        for refused in list(self._refused.values()):
            if refused.refused_at is not None and now - refused.refused_at >= self.unschedulable_settle_seconds:
                if budget == 0:
                    return True
                budget -= 1
                self._decide(refused, Observed(Outcome.UNSCHEDULABLE, message=refused.message))
        for node, marks in list(self._marks.items()):
            while marks and now - marks[0].at > VICTIM_MEMORY_SECONDS:
                marks.popleft()
            if not marks:
                del self._marks[node]
        return False

    def close(self) -> None:
        """Shutting down: every prediction still followed is ``unobserved`` (none is kept across a restart)."""
        for followed in list(self._following.values()):
            self._unobserved(followed, "the webhook stopped before the scheduler decided")
        self._marks.clear()

    # ---- the preemptor ----------------------------------------------------------------------------
    def _preemptor_changed(self, followed: _Followed, new: Pod | None) -> None:
        if new is None:  # deleted: what the scheduler had decided by then, if anything
            if followed.nominated:
                self._decide_preemption(followed, " (then deleted)")
            elif followed.refused_at is not None:
                self._decide(followed, Observed(Outcome.UNSCHEDULABLE, message=followed.message + " (then deleted)"))
            else:
                self._unobserved(followed, "the pod was deleted before it was scheduled")
            return
        followed.pod, followed.uid = new.name, new.uid
        if new.scheduling_gates and not new.node_name and not followed.nominated:
            # The API server stored it gated (PodScheduled=False/SchedulingGated): kube-scheduler keeps it out of
            # its active queue, so nothing is preempted for it until the gates are removed (then it is a new
            # scheduling decision, against the cluster as it is then, which no admission prediction covered).
            self._decide(followed, Observed(Outcome.GATED, message=f"stored with scheduling gates"
                                                                   f" ({', '.join(new.scheduling_gates)})"))
            return
        if new.node_name:
            if followed.nominated:
                note = "" if new.node_name == followed.nominated else f" (then bound to {new.node_name})"
                self._decide_preemption(followed, note)
            elif followed.record.predicted.outcome == Outcome.NOT_SCHEDULED:
                # Bound without a nomination or a refusal of kube-scheduler: by the scheduler the pod names.
                self._decide(followed, Observed(Outcome.NOT_SCHEDULED, new.node_name,
                                                message=f"bound to {new.node_name}, kube-scheduler never nominated"
                                                        " or refused it"))
            else:
                self._decide(followed, Observed(Outcome.FITS, new.node_name, message=f"bound to {new.node_name}"))
            return
        trace = new.trace
        if trace is None or not trace.unschedulable or followed.nominated:
            return
        if new.nominated_node_name:
            self._nominate(followed, new.nominated_node_name, trace.scheduling_message)
        elif followed.refused_at is None:
            followed.refused_at, followed.message = self.clock(), trace.scheduling_message
            self._refused[followed.record.prediction_id] = followed

    def _nominate(self, followed: _Followed, node: str, message: str) -> None:
        now = self.clock()
        self._refused.pop(followed.record.prediction_id, None)
        followed.nominated, followed.nominated_at, followed.message = node, now, message
        followed.announced = announced_victims(message)
        marks = self._marks.get(node)
        if marks:
            kept: deque[_Mark] = deque()
            for mark in marks:
                ours = mark.at >= followed.since and mark.priority < followed.record.priority
                if ours and not followed.has_all_victims():
                    followed.victims = (*followed.victims, mark.victim)
                else:
                    kept.append(mark)
            self._marks[node] = kept
        if followed.has_all_victims():
            self._decide_preemption(followed, "")
        else:
            self._nominated.setdefault(node, []).append(followed)

    # ---- victims ----------------------------------------------------------------------------------
    def _claimant(self, victim: Pod) -> _Followed | None:
        """The earliest followed pod nominated on the victim's node that may preempt it and awaits victims."""
        for followed in self._nominated.get(victim.node_name, ()):
            if victim.effective_priority < followed.record.priority and not followed.has_all_victims():
                return followed
        return None

    def _victim_marked(self, victim: Pod) -> None:
        followed = self._claimant(victim)
        if followed is None:
            self._marks.setdefault(victim.node_name, deque()).append(
                _Mark(self.clock(), victim.key, victim.effective_priority))
            return
        self._add_victim(followed, victim.key)

    def _victim_deleted(self, victim: Pod) -> None:
        """Deleted while a followed pod is nominated on its node; before any nomination it is someone else's doing."""
        if victim.is_terminal:
            return
        followed = self._claimant(victim)
        if followed is not None:
            self._add_victim(followed, victim.key)

    def _add_victim(self, followed: _Followed, victim: str) -> None:
        if victim not in followed.victims:
            followed.victims = (*followed.victims, victim)
        if followed.has_all_victims():
            self._decide_preemption(followed, "")

    # ---- deciding ---------------------------------------------------------------------------------
    def _decide_preemption(self, followed: _Followed, note: str) -> None:
        self._decide(followed, Observed(Outcome.PREEMPTS, followed.nominated, tuple(sorted(followed.victims)),
                                        followed.message + note))

    def _unobserved(self, followed: _Followed, reason: str) -> None:
        self._decide(followed, Observed(ERROR, message=reason))

    def _decide(self, followed: _Followed, observed: Observed) -> None:
        record = followed.record
        if self._following.pop(record.prediction_id, None) is None:
            return  # decided already
        self._refused.pop(record.prediction_id, None)
        on_node = self._nominated.get(followed.nominated) if followed.nominated else None
        if on_node is not None:
            remaining = [f for f in on_node if f is not followed]
            if remaining:
                self._nominated[followed.nominated] = remaining
            else:
                del self._nominated[followed.nominated]
        decision = Decision(record, followed.pod or record.name, followed.uid, observed,
                            compare(record.predicted, observed), self.clock() - followed.since)
        self.on_decided(decision)
