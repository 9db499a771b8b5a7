"""Reading the ``--config`` file (docs/interfaces.md §6) into a ``Config``.

``parse_config`` checks every key: an unknown key or a wrong type raises ``ConfigError`` naming the key
path, e.g. ``unknown key guardrails.maxVictim`` or ``guardrails.maxVictims: expected an integer, got str``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml

from webhook.cluster.model import (
    DEFAULT_SCHEDULER_NAME,
    EMPTY_LABELS,
    FrozenMap,
    LabelSelector,
    LabelSelectorRequirement,
    ScopedResourceSelectorRequirement,
)
from webhook.cluster.release import parse_release
from webhook.config.model import (
    AUDIT_DETAILS,
    DEFAULT_CONFIG,
    DEFAULT_PREVIEWS_PER_MINUTE,
    DISCLOSURE_MODES,
    EXISTS_ONLY_SCOPES,
    GUARDRAIL_MODES,
    ON_UNPREDICTABLE,
    QUOTA_SCOPES,
    SCORE_PLUGINS,
    SCORING_STRATEGY_TYPES,
    SELECTOR_OPERATORS,
    UNVERIFIED_DISCLOSURES,
    AuditDetail,
    ClassAccessRule,
    ClassMatch,
    Config,
    DisclosureMode,
    Exemptions,
    GuardrailMode,
    GuardrailsConfig,
    LimitedResource,
    OnUnpredictable,
    PredictionConfig,
    PreemptionSetting,
    QuotaConfig,
    SchedulerConfig,
    ScoringStrategyConfig,
    UnverifiedDisclosure,
)
from webhook.errors import ConfigError

# --- strict readers ---------------------------------------------------------------------------------

_T = TypeVar("_T")

_TYPE_NAMES = {bool: "a boolean", int: "an integer", str: "a string", list: "a list", dict: "a mapping"}


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


class _Reader:
    """Reads one YAML mapping, rejecting unknown keys and wrong types with the full key path."""

    def __init__(self, data: object, path: str, source: str) -> None:
        self.path = path
        self.source = source
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise self.error(path or "<root>", f"expected a mapping, got {_type_name(data)}")
        for key, value in data.items():
            # A key without a value is what a cut-off file leaves (``guardrails:`` and nothing after it): read
            # as the defaults it would silently turn enforce into warn, so it is refused.
            if value is None:
                raise self.error(self.key(str(key)), "has no value (write the value, or leave the key out)")
        self.data: Mapping[Any, Any] = data

    def error(self, key_path: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {key_path}: {message}")

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def check_keys(self, allowed: Iterable[str]) -> None:
        allowed = set(allowed)
        for key in self.data:
            if key not in allowed:
                raise ConfigError(f"{self.source}: unknown key {self.key(str(key))}")

    def has(self, name: str) -> bool:
        return name in self.data

    def child(self, name: str) -> _Reader:
        return _Reader(self.data.get(name), self.key(name), self.source)

    def typed(self, name: str, kind: type[_T], default: _T) -> _T:
        value = self.data.get(name)
        if value is None:
            return default
        if kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        # bool is an int subclass in Python; YAML `true` is not an integer here.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            expected = _TYPE_NAMES.get(kind, kind.__name__)
            raise self.error(self.key(name), f"expected {expected}, got {_type_name(value)}")
        return value

    def optional_int(self, name: str, minimum: int | None = None) -> int | None:
        if self.data.get(name) is None:
            return None
        value = self.typed(name, int, 0)
        if minimum is not None and value < minimum:
            raise self.error(self.key(name), f"must be at least {minimum}, got {value}")
        return value

    def int_in_range(self, name: str, default: int, minimum: int, maximum: int | None = None) -> int:
        value = self.typed(name, int, default)
        if value < minimum or (maximum is not None and value > maximum):
            bounds = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            raise self.error(self.key(name), f"must be {bounds}, got {value}")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = self.typed(name, str, default)
        if value not in choices:
            allowed = ", ".join(choices)
            raise self.error(self.key(name), f"must be one of {allowed}, got {value!r}")
        return value

    def items(self, name: str) -> list[tuple[str, object]]:
        """The elements of a list with their key paths (``name[i]``)."""
        values = self.typed(name, list, [])
        return [(f"{self.key(name)}[{i}]", item) for i, item in enumerate(values)]

    def strings(self, name: str) -> tuple[str, ...]:
        result = []
        for path, item in self.items(name):
            if not isinstance(item, str):
                raise self.error(path, f"expected a string, got {_type_name(item)}")
            result.append(item)
        return tuple(result)


# --- sections ---------------------------------------------------------------------------------------

def _prediction(reader: _Reader) -> PredictionConfig:
    reader.check_keys(["budgetMilliseconds", "previewsPerMinute"])
    return PredictionConfig(reader.int_in_range("budgetMilliseconds", 250, 1),
                            reader.int_in_range("previewsPerMinute", DEFAULT_PREVIEWS_PER_MINUTE, 0))


def _score_weights(reader: _Reader) -> tuple[tuple[str, int], ...]:
    """``scheduler.scoreWeights``: {plugin: weight}; upstream refuses a Score plugin weight outside 1..100
    (ValidateKubeSchedulerConfiguration); 0 here disables the plugin (the profile's ``score.disabled``)."""
    for name in reader.data:
        if name not in SCORE_PLUGINS:
            raise reader.error(reader.key(str(name)),
                               f"not a Score plugin of the default profile; known: {', '.join(SCORE_PLUGINS)}")
    return tuple((name, reader.int_in_range(name, 0, 0, 100)) for name in reader.data)


def _scoring_strategy(reader: _Reader) -> ScoringStrategyConfig:
    """``scheduler.scoringStrategy``: NodeResourcesFitArgs.scoringStrategy, validated as upstream's
    ValidateNodeResourcesFitArgs does (resource weights 1..100, shape utilization 0..100 ascending, score 0..10)."""
    if not reader.data:
        return ScoringStrategyConfig()
    reader.check_keys(["type", "resources", "requestedToCapacityRatio"])
    kind = reader.choice("type", SCORING_STRATEGY_TYPES, "LeastAllocated")
    resources = []
    for path, item in reader.items("resources"):
        entry = _Reader(item, path, reader.source)
        entry.check_keys(["name", "weight"])
        name = entry.typed("name", str, "")
        if not name:
            raise entry.error(entry.key("name"), "Required value")
        resources.append((name, entry.int_in_range("weight", 1, 1, 100)))
    shape: list[tuple[int, int]] = []
    ratio = reader.child("requestedToCapacityRatio")
    if ratio.data:
        ratio.check_keys(["shape"])
        for path, item in ratio.items("shape"):
            point = _Reader(item, path, reader.source)
            point.check_keys(["utilization", "score"])
            utilization = point.int_in_range("utilization", 0, 0, 100)
            if shape and utilization <= shape[-1][0]:
                raise point.error(point.key("utilization"), "Invalid value: utilization values must be sorted"
                                  " in increasing order")
            shape.append((utilization, point.int_in_range("score", 0, 0, 10)))
    if kind == "RequestedToCapacityRatio" and not shape:
        raise reader.error(reader.key("requestedToCapacityRatio"), "Required value: shape for RequestedToCapacityRatio")
    return ScoringStrategyConfig(kind, tuple(resources) or ScoringStrategyConfig().resources, tuple(shape))


def _inter_pod_affinity(reader: _Reader) -> tuple[int, bool]:
    """``scheduler.interPodAffinity``: InterPodAffinityArgs (hardPodAffinityWeight 0..100, upstream's
    ValidateInterPodAffinityArgs; ignorePreferredTermsOfExistingPods)."""
    reader.check_keys(["hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"])
    return (reader.int_in_range("hardPodAffinityWeight", 1, 0, 100),
            reader.typed("ignorePreferredTermsOfExistingPods", bool, False))


def _scheduler(reader: _Reader) -> SchedulerConfig:
    reader.check_keys(["preemption", "minCandidateNodesPercentage", "minCandidateNodesAbsolute", "kubernetesVersion",
                       "percentageOfNodesToScore", "scoreWeights", "scoringStrategy", "interPodAffinity",
                       "schedulerNames"])
    preemption = cast(PreemptionSetting, reader.choice("preemption", ("enabled", "disabled"), "enabled"))
    percentage = reader.int_in_range("minCandidateNodesPercentage", 10, 0, 100)
    absolute = reader.int_in_range("minCandidateNodesAbsolute", 100, 0)
    # Upstream ValidateDefaultPreemptionArgs refuses both at zero.
    if percentage == 0 and absolute == 0:
        raise reader.error(reader.key("minCandidateNodesAbsolute"),
                           "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero")
    version = reader.typed("kubernetesVersion", str, "")
    if version:
        try:
            version = parse_release(version).name
        except ConfigError as exc:
            raise reader.error(reader.key("kubernetesVersion"), str(exc)) from None
    names = reader.strings("schedulerNames") if reader.has("schedulerNames") else (DEFAULT_SCHEDULER_NAME,)
    # Upstream ValidateKubeSchedulerConfiguration: each profile's schedulerName is required and unique.
    for i, name in enumerate(names):
        if not name:
            raise reader.error(f"{reader.key('schedulerNames')}[{i}]", "Required value")
        if name in names[:i]:
            raise reader.error(f"{reader.key('schedulerNames')}[{i}]", f"Duplicate value: {name!r}")
    if not names:
        raise reader.error(reader.key("schedulerNames"), "Required value: at least one profile")
    return SchedulerConfig(preemption, percentage, absolute, version,
                           reader.int_in_range("percentageOfNodesToScore", 0, 0, 100),
                           _score_weights(reader.child("scoreWeights")),
                           _scoring_strategy(reader.child("scoringStrategy")), *_inter_pod_affinity(
                               reader.child("interPodAffinity")), scheduler_names=names)


def _scope_requirement(reader: _Reader) -> ScopedResourceSelectorRequirement:
    """Upstream ValidateScopedResourceSelectorRequirement rules, with PreemptGuard's key paths."""
    reader.check_keys(["scopeName", "operator", "values"])
    scope = reader.typed("scopeName", str, "")
    if not scope:
        raise reader.error(reader.key("scopeName"), "Required value")
    if scope not in QUOTA_SCOPES:
        raise reader.error(reader.key("scopeName"),
                           f"unsupported scope {scope!r}; supported: {', '.join(QUOTA_SCOPES)}")
    operator = reader.typed("operator", str, "")
    if operator not in SELECTOR_OPERATORS:
        raise reader.error(reader.key("operator"), f"{operator!r}: not a valid selector operator")
    values = reader.strings("values")
    if scope in EXISTS_ONLY_SCOPES and operator != "Exists":
        raise reader.error(reader.key("operator"),
                           "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, "
                           "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                           "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity")
    if operator in ("In", "NotIn") and not values:
        raise reader.error(reader.key("values"),
                           "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector")
    if operator in ("Exists", "DoesNotExist") and values:
        raise reader.error(reader.key("values"),
                           "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector")
    return ScopedResourceSelectorRequirement(scope, operator, values)


def _limited_resource(reader: _Reader) -> LimitedResource:
    reader.check_keys(["resource", "apiGroup", "matchContains", "matchScopes"])
    resource = reader.typed("resource", str, "")
    if not resource:
        raise reader.error(reader.key("resource"), "Required value")
    scopes = tuple(_scope_requirement(_Reader(item, path, reader.source)) for path, item in reader.items("matchScopes"))
    return LimitedResource(resource, reader.typed("apiGroup", str, ""), reader.strings("matchContains"), scopes)


def _label_selector(reader: _Reader) -> LabelSelector:
    reader.check_keys(["matchLabels", "matchExpressions"])
    labels_reader = reader.child("matchLabels")
    labels: dict[str, str] = {}
    for key, value in labels_reader.data.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise reader.error(labels_reader.key(str(key)), f"expected a string, got {_type_name(value)}")
        labels[key] = value
    expressions = []
    for path, item in reader.items("matchExpressions"):
        expr = _Reader(item, path, reader.source)
        expr.check_keys(["key", "operator", "values"])
        key = expr.typed("key", str, "")
        if not key:
            raise expr.error(expr.key("key"), "Required value")
        operator = expr.typed("operator", str, "")
        if operator not in SELECTOR_OPERATORS:
            raise expr.error(expr.key("operator"), f"{operator!r}: not a valid label selector operator")
        values = expr.strings("values")
        if operator in ("In", "NotIn") and not values:
            raise expr.error(expr.key("values"), "must be specified when `operator` is 'In' or 'NotIn'")
        if operator in ("Exists", "DoesNotExist") and values:
            raise expr.error(expr.key("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        expressions.append(LabelSelectorRequirement(key, operator, values))
    return LabelSelector(FrozenMap(labels) if labels else EMPTY_LABELS, tuple(expressions))


def _class_rule(reader: _Reader) -> ClassAccessRule:
    reader.check_keys(["match", "allowedNamespaces", "namespaceSelector"])
    if not reader.has("match"):
        raise reader.error(reader.key("match"), "Required value")
    match_reader = reader.child("match")
    match_reader.check_keys(["names", "valueAtLeast"])
    match = ClassMatch(match_reader.strings("names"), match_reader.optional_int("valueAtLeast"))
    if not match.names and match.value_at_least is None:
        raise reader.error(reader.key("match"), "must set names or valueAtLeast")
    if not reader.has("allowedNamespaces") and not reader.has("namespaceSelector"):
        raise reader.error(reader.key("allowedNamespaces"),
                           "must set allowedNamespaces or namespaceSelector (an empty list allows no namespace)")
    selector = _label_selector(reader.child("namespaceSelector")) if reader.has("namespaceSelector") else None
    return ClassAccessRule(match, reader.strings("allowedNamespaces"), selector)


def _quota(reader: _Reader) -> QuotaConfig:
    reader.check_keys(["limitedResources", "classes"])
    limited = tuple(_limited_resource(_Reader(item, path, reader.source))
                    for path, item in reader.items("limitedResources"))
    classes = tuple(_class_rule(_Reader(item, path, reader.source)) for path, item in reader.items("classes"))
    return QuotaConfig(limited, classes)


def _service_accounts(reader: _Reader) -> tuple[str, ...]:
    accounts = reader.strings("serviceAccounts")
    for i, account in enumerate(accounts):
        namespace, sep, name = account.partition("/")
        if not sep or not namespace or not name or "/" in name:
            raise reader.error(f"{reader.key('serviceAccounts')}[{i}]",
                               f"expected <namespace>/<name> or <namespace>/*, got {account!r}")
    return accounts


def _exemptions(reader: _Reader) -> Exemptions:
    reader.check_keys(["namespaces", "users", "groups", "serviceAccounts"])
    return Exemptions(reader.strings("namespaces"), reader.strings("users"), reader.strings("groups"),
                      _service_accounts(reader))


def _guardrails(reader: _Reader) -> GuardrailsConfig:
    reader.check_keys(["mode", "tenantLabel", "denyCrossTenantPreemption", "maxVictims", "maxPdbViolations",
                       "denyVictimPriorityAtLeast", "exempt", "disclosure", "auditDetail",
                       "unverifiedDisclosure", "onUnpredictable"])
    # YAML 1.1 reads a bare `mode: off` as the boolean false.
    mode_value = reader.data.get("mode")
    if mode_value is False:
        mode: GuardrailMode = "off"
    else:
        mode = cast(GuardrailMode, reader.choice("mode", GUARDRAIL_MODES, "warn"))
    tenant_label = reader.typed("tenantLabel", str, "") or None
    return GuardrailsConfig(
        mode=mode,
        tenant_label=tenant_label,
        deny_cross_tenant_preemption=reader.typed("denyCrossTenantPreemption", bool, False),
        max_victims=reader.optional_int("maxVictims", minimum=0),
        max_pdb_violations=reader.optional_int("maxPdbViolations", minimum=0),
        deny_victim_priority_at_least=reader.optional_int("denyVictimPriorityAtLeast"),
        exempt=_exemptions(reader.child("exempt")),
        disclosure=cast(DisclosureMode, reader.choice("disclosure", DISCLOSURE_MODES, "tenant")),
        audit_detail=cast(AuditDetail, reader.choice("auditDetail", AUDIT_DETAILS, "tenant")),
        unverified_disclosure=cast(UnverifiedDisclosure,
                                   reader.choice("unverifiedDisclosure", UNVERIFIED_DISCLOSURES, "counts")),
        on_unpredictable=(cast(OnUnpredictable, reader.choice("onUnpredictable", ON_UNPREDICTABLE, "deny"))
                          if reader.data.get("onUnpredictable") is not None else None),
    )


def parse_config(data: object, source: str) -> Config:
    """Build a ``Config`` from parsed YAML/JSON; ``source`` names the file in error messages."""
    root = _Reader(data, "", source)
    root.check_keys(["prediction", "scheduler", "quota", "guardrails"])
    return Config(
        prediction=_prediction(root.child("prediction")),
        scheduler=_scheduler(root.child("scheduler")),
        quota=_quota(root.child("quota")),
        guardrails=_guardrails(root.child("guardrails")),
        source=source,
    )


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a configuration file (YAML or JSON); any problem raises ``ConfigError``."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read configuration: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {exc}") from exc
    if data is None:  # empty, or comments only: most likely caught mid-write, never "the defaults"
        raise ConfigError(f"{source}: the configuration file is empty (write {{}} for the defaults)")
    config = parse_config(data, source)
    check_tenant_label_readable(text, config.guardrails.tenant_label, source)
    return config


# What the namespace label policy (manifests/base/label-policy.yaml, preemptguard-tenant-label) finds in this
# file to protect the tenant label; the same expression in CEL there (RE2) and here.
TENANT_LABEL_LINE = re.compile(r"""(?m)^[ \t]+tenantLabel:[ \t]*["']?[A-Za-z0-9][-A-Za-z0-9_./]*""")


def tenant_labels_in(text: str) -> list[str]:
    """The tenant label names the label policy reads from a configuration file's text."""
    return [line.split(":", 1)[1].strip().replace('"', "").replace("'", "") for line in TENANT_LABEL_LINE.findall(text)]


def check_tenant_label_readable(text: str, tenant_label: str | None, source: str) -> None:
    """``ConfigError`` unless the label policy reads exactly ``tenant_label`` from ``text``: a tenant label it
    cannot see would be a label any tenant could change on its own namespace."""
    if tenant_label is None:
        return
    found = tenant_labels_in(text)
    if found != [tenant_label]:
        raise ConfigError(
            f"{source}: guardrails.tenantLabel must be written on a line of its own under guardrails "
            f"(`  tenantLabel: {tenant_label}`): the namespace label policy reads it there to keep tenants from "
            f"changing it (found {found or 'none'})")


def load_config_or_defaults(path: str | os.PathLike[str] | None) -> Config:
    """``load_config(path)``, or the defaults when there is no file (docs/interfaces.md §6)."""
    return load_config(path) if path is not None else DEFAULT_CONFIG
