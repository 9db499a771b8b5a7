"""PreemptGuard's configuration file (contract ``interfaces.md`` §6): one typed, frozen settings object.

``parse_config`` checks every key: an unknown key or a wrong type raises ``ConfigError`` naming the key
path, e.g. ``unknown key guardrails.maxVictim`` or ``guardrails.maxVictims: expected an integer, got str``.
``ConfigReloader`` re-reads the file when it changes and keeps the previous configuration on error.

Extensions to the §6 schema (documented here because the contract example does not show them):
- ``guardrails.denyVictimPriorityAtLeast: N`` denies (or warns) when any victim's priority is >= N.
- ``guardrails.exempt.serviceAccounts: ["<namespace>/<name>", "<namespace>/*"]``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import yaml

from webhook.cluster.model import (
    EMPTY_LABELS,
    FrozenMap,
    LabelSelector,
    LabelSelectorRequirement,
    ScopedResourceSelectorRequirement,
)
from webhook.errors import ConfigError

log = logging.getLogger(__name__)

GuardrailMode = Literal["off", "warn", "enforce"]
GUARDRAIL_MODES: tuple[GuardrailMode, ...] = ("off", "warn", "enforce")
DisclosureMode = Literal["tenant", "cluster"]
DISCLOSURE_MODES: tuple[DisclosureMode, ...] = ("tenant", "cluster")
AuditDetail = Literal["tenant", "full"]
AUDIT_DETAILS: tuple[AuditDetail, ...] = ("tenant", "full")
PreemptionSetting = Literal["enabled", "disabled"]

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


@dataclass(frozen=True, slots=True)
class PredictionConfig:
    budget_milliseconds: int = 250


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Mirror of the cluster's kube-scheduler profile (DefaultPreemptionArgs)."""

    preemption: PreemptionSetting = "enabled"
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

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


@dataclass(frozen=True, slots=True)
class Config:
    prediction: PredictionConfig = field(default_factory=PredictionConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    quota: QuotaConfig = field(default_factory=QuotaConfig)
    guardrails: GuardrailsConfig = field(default_factory=GuardrailsConfig)
    # Where this configuration came from (a file path, or "<defaults>").
    source: str = "<defaults>"


DEFAULT_CONFIG = Config()


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
    reader.check_keys(["budgetMilliseconds"])
    return PredictionConfig(reader.int_in_range("budgetMilliseconds", 250, 1))


def _scheduler(reader: _Reader) -> SchedulerConfig:
    reader.check_keys(["preemption", "minCandidateNodesPercentage", "minCandidateNodesAbsolute"])
    preemption = cast(PreemptionSetting, reader.choice("preemption", ("enabled", "disabled"), "enabled"))
    percentage = reader.int_in_range("minCandidateNodesPercentage", 10, 0, 100)
    absolute = reader.int_in_range("minCandidateNodesAbsolute", 100, 0)
    # Upstream ValidateDefaultPreemptionArgs refuses both at zero.
    if percentage == 0 and absolute == 0:
        raise reader.error(reader.key("minCandidateNodesAbsolute"),
                           "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero")
    return SchedulerConfig(preemption, percentage, absolute)


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
                       "denyVictimPriorityAtLeast", "exempt", "disclosure", "auditDetail"])
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
    return parse_config(data, source)


# --- reloading --------------------------------------------------------------------------------------

class ReloadOutcome(Enum):
    UNCHANGED = "unchanged"
    RELOADED = "reloaded"
    FAILED = "failed"


def _file_signature(path: str) -> tuple[int, int, int] | None:
    # A ConfigMap volume swaps a symlink, so the inode changes even when the mtime granularity hides it.
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino, st.st_size)


class ConfigReloader:
    """Holds the current configuration and re-reads its file when the file changes.

    A file that fails to load (bad key, bad YAML, missing) keeps the previous configuration; the error
    is logged and kept in ``last_error``. Call ``check()`` periodically (e.g. every few seconds).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        initial: Config | None = None,
        *,
        on_reload: Callable[[Config], None] | None = None,
        loader: Callable[[str], Config] = load_config,
    ) -> None:
        self.path = os.fspath(path)
        self._loader = loader
        self._on_reload = on_reload
        self._signature = _file_signature(self.path)
        self.current = initial if initial is not None else loader(self.path)
        self.last_error: ConfigError | None = None
        self.generation = 0

    def check(self) -> ReloadOutcome:
        signature = _file_signature(self.path)
        if signature == self._signature:
            return ReloadOutcome.UNCHANGED
        self._signature = signature
        try:
            config = self._loader(self.path)
        except ConfigError as exc:
            self.last_error = exc
            log.error("configuration reload rejected, keeping the previous configuration: %s", exc)
            return ReloadOutcome.FAILED
        self.current = config
        self.last_error = None
        self.generation += 1
        log.info("configuration reloaded from %s", self.path)
        if self._on_reload is not None:
            self._on_reload(config)
        return ReloadOutcome.RELOADED
