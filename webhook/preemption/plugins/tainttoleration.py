"""TaintToleration (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go): the pod must tolerate
every NoSchedule and NoExecute taint of the node; its Score counts the node's PreferNoSchedule taints the pod does
not tolerate, normalised in reverse (fewest best). Nodes share a few taint sets: each is counted once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webhook.cluster.model import Node, Pod, Taint, Toleration
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.types import MAX_NODE_SCORE, ScoringNodes
from webhook.preemption.plugins.helper import default_normalize_score, first_untolerated_taint, tolerates

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "TaintToleration"
ERR_REASON = "node(s) had untolerated taint(s)"
TAINTS_FAILED = Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON,))


@dataclass(slots=True)
class TolerationMemo:
    """Whether the pod tolerates a node's taints, per distinct taint set (nodes share a few): PreemptGuard's own,
    upstream checks every node."""

    tolerated: dict[tuple[Taint, ...], bool] = field(default_factory=dict)

    def copy(self) -> TolerationMemo:
        return self  # it depends on the pod only: every copy of the cycle shares it


PREFER_NO_SCHEDULE = "PreferNoSchedule"


def tolerations_prefer_no_schedule(tolerations: tuple[Toleration, ...]) -> tuple[Toleration, ...]:
    """``getAllTolerationPreferNoSchedule``: tolerations of effect PreferNoSchedule or of every effect."""
    return tuple(t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)


def count_intolerable_taints_prefer_no_schedule(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> int:
    return sum(1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE and not tolerates(tolerations, taint))


@dataclass(slots=True)
class TaintScoreState:
    """PreScore: the pod's tolerations that can tolerate a PreferNoSchedule taint."""

    tolerations: tuple[Toleration, ...]

    def copy(self) -> TaintScoreState:
        return self


class TaintToleration:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        cycle.write(TolerationMemo())
        return OK

    def filter_node(self, cycle: CycleState, pod: Pod, node: Node) -> Status:
        taints = node.taints
        if not taints:
            return OK
        memo = cycle.read(TolerationMemo)
        tolerated = None if memo is None else memo.tolerated.get(taints)
        if tolerated is None:
            tolerated = first_untolerated_taint(taints, pod.tolerations) is None
            if memo is not None:
                memo.tolerated[taints] = tolerated
        return OK if tolerated else TAINTS_FAILED

    def pre_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> Status:
        cycle.write(TaintScoreState(tolerations_prefer_no_schedule(pod.tolerations)))
        return OK

    def score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> list[int]:
        """The node's untolerated PreferNoSchedule taints, counted once per distinct taint set."""
        state = cycle.read(TaintScoreState)
        tolerations = tolerations_prefer_no_schedule(pod.tolerations) if state is None else state.tolerations
        per_taints: dict[tuple[Taint, ...], int] = {}
        scores = []
        for summary in nodes.summaries():
            taints = summary.node.taints
            found = per_taints.get(taints)
            if found is None:
                found = per_taints[taints] = count_intolerable_taints_prefer_no_schedule(taints, tolerations)
            scores.append(found)
        return scores

    def normalize_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes, scores: list[int]) -> None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
