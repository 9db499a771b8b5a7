"""Label selector matching with upstream semantics (apimachinery ``labels.Selector``).

Shared by the predictor (affinity, spread, PDBs) and the quota (namespace selectors).
"""

from __future__ import annotations

import re
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


_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def _label_key_error(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"invalid label key {key!r}: bad prefix"
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return f"invalid label key {key!r}"
    return None


def _label_value_error(value: str) -> str | None:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        return f"invalid label value {value!r}"
    return None


def label_selector_error(selector: LabelSelector) -> str | None:
    """Why ``metav1.LabelSelectorAsSelector`` refuses the selector, or None when it converts.

    In/NotIn need values, Exists/DoesNotExist take none, other operators are invalid, and keys and
    values must be valid label keys and values.
    """
    for key, value in selector.match_labels.items():
        error = _label_key_error(key) or _label_value_error(value)
        if error:
            return error
    for req in selector.match_expressions:
        if req.operator not in _SELECTOR_OPERATORS:
            return f"{req.operator!r} is not a valid label selector operator"
        if req.operator in ("In", "NotIn") and not req.values:
            return f"values: for 'in', 'notin' operators, values set can't be empty (key {req.key!r})"
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            return f"values: values set must be empty for exists and does not exist (key {req.key!r})"
        error = _label_key_error(req.key) or next(filter(None, map(_label_value_error, req.values)), None)
        if error:
            return error
    return None


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector: nil matches nothing, empty matches everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(requirement_matches(req, labels) for req in selector.match_expressions)
