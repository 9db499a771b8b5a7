"""JSON schemas for the Prometheus Operator objects PreemptGuard ships (``monitoring.coreos.com/v1``).

Written from the prometheus-operator API reference (``ServiceMonitorSpec``, ``Endpoint``, ``PrometheusRuleSpec``,
``RuleGroup``, ``Rule``); only the fields PreemptGuard may use are allowed, so a typo fails like strict validation.
"""

from __future__ import annotations

from typing import Any

from object_schema import STRING_MAP, resource

# Prometheus durations: 30s, 5m, 1h30m, ...
_DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                                          r"(([0-9]+)s)?(([0-9]+)ms)?)$"}
_LABEL_SELECTOR: dict[str, Any] = {
    "type": "object",
    "properties": {
        "matchLabels": STRING_MAP,
        "matchExpressions": {"type": "array", "items": {
            "type": "object", "required": ["key", "operator"],
            "properties": {"key": {"type": "string"}, "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                           "values": {"type": "array", "items": {"type": "string"}}},
            "additionalProperties": False}},
    },
    "additionalProperties": False,
}
_ENDPOINT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "port": {"type": "string"},
        "targetPort": {"type": ["string", "integer"]},
        "path": {"type": "string"},
        "scheme": {"enum": ["http", "https"]},
        "interval": _DURATION,
        "scrapeTimeout": _DURATION,
        "honorLabels": {"type": "boolean"},
        "relabelings": {"type": "array", "items": {"type": "object"}},
        "metricRelabelings": {"type": "array", "items": {"type": "object"}},
    },
    "additionalProperties": False,
}

SERVICE_MONITOR = resource("monitoring.coreos.com/v1", "ServiceMonitor", {
    "type": "object",
    "required": ["selector", "endpoints"],
    "properties": {
        "jobLabel": {"type": "string"},
        "targetLabels": {"type": "array", "items": {"type": "string"}},
        "podTargetLabels": {"type": "array", "items": {"type": "string"}},
        "selector": _LABEL_SELECTOR,
        "namespaceSelector": {"type": "object", "properties": {
            "any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}},
            "additionalProperties": False},
        "endpoints": {"type": "array", "minItems": 1, "items": _ENDPOINT},
        "sampleLimit": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
})

_RULE: dict[str, Any] = {
    "type": "object",
    "required": ["expr"],
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        "record": {"type": "string", "pattern": "^[a-zA-Z_:][a-zA-Z0-9_:]*$"},
        "expr": {"type": ["string", "integer"], "minLength": 1},
        "for": _DURATION,
        "keep_firing_for": _DURATION,
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
    },
    "additionalProperties": False,
}

PROMETHEUS_RULE = resource("monitoring.coreos.com/v1", "PrometheusRule", {
    "type": "object",
    "properties": {
        "groups": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "rules"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "interval": _DURATION,
                "limit": {"type": "integer"},
                "labels": STRING_MAP,
                "rules": {"type": "array", "items": _RULE},
            },
            "additionalProperties": False,
        }},
    },
    "additionalProperties": False,
})

SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
}
