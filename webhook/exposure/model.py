"""What a namespace's exposure is made of: frozen values, ready to render (``webhook.exposure.report``).

Nothing here names another tenant: a class that could preempt a namespace's pods carries how many *other*
tenants may use it, never which.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PreemptingClass:
    """A PriorityClass whose pods could preempt a band: higher value, ``preemptionPolicy: PreemptLowerPriority``."""

    name: str
    value: int
    # How many tenants other than the namespace's own may create pods of this class (quota.classes and
    # quota.limitedResources as PreemptGuard and the API server would apply them); never which ones.
    other_tenants: int
    # Whether the namespace's own tenant may use it too (its own pods can then preempt each other).
    own_tenant: bool
    # The rules that restrict who may use it ("quota.classes[0]", "quota.limitedResources"); () = anyone.
    restricted_by: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PriorityBand:
    """The namespace's running pods of one priority value."""

    priority: int
    classes: tuple[str, ...]  # the PriorityClass names its pods carry ("" for a pod with none), sorted
    pods: int
    pdb_protected: int  # of ``pods``, how many some PodDisruptionBudget selects
    preempting_classes: tuple[PreemptingClass, ...]  # highest value first; () = nothing can preempt the band

    @property
    def preemptible(self) -> bool:
        return bool(self.preempting_classes)

    @property
    def other_tenants_can_preempt(self) -> bool:
        return any(c.other_tenants for c in self.preempting_classes)


@dataclass(frozen=True, slots=True)
class PdbBudget:
    """One PodDisruptionBudget of the namespace: the running pods it selects and the budget left."""

    name: str
    pods: int
    pod_names: tuple[str, ...]  # the first ``PDB_POD_NAMES`` of them, sorted (they are the namespace's own)
    disruptions_allowed: int


@dataclass(frozen=True, slots=True)
class NamespaceExposure:
    namespace: str
    bands: tuple[PriorityBand, ...]  # lowest priority first
    pdbs: tuple[PdbBudget, ...]  # by name

    @property
    def running_pods(self) -> int:
        return sum(band.pods for band in self.bands)

    @property
    def preemptible_pods(self) -> int:
        return sum(band.pods for band in self.bands if band.preemptible)

    @property
    def preemptible_by_other_tenants(self) -> int:
        """Running pods that some class another tenant may use could preempt."""
        return sum(band.pods for band in self.bands if band.other_tenants_can_preempt)
