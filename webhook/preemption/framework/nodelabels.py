"""Node names by label key and value, kept by the ``StateIndex`` per changed node, so a label requirement is
answered for every node at once by set algebra: ``In`` and ``NotIn`` are lookups by value, ``Exists`` and
``DoesNotExist`` the nodes holding the key, and other operators test each distinct value of the key once with
``requirement_matches`` itself. NodeAffinity's Filter over many nodes (plugins/nodeaffinity.py) is built on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.cluster.model import LabelSelectorRequirement
from webhook.cluster.selectors import requirement_matches


class NodeLabelIndex:
    """Node names by label key and value."""

    __slots__ = ("by_value", "with_key")

    def __init__(self) -> None:
        self.by_value: dict[str, dict[str, set[str]]] = {}
        self.with_key: dict[str, set[str]] = {}

    def add(self, name: str, labels: Mapping[str, str]) -> None:
        for key, value in labels.items():
            self.by_value.setdefault(key, {}).setdefault(value, set()).add(name)
            self.with_key.setdefault(key, set()).add(name)

    def remove(self, name: str, labels: Mapping[str, str]) -> None:
        for key, value in labels.items():
            values = self.by_value.get(key)
            if values is not None:
                _discard(values, value, name)
                if not values:
                    del self.by_value[key]
            _discard(self.with_key, key, name)

    def with_label(self, key: str, value: str) -> set[str]:
        """The nodes labelled ``key=value`` (the index's own set: do not change it)."""
        return self.by_value.get(key, {}).get(value, _NONE)

    def meeting(self, req: LabelSelectorRequirement, nodes: set[str]) -> set[str]:
        """The ``nodes`` whose labels meet ``req`` (``requirement_matches``)."""
        key, op = req.key, req.operator
        by_value = self.by_value.get(key, {})
        if op in ("In", "NotIn"):
            listed = _union(by_value.get(value) for value in set(req.values))
            return nodes & listed if op == "In" else nodes - listed
        holding = self.with_key.get(key, set())
        if op == "Exists":
            return nodes & holding
        if op == "DoesNotExist":
            return nodes - holding
        # Gt, Lt or an unknown operator: never met without the label, so each value of the key is asked.
        return nodes & _union(names for value, names in by_value.items() if requirement_matches(req, {key: value}))


_NONE: set[str] = set()


def _union(sets: Iterable[set[str] | None]) -> set[str]:
    found: set[str] = set()
    for members in sets:
        if members:
            found |= members
    return found


def _discard(index: dict[str, set[str]], key: str, name: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(name)
        if not members:
            del index[key]
