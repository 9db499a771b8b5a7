"""Who preempted a pod, told to the victim's tenant after the fact (docs/interfaces.md §7 and §9).

kube-scheduler preempts a victim by writing its ``DisruptionTarget`` condition with reason
``PreemptionByScheduler`` and then deleting it (pkg/scheduler/framework/preemption/executor.go, ``PreemptPod``);
neither names the pod it makes room for (its own Event does, by UID, and to anyone who may read the victim's
Events). The preemptor is the pending pod *nominated* to the victim's node with a higher priority: upstream
writes ``status.nominatedNodeName`` in the same scheduling failure that starts the evictions
(schedule_one.go, ``handleSchedulingFailure``), before or after the victims' updates reach a watcher (the
evictions run asynchronously, KEP-4832). So ``PreemptionAttributor``, fed the informers' pod changes as the live
observer is (``ClusterState.pod_listener``):

- remembers each victim once it is marked *and* deleted (``deletionTimestamp`` or gone: a mark whose deletion
  failed is no preemption);
- attributes it to the highest-priority pod nominated to its node (ties: the first by namespace/name), looking
  again when a nomination to that node arrives, and gives up on finding one ``wait_seconds`` after the mark;
- hands each victim to ``on_attributed`` exactly once.

What PreemptGuard had predicted comes from the preemptor's ``PredictionTrace`` (the annotations its admission
patch wrote), as first seen: a tenant who edits its pod's annotations later does not change what the victims are
told. ``attribution_message`` renders one victim for its tenant: the preemptor named only when it is in the
victim's tenant (or under ``disclosure: cluster``), otherwise its PriorityClass and priority and "another
tenant". Pure logic; the clock is injected.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from webhook.cluster.model import Pod, PredictionTrace
from webhook.guardrails.disclosure import Audience, plural, tenant_of
from webhook.preemption.results import Outcome

DEFAULT_WAIT_SECONDS = 30.0
DEFAULT_MAX_PENDING = 10_000
# Traces remembered as first seen, for pods still pending (the preemptors-to-be); oldest forgotten first.
MAX_TRACES = 100_000
# An Event's note is at most 1 KiB (pkg/apis/core/validation/events.go, NoteLengthLimit).
EVENT_MESSAGE_LIMIT = 1024
UNKNOWN_CLASS = "unknown"


@dataclass(frozen=True, slots=True)
class Preemptor:
    namespace: str
    name: str
    uid: str
    priority: int
    priority_class: str
    trace: PredictionTrace | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Preemption:
    """One victim of kube-scheduler and, when found, the pod it was preempted for."""

    namespace: str
    name: str
    uid: str
    node: str
    priority: int
    priority_class: str
    preemptor: Preemptor | None

    @property
    def preemptor_class(self) -> str:
        """The preemptor's PriorityClass for metrics: its name, ``""`` for none, ``unknown`` when not found."""
        return UNKNOWN_CLASS if self.preemptor is None else self.preemptor.priority_class


# Whether PreemptGuard saw a preemption coming (the ``predicted`` label of the attribution metric).
PREDICTED = "predicted"  # a preemption on the victim's node
PREDICTED_ELSEWHERE = "elsewhere"  # a preemption, but on another node
NOT_PREDICTED = "not_predicted"  # the prediction said the pod fits, or stays pending
NO_PREDICTION = "no_prediction"  # no prediction on the preemptor (or no preemptor found)
PREDICTION_VERDICTS = (PREDICTED, PREDICTED_ELSEWHERE, NOT_PREDICTED, NO_PREDICTION)


def prediction_verdict(preemption: Preemption) -> str:
    trace = preemption.preemptor.trace if preemption.preemptor is not None else None
    if trace is None or not trace.predicted_outcome:
        return NO_PREDICTION
    if trace.predicted_outcome != Outcome.PREEMPTS:
        return NOT_PREDICTED
    return PREDICTED if trace.predicted_node == preemption.node else PREDICTED_ELSEWHERE


@dataclass(slots=True, eq=False)
class _Victim:
    pod: Pod
    marked_at: float
    deleted: bool


class PreemptionAttributor:
    """Victims of kube-scheduler's preemption, each attributed once (``on_attributed``, on the caller's thread).

    ``nominated_on(node)``: the pods nominated to a node now (``ClusterState.nominated_by_node``).
    """

    def __init__(self, on_attributed: Callable[[Preemption], None], nominated_on: Callable[[str], Iterable[Pod]], *,
                 wait_seconds: float = DEFAULT_WAIT_SECONDS, max_pending: int = DEFAULT_MAX_PENDING,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.on_attributed = on_attributed
        self.nominated_on = nominated_on
        self.wait_seconds = wait_seconds
        self.max_pending = max_pending
        self.clock = clock
        self._victims: OrderedDict[str, _Victim] = OrderedDict()  # key -> victim, oldest mark first
        self._done: OrderedDict[str, None] = OrderedDict()  # uids attributed lately (a relist repeats nothing)
        self._traces: OrderedDict[str, PredictionTrace] = OrderedDict()  # pod uid -> trace as first seen

    def __len__(self) -> int:
        return len(self._victims)

    # ---- feeding ----------------------------------------------------------------------------------
    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """The cluster state's pod listener: (None, pod) added, (pod, pod') changed, (pod, None) deleted."""
        if new is not None:
            if new.trace is not None and new.uid and not new.node_name:
                self._remember_trace(new)
            elif new.node_name and new.uid in self._traces:
                del self._traces[new.uid]  # bound: it preempts nobody any more
            if new.preempted_by_scheduler and new.node_name and new.uid not in self._done:
                victim = self._victims.get(new.key)
                if victim is None:
                    if len(self._victims) >= self.max_pending:
                        self._victims.popitem(last=False)
                    victim = self._victims[new.key] = _Victim(new, self.clock(), new.deleting)
                else:
                    victim.pod, victim.deleted = new, victim.deleted or new.deleting
                self._try(victim)
            if new.nominated_node_name and not new.node_name and (
                    old is None or old.nominated_node_name != new.nominated_node_name):
                self._nominated(new.nominated_node_name)
        elif old is not None:
            self._traces.pop(old.uid, None)
            victim = self._victims.get(old.key)
            if victim is not None:
                victim.deleted = True
                self._try(victim)

    def tick(self) -> None:
        """Victims whose preemptor was not found in time are attributed to nobody; marks never followed by a
        deletion are forgotten."""
        now = self.clock()
        while self._victims:
            key, victim = next(iter(self._victims.items()))
            if now - victim.marked_at < self.wait_seconds:
                break
            del self._victims[key]
            if victim.deleted:
                self._attribute(victim, None)

    # ---- attribution ------------------------------------------------------------------------------
    def _remember_trace(self, pod: Pod) -> None:
        if pod.uid in self._traces:
            return  # the annotations as created (at admission) count, not a later edit
        if len(self._traces) >= MAX_TRACES:
            self._traces.popitem(last=False)
        assert pod.trace is not None
        self._traces[pod.uid] = pod.trace

    def _nominated(self, node: str) -> None:
        for victim in [v for v in self._victims.values() if v.pod.node_name == node]:
            self._try(victim)

    def _try(self, victim: _Victim) -> None:
        if not victim.deleted:
            return
        preemptor = self.find_preemptor(victim.pod)
        if preemptor is not None:
            self._victims.pop(victim.pod.key, None)
            self._attribute(victim, preemptor)

    def find_preemptor(self, victim: Pod) -> Preemptor | None:
        """The pod nominated to the victim's node that may have preempted it: a higher priority (upstream evicts
        only lower-priority pods), the highest of them, ties broken by namespace/name."""
        best: Pod | None = None
        for pod in self.nominated_on(victim.node_name):
            if pod.node_name or pod.effective_priority <= victim.effective_priority:
                continue
            if best is None or (-pod.effective_priority, pod.key) < (-best.effective_priority, best.key):
                best = pod
        if best is None:
            return None
        trace = self._traces.get(best.uid, best.trace)
        return Preemptor(best.namespace, best.name, best.uid, best.effective_priority, best.priority_class_name, trace)

    def _attribute(self, victim: _Victim, preemptor: Preemptor | None) -> None:
        pod = victim.pod
        if pod.uid:
            self._done[pod.uid] = None
            if len(self._done) > self.max_pending:
                self._done.popitem(last=False)
        self.on_attributed(Preemption(pod.namespace, pod.name, pod.uid, pod.node_name, pod.effective_priority,
                                      pod.priority_class_name, preemptor))


# ---- what the victim's tenant is told -----------------------------------------------------------------------------
def preemptor_phrase(preemption: Preemption, audience: Audience) -> str:
    """``pod team-a/web (PriorityClass high, priority 1000) of your tenant``, or ``a pod of another tenant
    (PriorityClass high, priority 1000)``: the preemptor is named only to its own tenant."""
    preemptor = preemption.preemptor
    if preemptor is None:
        return "a pod PreemptGuard could not identify"
    what = f"PriorityClass {preemptor.priority_class}" if preemptor.priority_class else "no PriorityClass"
    detail = f"({what}, priority {preemptor.priority})"
    if not audience.names_namespace(preemptor.namespace):
        return f"a pod of another tenant {detail}"
    ours = tenant_of(preemptor.namespace, audience.namespaces, audience.tenant_label) == audience.tenant
    return f"pod {preemptor.key} {detail} of {'your' if ours else 'another'} tenant"


def prediction_phrase(preemption: Preemption) -> str:
    """What PreemptGuard had predicted for the preemptor at admission, and its guardrail decision."""
    preemptor = preemption.preemptor
    trace = preemptor.trace if preemptor is not None else None
    if preemptor is None:
        return ""
    if trace is None:
        return "PreemptGuard made no prediction for that pod at admission."
    verdict = prediction_verdict(preemption)
    pid = f"prediction {trace.prediction_id}"
    if verdict == PREDICTED:
        said = (f"PreemptGuard predicted this preemption at admission ({pid}: "
                f"{plural(trace.predicted_victims, 'victim')} on {trace.predicted_node})")
    elif verdict == PREDICTED_ELSEWHERE:
        said = f"PreemptGuard predicted a preemption on node {trace.predicted_node or '?'} instead ({pid})"
    elif verdict == NOT_PREDICTED:
        said = f"PreemptGuard did not predict a preemption at admission ({pid}: {trace.predicted_outcome})"
    else:
        said = f"PreemptGuard's prediction for that pod is not known ({pid})"
    decision = f"; guardrail decision: {trace.guardrail_decision}" if trace.guardrail_decision else ""
    return f"{said}{decision}."


def attribution_message(preemption: Preemption, audience: Audience, *, wait_seconds: float) -> str:
    """The Event's message on the victim, for the victim's tenant (``audience``)."""
    head = f"Preempted by kube-scheduler on node {preemption.node} to make room for "
    if preemption.preemptor is None:
        line = (f"{head}a higher-priority pod; PreemptGuard saw no pod nominated to {preemption.node} within "
                f"{wait_seconds:g}s, so it cannot say which.")
    else:
        line = f"{head}{preemptor_phrase(preemption, audience)}. {prediction_phrase(preemption)}"
    return line if len(line) <= EVENT_MESSAGE_LIMIT else line[:EVENT_MESSAGE_LIMIT - 3] + "..."
