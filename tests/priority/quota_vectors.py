"""Load ``tests/vectors/quota.yaml`` and turn each case into snapshot documents plus a configuration.

Webhook-independent on purpose (only PyYAML): end-to-end tests through ``/mutate/pods`` can reuse
``load_quota_vectors`` and feed ``snapshot_documents`` / ``config_document`` to the real server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_DIR = _REPO_ROOT / "tests" / "vectors"
QUOTA_VECTORS = VECTORS_DIR / "quota.yaml"


@dataclass(frozen=True)
class QuotaVector:
    name: str
    operation: str
    namespace: str
    subresource: str
    object: dict[str, Any]
    old_object: dict[str, Any] | None
    # PriorityClasses, ResourceQuotas and the Namespace, as API objects (a snapshot's documents).
    snapshot_documents: list[dict[str, Any]]
    # A PreemptGuard configuration file body (None = the vector has no limitedResources configured).
    config_document: dict[str, Any] | None
    expect: dict[str, Any]

    @property
    def snapshot_list(self) -> dict[str, Any]:
        """The snapshot as one ``kind: List`` (what ``kubectl get ... -o yaml`` prints)."""
        return {"apiVersion": "v1", "kind": "List", "items": self.snapshot_documents}


def _to_vector(case: dict[str, Any]) -> QuotaVector:
    namespace = case["namespace"]
    documents: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": namespace, "labels": {"kubernetes.io/metadata.name": namespace}}},
        *(case.get("existing_priority_classes") or []),
        *(case.get("existing_resource_quotas") or []),
    ]
    limited = case.get("resource_quota_configuration")
    config = {"quota": {"limitedResources": limited}} if limited is not None else None
    return QuotaVector(
        name=case["name"],
        operation=case["operation"],
        namespace=namespace,
        subresource=case.get("subresource") or "",
        object=case["object"],
        old_object=case.get("old_object"),
        snapshot_documents=documents,
        config_document=config,
        expect=case["expect"],
    )


def load_quota_vectors(path: Path = QUOTA_VECTORS) -> list[QuotaVector]:
    """Every case of the vector file; a missing file is an error, never an empty list."""
    if not path.is_file():
        raise FileNotFoundError(f"quota vectors not found at {path} (they are part of the repository: tests/vectors)")
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(cases, list) or not cases:
        raise ValueError(f"{path}: expected a non-empty list of cases")
    return [_to_vector(case) for case in cases]
