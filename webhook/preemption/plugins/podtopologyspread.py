"""PodTopologySpread's hard constraints (pkg/scheduler/framework/plugins/podtopologyspread/filtering.go):
PreFilter counts the matching pods per topology value of each DoNotSchedule constraint, AddPod/RemovePod keep
the counts true during the dry run, and Filter refuses a node whose domain would exceed ``maxSkew``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from webhook.cluster.model import LabelSelector, LabelSelectorRequirement, Node, Pod, TopologySpreadConstraint
from webhook.cluster.selectors import label_selector_matches
from webhook.preemption.deadline import checked
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, SKIPPED, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.plugins.helper import (
    TopologyCountsPlugin,
    first_untolerated_taint,
    required_node_affinity_matches,
)

if TYPE_CHECKING:
    from webhook.preemption.deadline import Deadline
    from webhook.preemption.framework.view import ClusterView

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = "node(s) didn't match pod topology spread constraints (missing required label)"
DO_NOT_SCHEDULE = "DoNotSchedule"
HONOR = "Honor"


def spread_selector(constraint: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    """The constraint's selector with ``matchLabelKeys`` merged in as ``key In (pod's value)``."""
    selector = constraint.label_selector
    keys = [k for k in constraint.match_label_keys if k in pod.labels]
    if selector is None or not keys:
        return selector
    extra = tuple(LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in keys)
    return LabelSelector(selector.match_labels, selector.match_expressions + extra)


def hard_spread_constraints(pod: Pod) -> tuple[TopologySpreadConstraint, ...]:
    return tuple(c for c in pod.topology_spread if c.when_unsatisfiable == DO_NOT_SCHEDULE)


@dataclass(slots=True)
class SpreadState:
    """PodTopologySpread PreFilter state: matching-pod counts per topology value, per DoNotSchedule constraint."""

    pod: Pod
    constraints: tuple[TopologySpreadConstraint, ...]
    selectors: tuple[LabelSelector | None, ...]
    counts: list[dict[str, int]]

    def copy(self) -> SpreadState:
        return SpreadState(self.pod, self.constraints, self.selectors, [dict(c) for c in self.counts])

    def node_has_all_keys(self, node: Node) -> bool:
        return all(c.topology_key in node.labels for c in self.constraints)

    def node_included(self, constraint: TopologySpreadConstraint, node: Node) -> bool:
        """``matchNodeInclusionPolicies``: nodeAffinityPolicy (default Honor), nodeTaintsPolicy (default Ignore)."""
        if constraint.node_affinity_policy == HONOR and not required_node_affinity_matches(self.pod, node):
            return False
        return not (constraint.node_taints_policy == HONOR
                    and first_untolerated_taint(node.taints, self.pod.tolerations) is not None)

    def update(self, other: Pod, node: Node, delta: int) -> None:
        """Upstream ``updateWithPod`` (AddPod/RemovePod during preemption); no terminating-pod check here."""
        if other.namespace != self.pod.namespace or not self.node_has_all_keys(node):
            return
        for i, constraint in enumerate(self.constraints):
            if not label_selector_matches(self.selectors[i], other.labels):
                continue
            if not self.node_included(constraint, node):
                continue
            value = node.labels[constraint.topology_key]
            self.counts[i][value] = self.counts[i].get(value, 0) + delta

    def filter(self, node: Node) -> Status:
        for i, constraint in enumerate(self.constraints):
            value = node.labels.get(constraint.topology_key)
            if value is None:
                return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_NODE_LABEL_NOT_MATCH,))
            counts = self.counts[i]
            min_match = min(counts.values()) if counts else 2**31 - 1
            if constraint.min_domains is not None and len(counts) < constraint.min_domains:
                min_match = 0
            self_match = 1 if label_selector_matches(self.selectors[i], self.pod.labels) else 0
            if counts.get(value, 0) + self_match - min_match > constraint.max_skew:
                return Status(UNSCHEDULABLE, (ERR_REASON_CONSTRAINTS_NOT_MATCH,))
        return OK


def new_spread_state(pod: Pod, nodes: Iterable[Node], pods_on: Callable[[str], Iterable[Pod]]) -> SpreadState | None:
    """PreFilter: count matching pods in the pod's namespace per domain over the eligible nodes."""
    constraints = hard_spread_constraints(pod)
    if not constraints:
        return None
    selectors = tuple(spread_selector(c, pod) for c in constraints)
    state = SpreadState(pod, constraints, selectors, [{} for _ in constraints])
    for node in nodes:
        if not state.node_has_all_keys(node):
            continue
        pods = None
        for i, constraint in enumerate(constraints):
            if not state.node_included(constraint, node):
                continue
            value = node.labels[constraint.topology_key]
            count = 0
            selector = selectors[i]
            # countPodsMatchSelector: an empty selector counts nothing; terminating pods are skipped (#87621).
            if selector is not None and not selector.is_empty():
                if pods is None:
                    pods = [p for p in pods_on(node.name) if p.namespace == pod.namespace and not p.deleting]
                count = sum(1 for p in pods if label_selector_matches(selector, p.labels))
            state.counts[i][value] = state.counts[i].get(value, 0) + count
    return state


class PodTopologySpread(TopologyCountsPlugin[SpreadState]):
    name = NAME
    state_type = SpreadState

    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        """The state over the bound pods of the pod's namespace, or Skip without a DoNotSchedule constraint."""
        if not pod.topology_spread or not hard_spread_constraints(pod):
            return SKIPPED
        by_node: dict[str, list[Pod]] = {}
        for other in checked(view.bound_pods_in(pod.namespace), deadline):
            by_node.setdefault(other.node_name, []).append(other)
        nodes = checked((view.node(n) for n in view.node_names), deadline)
        state = new_spread_state(pod, nodes, lambda name: by_node.get(name, ()))
        assert state is not None  # the pod has a hard constraint
        cycle.write(state)
        return OK
