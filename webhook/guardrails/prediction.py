"""The typed view of a prediction that the guardrails read: one ``PreemptionPreview`` result (contract §4)
and the requester's ``userInfo`` from the AdmissionReview."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.errors import InvalidInput

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"

OUTCOME_FITS = "Fits"
OUTCOME_PREEMPTS = "Preempts"
OUTCOME_UNSCHEDULABLE = "Unschedulable"
OUTCOME_REJECTED = "Rejected"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """``request.userInfo``: who creates the pod."""

    username: str = ""
    groups: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> UserInfo:
        raw = raw or {}
        groups = raw.get("groups") or []
        return cls(str(raw.get("username") or ""), tuple(str(g) for g in groups if isinstance(g, str)))

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) when the user is a service account (``system:serviceaccount:<ns>:<name>``)."""
        if not self.username.startswith(SERVICE_ACCOUNT_PREFIX):
            return None
        namespace, sep, name = self.username[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
        if not sep or not namespace or not name or ":" in name:
            return None
        return namespace, name


@dataclass(frozen=True, slots=True)
class Victim:
    namespace: str
    name: str
    node: str
    priority: int
    pdb_violation: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PredictedOutcome:
    """One ``results[]`` entry of a PreemptionPreview."""

    pod: str
    outcome: str
    node: str | None
    victims: tuple[Victim, ...] = ()
    pdb_violations: int = 0
    message: str = ""

    @property
    def namespaces_affected(self) -> tuple[str, ...]:
        return tuple(sorted({v.namespace for v in self.victims}))

    def victims_by_namespace(self) -> dict[str, int]:
        """Victim counts per namespace, most victims first (then by name)."""
        counts: dict[str, int] = {}
        for victim in self.victims:
            counts[victim.namespace] = counts.get(victim.namespace, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _field(raw: Mapping[str, Any], key: str, kind: type, path: str, default: Any) -> Any:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidInput(f"{path}.{key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _victim(raw: object, path: str) -> Victim:
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{path}: expected an object")
    return Victim(
        namespace=_field(raw, "namespace", str, path, ""),
        name=_field(raw, "name", str, path, ""),
        node=_field(raw, "node", str, path, ""),
        priority=_field(raw, "priority", int, path, 0),
        pdb_violation=_field(raw, "pdbViolation", bool, path, False),
    )


def outcome_from_result(raw: Mapping[str, Any], path: str = "results[0]") -> PredictedOutcome:
    victims = tuple(_victim(v, f"{path}.victims[{i}]")
                    for i, v in enumerate(_field(raw, "victims", list, path, [])))
    pdb_violations = raw.get("pdbViolations")
    if pdb_violations is None:
        pdb_violations = sum(v.pdb_violation for v in victims)
    elif isinstance(pdb_violations, bool) or not isinstance(pdb_violations, int):
        raise InvalidInput(f"{path}.pdbViolations: expected int, got {type(pdb_violations).__name__}")
    return PredictedOutcome(
        pod=_field(raw, "pod", str, path, ""),
        outcome=_field(raw, "outcome", str, path, ""),
        node=_field(raw, "node", str, path, None),
        victims=victims,
        pdb_violations=pdb_violations,
        message=_field(raw, "message", str, path, ""),
    )


def outcome_from_preview(preview: Mapping[str, Any]) -> PredictedOutcome | None:
    """The first result of a PreemptionPreview dict (admission predicts one pod); None without results."""
    results = _field(preview, "results", list, "preview", [])
    if not results:
        return None
    first = results[0]
    if not isinstance(first, Mapping):
        raise InvalidInput("preview.results[0]: expected an object")
    return outcome_from_result(first)
