"""``PredictionContext``: one scheduling attempt of one pod. It carries what upstream passes around a cycle: the
profile whose plugins run (the framework handle), the cluster as the scheduler's snapshot sees it (``ClusterView``),
the pod and its ``CycleState`` after PreFilter, the PDBs listed once, and the deadline (upstream: the context).
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass, field

from webhook.cluster.model import Pod
from webhook.preemption.deadline import Deadline
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.index import StaticGroupKey
from webhook.preemption.framework.pdb import PdbIndex
from webhook.preemption.framework.runtime import Framework
from webhook.preemption.framework.status import Status
from webhook.preemption.framework.view import ClusterView
from webhook.preemption.results import PreemptionArgs


@dataclass(frozen=True, slots=True)
class NodeRestriction:
    """What the volume Filter plugins of a pod leave to the resource-only paths (#27), computed once per prediction.

    ``allowed``: the nodes passing the Filters that read only the node for this pod (VolumeBinding's bound volumes'
    node affinity, VolumeZone's zones); every other node is in one of ``blocked``, with the status of the first of
    them that fails there. ``general``: the nodes where a Filter that reads the node's pods (NodeVolumeLimits) may
    fail for some subset of their pods; those take the plugin-by-plugin path, the others pass it whatever is evicted.
    """

    allowed: Set[str]
    blocked: tuple[tuple[Set[str], Status], ...]
    general: Set[str]

    def status_of(self, name: str) -> Status | None:
        """The node-only volume status of a node that is not ``allowed`` (None when it is)."""
        if name in self.allowed:
            return None
        for members, status in self.blocked:
            if name in members:
                return status
        return None

    def partition(self, nodes: Set[str]) -> list[tuple[set[str], Status]]:
        """The ``nodes`` that are not allowed, by their node-only volume status."""
        parts = []
        for members, status in self.blocked:
            part = set(nodes & members) if len(nodes) > len(members) else {n for n in nodes if n in members}
            if part:
                parts.append((part, status))
        return parts


@dataclass(slots=True)
class PredictionContext:
    """Everything one replica's prediction reuses across nodes."""

    framework: Framework
    view: ClusterView
    pod: Pod
    priority: int
    args: PreemptionArgs
    pdbs: PdbIndex
    cycle: CycleState
    # The only Filter that reads the node's pods is NodeResourcesFit, without scalar resources: fit is arithmetic
    # on the index's sums, and the resource-only paths (beside each step they speed up) give the answer. A volume pod
    # too, when ``volumes`` says where its volume Filters pass.
    resource_only: bool
    # The node-only Filter plugins' status per (unschedulable, taints), when those are all that the active ones
    # read (the index's static groups); None when some active one reads more (a nodeSelector, a nodeName).
    node_filter_memo: dict[StaticGroupKey, Status] | None
    # A pod with volumes on the resource-only paths: the nodes its volume Filters allow (None: no volume Filter runs).
    volumes: NodeRestriction | None = None
    # Past it (or once cancelled) the prediction raises PredictionTimeout from the node loops.
    deadline: Deadline = field(default_factory=Deadline)

    def check_deadline(self) -> None:
        self.deadline.check()

    def takes_general_path(self, name: str) -> bool:
        """Whether a volume pod's Filter on node ``name`` runs plugin by plugin: a pod-reading volume Filter may fail
        there, or the node has simulated changes or nominated pods the restriction did not count."""
        volumes = self.volumes
        return volumes is not None and (name in volumes.general or name in self.view.touched
                                        or name in self.view.index.nominated_nodes)

    def nominated_pods(self, name: str) -> list[Pod]:
        """The pods nominated to node ``name`` that count in pass 1 of the Filter (docs/preemption.md §6)."""
        view = self.view
        if not view.index.has_nominated:
            return []
        return nominated_pods_for(self.pod, self.priority, view.nominated_on(name),
                                  gated_reserve=self.args.gated_nominations_reserve)


def nominated_pods_for(pod: Pod, priority: int, nominated: Iterable[Pod], *,
                       gated_reserve: bool = True) -> list[Pod]:
    """Pods nominated to a node that count in pass 1: priority >= the preemptor's, not the preemptor itself
    (runtime/framework.go (addGENominatedPods)); with ``gated_reserve`` False (before v1.37) not a pod that still
    has scheduling gates, whose nomination the queue never recorded (backend/queue/scheduling_queue.go)."""
    return [p for p in nominated
            if p.effective_priority >= priority and p.key != pod.key and (not pod.uid or p.uid != pod.uid)
            and (gated_reserve or not p.scheduling_gated)]
