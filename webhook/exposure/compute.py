"""A namespace's running pods by priority band, the classes that could preempt each band, and its PDBs.

*Running* is what kube-scheduler may preempt: a pod bound to a node, not Succeeded/Failed and not already being
deleted (``webhook.cluster.snapshot.holds_node_resources``). A PodDisruptionBudget *protects* a pod when its
selector selects it as kube-scheduler's preemption reads PDBs (``webhook.preemption.framework.pdb.PdbIndex``: a nil or
empty selector selects nothing there); the scheduler prefers victims whose eviction violates no PDB, but a PDB
never forbids a preemption (docs/preemption.md §8). Pods a PDB lists in ``status.disruptedPods`` still count as
protected here: that list is a moment of an eviction, not who the budget is for.

``ExposureIndex`` keeps the counts current pod change by pod change (the cluster state's pod listener), so the
server's scan never walks a namespace's pods again for a pod change: it only re-reads a namespace's counts, in
O(bands x classes). Only a change of a namespace's PDB *selectors* recounts that namespace's pods
(``pdbs_changed``, or ``recount`` in steps of ``RECOUNT_STEP`` pods that the server's scan paces: at 15,000 nodes a
namespace holds ~20,000 pods, counted whole in ~50 ms of the event loop). ``compute_exposure``, the one-call form
the plugin uses, fills an index from a state.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.cluster.model import LabelSelector, Namespace, Pod, PodDisruptionBudget
from webhook.cluster.snapshot import ClusterState, holds_node_resources
from webhook.config import Config
from webhook.exposure.access import ClassAccessTable, class_access_table
from webhook.exposure.model import NamespaceExposure, PdbBudget, PriorityBand
from webhook.guardrails.disclosure import tenant_of
from webhook.preemption.framework.pdb import PdbIndex

# How many pod names a PDB's entry lists (its count is always whole): a PolicyReport is one etcd object.
PDB_POD_NAMES = 20
# Pods one step of ``ExposureIndex.recount`` counts (a few hundred microseconds): the caller may give the event
# loop back between steps.
RECOUNT_STEP = 256

# What decides which pods a namespace's PDBs select: (name, selector) of each, by name.
PdbSelectors = tuple[tuple[str, LabelSelector | None], ...]


def running_pod(pod: Pod) -> bool:
    """A pod kube-scheduler could preempt now: bound, not terminal, not being deleted."""
    return holds_node_resources(pod) and not pod.deleting


def pdb_selectors(pdbs: Iterable[PodDisruptionBudget]) -> PdbSelectors:
    return tuple(sorted((pdb.name, pdb.selector) for pdb in pdbs))


@dataclass(slots=True)
class _Band:
    pods: int = 0
    protected: int = 0
    classes: Counter[str] = field(default_factory=Counter)


class _Namespace:
    """One namespace's running pods, counted."""

    __slots__ = ("bands", "budgets", "changed", "matcher", "members", "selectors")

    def __init__(self, namespace: str, selectors: PdbSelectors = ()) -> None:
        self.bands: dict[int, _Band] = {}
        self.selectors = selectors
        self.members: dict[str, set[str]] = {name: set() for name, _ in selectors}
        # Each PDB's last budget read, and the PDBs whose members changed since: a read under churn builds only
        # those again (a namespace of 225 PDBs built whole held the event loop ~1.6 ms a scan at 15,000 nodes).
        self.budgets: dict[str, PdbBudget] = {}
        self.changed: set[str] = set()
        self.matcher: PdbIndex | None = None
        if selectors:
            # disruptedPods left out (see the module doc); PdbIndex keeps upstream's order and selector rules.
            budgets = [PodDisruptionBudget(name, namespace, selector) for name, selector in selectors]
            self.matcher = PdbIndex(budgets, empty_matches_all=False, stop_at_first=True)

    def count(self, pod: Pod, sign: int) -> None:
        priority = pod.effective_priority
        band = self.bands.get(priority)
        if band is None:
            band = self.bands[priority] = _Band()
        band.pods += sign
        band.classes[pod.priority_class_name] += sign
        if self.matcher is not None:
            matches = self.matcher.matches(pod)
            if matches:
                band.protected += sign
                for i in matches:
                    name = self.selectors[i][0]
                    names = self.members[name]
                    if sign > 0:
                        names.add(pod.name)
                    else:
                        names.discard(pod.name)
                    self.changed.add(name)
        if band.pods == 0:
            del self.bands[priority]
        elif band.classes[pod.priority_class_name] == 0:
            del band.classes[pod.priority_class_name]

    def budget(self, pdb: PodDisruptionBudget) -> PdbBudget:
        """``pdb``'s running pods as counted and the budget it has left (the last one read, if still true)."""
        kept = self.budgets.get(pdb.name)
        if kept is not None and pdb.name not in self.changed and kept.disruptions_allowed == pdb.disruptions_allowed:
            return kept
        names = self.members.get(pdb.name, set())
        budget = PdbBudget(pdb.name, len(names), tuple(heapq.nsmallest(PDB_POD_NAMES, names)),
                           pdb.disruptions_allowed)
        self.budgets[pdb.name] = budget
        self.changed.discard(pdb.name)
        return budget


class _Recount:
    """A namespace's pods being counted again under new PDB selectors, and the changes to replay once they are."""

    __slots__ = ("counted", "pending")

    def __init__(self, counted: _Namespace) -> None:
        self.counted = counted
        self.pending: list[tuple[Pod, int]] = []


class ExposureIndex:
    """Every namespace's running pods by band and PDB, kept current by ``pod_changed``; ``dirty`` collects the
    namespaces whose counts changed since the caller last took them (``take_dirty``)."""

    def __init__(self) -> None:
        self._namespaces: dict[str, _Namespace] = {}
        self._recounts: dict[str, _Recount] = {}
        self.dirty: set[str] = set()

    # ---- feeding ----------------------------------------------------------------------------------
    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """The cluster state's pod listener: (None, pod) added, (pod, pod') changed, (pod, None) deleted."""
        was = old is not None and running_pod(old)
        now = new is not None and running_pod(new)
        if was and now and old is not None and new is not None and _counted_alike(old, new):
            return  # a status update: nothing counted changes
        if was and old is not None:
            self._change(old, -1)
        if now and new is not None:
            self._change(new, 1)

    def _change(self, pod: Pod, sign: int) -> None:
        namespace = pod.namespace
        self._counts(namespace).count(pod, sign)
        self.dirty.add(namespace)
        recount = self._recounts.get(namespace)
        if recount is not None:  # replayed on the new counts once the pods listed before it are counted
            recount.pending.append((pod, sign))

    def add_pods(self, pods: Iterable[Pod]) -> None:
        for pod in pods:
            self.pod_changed(None, pod)

    def pdbs_changed(self, namespace: str, pdbs: Iterable[PodDisruptionBudget], pods: Iterable[Pod]) -> bool:
        """The namespace's PDBs now: when their selectors differ from those counted, its ``pods`` are counted
        again (O(its pods), in one call); True then."""
        steps = self.recount(namespace, pdbs, pods)
        if steps is None:
            return False
        for _ in steps:
            pass
        return True

    def recount(self, namespace: str, pdbs: Iterable[PodDisruptionBudget], pods: Iterable[Pod],
                step: int = RECOUNT_STEP) -> Generator[None, None, None] | None:
        """``pdbs_changed`` in steps: None when the selectors are those counted (or being counted); else the steps.
        The first lists ``pods`` (the namespace's pods in the cluster state, a live view) and each counts ``step``
        of them; pod changes that arrive between two steps still update the counts in use and are replayed onto the
        new ones, which replace them after the last step. A newer ``recount`` of the namespace (or ``forget``)
        abandons an unfinished one, as does closing its iterator."""
        selectors = pdb_selectors(pdbs)
        running = self._recounts.get(namespace)
        current = running.counted if running is not None else self._namespaces.get(namespace)
        if (current.selectors if current is not None else ()) == selectors:
            return None
        return self._recount_steps(namespace, selectors, pods, max(1, step))

    def _recount_steps(self, namespace: str, selectors: PdbSelectors, pods: Iterable[Pod],
                       step: int) -> Generator[None, None, None]:
        # Listed and registered in one step of the caller's, so the replay holds exactly the changes after the list.
        recount = self._recounts[namespace] = _Recount(_Namespace(namespace, selectors))
        listed = list(pods)
        counted = recount.counted
        try:
            for start in range(0, len(listed), step):
                for pod in listed[start:start + step]:
                    if pod.namespace == namespace and running_pod(pod):
                        counted.count(pod, 1)
                yield
                if self._recounts.get(namespace) is not recount:
                    return  # superseded or forgotten meanwhile
            for pod, sign in recount.pending:
                counted.count(pod, sign)
            self._namespaces[namespace] = counted
            self.dirty.add(namespace)
        finally:
            if self._recounts.get(namespace) is recount:
                del self._recounts[namespace]

    def forget(self, namespace: str) -> None:
        self._namespaces.pop(namespace, None)
        self._recounts.pop(namespace, None)
        self.dirty.discard(namespace)

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def namespaces(self) -> list[str]:
        return sorted(self._namespaces)

    def _counts(self, namespace: str) -> _Namespace:
        counted = self._namespaces.get(namespace)
        if counted is None:
            counted = self._namespaces[namespace] = _Namespace(namespace)
        return counted

    # ---- reading ----------------------------------------------------------------------------------
    def exposure(self, namespace: str, pdbs: Iterable[PodDisruptionBudget], table: ClassAccessTable,
                 namespaces: Mapping[str, Namespace], tenant_label: str | None) -> NamespaceExposure:
        """The namespace's exposure: its counts, the preempting classes of ``table`` as its tenant is told them,
        and the budgets ``pdbs`` have left (their selectors are those counted once ``pdbs_changed`` saw them)."""
        counted = self._namespaces.get(namespace) or _Namespace(namespace)
        tenant = tenant_of(namespace, namespaces, tenant_label)
        bands = tuple(
            PriorityBand(priority, tuple(sorted(band.classes)), band.pods, band.protected,
                         table.preempting(priority, tenant))
            for priority, band in sorted(counted.bands.items()))
        budgets = tuple(counted.budget(pdb) for pdb in sorted(pdbs, key=lambda p: p.name))
        return NamespaceExposure(namespace, bands, budgets)


def _counted_alike(old: Pod, new: Pod) -> bool:
    return (old.namespace, old.name, old.effective_priority, old.priority_class_name, old.labels) == \
        (new.namespace, new.name, new.effective_priority, new.priority_class_name, new.labels)


def known_namespaces(state: ClusterState) -> list[str]:
    """The namespaces the state knows of: its Namespace objects and any namespace a pod names."""
    return sorted({*state.namespaces, *state.pods_by_namespace})


def access_table(state: ClusterState, config: Config) -> ClassAccessTable:
    return class_access_table(state.priority_classes, known_namespaces(state), state.namespaces,
                              state.quotas_by_namespace, config.quota, config.guardrails.tenant_label)


def index_of(state: ClusterState) -> ExposureIndex:
    """An index of every pod and PDB of ``state``."""
    index = ExposureIndex()
    for namespace in known_namespaces(state):
        pods = state.pods_by_namespace.get(namespace, {}).values()
        if not index.pdbs_changed(namespace, state.pdbs_in(namespace), pods):
            index.add_pods(pods)
    return index


def compute_exposure(state: ClusterState, config: Config,
                     namespaces: Sequence[str] | None = None) -> list[NamespaceExposure]:
    """The exposure of ``namespaces`` (default: every namespace the state knows), in that order."""
    table = access_table(state, config)
    index = index_of(state)
    chosen = known_namespaces(state) if namespaces is None else list(namespaces)
    tenant_label = config.guardrails.tenant_label
    return [index.exposure(ns, state.pdbs_in(ns), table, state.namespaces, tenant_label) for ns in chosen]
