"""NodeName (pkg/scheduler/framework/plugins/nodename/node_name.go): a pod that names a node fits only there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.cluster.model import Node, Pod
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, SKIPPED, UNSCHEDULABLE_AND_UNRESOLVABLE, Status

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"
NODE_NAME_FAILED = Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON,))


class NodeName:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        # PreemptGuard's: upstream's NodeName has no PreFilter, and without spec.nodeName its Filter passes every node.
        return OK if pod.node_name else SKIPPED

    def filter_node(self, cycle: CycleState, pod: Pod, node: Node) -> Status:
        return NODE_NAME_FAILED if pod.node_name and pod.node_name != node.name else OK
