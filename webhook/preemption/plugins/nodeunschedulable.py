"""NodeUnschedulable (pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go): a cordoned node
takes only pods that tolerate its ``node.kubernetes.io/unschedulable:NoSchedule`` taint."""

from __future__ import annotations

from webhook.cluster.model import Node, Pod, Taint
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.plugins.helper import tolerates

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
NODE_UNSCHEDULABLE_FAILED = Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_UNSCHEDULABLE,))


class NodeUnschedulable:
    name = NAME

    def filter_node(self, cycle: CycleState, pod: Pod, node: Node) -> Status:
        if node.unschedulable and not tolerates(pod.tolerations, UNSCHEDULABLE_TAINT):
            return NODE_UNSCHEDULABLE_FAILED
        return OK
