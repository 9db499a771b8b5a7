"""NodePorts (pkg/scheduler/framework/plugins/nodeports/node_ports.go): the pod's host ports must be free on the
node."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from webhook.cluster.model import HostPort, Pod
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, SKIPPED, UNSCHEDULABLE, Status
from webhook.preemption.framework.types import NodeInfo

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
NODE_PORTS_FAILED = Status(UNSCHEDULABLE, (ERR_REASON,))


def host_ports_conflict(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> bool:
    """``HostPortInfo.CheckConflict``: same protocol and port, and either IP is 0.0.0.0 or they are equal."""
    used_list = [p for p in used if p.port]
    for want in wanted:
        if not want.port:
            continue
        for have in used_list:
            if have.port == want.port and have.protocol == want.protocol and (
                    want.host_ip == "0.0.0.0" or have.host_ip == "0.0.0.0" or have.host_ip == want.host_ip):
                return True
    return False


def ports_in_use(info: NodeInfo) -> Iterable[HostPort]:
    return (hp for p in info.pods.values() for hp in p.host_ports)


class NodePorts:
    name = NAME

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        return OK if pod.host_ports else SKIPPED  # upstream skips a pod without host ports

    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        if pod.host_ports and host_ports_conflict(pod.host_ports, ports_in_use(info)):
            return NODE_PORTS_FAILED
        return OK
