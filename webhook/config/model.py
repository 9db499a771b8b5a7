"""The typed ``--config`` document (docs/interfaces.md §6): frozen settings objects and their defaults.

Besides the schema of docs/interfaces.md §6, PreemptGuard adds ``guardrails.denyVictimPriorityAtLeast`` and
``guardrails.exempt.serviceAccounts`` (docs/interfaces.md, "What PreemptGuard adds", §6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from webhook.cluster.model import DEFAULT_SCHEDULER_NAME, LabelSelector, ScopedResourceSelectorRequirement

__all__ = [
    "AUDIT_DETAILS",
    "DEFAULT_CONFIG",
    "DEFAULT_PREVIEWS_PER_MINUTE",
    "DISCLOSURE_MODES",
    "EXISTS_ONLY_SCOPES",
    "GUARDRAIL_MODES",
    "ON_UNPREDICTABLE",
    "QUOTA_SCOPES",
    "SCOPE_BEST_EFFORT",
    "SCOPE_CROSS_NAMESPACE_POD_AFFINITY",
    "SCOPE_NOT_BEST_EFFORT",
    "SCOPE_NOT_TERMINATING",
    "SCOPE_PRIORITY_CLASS",
    "SCOPE_TERMINATING",
    "SCOPE_VOLUME_ATTRIBUTES_CLASS",
    "SCORE_PLUGINS",
    "SCORING_STRATEGY_TYPES",
    "SELECTOR_OPERATORS",
    "UNVERIFIED_DISCLOSURES",
    "AuditDetail",
    "ClassAccessRule",
    "ClassMatch",
    "Config",
    "DisclosureMode",
    "Exemptions",
    "GuardrailMode",
    "GuardrailsConfig",
    "LimitedResource",
    "OnUnpredictable",
    "PredictionConfig",
    "PreemptionSetting",
    "QuotaConfig",
    "SchedulerConfig",
    "ScoringStrategyConfig",
    "UnverifiedDisclosure",
]

GuardrailMode = Literal["off", "warn", "enforce"]
GUARDRAIL_MODES: tuple[GuardrailMode, ...] = ("off", "warn", "enforce")
DisclosureMode = Literal["tenant", "cluster"]
DISCLOSURE_MODES: tuple[DisclosureMode, ...] = ("tenant", "cluster")
AuditDetail = Literal["tenant", "full"]
AUDIT_DETAILS: tuple[AuditDetail, ...] = ("tenant", "full")
# Who is named to a caller nobody authenticated (no --client-ca): nobody ("counts"), or the victims in the
# namespace the review claims ("namespace": a forger claiming it learns those pods' names).
UnverifiedDisclosure = Literal["counts", "namespace"]
UNVERIFIED_DISCLOSURES: tuple[UnverifiedDisclosure, ...] = ("counts", "namespace")
PreemptionSetting = Literal["enabled", "disabled"]
# What a guarded CREATE whose prediction cannot be made gets (docs/interfaces.md §6, guardrails.onUnpredictable).
OnUnpredictable = Literal["deny", "allow"]
ON_UNPREDICTABLE: tuple[OnUnpredictable, ...] = ("deny", "allow")

# Pod scopes of ResourceQuota (core/v1 ResourceQuotaScope); VolumeAttributesClass is the PVC scope.
SCOPE_TERMINATING = "Terminating"
SCOPE_NOT_TERMINATING = "NotTerminating"
SCOPE_BEST_EFFORT = "BestEffort"
SCOPE_NOT_BEST_EFFORT = "NotBestEffort"
SCOPE_PRIORITY_CLASS = "PriorityClass"
SCOPE_CROSS_NAMESPACE_POD_AFFINITY = "CrossNamespacePodAffinity"
SCOPE_VOLUME_ATTRIBUTES_CLASS = "VolumeAttributesClass"
QUOTA_SCOPES = (
    SCOPE_TERMINATING, SCOPE_NOT_TERMINATING, SCOPE_BEST_EFFORT, SCOPE_NOT_BEST_EFFORT,
    SCOPE_PRIORITY_CLASS, SCOPE_CROSS_NAMESPACE_POD_AFFINITY, SCOPE_VOLUME_ATTRIBUTES_CLASS,
)
# Scopes that take no values: upstream ValidateScopedResourceSelectorRequirement allows only Exists.
EXISTS_ONLY_SCOPES = (
    SCOPE_TERMINATING, SCOPE_NOT_TERMINATING, SCOPE_BEST_EFFORT, SCOPE_NOT_BEST_EFFORT,
    SCOPE_CROSS_NAMESPACE_POD_AFFINITY,
)
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


# /preview requests and dry-run admissions each caller may make per minute (0: no limit).
DEFAULT_PREVIEWS_PER_MINUTE = 60


@dataclass(frozen=True, slots=True)
class PredictionConfig:
    budget_milliseconds: int = 250
    # Per caller: a token bucket of this many previews, refilled at this rate (dry-run probing, issue #24).
    previews_per_minute: int = DEFAULT_PREVIEWS_PER_MINUTE


# The default profile's Score plugins (pkg/scheduler/apis/config/v1/default_plugins.go), whose weights
# ``scheduler.scoreWeights`` may change (0 disables one); the predictor holds their default weights.
SCORE_PLUGINS = ("TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread",
                 "InterPodAffinity", "NodeResourcesBalancedAllocation", "ImageLocality")
SCORING_STRATEGY_TYPES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")


@dataclass(frozen=True, slots=True)
class ScoringStrategyConfig:
    """``scheduler.scoringStrategy``: NodeResourcesFitArgs.scoringStrategy (type, resources with weights and, for
    RequestedToCapacityRatio, the shape as (utilization, score) points)."""

    type: str = "LeastAllocated"
    resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
    shape: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Mirror of the cluster's kube-scheduler profile (DefaultPreemptionArgs and the scoring that picks the node)."""

    preemption: PreemptionSetting = "enabled"
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    # The release whose preemption the prediction follows (``KubernetesRelease.name``, e.g. "v1.34"); "" for the
    # default (the newest PreemptGuard knows, or the binaries' for ``verify``).
    kubernetes_version: str = ""
    # percentageOfNodesToScore: 0 is upstream's adaptive default; 100 scores every feasible node.
    percentage_of_nodes_to_score: int = 0
    # Score plugin weights that differ from the default profile's (0: the plugin is disabled).
    score_weights: tuple[tuple[str, int], ...] = ()
    scoring_strategy: ScoringStrategyConfig = ScoringStrategyConfig()
    # InterPodAffinityArgs: the weight of existing pods' required affinity terms in Score, and whether Score
    # ignores existing pods' preferred terms.
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False
    # ``profiles[].schedulerName`` of the cluster's kube-scheduler: a pod naming another is never seen by it.
    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)

    @property
    def preemption_enabled(self) -> bool:
        return self.preemption == "enabled"


@dataclass(frozen=True, slots=True)
class LimitedResource:
    """One ``ResourceQuotaConfiguration.limitedResources`` entry (upstream schema)."""

    resource: str
    api_group: str = ""
    match_contains: tuple[str, ...] = ()
    match_scopes: tuple[ScopedResourceSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class ClassMatch:
    """Selects PriorityClasses by name or by value; a class matching either field matches."""

    names: tuple[str, ...] = ()
    value_at_least: int | None = None

    def matches(self, class_name: str, value: int) -> bool:
        if class_name in self.names:
            return True
        return self.value_at_least is not None and value >= self.value_at_least


@dataclass(frozen=True, slots=True)
class ClassAccessRule:
    """``quota.classes[i]``: which namespaces may use the matched classes (listed OR selected)."""

    match: ClassMatch
    allowed_namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    limited_resources: tuple[LimitedResource, ...] = ()
    classes: tuple[ClassAccessRule, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.limited_resources and not self.classes


@dataclass(frozen=True, slots=True)
class Exemptions:
    namespaces: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    # "<namespace>/<name>", or "<namespace>/*" for every service account of a namespace.
    service_accounts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GuardrailsConfig:
    mode: GuardrailMode = "warn"
    tenant_label: str | None = None
    deny_cross_tenant_preemption: bool = False
    max_victims: int | None = None
    max_pdb_violations: int | None = None
    deny_victim_priority_at_least: int | None = None
    exempt: Exemptions = field(default_factory=Exemptions)
    # docs/interfaces.md §7: who may be named in answers (the requesting pod's tenant, or everyone), and
    # whether audit annotations name every victim (honoured only when callers present client certificates).
    disclosure: DisclosureMode = "tenant"
    audit_detail: AuditDetail = "tenant"
    # Without --client-ca the namespace of a review is only a claim: victims are counted, never named, unless
    # the operator accepts naming those of the pod's own namespace.
    unverified_disclosure: UnverifiedDisclosure = "counts"
    # A CREATE whose prediction cannot be made (over budget, too complex, predictor error, not decided in
    # time): None follows the mode (deny under enforce, allow under warn).
    on_unpredictable: OnUnpredictable | None = None

    def unpredictable_action(self, mode: GuardrailMode) -> OnUnpredictable:
        """``onUnpredictable`` in force under ``mode`` (the namespace's effective mode); ``off`` never denies."""
        if mode == "off":
            return "allow"
        if self.on_unpredictable is not None:
            return self.on_unpredictable
        return "deny" if mode == "enforce" else "allow"


@dataclass(frozen=True, slots=True)
class Config:
    prediction: PredictionConfig = field(default_factory=PredictionConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    quota: QuotaConfig = field(default_factory=QuotaConfig)
    guardrails: GuardrailsConfig = field(default_factory=GuardrailsConfig)
    # Where this configuration came from (a file path, or "<defaults>").
    source: str = "<defaults>"


DEFAULT_CONFIG = Config()
