"""Label selector matching with upstream semantics (apimachinery ``labels.Selector``).

Shared by the predictor (affinity, spread, PDBs) and the quota (namespace selectors).
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.cluster.model import LabelSelector, LabelSelectorRequirement


def requirement_matches(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One label requirement; Gt/Lt compare integers (a non-integer value never matches)."""
    op = req.operator
    present = req.key in labels
    if op == "In":
        return present and labels[req.key] in req.values
    if op == "NotIn":
        return not present or labels[req.key] not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        try:
            have, want = int(labels[req.key]), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector: nil matches nothing, empty matches everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(requirement_matches(req, labels) for req in selector.match_expressions)
