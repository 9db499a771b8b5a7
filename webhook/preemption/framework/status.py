"""A plugin's answer for one node: upstream's ``fwk.Code`` and ``fwk.Status``
(staging/src/k8s.io/kube-scheduler/framework/interface.go).

A Filter failure is ``UNSCHEDULABLE`` (removing pods might help: the node is a preemption candidate) or
``UNSCHEDULABLE_AND_UNRESOLVABLE`` (it cannot: the node is not). The codes are plain strings, compared in the
per-node loops (an enum member costs an attribute lookup there).
"""

from __future__ import annotations

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
