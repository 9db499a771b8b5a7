"""``Framework``: one scheduler profile's plugins and the runners that call them in the profile's order
(pkg/scheduler/framework/runtime/framework.go: RunPreFilterPlugins, RunFilterPlugins,
RunFilterPluginsWithNominatedPods, RunPreFilterExtensionAddPod/RemovePod, RunPreScorePlugins, RunScorePlugins with
its normalizeScores and the plugins' weights).

The registry (plugins/registry.py) builds the default profile; adding a plugin is adding its module and listing
it there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from webhook.cluster.model import Node, Pod
from webhook.preemption.deadline import Deadline
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.interface import (
    FilterPlugin,
    NodeFilterPlugin,
    Plugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from webhook.preemption.framework.status import OK, SKIP, SUCCESS, UNSCHEDULABLE, Status
from webhook.preemption.framework.types import MAX_NODE_SCORE, NodeInfo, NodeScores, ScoringNodes

if TYPE_CHECKING:
    from webhook.preemption.framework.view import ClusterView


class Active(NamedTuple):
    """The plugins of each extension point that run for a pod: those whose PreFilter did not Skip."""

    node_filter_plugins: tuple[NodeFilterPlugin, ...]
    filter_plugins: tuple[FilterPlugin, ...]
    extensions: tuple[PreFilterExtensions, ...]
    # The names of the Filter plugins that run: node-only ones, and all.
    node_filter_names: frozenset[str]
    filter_names: frozenset[str]


class ScoreError(ValueError):
    """A Score plugin answered outside 0..MAX_NODE_SCORE after NormalizeScore (upstream fails the cycle)."""


class Framework:
    """The plugins of one profile by extension point, each list in the profile's order.

    ``score_weights``: the weight of each Score plugin the profile runs (upstream ``scorePluginWeight``); a plugin
    with a Score method but no weight there does not score (disabled in the profile's score point).
    """

    __slots__ = ("_active", "extensions", "filter_plugins", "node_filter_plugins", "normalizers", "plugins",
                 "pre_filter_plugins", "pre_score_plugins", "score_plugins", "score_weights")

    def __init__(self, plugins: Sequence[Plugin], score_weights: Mapping[str, int] | None = None) -> None:
        self.plugins = tuple(plugins)
        weights = dict(score_weights or {})
        self.score_plugins = tuple(p for p in plugins if isinstance(p, ScorePlugin) and p.name in weights)
        self.score_weights = {p.name: weights[p.name] for p in self.score_plugins}
        # Found once (upstream keeps ``ScoreExtensions()`` per plugin): an isinstance on a runtime-checkable
        # protocol walks its members, ~50 µs per Score plugin per cycle, a tenth of a fitting pod's prediction.
        self.normalizers = {p.name: p for p in self.score_plugins if isinstance(p, ScoreExtensions)}
        self.pre_score_plugins = tuple(p for p in plugins if isinstance(p, PreScorePlugin) and p.name in weights)
        self.pre_filter_plugins = tuple(p for p in plugins if isinstance(p, PreFilterPlugin))
        self.extensions = tuple(p for p in plugins if isinstance(p, PreFilterExtensions))
        self.node_filter_plugins = tuple(p for p in plugins if isinstance(p, NodeFilterPlugin))
        self.filter_plugins = tuple(p for p in plugins if isinstance(p, FilterPlugin))
        # Running the node-only filters first reports the same first failure as upstream only if they come first.
        order = [p for p in plugins if isinstance(p, (NodeFilterPlugin, FilterPlugin))]
        if order[:len(self.node_filter_plugins)] != list(self.node_filter_plugins):
            raise ValueError("a Filter plugin that reads only the node must come before those that read its pods")
        # Per set of skipped plugins (a handful per profile): the runners loop over these, once per node.
        self._active: dict[frozenset[str], Active] = {}

    def active(self, cycle: CycleState) -> Active:
        """The plugins that run for the pod of ``cycle``."""
        skip = cycle.skip_filter_plugins
        found = self._active.get(skip)
        if found is None:
            node_filters = tuple(p for p in self.node_filter_plugins if p.name not in skip)
            filters = tuple(p for p in self.filter_plugins if p.name not in skip)
            extensions = tuple(p for p in self.extensions if p.name not in skip)
            found = Active(node_filters, filters, extensions, frozenset(p.name for p in node_filters),
                           frozenset(p.name for p in (*node_filters, *filters)))
            self._active[skip] = found
        return found

    def run_pre_filter_plugins(self, pod: Pod, view: ClusterView, deadline: Deadline) -> CycleState:
        """Every PreFilter plugin writes its state; those that Skip are left out of Filter and AddPod/RemovePod.

        A failure is kept in ``cycle.pre_filter_status`` as upstream's RunPreFilterPlugins returns it: the first
        UnschedulableAndUnresolvable or Error ends PreFilter (preemption cannot help, #119770), an Unschedulable
        one is remembered (the last wins) and the other plugins still run.
        """
        cycle = CycleState()
        skipped = []
        for plugin in self.pre_filter_plugins:
            status = plugin.pre_filter(cycle, pod, view, deadline)
            code = status.code
            if code == SKIP:
                skipped.append(plugin.name)
            elif code == UNSCHEDULABLE:
                cycle.pre_filter_status = status
            elif code != SUCCESS:
                cycle.pre_filter_status = status
                break
        cycle.skip_filter_plugins = frozenset(skipped)
        return cycle

    def run_node_filter_plugins(self, cycle: CycleState, pod: Pod, node: Node,
                                plugins: Sequence[NodeFilterPlugin] | None = None) -> Status:
        """The Filter plugins that read only the node (or ``plugins``, some of them): the first failure, else OK."""
        skip = cycle.skip_filter_plugins
        for plugin in self.active(cycle).node_filter_plugins if plugins is None else plugins:
            if plugins is not None and plugin.name in skip:
                continue
            status = plugin.filter_node(cycle, pod, node)
            if not status.ok:
                return status
        return OK

    def run_filter_plugins(self, cycle: CycleState, pod: Pod, info: NodeInfo) -> Status:
        """The Filter plugins that read the node's pods, on ``info``: the first failure, else OK."""
        for plugin in self.active(cycle).filter_plugins:
            status = plugin.filter(cycle, pod, info)
            if not status.ok:
                return status
        return OK

    def run_filter_plugins_with_nominated_pods(self, cycle: CycleState, pod: Pod, info: NodeInfo,
                                               nominated: Sequence[Pod]) -> Status:
        """Two passes (docs/preemption.md §6): with the ``nominated`` pods (those of equal or higher priority) added
        to the node and the states, then without them; the pod must fit both times. The node-only filters ran before.
        """
        if not nominated:
            return self.run_filter_plugins(cycle, pod, info)
        with_nominated = info.copy()
        cycle_with = cycle.copy()
        for other in nominated:
            with_nominated.add(other)
            self.run_pre_filter_extension_add_pod(cycle_with, pod, other, with_nominated)
        status = self.run_filter_plugins(cycle_with, pod, with_nominated)
        if not status.ok:
            return status
        return self.run_filter_plugins(cycle, pod, info)

    def run_pre_filter_extension_add_pod(self, cycle: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> None:
        for plugin in self.active(cycle).extensions:
            plugin.add_pod(cycle, pod, other, info)

    def run_pre_filter_extension_remove_pod(self, cycle: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> None:
        for plugin in self.active(cycle).extensions:
            plugin.remove_pod(cycle, pod, other, info)

    # ---- scoring ---------------------------------------------------------------------------------------
    @property
    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def run_pre_score_plugins(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> None:
        """Every PreScore plugin writes its state; those that Skip are left out of Score."""
        skipped = [p.name for p in self.pre_score_plugins if p.pre_score(cycle, pod, nodes).code == SKIP]
        cycle.skip_score_plugins = frozenset(skipped)

    def run_score_plugins(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> NodeScores:
        """Score, NormalizeScore and the weights (``RunScorePlugins``): per plugin that did not Skip, its normalised
        score of each node times its weight, and each node's total."""
        skip = cycle.skip_score_plugins
        plugins = [p for p in self.score_plugins if p.name not in skip]
        weighted: list[list[int]] = []
        for plugin in plugins:
            scores = plugin.score(cycle, pod, nodes)
            normalizer = self.normalizers.get(plugin.name)
            if normalizer is not None:
                normalizer.normalize_score(cycle, pod, nodes, scores)
            if scores and (min(scores) < 0 or max(scores) > MAX_NODE_SCORE):
                raise ScoreError(f"plugin {plugin.name!r} returns an invalid score {min(scores)}..{max(scores)}, it "
                                 f"should be in the range of [0, {MAX_NODE_SCORE}] after normalizing")
            weight = self.score_weights[plugin.name]
            if weight != 1:
                scores = [score * weight for score in scores]
            weighted.append(scores)
        # One pass over the nodes for every plugin's score (750 nodes at 15,000: a pass per plugin cost 0.1 ms more).
        totals = list(map(sum, zip(*weighted, strict=True))) if weighted else [0] * len(nodes.names)
        return NodeScores(nodes.names, tuple(p.name for p in plugins), weighted, totals)
