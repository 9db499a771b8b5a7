"""The per-replica prediction context: upstream's CycleState of the pod, built once by PreFilter.

``new_context`` computes the InterPodAffinity and PodTopologySpread PreFilter states over the ``ClusterView``
(pkg/scheduler/framework/plugins/interpodaffinity/filtering.go (PreFilter),
pkg/scheduler/framework/plugins/podtopologyspread/filtering.go (PreFilter)) and reads the PDBs once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from webhook.cluster.model import Pod, Taint
from webhook.preemption.deadline import Deadline
from webhook.preemption.filters import nominated_pods_for, tolerates_unschedulable
from webhook.preemption.pdb import PdbIndex
from webhook.preemption.prefilter import (
    AffinityState,
    CycleState,
    SpreadState,
    hard_spread_constraints,
    new_spread_state,
)
from webhook.preemption.results import PreemptionArgs
from webhook.preemption.view import ClusterView

# How many nodes (or pods) a Python loop handles between two deadline checks.
DEADLINE_STRIDE = 256

_T = TypeVar("_T")


@dataclass(slots=True)
class PredictionContext:
    """Everything one replica's prediction reuses across nodes (upstream: the CycleState of the pod)."""

    view: ClusterView
    pod: Pod
    priority: int
    args: PreemptionArgs
    pdbs: PdbIndex
    cycle: CycleState
    # No host ports, no scalar requests, no inter-pod (anti-)affinity or spread state: fit is pure arithmetic.
    resource_only: bool
    tolerates_unschedulable: bool
    taint_memo: dict[tuple[Taint, ...], bool] = field(default_factory=dict)
    # Past it (or once cancelled) the prediction raises PredictionTimeout from the node loops.
    deadline: Deadline = field(default_factory=Deadline)

    def check_deadline(self) -> None:
        self.deadline.check()

    def nominated_pods(self, name: str) -> list[Pod]:
        """The pods nominated to node ``name`` that count in pass 1 of the Filter (docs/preemption.md §6)."""
        view = self.view
        if not view.index.has_nominated:
            return []
        return nominated_pods_for(self.pod, self.priority, view.nominated_on(name))


def new_context(view: ClusterView, pod: Pod, args: PreemptionArgs, *,
                deadline: Deadline | float | None = None) -> PredictionContext:
    """PreFilter: the inter-pod affinity and topology-spread states, and the PDB list (read once)."""
    deadline = Deadline.of(deadline)
    pdbs = view.index.pdb_index(args)
    cycle = CycleState(affinity=affinity_state(view, pod, deadline), spread=spread_state(view, pod, deadline))
    resource_only = (cycle.affinity is None and cycle.spread is None and not pod.host_ports
                     and not pod.requests.scalar)
    return PredictionContext(view, pod, pod.effective_priority, args, pdbs, cycle, resource_only,
                             tolerates_unschedulable(pod), deadline=deadline)


def checked(items: Iterable[_T], deadline: Deadline) -> Iterator[_T]:
    """``items``, with the deadline checked every ``DEADLINE_STRIDE`` of them (PreFilter walks every pod)."""
    for i, item in enumerate(items):
        if not i % DEADLINE_STRIDE:
            deadline.check()
        yield item


def affinity_state(view: ClusterView, pod: Pod, deadline: Deadline | None = None) -> AffinityState | None:
    """InterPodAffinity's PreFilter state, or None when the plugin would Skip (nothing can make it fail)."""
    deadline = deadline or Deadline()
    state = AffinityState(pod, view.namespace_labels)
    for other in checked(view.anti_affinity_pods(), deadline):
        state.update_existing_anti_affinity(other, view.node(other.node_name), 1)
    if pod.pod_affinity or pod.pod_anti_affinity:
        for other in checked(_pods_in_term_namespaces(view, pod), deadline):
            state.update_incoming(other, view.node(other.node_name), 1)
    elif not state.existing_anti_affinity_counts and not view.has_nominated_anti_affinity():
        return None
    return state


def _pods_in_term_namespaces(view: ClusterView, pod: Pod) -> Iterable[Pod]:
    terms = (*pod.pod_affinity, *pod.pod_anti_affinity)
    if any(t.namespace_selector is not None for t in terms):
        namespaces: set[str] = set(view.state.pods_by_namespace)
    else:
        namespaces = {ns for t in terms for ns in (t.namespaces or (pod.namespace,))}
    for namespace in sorted(namespaces):
        yield from view.bound_pods_in(namespace)


def spread_state(view: ClusterView, pod: Pod, deadline: Deadline | None = None) -> SpreadState | None:
    """PodTopologySpread's PreFilter state for the pod's DoNotSchedule constraints, or None without any."""
    if not hard_spread_constraints(pod):
        return None
    deadline = deadline or Deadline()
    by_node: dict[str, list[Pod]] = {}
    for other in checked(view.bound_pods_in(pod.namespace), deadline):
        by_node.setdefault(other.node_name, []).append(other)
    nodes = checked((view.node(n) for n in view.node_names), deadline)
    return new_spread_state(pod, nodes, lambda name: by_node.get(name, ()))
