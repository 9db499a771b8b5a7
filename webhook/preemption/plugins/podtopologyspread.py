"""PodTopologySpread (pkg/scheduler/framework/plugins/podtopologyspread). Hard constraints (filtering.go):
PreFilter counts the matching pods per topology value of each DoNotSchedule constraint, AddPod/RemovePod keep
the counts true during the dry run, and Filter refuses a node whose domain would exceed ``maxSkew``. Soft
constraints (scoring.go): the pod's ScheduleAnyway constraints, or, for a pod without any, the profile's default
constraints (System: hostname maxSkew 3, zone maxSkew 5) over the pods its controller selects; Score counts the
matching pods of each node's domains, NormalizeScore favours the fewest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from webhook.cluster.model import LabelSelector, LabelSelectorRequirement, Node, Pod, TopologySpreadConstraint
from webhook.cluster.selectors import label_selector_matches
from webhook.preemption.deadline import checked
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import OK, SKIPPED, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.framework.types import MAX_NODE_SCORE, ScoringNodes
from webhook.preemption.plugins.helper import (
    TopologyCountsPlugin,
    first_untolerated_taint,
    go_div,
    go_round,
    required_node_affinity_matches,
)
from webhook.preemption.results import SYSTEM_DEFAULTING

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

    def __init__(self, defaulting: str = SYSTEM_DEFAULTING,
                 default_constraints: tuple[TopologySpreadConstraint, ...] = ()) -> None:
        self.defaulting = defaulting
        self.default_constraints = default_constraints

    def pre_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> Status:
        state = spread_score_state(pod, nodes, self.defaulting, self.default_constraints)
        if state is None:
            return SKIPPED
        cycle.write(state)
        return OK

    def score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> list[int]:
        return spread_scores(cycle.read(SpreadScoreState), nodes)

    def normalize_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes, scores: list[int]) -> None:
        normalize_spread_scores(cycle.read(SpreadScoreState), nodes, scores)

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


# ---- Score (pkg/scheduler/framework/plugins/podtopologyspread/scoring.go) ---------------------------------------

SCHEDULE_ANYWAY = "ScheduleAnyway"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
# PodTopologySpreadArgs defaultingType System (plugin.go: systemDefaultConstraints).
SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY),
    TopologySpreadConstraint(max_skew=5, topology_key=LABEL_TOPOLOGY_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY),
)
# A node that misses a constraint's topology key (when every key is required) scores 0 after normalising.
INVALID_SCORE = -1


def topology_normalizing_weight(size: int) -> float:
    """``topologyNormalizingWeight``: log(domains + 2), so small topologies are not watered down by big ones."""
    return math.log(size + 2)


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    """``scoreForCount``: matching pods times the topology's weight, plus maxSkew - 1 (tolerance to skew)."""
    return count * weight + (max_skew - 1)


@dataclass(slots=True)
class SpreadScoreState:
    """PreScore: the soft (or default) constraints with their selectors, the scored nodes missing a required key,
    the matching pods per topology value (not for hostname: counted per node) and each constraint's weight."""

    pod: Pod
    constraints: tuple[TopologySpreadConstraint, ...]
    selectors: tuple[LabelSelector, ...]
    ignored_nodes: set[str]
    counts: list[dict[str, int]]
    weights: list[float]
    # Matching pods per node, for the hostname constraints (PreemptGuard counts them once, not once per node).
    per_node: list[dict[str, int]]

    def copy(self) -> SpreadScoreState:
        return self


def soft_constraints(pod: Pod, defaulting: str, default_constraints: tuple[TopologySpreadConstraint, ...],
                     ) -> tuple[tuple[TopologySpreadConstraint, ...], tuple[LabelSelector, ...], bool]:
    """The constraints Score reads (``initPreScoreState``): the pod's ScheduleAnyway ones, or when it has none at all
    the default constraints with the selector of the pod's controller (``buildDefaultConstraints``: none without
    one); and whether a node must hold every topology key (not for the system defaults)."""
    if pod.topology_spread:
        chosen = tuple(c for c in pod.topology_spread if c.when_unsatisfiable == SCHEDULE_ANYWAY)
        selectors = tuple(spread_selector(c, pod) or _NOTHING for c in chosen)
        return chosen, selectors, True
    system = defaulting == SYSTEM_DEFAULTING
    defaults = SYSTEM_DEFAULT_CONSTRAINTS if system else default_constraints
    defaults = tuple(c for c in defaults if c.when_unsatisfiable == SCHEDULE_ANYWAY)
    selector = pod.controller_selector
    if not defaults or selector is None or selector.is_empty():
        return (), (), not system
    return defaults, tuple(selector for _ in defaults), not system


# A nil label selector matches nothing (metav1.LabelSelectorAsSelector(nil) is labels.Nothing()).
_NOTHING = LabelSelector(match_expressions=(LabelSelectorRequirement("", "In", ()),))


def _counted(selector: LabelSelector) -> bool:
    """``countPodsMatchSelector`` counts nothing for an empty selector."""
    return selector is not _NOTHING and not selector.is_empty()


def spread_score_state(pod: Pod, nodes: ScoringNodes, defaulting: str,
                       default_constraints: tuple[TopologySpreadConstraint, ...]) -> SpreadScoreState | None:
    """``PreScore``; None (Skip) without constraints to score by or without any node."""
    view = nodes.view
    if not view.node_names:
        return None
    constraints, selectors, require_all = soft_constraints(pod, defaulting, default_constraints)
    if not constraints:
        return None
    counts: list[dict[str, int]] = [{} for _ in constraints]
    ignored: set[str] = set()
    keys = [c.topology_key for c in constraints]
    for name in nodes.names:
        labels = view.node(name).labels
        if require_all and not all(key in labels for key in keys):
            ignored.add(name)
            continue
        for i, key in enumerate(keys):
            if key != LABEL_HOSTNAME:
                counts[i].setdefault(labels.get(key, ""), 0)
    scored = len(nodes.names) - len(ignored)
    weights = [topology_normalizing_weight(scored if key == LABEL_HOSTNAME else len(counts[i]))
               for i, key in enumerate(keys)]
    state = SpreadScoreState(pod, constraints, selectors, ignored, counts, weights, [{} for _ in constraints])
    # Every node's matching pods of the pod's namespace (not terminating), counted where the node is included.
    spread = SpreadState(pod, constraints, tuple(selectors), [])
    included: dict[str, list[bool] | None] = {}
    for other in view.bound_pods_in(pod.namespace):
        if other.deleting:
            continue
        name = other.node_name
        node = view.node(name)
        if name in included:
            flags = included[name]
        else:
            flags = None if require_all and not all(k in node.labels for k in keys) else [
                spread.node_included(c, node) for c in constraints]
            included[name] = flags
        for i in range(len(constraints)):
            selector = selectors[i]
            if not _counted(selector) or not label_selector_matches(selector, other.labels):
                continue
            if keys[i] == LABEL_HOSTNAME:
                state.per_node[i][name] = state.per_node[i].get(name, 0) + 1
                continue
            if flags is None or not flags[i]:
                continue
            value = node.labels.get(keys[i], "")
            if value in counts[i]:
                counts[i][value] += 1
    return state


def spread_scores(state: SpreadScoreState | None, nodes: ScoringNodes) -> list[int]:
    """``Score``: per node, each constraint whose key it holds adds scoreForCount of its domain's (or, for
    hostname, its own) matching pods; rounded."""
    if state is None:
        return [0] * len(nodes.names)
    view = nodes.view
    constraints = state.constraints
    scores = []
    for name in nodes.names:
        if name in state.ignored_nodes:
            scores.append(0)
            continue
        labels = view.node(name).labels
        total = 0.0
        for i, constraint in enumerate(constraints):
            key = constraint.topology_key
            value = labels.get(key)
            if value is None:
                continue
            count = state.per_node[i].get(name, 0) if key == LABEL_HOSTNAME else state.counts[i][value]
            total += score_for_count(count, constraint.max_skew, state.weights[i])
        scores.append(go_round(total))
    return scores


def normalize_spread_scores(state: SpreadScoreState | None, nodes: ScoringNodes, scores: list[int]) -> None:
    """``NormalizeScore``: fewest matching pods best; ignored nodes 0; all 100 when every score is 0."""
    if state is None:
        return
    ignored = state.ignored_nodes
    valid = [score for name, score in zip(nodes.names, scores, strict=True) if name not in ignored]
    low = min(valid, default=2**63 - 1)
    high = max(valid, default=0)
    high = max(high, 0)
    for i, name in enumerate(nodes.names):
        if name in ignored:
            scores[i] = 0
        elif high == 0:
            scores[i] = MAX_NODE_SCORE
        else:
            scores[i] = go_div(MAX_NODE_SCORE * (high + low - scores[i]), high)
