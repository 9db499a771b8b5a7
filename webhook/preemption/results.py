"""Value types of the preemption predictor: arguments, candidates and per-replica results."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from webhook.cluster.model import Pod
from webhook.errors import ConfigError


class Outcome(StrEnum):
    """What happens to one pod (docs/interfaces.md §4, ``results[].outcome``): the one set of outcome constants."""

    FITS = "Fits"
    PREEMPTS = "Preempts"
    UNSCHEDULABLE = "Unschedulable"
    REJECTED = "Rejected"


# A pod with no status.startTime counts as started "now": later than every started pod.
START_NOW_NS = 2**63
# pickOneNodeForPreemption adds MaxInt32+1 per victim so every term of the sum is non-negative.
PRIORITY_SUM_OFFSET = 2**31
DEFAULT_GRACE_PERIOD_SECONDS = 30


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """DefaultPreemptionArgs plus PreemptGuard's version switches.

    ``pdb_empty_selector_matches_all`` defaults to False: the newest *released* behaviour (an empty
    PDB selector matches nothing, unlabeled pods match no PDB); True follows master after #141785.
    ``pdb_stop_at_first_violation``: newest util.go stops counting a victim at the first PDB that
    goes negative; False decrements every matching PDB like older releases.
    ``preemption_enabled``: the scheduler profile runs DefaultPreemption's PostFilter (``scheduler.preemption``);
    without it a pod that fits nowhere stays Pending and evicts nobody.
    """

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    pdb_empty_selector_matches_all: bool = False
    pdb_stop_at_first_violation: bool = True
    preemption_enabled: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            raise ConfigError("minCandidateNodesPercentage must be in 0..100")
        if self.min_candidate_nodes_absolute < 0:
            raise ConfigError("minCandidateNodesAbsolute must be >= 0")
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise ConfigError("minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be 0")

    def num_candidates(self, potential_nodes: int) -> int:
        """How many candidates upstream's dry run collects before it may stop (docs/preemption.md §5)."""
        n = potential_nodes * self.min_candidate_nodes_percentage // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, potential_nodes)


def start_key(pod: Pod) -> int:
    return pod.start_time_ns if pod.start_time_ns is not None else START_NOW_NS


def importance_key(pod: Pod) -> tuple[int, int, str, str, str]:
    """Sort key, most important first: priority descending, then earlier start, then a stable tie-break."""
    return (-pod.effective_priority, start_key(pod), pod.uid, pod.namespace, pod.name)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where preemption makes room: its victims (most important first) and PDB violations."""

    node: str
    victims: tuple[Pod, ...]
    violating: frozenset[str]  # keys of victims classified as PDB-violating
    num_pdb_violations: int


class CandidateScore(NamedTuple):
    """``pickOneNodeForPreemption``'s criteria in order (docs/preemption.md §9): smaller is better, field by field.

    pkg/scheduler/framework/preemption/preemption.go (pickOneNodeForPreemption).
    """

    pdb_violations: int
    top_priority: int  # the highest victim priority
    priority_sum: int  # Σ(priority + 2^31) over the victims
    victim_count: int
    # Minus the earliest start among the highest-priority victims: upstream prefers the node where it is latest.
    negated_earliest_start: int


# ``CandidateScore(...)`` runs the NamedTuple's Python-level __new__; code that makes one per dry run calls the
# tuple's: ``new_score(CandidateScore, (...))``.
new_score = tuple.__new__

# The smallest ``negated_earliest_start`` possible: every start is at most START_NOW_NS.
LOWEST_NEGATED_START = -START_NOW_NS


@dataclass(frozen=True, slots=True)
class VictimInfo:
    namespace: str
    name: str
    node: str
    priority: int
    pdb_violation: bool
    grace_period_seconds: int


@dataclass(frozen=True, slots=True)
class PreemptionResult:
    """The prediction for one replica (docs/interfaces.md §4, one entry of ``results``)."""

    pod: str
    priority: int | None
    priority_class_name: str
    preemption_policy: str
    outcome: Outcome
    node: str | None = None
    victims: tuple[VictimInfo, ...] = ()
    pdb_violations: int = 0
    candidate_nodes: int = 0
    tied_nodes: tuple[str, ...] = ()
    expected_delay_seconds: int = 0
    message: str = ""
    # The PostFilter status message upstream would record ("preemption: ..."), "" when it would not run.
    preemption_status: str = ""
    # More candidates than upstream's sample (docs/preemption.md §5): upstream may choose a different node.
    sampled: bool = False
    # The candidate of each tied node (``tied_nodes``, ``node`` included), with its victims: upstream picks one of
    # them at random and evicts that node's victims. The dry run's own objects (no copy on the hot path).
    tied_candidates: tuple[Candidate, ...] = ()
