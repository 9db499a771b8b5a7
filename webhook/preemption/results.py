"""The predictor's public value types: its arguments (``PreemptionArgs``) and the result of each pod
(``PreemptionResult``, ``Outcome``, ``VictimInfo``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from webhook.cluster.model import DEFAULT_SCHEDULER_NAME, Pod, TopologySpreadConstraint
from webhook.cluster.release import DEFAULT_RELEASE, KubernetesRelease
from webhook.errors import ConfigError


class Outcome(StrEnum):
    """What happens to one pod (docs/interfaces.md §4, ``results[].outcome``): the one set of outcome constants."""

    FITS = "Fits"
    PREEMPTS = "Preempts"
    UNSCHEDULABLE = "Unschedulable"
    REJECTED = "Rejected"
    # The scheduler does not act on the pod now, so it preempts nothing for it (issue #26):
    GATED = "Gated"  # spec.schedulingGates left: the queue's PreEnqueue (SchedulingGates plugin) holds it back
    NOT_SCHEDULED = "NotScheduled"  # spec.schedulerName names no profile of the configured kube-scheduler


# Outcomes where the pod stays Pending for now and nobody is evicted for it.
PENDING_OUTCOMES = frozenset({Outcome.UNSCHEDULABLE, Outcome.REJECTED, Outcome.GATED, Outcome.NOT_SCHEDULED})


DEFAULT_GRACE_PERIOD_SECONDS = 30


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A resource a scoring strategy weighs (upstream ``config.ResourceSpec``)."""

    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    """NodeResourcesFitArgs.scoringStrategy: the type, its resources and (RequestedToCapacityRatio) the shape as
    (utilization, score) points, utilization 0..100 ascending, score 0..10."""

    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    shape: tuple[tuple[int, int], ...] = ()


# The default profile's Score plugins and weights (pkg/scheduler/apis/config/v1/default_plugins.go). VolumeBinding
# scores only pods whose claims it binds (a VolumeBinding plugin in the profile, issue #27, is weighed here).
DEFAULT_SCORE_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("VolumeBinding", 1),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
)
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"


@dataclass(frozen=True, slots=True)
class ScoringArgs:
    """The scoring half of the scheduler profile (``scheduler.*`` of --config, docs/interfaces.md §6).

    ``percentage_of_nodes_to_score``: 0 is upstream's adaptive default (``numFeasibleNodesToFind``), 100 scores
    every feasible node. ``weights``: the Score plugins that run and their weights. The plugin arguments are
    upstream's: NodeResourcesFitArgs.scoringStrategy, NodeResourcesBalancedAllocationArgs.resources,
    InterPodAffinityArgs and PodTopologySpreadArgs (``System`` defaulting: hostname maxSkew 3 and zone maxSkew 5,
    ScheduleAnyway; ``List``: ``spread_default_constraints``).
    """

    percentage_of_nodes_to_score: int = 0
    weights: tuple[tuple[str, int], ...] = DEFAULT_SCORE_WEIGHTS
    fit_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)
    balanced_resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False
    spread_defaulting: str = SYSTEM_DEFAULTING
    spread_default_constraints: tuple[TopologySpreadConstraint, ...] = ()

    def weight_of(self, plugin: str) -> int:
        """The plugin's weight, 0 when it does not score."""
        return dict(self.weights).get(plugin, 0)


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """DefaultPreemptionArgs plus PreemptGuard's version switches.

    ``pdb_empty_selector_matches_all`` defaults to False: the newest *released* behaviour (an empty
    PDB selector matches nothing, unlabeled pods match no PDB); True follows master after #141785.
    ``pdb_stop_at_first_violation``: newest util.go stops counting a victim at the first PDB that
    goes negative; False decrements every matching PDB like older releases.
    ``preemption_enabled``: the scheduler profile runs DefaultPreemption's PostFilter (``scheduler.preemption``);
    without it a pod that fits nowhere stays Pending and evicts nobody.
    ``gated_nominations_reserve``: a nominated pod that still has scheduling gates reserves room on its node
    (v1.37); False: only ungated ones do (v1.33-v1.36).
    ``pod_level_resources``: a pod's pod-level requests count (v1.34+); False: the containers' (v1.33).
    ``scheduler_names``: the ``schedulerName`` of each profile of the configured kube-scheduler (its informer
    only takes pods whose ``spec.schedulerName`` is one of them: ``responsibleForPod``,
    pkg/scheduler/eventhandlers.go).
    ``release``: the release these follow (``KubernetesRelease.name``); ``for_release`` sets the switches from
    its row, so the predictor reads behaviours, never a version number (docs/preemption.md §12).
    """

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    pdb_empty_selector_matches_all: bool = False
    pdb_stop_at_first_violation: bool = True
    preemption_enabled: bool = True
    # The profile's Score plugins and their arguments (issue #28).
    scoring: ScoringArgs = field(default_factory=ScoringArgs)
    gated_nominations_reserve: bool = True
    pod_level_resources: bool = True
    release: str = DEFAULT_RELEASE.name
    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)

    @classmethod
    def for_release(cls, release: KubernetesRelease, *, min_candidate_nodes_percentage: int = 10,
                    min_candidate_nodes_absolute: int = 100, preemption_enabled: bool = True,
                    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)) -> PreemptionArgs:
        """DefaultPreemptionArgs with ``release``'s semantics."""
        return cls(min_candidate_nodes_percentage=min_candidate_nodes_percentage, scheduler_names=scheduler_names,
                   min_candidate_nodes_absolute=min_candidate_nodes_absolute,
                   pdb_stop_at_first_violation=release.pdb_stop_at_first_violation,
                   preemption_enabled=preemption_enabled,
                   gated_nominations_reserve=release.gated_nominations_reserve,
                   pod_level_resources=release.pod_level_resources, release=release.name)

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


@dataclass(frozen=True, slots=True)
class NodeScore:
    """One scored node: its total and each Score plugin's share (the normalised score times the plugin's weight)."""

    node: str
    total: int
    scores: tuple[tuple[str, int], ...]


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
    # Fits (issue #28): how the node was chosen (``schedule_one.Placement.how``: nominated, only, scored, sampled,
    # unscored), how many feasible nodes were scored, and the best of them with each Score plugin's share.
    placement: str = ""
    scored_nodes: int = 0
    top_nodes: tuple[NodeScore, ...] = ()
    # Earlier pods of the same simulation whose node the scheduler may choose otherwise (their placement was
    # sampled): this result assumes each landed where it was predicted.
    depends_on: tuple[str, ...] = ()
    # The victims on each tied node (``tied_nodes``, ``node`` included), most important first: upstream picks one
    # of them at random and evicts that node's victims. The dry run's own tuples (no copy on the admission path).
    tied_victims: tuple[tuple[str, tuple[Pod, ...]], ...] = ()
