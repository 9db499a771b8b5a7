"""The metric names a PromQL expression reads (enough PromQL for alert rules and dashboards, not a parser)."""

from __future__ import annotations

import re

# Functions and aggregations the shipped rules and dashboard may call; anything else called is an error.
FUNCTIONS = {
    "abs", "absent", "avg", "avg_over_time", "ceil", "clamp_min", "count", "count_over_time", "delta", "deriv",
    "floor", "histogram_quantile", "increase", "irate", "label_replace", "max", "max_over_time", "min",
    "min_over_time", "rate", "round", "scalar", "sort", "sort_desc", "sum", "sum_over_time", "time", "topk",
    "bottomk", "vector",
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
_IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")


def metric_names(expression: str) -> set[str]:
    """Every metric the expression selects; raises ValueError on a call of an unknown function."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expression)  # string literals
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range selectors
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    names = set()
    for name, call in _IDENTIFIER.findall(text):
        if call:
            if name not in FUNCTIONS:
                raise ValueError(f"{expression!r} calls {name}(), which is not a PromQL function this check knows")
        elif name not in KEYWORDS and not re.fullmatch(r"[0-9eE]+", name):
            names.add(name)
    return names
