"""What every source answers: a ``PreemptionPreview`` (docs/interfaces.md §4) and its warnings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubectl_plugin.inputs import JsonObject
from kubectl_plugin.render import Progress
from webhook.errors import InvalidInput
from webhook.preemption.preview import KIND
from webhook.preemption.results import Outcome


@dataclass(slots=True)
class PreviewAnswer:
    """A ``PreemptionPreview`` and the warnings that came with it (API server ``Warning`` headers)."""

    preview: JsonObject
    warnings: list[str] = field(default_factory=list)


class PreviewSource(Protocol):
    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer: ...


# ---- the PreemptionPreview document -----------------------------------------------------------------
def check_preview(document: object, where: str) -> JsonObject:
    if not isinstance(document, dict) or document.get("kind") != KIND or not isinstance(document.get("results"), list):
        raise InvalidInput(f"{where} did not return a {KIND}")
    return document


def rejected_result(pod: Mapping[str, Any], message: str) -> JsonObject:
    """A ``Rejected`` result for a pod the API server refused (admission or validation)."""
    meta: Mapping[str, Any] = pod.get("metadata") or {}
    spec: Mapping[str, Any] = pod.get("spec") or {}
    return {
        "pod": f"{meta.get('namespace') or 'default'}/{meta.get('name') or meta.get('generateName') or ''}",
        "priority": None,
        "priorityClassName": spec.get("priorityClassName") or None,
        "preemptionPolicy": spec.get("preemptionPolicy") or "PreemptLowerPriority",
        "outcome": Outcome.REJECTED.value,
        "node": None,
        "victims": [],
        "pdbViolations": 0,
        "candidateNodes": 0,
        "tiedNodes": [],
        "expectedDelaySeconds": 0,
        "message": message,
    }
