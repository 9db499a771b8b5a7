"""A plugin's answer for one node: upstream's ``fwk.Code`` and ``fwk.Status``
(staging/src/k8s.io/kube-scheduler/framework/interface.go).

A Filter failure is ``UNSCHEDULABLE`` (removing pods might help: the node is a preemption candidate) or
``UNSCHEDULABLE_AND_UNRESOLVABLE`` (it cannot: the node is not). The codes are plain strings, compared in the
per-node loops (an enum member costs an attribute lookup there).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Final

SUCCESS: Final = "Success"
ERROR: Final = "Error"
UNSCHEDULABLE: Final = "Unschedulable"
UNSCHEDULABLE_AND_UNRESOLVABLE: Final = "UnschedulableAndUnresolvable"
# A PreFilter plugin with nothing to check for this pod: its Filter (and AddPod/RemovePod) are not run.
SKIP: Final = "Skip"


@dataclass(frozen=True, slots=True)
class Status:
    """A code and its reasons; statuses are compared and counted by value (the FitError's histogram)."""

    code: str
    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code == SUCCESS


OK = Status(SUCCESS)
SKIPPED = Status(SKIP)


class NodeStatuses(Mapping[str, Status]):
    """Upstream's ``NodeToStatus`` of a Filter pass that answered sets of nodes at once: statuses per node
    (``by_node``) and per set of nodes (``groups``, disjoint, read and never changed), so a bulk pass over 15,000
    nodes records a few sets instead of 15,000 entries. A node of ``by_node`` that is in a group too (one the
    node-by-node scan looked at before the bulk pass) has the same status in both."""

    __slots__ = ("by_node", "groups")

    def __init__(self, by_node: dict[str, Status], groups: list[tuple[AbstractSet[str], Status]]) -> None:
        self.by_node = by_node
        self.groups = groups

    def __getitem__(self, name: str) -> Status:
        found = self.by_node.get(name)
        if found is not None:
            return found
        for members, status in self.groups:
            if name in members:
                return status
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield from self.by_node
        for members, _ in self.groups:
            yield from (name for name in members if name not in self.by_node)

    def __len__(self) -> int:
        return sum(1 for _ in self)
