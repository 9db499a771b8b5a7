"""The extension points a plugin implements (pkg/scheduler/framework/interface.go, the staging module's
``fwk.PreFilterPlugin``, ``fwk.FilterPlugin``, ``fwk.PreFilterExtensions``).

A Filter plugin that reads only the Node (NodeName, NodeUnschedulable, TaintToleration, NodeAffinity) is a
``NodeFilterPlugin``: its answer does not depend on the pods, so the runtime runs it once per node, before the
passes with and without nominated pods, and the Filter pass may answer it for many nodes at once. The others are
``FilterPlugin``s and read a ``NodeInfo``.

Scoring (``fwk.PreScorePlugin``, ``fwk.ScorePlugin``, ``fwk.ScoreExtensions``): upstream calls Score once per node
(in parallel); here a ``ScorePlugin`` answers for every node of a ``ScoringNodes`` at once, so a plugin whose score
depends on a few nodes only (the nodes holding an image, a topology domain, a label) fills those and leaves the rest
at their common value, and the resource scores run over the index's per-node sums in one loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from webhook.cluster.model import Node, Pod
from webhook.preemption.deadline import Deadline
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import Status
from webhook.preemption.framework.types import NodeInfo, ScoringNodes

if TYPE_CHECKING:
    from webhook.preemption.framework.view import ClusterView


class Plugin(Protocol):
    """Every plugin has its upstream name (pkg/scheduler/framework/plugins/names/names.go)."""

    name: str


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, cycle: CycleState, pod: Pod, view: ClusterView, deadline: Deadline) -> Status:
        """Write the plugin's state for ``pod`` into ``cycle``; ``SKIPPED`` when there is nothing to check. A walk
        over the cluster's pods checks ``deadline`` (upstream: the context's cancellation)."""
        ...


@runtime_checkable
class PreFilterExtensions(Plugin, Protocol):
    """AddPod/RemovePod: keep the PreFilter state true while the dry run removes victims and adds nominated pods."""

    def add_pod(self, cycle: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> None: ...

    def remove_pod(self, cycle: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> None: ...


@runtime_checkable
class NodeFilterPlugin(Plugin, Protocol):
    def filter_node(self, cycle: CycleState, pod: Pod, node: Node) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> Status:
        """Write the plugin's scoring state for ``pod`` over the feasible ``nodes``; ``SKIPPED`` leaves the plugin's
        Score out of this cycle (upstream ``SetSkipScorePlugins``)."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> list[int]:
        """The raw score of each of ``nodes.names``, in that order (upstream ``Score``, once per node)."""
        ...


@runtime_checkable
class ScoreExtensions(Plugin, Protocol):
    def normalize_score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes, scores: list[int]) -> None:
        """Rewrite ``scores`` (one per ``nodes.names``) into 0..MAX_NODE_SCORE (upstream ``NormalizeScore``)."""
        ...
