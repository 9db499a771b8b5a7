"""The node-level scheduler Filter plugins (NodePorts, NodeResourcesFit), ``NodeInfo`` and the statuses.

The plugins that depend on other pods through their PreFilter state (InterPodAffinity, PodTopologySpread)
and a node's full status live in ``prefilter.py``.

Each failure is classified like upstream: ``UNSCHEDULABLE`` (removing pods might help) or
``UNRESOLVABLE`` (UnschedulableAndUnresolvable: the node is not a preemption candidate).
Plugin order (and so the reason a node reports) follows the default profile: NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread,
InterPodAffinity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from webhook.cluster.model import HostPort, Node, Pod, Resources
from webhook.preemption.selectors import UNSCHEDULABLE_TAINT, tolerates

SUCCESS = "Success"
UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"
ERROR = "Error"

ERR_NODE_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_NODE_NAME = "node(s) didn't match the requested node name"
ERR_TAINTS = "node(s) had untolerated taint(s)"
ERR_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
ERR_NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
ERR_TOO_MANY_PODS = "Too many pods"
ERR_POD_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_SPREAD = "node(s) didn't match pod topology spread constraints"
ERR_SPREAD_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
ERR_NO_VICTIMS = "No preemption victims found for incoming pod"
ERR_NOT_HELPFUL = "Preemption is not helpful for scheduling"

DO_NOT_SCHEDULE = "DoNotSchedule"
HONOR = "Honor"


@dataclass(frozen=True, slots=True)
class Status:
    code: str
    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code == SUCCESS


OK = Status(SUCCESS)


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


# ---- NodeUnschedulable (the other node-only filters: filtering.node_static_status) ---------------

def tolerates_unschedulable(pod: Pod) -> bool:
    return tolerates(pod.tolerations, UNSCHEDULABLE_TAINT)


# ---- NodePorts -----------------------------------------------------------------------------------

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


# ---- NodeResourcesFit ------------------------------------------------------------------------------

@dataclass(slots=True)
class Requested:
    """What the pods of a NodeInfo request (mutable running totals)."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pod_count: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    def add(self, requests: Resources, sign: int = 1) -> None:
        self.milli_cpu += sign * requests.milli_cpu
        self.memory += sign * requests.memory
        self.ephemeral_storage += sign * requests.ephemeral_storage
        self.pod_count += sign
        for name, value in requests.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * value

    def copy(self) -> Requested:
        return Requested(self.milli_cpu, self.memory, self.ephemeral_storage, self.pod_count, dict(self.scalar))


def resource_fit_status(req: Resources, alloc: Resources, used_cpu: int, used_mem: int, used_eph: int,
                        used_pods: int, used_scalar: Mapping[str, int]) -> Status:
    """NodeResourcesFit (docs/preemption.md §11): every failure collected; UU when a failing request exceeds
    allocatable."""
    reasons: list[str] = []
    if used_pods + 1 > alloc.pods:
        reasons.append(ERR_TOO_MANY_PODS)
    if req.milli_cpu == 0 and req.memory == 0 and req.ephemeral_storage == 0 and not req.scalar:
        return Status(UNSCHEDULABLE, tuple(reasons)) if reasons else OK
    unresolvable = False
    if req.milli_cpu > 0 and req.milli_cpu > alloc.milli_cpu - used_cpu:
        reasons.append(insufficient("cpu"))
        unresolvable |= req.milli_cpu > alloc.milli_cpu
    if req.memory > 0 and req.memory > alloc.memory - used_mem:
        reasons.append(insufficient("memory"))
        unresolvable |= req.memory > alloc.memory
    if req.ephemeral_storage > 0 and req.ephemeral_storage > alloc.ephemeral_storage - used_eph:
        reasons.append(insufficient("ephemeral-storage"))
        unresolvable |= req.ephemeral_storage > alloc.ephemeral_storage
    for name in sorted(req.scalar):
        want = req.scalar[name]
        have = alloc.scalar.get(name, 0)
        if want > 0 and want > have - used_scalar.get(name, 0):
            reasons.append(insufficient(name))
            unresolvable |= want > have
    if not reasons:
        return OK
    return Status(UNRESOLVABLE if unresolvable else UNSCHEDULABLE, tuple(reasons))


# ---- NodeInfo ------------------------------------------------------------------------------------

@dataclass(slots=True)
class NodeInfo:
    """A node with the pods it holds and their running request totals (scheduler NodeInfo)."""

    node: Node
    pods: dict[str, Pod]
    requested: Requested

    @classmethod
    def build(cls, node: Node, pods: Iterable[Pod]) -> NodeInfo:
        info = cls(node, {}, Requested())
        for pod in pods:
            info.add(pod)
        return info

    def add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        self.requested.add(pod.requests)

    def remove(self, pod: Pod) -> None:
        if self.pods.pop(pod.key, None) is not None:
            self.requested.add(pod.requests, -1)

    def copy(self) -> NodeInfo:
        return NodeInfo(self.node, dict(self.pods), self.requested.copy())


def nominated_pods_for(pod: Pod, priority: int, nominated: Iterable[Pod]) -> list[Pod]:
    """Pods nominated to a node that count in pass 1: priority >= the preemptor's, not the preemptor itself."""
    return [p for p in nominated
            if p.effective_priority >= priority and p.key != pod.key and (not pod.uid or p.uid != pod.uid)]
