"""Upstream's storage helpers, shared by the volume plugins: staging/src/k8s.io/component-helpers/storage/volume
(``CheckNodeAffinity``, ``FindMatchingVolume``, ``IsVolumeBoundToClaim``, ``CheckAccessModes``), .../storage/ephemeral
(the claim an ephemeral volume becomes), pkg/apis/core/v1/helper (``MatchTopologySelectorTerms``) and
component-helpers/scheduling/corev1 (``MatchNodeSelectorTerms``), written once over the slim model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.cluster.copying import replace_fields
from webhook.cluster.model import LabelSelectorRequirement, NodeSelectorTerm
from webhook.cluster.selectors import label_selector_matches, requirement_matches
from webhook.cluster.volumes import VOLUME_AVAILABLE, PersistentVolume, PersistentVolumeClaim, StorageClass


def node_selector_terms_match(terms: Iterable[NodeSelectorTerm], node_name: str, labels: Mapping[str, str]) -> bool:
    """``MatchNodeSelectorTerms``: any term; a term ANDs its requirements and one with none matches nothing."""
    for term in terms:
        if not term.match_expressions and not term.match_fields:
            continue
        if not all(requirement_matches(req, labels) for req in term.match_expressions):
            continue
        fields = {"metadata.name": node_name}
        if all(req.key == "metadata.name" and requirement_matches(req, fields) for req in term.match_fields):
            return True
    return False


def check_node_affinity(pv: PersistentVolume, node_name: str, labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: a volume without required node affinity fits every node."""
    return pv.node_affinity is None or node_selector_terms_match(pv.node_affinity, node_name, labels)


def match_topology_selector_terms(terms: tuple[tuple[LabelSelectorRequirement, ...], ...],
                                  labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms``: no terms allow every node; an empty term, or a requirement without values,
    selects nothing."""
    if not terms:
        return True
    return any(term and all(req.values and labels.get(req.key) in req.values for req in term) for term in terms)


def is_volume_bound_to_claim(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    ref = pv.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
        return False
    return not ref.uid or ref.uid == claim.uid


def check_access_modes(claim: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """Every access mode the claim asks for is one the volume offers."""
    return all(mode in pv.access_modes for mode in claim.access_modes)


def find_matching_volume(claim: PersistentVolumeClaim, volumes: Iterable[PersistentVolume], node_name: str,
                         labels: Mapping[str, str], excluded: Mapping[str, object]) -> PersistentVolume | None:
    """``FindMatchingVolume`` for a node (delayBinding true, VolumeAttributesClass on): the volume already reserved
    for the claim if it fits the node, else the smallest available volume that satisfies the claim there."""
    smallest: PersistentVolume | None = None
    requested = claim.storage_request.value if claim.storage_request is not None else 0
    for volume in volumes:
        if volume.name in excluded:
            continue
        if volume.claim_ref is not None and not is_volume_bound_to_claim(volume, claim):
            continue
        capacity = volume.capacity.value if volume.capacity is not None else 0
        if capacity < requested:
            continue
        if claim.volume_mode != volume.volume_mode:
            continue
        if claim.volume_attributes_class != volume.volume_attributes_class:
            continue
        if volume.deleting:
            continue
        fits_node = check_node_affinity(volume, node_name, labels)
        if is_volume_bound_to_claim(volume, claim):
            return volume if fits_node else None
        if volume.phase != VOLUME_AVAILABLE:
            continue
        if claim.selector is not None and not label_selector_matches(claim.selector, volume.labels):
            continue
        if volume.storage_class != claim.storage_class:
            continue
        if not fits_node or not check_access_modes(claim, volume):
            continue
        if smallest is None or (smallest.capacity.value if smallest.capacity is not None else 0) > capacity:
            smallest = volume
    return smallest


def default_storage_class(classes: Iterable[StorageClass]) -> StorageClass | None:
    """The class the DefaultStorageClass admission plugin gives a claim without one: of the classes marked default,
    the newest, then the first by name (plugin/pkg/admission/storage/storageclass/setdefault, GetDefaultClass)."""
    defaults = [c for c in classes if c.is_default]
    if not defaults:
        return None
    return sorted(defaults, key=lambda c: (-c.creation_ns, c.name))[0]


def ephemeral_claim(template: PersistentVolumeClaim, name: str, namespace: str, pod_uid: str,
                    default_class: StorageClass | None) -> PersistentVolumeClaim:
    """The claim the ephemeral volume controller creates for a pod's ``ephemeral`` volume (named ``<pod>-<volume>``,
    controlled by the pod), as the API server stores it: without a class, the default class if there is one."""
    claim = replace_fields(template, name=name, namespace=namespace, controller_uid=pod_uid, controller_kind="Pod")
    if not template.has_class and default_class is not None:
        claim = replace_fields(claim, storage_class=default_class.name, has_class=True)
    return claim
