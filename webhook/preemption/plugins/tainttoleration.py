"""TaintToleration (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go): the pod must tolerate
every NoSchedule and NoExecute taint of the node."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from webhook.cluster.model import Node, Pod, Taint
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.plugins.helper import first_untolerated_taint

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
