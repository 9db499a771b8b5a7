"""``CycleState``: what the PreFilter plugins computed for one pod, read by their Filter and updated by their
AddPod/RemovePod; copied per dry-run node like upstream (pkg/scheduler/framework/cycle_state.go, ``Clone``).

Each plugin's state is stored under its own class, so ``cycle.read(SpreadState)`` is typed without a cast.
"""

from __future__ import annotations

from typing import Protocol, Self, TypeVar, cast

from webhook.preemption.framework.status import Status


class StateData(Protocol):
    """A plugin's PreFilter state (upstream ``fwk.StateData``)."""

    def copy(self) -> Self:
        """An independent copy for a dry run (a state that never changes may return itself)."""
        ...


T = TypeVar("T", bound=StateData)


class CycleState:
    """The plugins' states for one pod, the plugins whose PreFilter (PreScore) said Skip, the PreFilter's failure
    (None when it passed) and what the plugins could not know (notes for the result's message)."""

    __slots__ = ("_data", "notes", "pre_filter_status", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[type, StateData] = {}
        self.skip_filter_plugins: frozenset[str] = frozenset()
        self.skip_score_plugins: frozenset[str] = frozenset()
        self.pre_filter_status: Status | None = None
        self.notes: list[str] = []

    def read(self, kind: type[T]) -> T | None:
        """The state of that class, or None when its plugin wrote none (it skipped: nothing to check)."""
        return cast("T | None", self._data.get(kind))

    def write(self, data: StateData) -> None:
        self._data[type(data)] = data

    def copy(self) -> CycleState:
        copied = CycleState()
        copied._data = {kind: data.copy() for kind, data in self._data.items()}
        copied.skip_filter_plugins = self.skip_filter_plugins
        copied.skip_score_plugins = self.skip_score_plugins
        copied.pre_filter_status = self.pre_filter_status
        copied.notes = self.notes
        return copied

    def note(self, text: str) -> None:
        """Something the prediction did not know (a kind the snapshot lacks); said once in the result's message."""
        if text not in self.notes:
            self.notes.append(text)
