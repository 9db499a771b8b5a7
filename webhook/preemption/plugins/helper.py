"""What several plugins share: tolerations against taints and a pod's required node affinity, as upstream's
shared helpers (staging/src/k8s.io/component-helpers/scheduling/corev1/helpers.go (TolerationsTolerateTaint,
FindMatchingUntoleratedTaint), component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go
(GetRequiredNodeAffinity), pkg/scheduler/framework/plugins/helper/taint.go (DoNotScheduleTaintsFilterFunc)).

TaintToleration, NodeUnschedulable, PodTopologySpread (nodeTaintsPolicy) and the kubelet's admission check read
the first two; NodeAffinity, PodTopologySpread (nodeAffinityPolicy) and the kubelet the last. InterPodAffinity and
PodTopologySpread share the shape of their Filter and AddPod/RemovePod (``TopologyCountsPlugin``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Generic, Protocol, TypeVar

from webhook.cluster.model import LabelSelectorRequirement, Node, NodeSelectorTerm, Pod, Taint, Toleration
from webhook.cluster.selectors import requirement_matches
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.nodelabels import NodeLabelIndex
from webhook.preemption.framework.status import OK, Status
from webhook.preemption.framework.types import NodeInfo

# The Filter only looks at these effects (PreferNoSchedule is a scoring concern).
DO_NOT_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def node_selector_term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """A term ANDs its requirements; a term with none matches nothing. Fields: only metadata.name."""
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(requirement_matches(req, node.labels) for req in term.match_expressions):
        return False
    fields = {"metadata.name": node.name}
    return all(req.key == "metadata.name" and requirement_matches(req, fields) for req in term.match_fields)


def required_node_affinity_matches(pod: Pod, node: Node) -> bool:
    """nodeSelector AND (any required node-affinity term), as ``nodeaffinity.GetRequiredNodeAffinity``."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    terms = pod.required_node_affinity
    if terms is None:
        return True
    return any(node_selector_term_matches(term, node) for term in terms)


def tolerates_taint(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates_taint(t, taint) for t in tolerations)


def first_untolerated_taint(taints: Iterable[Taint], tolerations: tuple[Toleration, ...]) -> Taint | None:
    """The first NoSchedule/NoExecute taint the pod does not tolerate (``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint.effect in DO_NOT_SCHEDULE_EFFECTS and not tolerates(tolerations, taint):
            return taint
    return None


class TopologyCounts(Protocol):
    """A PreFilter state of matching-pod counts per topology domain: AddPod/RemovePod update it, Filter reads it."""

    def copy(self) -> TopologyCounts: ...

    def update(self, other: Pod, node: Node, delta: int) -> None: ...

    def filter(self, node: Node) -> Status: ...


S = TypeVar("S", bound=TopologyCounts)


class TopologyCountsPlugin(Generic[S]):
    """Filter, AddPod and RemovePod of a plugin whose PreFilter state is ``TopologyCounts`` of class ``state_type``
    (none written: the plugin skipped, nothing to check)."""

    state_type: ClassVar[type]

    def _read(self, cycle: CycleState) -> S | None:
        found: S | None = cycle.read(self.state_type)
        return found

    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        state = self._read(cycle)
        return OK if state is None else state.filter(info.node)

    def add_pod(self, cycle: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> None:
        state = self._read(cycle)
        if state is not None:
            state.update(other, info.node, 1)

    def remove_pod(self, cycle: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> None:
        state = self._read(cycle)
        if state is not None:
            state.update(other, info.node, -1)


def default_normalize_score(max_priority: int, reverse: bool, scores: list[int]) -> None:
    """``helper.DefaultNormalizeScore`` (pkg/scheduler/framework/plugins/helper/normalize_score.go): scale
    ``scores`` in place so the highest becomes ``max_priority`` (reversed: the highest becomes 0); all zero stays
    zero, or becomes ``max_priority`` when reversed."""
    top = max(scores, default=0)
    if top <= 0:
        if reverse:
            scores[:] = [max_priority] * len(scores)
        return
    if reverse:
        scores[:] = [max_priority - go_div(max_priority * score, top) for score in scores]
    else:
        scores[:] = [go_div(max_priority * score, top) for score in scores]


def go_div(a: int, b: int) -> int:
    """Go's integer division, truncating toward zero (Python's ``//`` floors: they differ for a negative quotient)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_round(x: float) -> int:
    """Go's ``math.Round``: half away from zero (Python's ``round`` rounds half to even)."""
    whole = int(x)
    frac = x - whole
    if frac >= 0.5:
        return whole + 1
    if frac <= -0.5:
        return whole - 1
    return whole


# ---- node selector terms over many nodes at once (the label index) ----

NODE_NAME_FIELD = "metadata.name"


def terms_matching(labels: NodeLabelIndex, terms: Iterable[NodeSelectorTerm], nodes: set[str]) -> set[str]:
    """The ``nodes`` that match any of ``terms`` (``node_selector_terms_match``), from the label index."""
    matched: set[str] = set()
    for term in terms:
        matched |= term_matching(labels, term, nodes)
    return matched


def term_matching(labels: NodeLabelIndex, term: NodeSelectorTerm, nodes: set[str]) -> set[str]:
    """The ``nodes`` that match ``term``, from the label index (NodeAffinity's Filter and Score over many nodes,
    VolumeBinding's volumes' node affinity). A term ANDs its requirements; a term with none matches nothing
    (``node_selector_term_matches``)."""
    if not term.match_expressions and not term.match_fields:
        return set()
    found = set(nodes)
    for req in term.match_expressions:
        if not found:
            break
        found = labels.meeting(req, found)
    for req in term.match_fields:
        if not found:
            break
        found = _name_meeting(req, found)
    return found


def _name_meeting(req: LabelSelectorRequirement, nodes: set[str]) -> set[str]:
    """Fields: only ``metadata.name``, the node's name (``node_selector_term_matches``)."""
    if req.key != NODE_NAME_FIELD:
        return set()
    if req.operator == "In":
        return nodes.intersection(req.values)
    if req.operator == "NotIn":
        return nodes.difference(req.values)
    return {name for name in nodes if requirement_matches(req, {NODE_NAME_FIELD: name})}
