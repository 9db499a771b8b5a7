"""PriorityClass validation, exactly as upstream words it.

Upstream: pkg/apis/scheduling/validation/validation.go (ValidatePriorityClass, ValidatePriorityClassUpdate),
pkg/apis/scheduling/v1/helpers.go (IsKnownSystemPriorityClass), plugin/pkg/admission/priority/admission.go
(the single global default), pkg/registry/scheduling/priorityclass/storage/storage.go (system-class delete guard).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from webhook.cluster.model import PREEMPT_LOWER_PRIORITY, PREEMPTION_POLICIES, PriorityClass
from webhook.priority.resolution import (
    HIGHEST_USER_DEFINABLE_PRIORITY,
    SYSTEM_PRIORITY_CLASS_PREFIX,
    SYSTEM_PRIORITY_CLASSES,
    lowest_global_default,
)

PRIORITY_CLASS_KIND = "PriorityClass.scheduling.k8s.io"
PRIORITY_CLASS_RESOURCE = "priorityclasses.scheduling.k8s.io"

DNS1123_SUBDOMAIN_MAX_LENGTH = 253
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
DNS1123_SUBDOMAIN_ERROR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
FIELD_IMMUTABLE = "field is immutable"

FieldErrorType = Literal["Required value", "Forbidden", "Invalid value", "Unsupported value"]


@dataclass(frozen=True, slots=True)
class FieldError:
    """apimachinery field.Error: ``<field>: <type>[: <value>][: <detail>]``."""

    field: str
    type: FieldErrorType
    detail: str = ""
    value: str | int | None = None

    def __str__(self) -> str:
        body: str = self.type
        if self.type in ("Invalid value", "Unsupported value"):
            body += f": {_go_value(self.value)}"
        if self.detail:
            body += f": {self.detail}"
        return f"{self.field}: {body}"


def _go_value(value: str | int | None) -> str:
    """Values as field.Error prints them: strings quoted (Go %q), numbers bare, nil as null."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


@dataclass(frozen=True, slots=True)
class PriorityClassObject:
    """The fields of a PriorityClass that validation reads (``preemption_policy`` None means unset)."""

    name: str
    value: int = 0
    global_default: bool = False
    preemption_policy: str | None = None
    description: str = ""
    generate_name: str = ""

    @property
    def defaulted_preemption_policy(self) -> str:
        """API defaulting: an unset policy is stored as PreemptLowerPriority."""
        return PREEMPT_LOWER_PRIORITY if self.preemption_policy is None else self.preemption_policy


# ---- name rules ---------------------------------------------------------------------------------
def is_dns1123_subdomain(value: str) -> list[str]:
    """Upstream validation.IsDNS1123Subdomain: the list of problems (empty when valid)."""
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters")
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(
            f"{DNS1123_SUBDOMAIN_ERROR} (e.g. 'example.com', regex used for validation is '{_DNS1123_SUBDOMAIN_FMT}')"
        )
    return errs


def mask_trailing_dash(name: str) -> str:
    """apimachinery MaskTrailingDash, verbatim (it drops the character before the dash too)."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def validate_object_meta_name(name: str, generate_name: str = "") -> list[FieldError]:
    """ValidateObjectMeta's name rules with NameIsDNSSubdomain (namespace is cleared by the registry)."""
    errs: list[FieldError] = []
    if generate_name:
        masked = mask_trailing_dash(generate_name)
        errs.extend(FieldError("metadata.generateName", "Invalid value", m, generate_name)
                    for m in is_dns1123_subdomain(masked))
    if not name:
        errs.append(FieldError("metadata.name", "Required value", "name or generateName is required"))
    else:
        errs.extend(FieldError("metadata.name", "Invalid value", m, name) for m in is_dns1123_subdomain(name))
    return errs


def is_known_system_priority_class(name: str, value: int, global_default: bool) -> str | None:
    """None when (name, value, globalDefault) is a bootstrapped class, else upstream's reason."""
    known = SYSTEM_PRIORITY_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if known.value != value:
        return f"value of {name} PriorityClass must be {known.value}"
    if known.global_default != global_default:
        return f"globalDefault of {name} PriorityClass must be {str(known.global_default).lower()}"
    return None


def validate_preemption_policy(policy: str, field: str = "preemptionPolicy") -> list[FieldError]:
    """core ValidatePreemptionPolicy (only called for a set policy)."""
    if policy in PREEMPTION_POLICIES:
        return []
    if policy == "":
        return [FieldError(field, "Required value")]
    supported = ", ".join(_go_value(p) for p in PREEMPTION_POLICIES)
    return [FieldError(field, "Unsupported value", f"supported values: {supported}", policy)]


# ---- ValidatePriorityClass / ValidatePriorityClassUpdate ------------------------------------------
def validate_priority_class(pc: PriorityClassObject) -> list[FieldError]:
    """Create-time validation (HTTP 422 when non-empty)."""
    errs = validate_object_meta_name(pc.name, pc.generate_name)
    if pc.name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        reason = is_known_system_priority_class(pc.name, pc.value, pc.global_default)
        if reason is not None:
            errs.append(FieldError(
                "metadata.name", "Forbidden",
                f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are reserved for system use only. "
                f"error: {reason}",
            ))
    elif pc.value > HIGHEST_USER_DEFINABLE_PRIORITY:
        limit = HIGHEST_USER_DEFINABLE_PRIORITY
        errs.append(FieldError("value", "Forbidden", f"maximum allowed value of a user defined priority is {limit}"))
    if pc.preemption_policy is not None:
        errs.extend(validate_preemption_policy(pc.preemption_policy))
    return errs


def validate_priority_class_update(new: PriorityClassObject, old: PriorityClassObject) -> list[FieldError]:
    """Update-time validation: name, value and preemptionPolicy are immutable; create rules are not re-run."""
    errs: list[FieldError] = []
    if new.name != old.name:
        errs.append(FieldError("metadata.name", "Invalid value", FIELD_IMMUTABLE, new.name))
    if new.value != old.value:
        errs.append(FieldError("value", "Forbidden", "may not be changed in an update."))
    # Both sides are compared after defaulting, so omitting PreemptLowerPriority is no change.
    if new.defaulted_preemption_policy != old.defaulted_preemption_policy:
        errs.append(FieldError("preemptionPolicy", "Invalid value", FIELD_IMMUTABLE, new.defaulted_preemption_policy))
    return errs


def invalid_message(kind: str, name: str, errs: Sequence[FieldError]) -> str:
    """apierrors.NewInvalid: one error bare, several as ``[e1, e2]`` (duplicates dropped like an Aggregate)."""
    messages = list(dict.fromkeys(str(e) for e in errs))
    if not messages:
        return f'{kind} "{name}" is invalid'
    body = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    return f'{kind} "{name}" is invalid: {body}'


# ---- Priority plugin (Validate) and registry rules ----------------------------------------------
def check_single_global_default(
    operation: str, incoming: PriorityClassObject, stored: Iterable[PriorityClass]
) -> str | None:
    """The plugin's one-default rule: the inner Forbidden message, or None when allowed.

    Only an incoming ``globalDefault: true`` is checked; the reference is the lowest-valued stored default,
    and on UPDATE only another class's name conflicts.
    """
    if not incoming.global_default:
        return None
    current = lowest_global_default(stored)
    if current is None:
        return None
    if operation == "CREATE" or (operation == "UPDATE" and current.name != incoming.name):
        return f"PriorityClass {current.name} is already marked as default. Only one default can exist"
    return None


def check_system_class_delete(name: str) -> str | None:
    """storage.go REST.Delete: bootstrapped classes cannot be deleted by name (inner Forbidden message)."""
    if name in SYSTEM_PRIORITY_CLASSES:
        return "this is a system priority class and cannot be deleted"
    return None


def system_class_already_exists(name: str, stored: Mapping[str, PriorityClass]) -> bool:
    """A create of a bootstrapped system class that the store holds fails with 409 AlreadyExists."""
    return name in SYSTEM_PRIORITY_CLASSES and name in stored
