"""Reading a pod's scheduling constraints from its API dict: labels, label and node selectors, affinity terms,
topology spread constraints and tolerations.

Most pods of a workload carry the same labels and tolerations: those are remembered by the raw items
(only inputs the checked reading accepted, so a hit equals a valid input) and equal values are shared.

Constraints are normalised once, here: repeated terms, requirements, values, namespaces, spread constraints and
tolerations are kept once, in their first position (``distinct``). Each list is ANDed or ORed as a whole, so a
repeat changes no answer, and what the predictor evaluates no longer grows with padding (issue #24: 6,000
copies of one anti-affinity term).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

from webhook.cluster.jsonfields import JsonObject, json_int, json_list, json_object, json_str
from webhook.cluster.model import (
    EMPTY_LABELS,
    FrozenMap,
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from webhook.cluster.sharing import BoundedCache, shared
from webhook.errors import InvalidInput

_H = TypeVar("_H", bound=Hashable)


def distinct(items: Iterable[_H]) -> tuple[_H, ...]:
    """``items`` without repeats, each in its first position (one item, the usual case, is not hashed)."""
    found = tuple(items)
    return found if len(found) < 2 else tuple(dict.fromkeys(found))


_labels_by_items: BoundedCache[tuple[tuple[str, str], ...], Mapping[str, str]] = BoundedCache()


def read_labels(value: object, path: str) -> Mapping[str, str]:
    """``checked_labels``, remembered by the raw items."""
    if value is None:
        return EMPTY_LABELS
    if type(value) is not dict or not value:
        return checked_labels(value, path)
    items = tuple(value.items())
    try:
        found = _labels_by_items.get(items)
    except TypeError:  # an unhashable value: the checked path names it
        return checked_labels(value, path)
    if found is None:
        found = _labels_by_items.remember(items, checked_labels(value, path))
    return found


def checked_labels(value: object, path: str) -> Mapping[str, str]:
    raw = json_object(value, path)
    if not raw:
        return EMPTY_LABELS
    result: dict[str, str] = {}
    for key, val in raw.items():
        if not isinstance(key, str):
            raise InvalidInput(f"{path}: keys must be strings")
        if not isinstance(val, str):
            val = json_str(val, f"{path}.{key}")
        result[sys.intern(key)] = sys.intern(val)
    return shared(FrozenMap(result))


def label_selector(value: object, path: str) -> LabelSelector | None:
    if value is None:
        return None
    raw = json_object(value, path)
    expressions = distinct(
        _requirement(json_object(expr, f"{path}.matchExpressions[{i}]"), f"{path}.matchExpressions[{i}]")
        for i, expr in enumerate(json_list(raw.get("matchExpressions"), f"{path}.matchExpressions"))
    )
    return LabelSelector(read_labels(raw.get("matchLabels"), f"{path}.matchLabels"), expressions)


def _requirement(raw: JsonObject, path: str) -> LabelSelectorRequirement:
    values = distinct(json_str(v, f"{path}.values") for v in json_list(raw.get("values"), f"{path}.values"))
    return LabelSelectorRequirement(json_str(raw.get("key"), f"{path}.key"),
                                    json_str(raw.get("operator"), f"{path}.operator"), values)


def node_selector_terms(value: object, path: str) -> tuple[NodeSelectorTerm, ...] | None:
    if value is None:
        return None
    raw = json_object(value, path)
    terms = []
    for i, term in enumerate(json_list(raw.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")):
        terms.append(_node_selector_term(term, f"{path}.nodeSelectorTerms[{i}]"))
    return distinct(terms)


def _node_selector_term(value: object, tpath: str) -> NodeSelectorTerm:
    term = json_object(value, tpath)
    return NodeSelectorTerm(
        distinct(_requirement(json_object(e, tpath), tpath)
                 for e in json_list(term.get("matchExpressions"), f"{tpath}.matchExpressions")),
        distinct(_requirement(json_object(e, tpath), tpath)
                 for e in json_list(term.get("matchFields"), f"{tpath}.matchFields")),
    )


def _weight(raw: JsonObject, path: str) -> int:
    return json_int(raw.get("weight"), f"{path}.weight") or 0


def preferred_node_terms(value: object, path: str) -> tuple[PreferredSchedulingTerm, ...]:
    """Preferred node-affinity terms. A term of weight 0 or without requirements is dropped, as
    ``nodeaffinity.NewPreferredSchedulingTerms`` drops it; equal terms are kept once, their weights summed."""
    if value is None:
        return ()
    weights: dict[NodeSelectorTerm, int] = {}
    for i, raw in enumerate(json_list(value, path)):
        tpath = f"{path}[{i}]"
        raw = json_object(raw, tpath)
        weight = _weight(raw, tpath)
        term = _node_selector_term(raw.get("preference"), f"{tpath}.preference")
        if weight and (term.match_expressions or term.match_fields):
            weights[term] = weights.get(term, 0) + weight
    return tuple(PreferredSchedulingTerm(weight, term) for term, weight in weights.items())


def weighted_affinity_terms(value: object, path: str, labels: Mapping[str, str] = EMPTY_LABELS,
                            ) -> tuple[WeightedPodAffinityTerm, ...]:
    """Preferred pod (anti-)affinity terms (``matchLabelKeys`` merged as for required ones); a term of weight 0
    adds nothing to a score and is dropped; equal terms are kept once, their weights summed."""
    if value is None:
        return ()
    weights: dict[PodAffinityTerm, int] = {}
    for i, raw in enumerate(json_list(value, path)):
        tpath = f"{path}[{i}]"
        raw = json_object(raw, tpath)
        weight = _weight(raw, tpath)
        term = _affinity_term(raw.get("podAffinityTerm"), f"{tpath}.podAffinityTerm", labels)
        if weight:
            weights[term] = weights.get(term, 0) + weight
    return tuple(WeightedPodAffinityTerm(weight, term) for term, weight in weights.items())


def affinity_terms(value: object, path: str, labels: Mapping[str, str] = EMPTY_LABELS) -> tuple[PodAffinityTerm, ...]:
    """Required pod (anti-)affinity terms, with ``matchLabelKeys``/``mismatchLabelKeys`` merged into the selector
    from the pod's own ``labels`` as the API server does on create (``key In (value)`` / ``key NotIn (value)``):
    pkg/registry/core/pod/strategy.go (applyMatchLabelKeysAndMismatchLabelKeys). Admission webhooks see a pod
    before that merge; a stored pod has it already, and merging again adds an identical requirement."""
    if value is None:
        return ()
    return distinct(_affinity_term(term, f"{path}[{i}]", labels) for i, term in enumerate(json_list(value, path)))


def _affinity_term(value: object, tpath: str, labels: Mapping[str, str]) -> PodAffinityTerm:
    term = json_object(value, tpath)
    namespace_selector = term.get("namespaceSelector")
    selector = label_selector(term.get("labelSelector"), f"{tpath}.labelSelector")
    match_keys = [json_str(k, f"{tpath}.matchLabelKeys") for k in json_list(term.get("matchLabelKeys"), tpath)]
    mismatch_keys = [json_str(k, f"{tpath}.mismatchLabelKeys")
                     for k in json_list(term.get("mismatchLabelKeys"), tpath)]
    if selector is not None and (match_keys or mismatch_keys):
        merged = tuple(LabelSelectorRequirement(key, operator, (labels[key],))
                       for keys, operator in ((match_keys, "In"), (mismatch_keys, "NotIn"))
                       for key in keys if key in labels)
        if merged:
            selector = LabelSelector(selector.match_labels, distinct(selector.match_expressions + merged))
    return PodAffinityTerm(
        label_selector=selector,
        topology_key=json_str(term.get("topologyKey"), f"{tpath}.topologyKey"),
        namespaces=distinct(json_str(n, f"{tpath}.namespaces") for n in json_list(term.get("namespaces"), tpath)),
        namespace_selector=label_selector(namespace_selector, f"{tpath}.namespaceSelector"),
    )


def spread_constraints(value: object, path: str) -> tuple[TopologySpreadConstraint, ...]:
    if value is None:
        return ()
    constraints = []
    for i, raw in enumerate(json_list(value, path)):
        cpath = f"{path}[{i}]"
        raw = json_object(raw, cpath)
        constraints.append(TopologySpreadConstraint(
            max_skew=json_int(raw.get("maxSkew"), f"{cpath}.maxSkew") or 1,
            topology_key=json_str(raw.get("topologyKey"), f"{cpath}.topologyKey"),
            when_unsatisfiable=json_str(raw.get("whenUnsatisfiable"), f"{cpath}.whenUnsatisfiable", "DoNotSchedule"),
            label_selector=label_selector(raw.get("labelSelector"), f"{cpath}.labelSelector"),
            min_domains=json_int(raw.get("minDomains"), f"{cpath}.minDomains"),
            node_affinity_policy=json_str(raw.get("nodeAffinityPolicy"), f"{cpath}.nodeAffinityPolicy", "Honor"),
            node_taints_policy=json_str(raw.get("nodeTaintsPolicy"), f"{cpath}.nodeTaintsPolicy", "Ignore"),
            match_label_keys=tuple(json_str(k, cpath) for k in json_list(raw.get("matchLabelKeys"), cpath)),
        ))
    return distinct(constraints)


_tolerations_by_items: BoundedCache[tuple[tuple[tuple[str, object], ...], ...], tuple[Toleration, ...]] = (
    BoundedCache())


def read_tolerations(value: object, path: str) -> tuple[Toleration, ...]:
    """``checked_tolerations``, remembered by the raw items."""
    if value is None:
        return ()
    if type(value) is not list:
        return checked_tolerations(value, path)
    # Most pods carry the same default tolerations (not-ready and unreachable, NoExecute for 300 s).
    items = tuple([tuple(raw.items()) for raw in value if type(raw) is dict])
    if len(items) != len(value):
        return checked_tolerations(value, path)
    try:
        found = _tolerations_by_items.get(items)
    except TypeError:  # an unhashable value: the checked path names it if it matters
        return checked_tolerations(value, path)
    if found is None:
        found = _tolerations_by_items.remember(items, checked_tolerations(value, path))
    return found


def checked_tolerations(value: object, path: str) -> tuple[Toleration, ...]:
    result = []
    for i, raw in enumerate(json_list(value, path)):
        tpath = f"{path}[{i}]"
        raw = json_object(raw, tpath)
        result.append(Toleration(
            key=json_str(raw.get("key"), f"{tpath}.key"),
            operator=json_str(raw.get("operator"), f"{tpath}.operator", "Equal") or "Equal",
            value=json_str(raw.get("value"), f"{tpath}.value"),
            effect=json_str(raw.get("effect"), f"{tpath}.effect"),
        ))
    return shared(distinct(result)) if result else ()
