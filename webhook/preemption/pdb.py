"""PodDisruptionBudget classification of potential victims on one node (spec §8).

Budgets are fresh per node (``allowed = status.disruptionsAllowed``); a pod listed in
``status.disruptedPods`` (by name) neither violates nor uses that PDB's budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from webhook.cluster.model import Pod, PodDisruptionBudget
from webhook.preemption.selectors import pdb_selector_matches


def matching_pdbs(pod: Pod, pdbs: Sequence[PodDisruptionBudget], *, empty_matches_all: bool) -> tuple[int, ...]:
    """Indexes (into ``pdbs``) of the PDBs that select ``pod`` and do not list it as already disrupted."""
    return tuple(
        i for i, pdb in enumerate(pdbs)
        if pdb.namespace == pod.namespace
        and pdb_selector_matches(pdb.selector, pod.labels, empty_matches_all=empty_matches_all)
        and pod.name not in pdb.disrupted_pods
    )


def classify_violations(matches: Iterable[tuple[int, ...]], budgets: Sequence[int], *,
                        stop_at_first: bool = True) -> list[bool]:
    """One flag per victim (in importance order): True when evicting it drives a matching PDB below zero.

    Newest upstream stops at the first PDB that goes negative; older code decremented every match.
    """
    allowed: dict[int, int] = {}
    flags: list[bool] = []
    for pdb_indexes in matches:
        violating = False
        for i in pdb_indexes:
            left = allowed.get(i, budgets[i]) - 1
            allowed[i] = left
            if left < 0:
                violating = True
                if stop_at_first:
                    break
        flags.append(violating)
    return flags


def filter_pods_with_pdb_violation(
    pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget], *, empty_matches_all: bool, stop_at_first: bool = True,
) -> tuple[list[Pod], list[Pod]]:
    """(violating, non-violating), each keeping the input order (upstream ``filterPodsWithPDBViolation``)."""
    flags = classify_violations(
        (matching_pdbs(p, pdbs, empty_matches_all=empty_matches_all) for p in pods),
        [pdb.disruptions_allowed for pdb in pdbs], stop_at_first=stop_at_first)
    violating = [p for p, bad in zip(pods, flags, strict=True) if bad]
    non_violating = [p for p, bad in zip(pods, flags, strict=True) if not bad]
    return violating, non_violating


class PdbIndex:
    """All PDBs listed once per prediction (upstream lists them once per attempt), with match caching."""

    __slots__ = ("_by_namespace", "_cache", "budgets", "empty_matches_all", "pdbs", "stop_at_first")

    def __init__(self, pdbs: Sequence[PodDisruptionBudget], *, empty_matches_all: bool, stop_at_first: bool) -> None:
        self.pdbs = list(pdbs)
        self.budgets = [pdb.disruptions_allowed for pdb in self.pdbs]
        self.empty_matches_all = empty_matches_all
        self.stop_at_first = stop_at_first
        self._cache: dict[str, tuple[int, ...]] = {}
        self._by_namespace: dict[str, list[int]] = {}
        for i, pdb in enumerate(self.pdbs):
            self._by_namespace.setdefault(pdb.namespace, []).append(i)

    def matches(self, pod: Pod) -> tuple[int, ...]:
        found = self._cache.get(pod.key)
        if found is None:
            found = tuple(
                i for i in self._by_namespace.get(pod.namespace, ())
                if pdb_selector_matches(self.pdbs[i].selector, pod.labels, empty_matches_all=self.empty_matches_all)
                and pod.name not in self.pdbs[i].disrupted_pods
            )
            self._cache[pod.key] = found
        return found

    def classify(self, pods: Sequence[Pod]) -> list[bool]:
        return classify_violations((self.matches(p) for p in pods), self.budgets, stop_at_first=self.stop_at_first)
