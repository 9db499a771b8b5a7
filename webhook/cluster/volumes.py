"""The storage objects the volume plugins read, in the slim model's style: PersistentVolumes, PersistentVolumeClaims,
StorageClasses, CSINodes and VolumeAttachments, and what a pod asks of them (``PodVolumes``).

Each keeps only what the scheduler's storage plugins read (pkg/scheduler/framework/plugins/{volumebinding,
volumezone,volumerestrictions,nodevolumelimits}), resolved once by ``webhook.cluster.reader_volumes``: a claim's
class as ``GetPersistentVolumeClaimClass`` finds it, a volume's as ``GetPersistentVolumeClass``, quantities exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.cluster.model import EMPTY_LABELS, LabelSelector, LabelSelectorRequirement, NodeSelectorTerm
from webhook.cluster.quantity import Quantity

# The access mode a claim can hold for one pod only (VolumeRestrictions).
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
VOLUME_BINDING_IMMEDIATE = "Immediate"
VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
FILESYSTEM = "Filesystem"
# component-helpers/storage/volume/pv_helpers.go: a class whose volumes are only ever created by hand.
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
CLAIM_LOST = "Lost"
VOLUME_AVAILABLE = "Available"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A PersistentVolume's ``spec.claimRef``: the claim it is bound (or reserved) to."""

    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class InTreeVolume:
    """An in-tree volume source that kube-scheduler translates to its CSI driver (csi-translation-lib): the in-tree
    plugin's name and the CSI volume handle the translation gives the disk."""

    plugin: str  # e.g. kubernetes.io/aws-ebs
    volume_id: str


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    labels: Mapping[str, str] = EMPTY_LABELS
    storage_class: str = ""  # GetPersistentVolumeClass: the beta annotation first, then spec.storageClassName
    capacity: Quantity | None = None  # spec.capacity.storage
    access_modes: tuple[str, ...] = ()
    volume_mode: str = FILESYSTEM
    # spec.nodeAffinity.required's terms; None when the volume has none (it is then usable on every node).
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    claim_ref: ClaimRef | None = None
    phase: str = ""
    deleting: bool = False
    volume_attributes_class: str = ""
    csi_driver: str = ""  # spec.csi.driver
    csi_volume_handle: str = ""
    in_tree: InTreeVolume | None = None


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    name: str
    namespace: str
    uid: str = ""
    storage_class: str = ""  # GetPersistentVolumeClaimClass: the beta annotation first, then spec.storageClassName
    has_class: bool = False  # PersistentVolumeClaimHasClass: either is set (even to "")
    volume_name: str = ""
    bind_completed: bool = False  # annotation pv.kubernetes.io/bind-completed
    selected_node: str | None = None  # annotation volume.kubernetes.io/selected-node
    phase: str = ""
    deleting: bool = False
    access_modes: tuple[str, ...] = ()
    volume_mode: str = FILESYSTEM
    storage_request: Quantity | None = None  # spec.resources.requests.storage
    selector: LabelSelector | None = None
    volume_attributes_class: str = ""
    # The controller owner reference's uid (an ephemeral volume's claim is controlled by its pod).
    controller_uid: str = ""
    controller_kind: str = ""
    controller_name: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def fully_bound(self) -> bool:
        """``isPVCFullyBound``: bound to a volume and the binding completed."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    # None when the class does not say (upstream then refuses to decide: "VolumeBindingMode not set").
    volume_binding_mode: str | None = VOLUME_BINDING_IMMEDIATE
    # allowedTopologies: each term ANDs ``key In values`` requirements; an empty tuple allows every node.
    allowed_topologies: tuple[tuple[LabelSelectorRequirement, ...], ...] = ()
    is_default: bool = False  # annotation storageclass.kubernetes.io/is-default-class: "true"
    creation_ns: int = 0


@dataclass(frozen=True, slots=True)
class CSIDriverLimit:
    """One driver of a CSINode and how many of its volumes the node can attach (None: no limit)."""

    name: str
    allocatable_count: int | None = None


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str  # the node's name
    drivers: tuple[CSIDriverLimit, ...] = ()
    # The annotation storage.alpha.kubernetes.io/migrated-plugins: in-tree plugins served by their CSI driver.
    migrated_plugins: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class VolumeAttachment:
    """A volume attached (or being attached) to a node: counted toward the node's CSI limit even with no pod."""

    name: str
    node_name: str
    attacher: str
    persistent_volume_name: str = ""


@dataclass(frozen=True, slots=True)
class ClaimVolume:
    """A pod volume backed by a claim: ``persistentVolumeClaim`` (the claim named) or ``ephemeral`` (the claim the
    ephemeral volume controller creates from ``template``, named ``<pod>-<volume>``: ``ephemeral.VolumeClaimName``)."""

    volume: str
    claim_name: str = ""  # persistentVolumeClaim.claimName; "" for an ephemeral volume (named after the pod)
    template: PersistentVolumeClaim | None = None  # ephemeral.volumeClaimTemplate (its spec; no name)
    read_only: bool = False

    @property
    def ephemeral(self) -> bool:
        return self.template is not None

    def claim_name_for(self, pod_name: str) -> str:
        return f"{pod_name}-{self.volume}" if self.template is not None else self.claim_name


@dataclass(frozen=True, slots=True)
class InlineDisk:
    """An inline volume VolumeRestrictions checks for conflicts on a node: GCE PD, AWS EBS, iSCSI or Ceph RBD."""

    kind: str  # gcePersistentDisk | awsElasticBlockStore | iscsi | rbd
    identity: str  # pdName; volumeID; iqn; pool/image
    read_only: bool = False
    monitors: frozenset[str] = frozenset()  # rbd only: the Ceph monitors


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What a pod's ``spec.volumes`` ask of the storage plugins (None on a pod without such volumes)."""

    claims: tuple[ClaimVolume, ...] = ()
    disks: tuple[InlineDisk, ...] = ()
    # Inline in-tree volumes kube-scheduler would count toward a CSI limit once translated (the plugin's name).
    in_tree: tuple[InTreeVolume, ...] = ()


VolumeObject = PersistentVolume | PersistentVolumeClaim | StorageClass | CSINode | VolumeAttachment
