"""The extension points a plugin implements (pkg/scheduler/framework/interface.go, the staging module's
``fwk.PreFilterPlugin``, ``fwk.FilterPlugin``, ``fwk.PreFilterExtensions``).

A Filter plugin that reads only the Node (NodeName, NodeUnschedulable, TaintToleration, NodeAffinity) is a
``NodeFilterPlugin``: its answer does not depend on the pods, so the runtime runs it once per node, before the
passes with and without nominated pods, and the Filter pass may answer it for many nodes at once. The others are
``FilterPlugin``s and read a ``NodeInfo``. Score is the next extension point (issue #28).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from webhook.cluster.model import Node, Pod
from webhook.preemption.deadline import Deadline
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import Status
from webhook.preemption.framework.types import NodeInfo

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
