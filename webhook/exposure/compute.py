"""A namespace's running pods by priority band, the classes that could preempt each band, and its PDBs.

*Running* is what kube-scheduler may preempt: a pod bound to a node, not Succeeded/Failed and not already being
deleted (``webhook.cluster.snapshot.holds_node_resources``). A PodDisruptionBudget *protects* a pod when its
selector selects it as kube-scheduler's preemption reads PDBs (``webhook.preemption.pdb.PdbIndex``: a nil or
empty selector selects nothing there); the scheduler prefers victims whose eviction violates no PDB, but a PDB
never forbids a preemption (docs/preemption.md §8).

``NamespacePods`` takes the pods in slices (``add``), so the server's background scan can yield to admission
between slices; ``compute_exposure`` is the one-call form the plugin uses. Both read the same functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.cluster.model import Namespace, Pod, PodDisruptionBudget
from webhook.cluster.snapshot import ClusterState, holds_node_resources
from webhook.config import Config
from webhook.exposure.access import ClassAccessTable, class_access_table
from webhook.exposure.model import NamespaceExposure, PdbBudget, PriorityBand
from webhook.guardrails.disclosure import tenant_of
from webhook.preemption.pdb import PdbIndex

# How many pod names a PDB's entry lists (its count is always whole): a PolicyReport is one etcd object.
PDB_POD_NAMES = 20


def running_pod(pod: Pod) -> bool:
    """A pod kube-scheduler could preempt now: bound, not terminal, not being deleted."""
    return holds_node_resources(pod) and not pod.deleting


@dataclass(slots=True)
class _Band:
    pods: int = 0
    protected: int = 0
    classes: set[str] = field(default_factory=set)


class NamespacePods:
    """The running pods of one namespace, counted as they are added."""

    __slots__ = ("_bands", "_index", "_pdb_names", "namespace", "pdbs")

    def __init__(self, namespace: str, pdbs: Iterable[PodDisruptionBudget]) -> None:
        self.namespace = namespace
        # (namespace, name) order, as upstream lists PDBs.
        self.pdbs = sorted((p for p in pdbs if p.namespace == namespace), key=lambda p: p.name)
        self._index = PdbIndex(self.pdbs, empty_matches_all=False, stop_at_first=True)
        self._bands: dict[int, _Band] = {}
        self._pdb_names: list[list[str]] = [[] for _ in self.pdbs]

    def add(self, pods: Iterable[Pod]) -> None:
        bands, names, pdbs = self._bands, self._pdb_names, bool(self.pdbs)
        for pod in pods:
            if pod.namespace != self.namespace or not running_pod(pod):
                continue
            priority = pod.effective_priority
            band = bands.get(priority)
            if band is None:
                band = bands[priority] = _Band()
            band.pods += 1
            band.classes.add(pod.priority_class_name)
            if pdbs:
                matches = self._index.matches(pod)
                if matches:
                    band.protected += 1
                    for i in matches:
                        names[i].append(pod.name)

    def finish(self, table: ClassAccessTable, namespaces: Mapping[str, Namespace],
               tenant_label: str | None) -> NamespaceExposure:
        tenant = tenant_of(self.namespace, namespaces, tenant_label)
        bands = tuple(
            PriorityBand(priority, tuple(sorted(band.classes)), band.pods, band.protected,
                         table.preempting(priority, tenant))
            for priority, band in sorted(self._bands.items()))
        budgets = tuple(
            PdbBudget(pdb.name, len(names), tuple(sorted(names)[:PDB_POD_NAMES]), pdb.disruptions_allowed)
            for pdb, names in zip(self.pdbs, self._pdb_names, strict=True))
        return NamespaceExposure(self.namespace, bands, budgets)


def namespace_exposure(state: ClusterState, namespace: str, table: ClassAccessTable,
                       tenant_label: str | None) -> NamespaceExposure:
    """One namespace's exposure, in one call."""
    pods = NamespacePods(namespace, state.pdbs_in(namespace))
    pods.add(state.pods_by_namespace.get(namespace, {}).values())
    return pods.finish(table, state.namespaces, tenant_label)


def known_namespaces(state: ClusterState) -> list[str]:
    """The namespaces the state knows of: its Namespace objects and any namespace a pod names."""
    return sorted({*state.namespaces, *state.pods_by_namespace})


def access_table(state: ClusterState, config: Config) -> ClassAccessTable:
    return class_access_table(state.priority_classes, known_namespaces(state), state.namespaces,
                              state.quotas_by_namespace, config.quota, config.guardrails.tenant_label)


def compute_exposure(state: ClusterState, config: Config,
                     namespaces: Sequence[str] | None = None) -> list[NamespaceExposure]:
    """The exposure of ``namespaces`` (default: every namespace the state knows), in that order."""
    table = access_table(state, config)
    chosen = known_namespaces(state) if namespaces is None else list(namespaces)
    return [namespace_exposure(state, ns, table, config.guardrails.tenant_label) for ns in chosen]
