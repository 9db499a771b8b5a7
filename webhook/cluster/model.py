"""The slim, typed domain model shared by admission, quota and the preemption predictor.

Objects are read once from API dicts (``webhook.cluster.reader``) into these frozen dataclasses:
integers for millicores and bytes, tuples for lists, nothing the hot path does not need.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Union

from webhook.cluster.quantity import Quantity

if TYPE_CHECKING:  # the storage and device model (issue #27) builds on this module's types
    from webhook.cluster.devices import DeviceObject, PodClaims
    from webhook.cluster.volumes import PodVolumes, VolumeObject

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)


class FrozenMap(dict[str, Any]):
    """A read-only, hashable dict for labels and resource maps (usable as a dataclass default)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def _readonly(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("FrozenMap is read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly


EMPTY_LABELS: Mapping[str, str] = FrozenMap()
EMPTY_SCALARS: Mapping[str, int] = FrozenMap()
EMPTY_QUANTITIES: Mapping[str, Quantity] = FrozenMap()

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


@dataclass(frozen=True, slots=True)
class Resources:
    """Requests or allocatable: cpu in millicores, memory and ephemeral-storage in bytes."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalar: Mapping[str, int] = EMPTY_SCALARS

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or any(self.scalar.values()))


NO_RESOURCES = Resources()


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist (| Gt | Lt for node selectors)
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector. ``None`` where a selector is optional means "nil" (matches nothing)."""

    match_labels: Mapping[str, str] = EMPTY_LABELS
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()
    match_fields: tuple[LabelSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    """A preferred node-affinity term: ``weight`` counts toward NodeAffinity's score where ``preference`` matches."""

    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    """A preferred pod (anti-)affinity term: ``weight`` counts toward InterPodAffinity's score."""

    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" matches every effect


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class HostPort:
    host_ip: str
    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    description: str = ""


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str] = EMPTY_LABELS
    terminating: bool = False  # status.phase Terminating (or a deletionTimestamp): no new content is admitted


def labels_of_namespace(namespaces: Mapping[str, Namespace], name: str) -> Mapping[str, str]:
    """The labels of the namespace ``name``; none for a namespace the cluster does not (yet) hold."""
    found = namespaces.get(name)
    return found.labels if found is not None else EMPTY_LABELS


@dataclass(frozen=True, slots=True)
class NodeImage:
    """One entry of a node's ``status.images``: the image's names and its size (ImageLocality scores them).

    The reader shares equal entries (``webhook.cluster.sharing``), so nodes that pulled the same image hold one
    instance: 5,000 nodes of 50 images each keep a tuple of pointers apiece, not 250,000 objects.
    """

    names: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str] = EMPTY_LABELS
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: Resources = NO_RESOURCES
    images: tuple[NodeImage, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """One container's resources as the API defaulted them, in exact quantities (quota messages print them)."""

    name: str
    # Limits stand in for absent requests: pkg/apis/core/v1/defaults.go (SetDefaults_Pod).
    requests: Mapping[str, Quantity]
    limits: Mapping[str, Quantity]
    sidecar: bool  # an init container with restartPolicy: Always


@dataclass(frozen=True, slots=True)
class PodResourceSpec:
    """The resource fields of a pod spec (``webhook.cluster.resources`` sums them)."""

    containers: tuple[ContainerResources, ...] = ()
    init_containers: tuple[ContainerResources, ...] = ()
    pod_requests: Mapping[str, Quantity] = EMPTY_QUANTITIES  # spec.resources.requests
    pod_limits: Mapping[str, Quantity] = EMPTY_QUANTITIES  # spec.resources.limits
    overhead: Mapping[str, Quantity] = EMPTY_QUANTITIES


@dataclass(frozen=True, slots=True)
class ContainerStatusResources:
    """What a running pod's status says of one container's resources (in-place resize, issue #26)."""

    name: str
    allocated: Mapping[str, Quantity] | None = None  # allocatedResources (None when absent)
    actuated_requests: Mapping[str, Quantity] | None = None  # resources.requests (None when absent)


@dataclass(frozen=True, slots=True)
class PodResourceStatus:
    """The status half of component-helpers ``PodRequests`` with ``UseStatusResources``: the container statuses
    (``containerStatuses`` then ``initContainerStatuses``, the order ``findContainerStatus`` searches), the
    pod-level ``status.allocatedResources`` and ``status.resources.requests``, and whether the pod's resize is
    ``Infeasible`` (condition PodResizePending)."""

    containers: tuple[ContainerStatusResources, ...] = ()
    allocated: Mapping[str, Quantity] | None = None
    has_resources: bool = False  # status.resources is set
    actuated_requests: Mapping[str, Quantity] | None = None
    resize_infeasible: bool = False


@dataclass(frozen=True, slots=True)
class QuotaFacts:
    """The rest of what ResourceQuota admission reads of a pod (``webhook.priority.resource_quota``)."""

    resources: PodResourceSpec
    qos_class: str = ""  # status.qosClass as given ("" = compute it)
    active_deadline_seconds: int | None = None
    # Any required or preferred (anti-)affinity term with namespaces or a namespaceSelector.
    cross_namespace_pod_affinity: bool = False
    deletion_timestamp_ns: int | None = None
    deletion_grace_period_seconds: int | None = None


NO_QUOTA_FACTS = QuotaFacts(PodResourceSpec())


@dataclass(frozen=True, slots=True)
class PredictionTrace:
    """What the live observer (``webhook.observe``) reads of a pod carrying ``PREDICTION_ID_ANNOTATION``.

    Only such pods have one, and only until they are bound (``spec.nodeName``): the observer sees a binding as
    the change from the pending pod the cluster state holds. So the informer cache's bound pods (150,000 of
    them in bench/cluster_state.py) pay a single ``None`` field.
    """

    prediction_id: str
    # Condition PodScheduled=False with reason Unschedulable: the scheduler's failed attempt, with or without a
    # nomination (pkg/scheduler/schedule_one.go, handleSchedulingFailure).
    unschedulable: bool = False
    # That condition's message, e.g. "... preemption: found a potential placement for pod on node n1,
    # preempting 2 victims" (the PostFilter status of pkg/scheduler/framework/preemption/preemption.go).
    scheduling_message: str = ""
    # What the admission patch wrote beside the id (``preemptguard.io/prediction``, ``/guardrail-decision``), as
    # the preemption attribution tells a victim's tenant (webhook/observe/attribution.py): the predicted outcome,
    # node and victim count, and the guardrail decision ("warned: maxVictims"). "" / 0 when absent or unreadable.
    predicted_outcome: str = ""
    predicted_node: str = ""
    predicted_victims: int = 0
    guardrail_decision: str = ""


# The schedulerName of kube-scheduler's default profile, and of a pod that names none (SetDefaults_PodSpec).
DEFAULT_SCHEDULER_NAME = "default-scheduler"


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    namespace: str
    uid: str = ""
    labels: Mapping[str, str] = EMPTY_LABELS
    node_name: str = ""
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    phase: str = ""
    # status.startTime in nanoseconds since the epoch; None = not started ("now" for comparisons).
    start_time_ns: int | None = None
    deleting: bool = False
    # First DisruptionTarget condition is True with reason PreemptionByScheduler.
    preempted_by_scheduler: bool = False
    nominated_node_name: str = ""
    requests: Resources = NO_RESOURCES
    host_ports: tuple[HostPort, ...] = ()
    node_selector: Mapping[str, str] = EMPTY_LABELS
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    termination_grace_period_seconds: int | None = None
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    # spec.schedulingGates (names): the scheduler leaves the pod alone until they are all removed (issue #26).
    scheduling_gates: tuple[str, ...] = ()
    # spec.runtimeClassName: what the RuntimeClass admission plugin reads (webhook.priority.runtimeclass).
    runtime_class_name: str = ""
    # Scheduling features this model does not simulate (named in prediction messages).
    unmodeled: tuple[str, ...] = ()
    quota: QuotaFacts = NO_QUOTA_FACTS
    trace: PredictionTrace | None = None
    # What the Score plugins read (issue #28). Preferred terms as the API server stores them (matchLabelKeys
    # merged); equal terms are kept once with their weights summed (a sum of weights is all a score reads).
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    # The scheduler's non-zero requests (milli cpu, memory bytes): a container without a cpu or memory request
    # counts 100m / 200 MiB (pkg/scheduler/framework/types.go, PodInfo.CalculateResource); None when they equal
    # ``requests`` (every container requests both), so the cluster's pods mostly keep None.
    non_zero_requests: tuple[int, int] | None = None
    # Only the pod under prediction: its containers' images, normalised as ImageLocality reads them (init
    # containers, containers, then image volumes; repeats kept, each counts), and the selector of the
    # ReplicaSet, StatefulSet or ReplicationController that owns it (PodTopologySpread's system default
    # constraints spread a pod only when such a selector, upstream's DefaultSelector, exists).
    images: tuple[str, ...] = ()
    controller_selector: LabelSelector | None = None
    # What the pod asks of storage and devices (None for most pods): its claims' volumes, inline disks, and its
    # ResourceClaims and extended resources DRA may back (webhook.cluster.volumes, webhook.cluster.devices).
    volumes: PodVolumes | None = None
    claims: PodClaims | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def effective_priority(self) -> int:
        """``corev1helpers.PodPriority``: an unset priority counts as 0."""
        return self.priority if self.priority is not None else 0

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def non_zero(self) -> tuple[int, int]:
        """(milli cpu, memory) as the scheduler's scoring sums them (``non_zero_requests``)."""
        found = self.non_zero_requests
        return (self.requests.milli_cpu, self.requests.memory) if found is None else found

    @property
    def has_pod_affinity(self) -> bool:
        """Any required or preferred pod affinity or anti-affinity term (upstream ``PodsWithAffinity``)."""
        return bool(self.pod_affinity or self.pod_anti_affinity or self.preferred_pod_affinity
                    or self.preferred_pod_anti_affinity)

    @property
    def scheduling_gated(self) -> bool:
        """spec.schedulingGates is not empty: the scheduler does not try the pod (its nomination may still count)."""
        return bool(self.scheduling_gates)


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    name: str
    namespace: str
    selector: LabelSelector | None
    disruptions_allowed: int = 0
    disrupted_pods: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ScopedResourceSelectorRequirement:
    scope_name: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    name: str
    namespace: str
    hard: Mapping[str, Quantity] = field(default_factory=dict)
    used: Mapping[str, Quantity] = field(default_factory=dict)
    scopes: tuple[str, ...] = ()
    scope_selector: tuple[ScopedResourceSelectorRequirement, ...] = ()


# ---- what the API server's admission chain reads before the scheduler sees a pod (issue #26) ---------------

LIMIT_TYPE_CONTAINER = "Container"
LIMIT_TYPE_POD = "Pod"


@dataclass(frozen=True, slots=True)
class LimitRangeItem:
    """One ``spec.limits[]`` entry as the API server stores it (pkg/apis/core/v1/defaults.go
    ``SetDefaults_LimitRangeItem`` applied: a Container item's ``default`` from ``max``, its ``defaultRequest`` from
    ``default``, then from ``min``)."""

    type: str  # Container | Pod | PersistentVolumeClaim
    max: Mapping[str, Quantity] = EMPTY_QUANTITIES
    min: Mapping[str, Quantity] = EMPTY_QUANTITIES
    default: Mapping[str, Quantity] = EMPTY_QUANTITIES
    default_request: Mapping[str, Quantity] = EMPTY_QUANTITIES
    max_limit_request_ratio: Mapping[str, Quantity] = EMPTY_QUANTITIES


@dataclass(frozen=True, slots=True)
class LimitRange:
    name: str
    namespace: str
    limits: tuple[LimitRangeItem, ...] = ()


@dataclass(frozen=True, slots=True)
class RuntimeClass:
    """node.k8s.io/v1 RuntimeClass: what the RuntimeClass admission plugin merges into a pod."""

    name: str
    handler: str = ""
    # overhead.podFixed; None when the class sets no ``overhead`` (an ``overhead`` without podFixed is empty).
    overhead: Mapping[str, Quantity] | None = None
    # scheduling.nodeSelector and scheduling.tolerations; ``scheduling`` None when the class sets none.
    node_selector: Mapping[str, str] = EMPTY_LABELS
    tolerations: tuple[Toleration, ...] = ()
    has_scheduling: bool = False


ClusterObject = Union[
    PriorityClass, Namespace, Node, Pod, PodDisruptionBudget, ResourceQuota, LimitRange, RuntimeClass,
    "VolumeObject", "DeviceObject"]
