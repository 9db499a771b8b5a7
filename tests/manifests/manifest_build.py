"""Build manifests/ with the machine's real ``kubectl kustomize`` (a missing kubectl fails, never skips)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
# Every kustomization a user may apply; a test also checks that no other one exists unnoticed.
KUSTOMIZATIONS = ("base", "overlays/self-signed", "overlays/cert-manager", "overlays/client-ca")
OVERLAYS = ("overlays/self-signed", "overlays/cert-manager", "overlays/client-ca")
# Optional parts an overlay adds with `components:`; tests build them on top of an overlay.
COMPONENTS = ("components/client-ca", "components/critical-class-quota", "components/events",
              "components/exposure-reports", "components/monitoring")


def kubectl_path() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl is not on PATH: the manifest tests drive the real `kubectl kustomize` "
                    "(install kubectl; CI's .ci/run requires it too)", pytrace=False)
    return path


@functools.cache
def _build(kustomization: str) -> str:
    result = subprocess.run([kubectl_path(), "kustomize", str(MANIFESTS / kustomization)],
                            capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        pytest.fail(f"kubectl kustomize {kustomization} failed:\n{result.stderr}", pytrace=False)
    return result.stdout


def build(kustomization: str) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize manifests/<kustomization>`` prints (a fresh copy each call)."""
    return [doc for doc in yaml.safe_load_all(_build(kustomization)) if doc is not None]


def build_overlay(kustomization: str) -> list[dict[str, Any]]:
    """Build a user's own overlay given as the text of its kustomization.yaml, with paths relative to
    manifests/ written as ``{manifests}/...`` (kustomize refuses absolute paths)."""
    return [doc for doc in yaml.safe_load_all(_build_overlay(kustomization)) if doc is not None]


@functools.cache
def _build_overlay(kustomization: str) -> str:
    with tempfile.TemporaryDirectory() as directory:
        text = kustomization.replace("{manifests}", os.path.relpath(MANIFESTS, directory))
        (Path(directory) / "kustomization.yaml").write_text(text)
        result = subprocess.run([kubectl_path(), "kustomize", directory], capture_output=True, text=True,
                                timeout=120, check=False)
    if result.returncode != 0:
        pytest.fail(f"kubectl kustomize of\n{kustomization}\nfailed:\n{result.stderr}", pytrace=False)
    return result.stdout


def with_components(overlay: str, *components: str) -> list[dict[str, Any]]:
    """``overlay`` with ``components`` added, as a user's overlay would."""
    listed = "".join(f"  - {{manifests}}/{component}\n" for component in components)
    return build_overlay(f"resources:\n  - {{manifests}}/{overlay}\ncomponents:\n{listed}")


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(matches) == 1, f"expected exactly one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def find_all(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def pod_specs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``Kind/name`` -> pod spec of every workload object."""
    specs: dict[str, dict[str, Any]] = {}
    for obj in objects:
        key = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
            specs[key] = obj["spec"]["template"]["spec"]
        elif obj["kind"] == "CronJob":
            specs[key] = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return specs


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A pod spec's init containers and containers."""
    return list(spec.get("initContainers") or []) + list(spec["containers"])
