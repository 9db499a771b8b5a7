"""Which potential victims violate a PodDisruptionBudget (docs/preemption.md §8): upstream's
``FilterVictimsWithPDBViolation`` (pkg/scheduler/framework/preemption/util.go) over PDBs listed once per prediction.

Budgets are fresh per node (``allowed = status.disruptionsAllowed``); a pod listed in
``status.disruptedPods`` (by name) neither violates nor uses that PDB's budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from webhook.cluster.model import LabelSelector, Pod, PodDisruptionBudget
from webhook.cluster.selectors import label_selector_error, label_selector_matches


def valid_pdb_selector_matches(selector: LabelSelector, labels: Mapping[str, str], *, empty_matches_all: bool) -> bool:
    """Whether a PDB whose selector converts (``LabelSelectorAsSelector``; one that does not matches nothing:
    upstream skips that PDB) selects a pod during preemption.

    Released behaviour: unlabeled pods and empty selectors never match. Newest master (#141785): an empty
    selector matches every pod in the namespace. A nil selector matches nothing either way.
    """
    if selector.is_empty():
        return empty_matches_all
    if not labels and not empty_matches_all:
        return False
    return label_selector_matches(selector, labels)


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


MATCH_CACHE_LIMIT = 1 << 18


class PdbIndex:
    """All PDBs listed once per prediction (upstream lists them once per attempt), with match caching.

    PDBs are indexed per namespace by one of their ``matchLabels`` pairs, so matching a pod looks only at
    the PDBs that can select it. Match results are cached per pod object (a changed pod is a new object).
    """

    __slots__ = ("_by_label", "_cache", "_scan", "_selectors", "budgets", "empty_matches_all", "pdbs", "stop_at_first")

    def __init__(self, pdbs: Sequence[PodDisruptionBudget], *, empty_matches_all: bool, stop_at_first: bool) -> None:
        self.pdbs = list(pdbs)
        self.budgets = [pdb.disruptions_allowed for pdb in self.pdbs]
        self.empty_matches_all = empty_matches_all
        self.stop_at_first = stop_at_first
        self._cache: dict[str, tuple[Pod, tuple[int, ...]]] = {}
        # namespace -> (label key, value) -> PDB indexes; namespace -> PDBs without matchLabels (checked always).
        self._by_label: dict[str, dict[tuple[str, str], list[int]]] = {}
        self._scan: dict[str, list[int]] = {}
        # The selectors that convert, by PDB index: only these PDBs are indexed.
        self._selectors: dict[int, LabelSelector] = {}
        for i, pdb in enumerate(self.pdbs):
            selector = pdb.selector
            if selector is None or label_selector_error(selector) is not None:
                continue  # a nil selector matches nothing; upstream skips one that does not convert
            self._selectors[i] = selector
            if selector.match_labels:
                pair = min(selector.match_labels.items())
                self._by_label.setdefault(pdb.namespace, {}).setdefault(pair, []).append(i)
            else:
                self._scan.setdefault(pdb.namespace, []).append(i)

    def matches(self, pod: Pod) -> tuple[int, ...]:
        cached = self._cache.get(pod.key)
        if cached is not None and cached[0] is pod:
            return cached[1]
        namespace = pod.namespace
        maybe = list(self._scan.get(namespace, ()))
        by_label = self._by_label.get(namespace)
        if by_label:
            for pair in pod.labels.items():
                found = by_label.get(pair)
                if found:
                    maybe.extend(found)
        maybe.sort()  # PDB (namespace, name) order: it decides which PDB a victim counts against first
        result = tuple(
            i for i in maybe
            if valid_pdb_selector_matches(self._selectors[i], pod.labels, empty_matches_all=self.empty_matches_all)
            and pod.name not in self.pdbs[i].disrupted_pods
        )
        if len(self._cache) >= MATCH_CACHE_LIMIT:
            self._cache.clear()  # pods come and go while the PDBs stay: keep the cache from growing forever
        self._cache[pod.key] = (pod, result)
        return result

    def classify(self, pods: Sequence[Pod]) -> list[bool]:
        return classify_violations((self.matches(p) for p in pods), self.budgets, stop_at_first=self.stop_at_first)
