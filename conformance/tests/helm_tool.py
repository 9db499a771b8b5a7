"""The real helm that conformance/build compiles (pinned in conformance/helm/go.mod); a missing helm fails
loudly, naming conformance/build, and never skips."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import REPO

CHART = REPO / "charts" / "preemptguard"
RELEASE, NAMESPACE = "preemptguard", "preemptguard"


def bin_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get("PREEMPTGUARD_KUBE_BIN") or REPO / "conformance" / "bin")


def helm_path() -> Path:
    path = bin_dir() / "helm"
    if not os.access(path, os.X_OK):
        pytest.fail(f"helm not found in {bin_dir()}: run conformance/build (it builds helm from the Go module "
                    "proxy, pinned in conformance/helm/go.mod) or set PREEMPTGUARD_KUBE_BIN", pytrace=False)
    return path


def pinned_version() -> str:
    for line in (REPO / "conformance" / "helm" / "go.mod").read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["helm.sh/helm/v3"]:
            return parts[1]
    raise AssertionError("conformance/helm/go.mod does not require helm.sh/helm/v3")


def helm(*args: str, tmp: Path, values: Mapping[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """Run helm with its cache, configuration and data under ``tmp`` (no repositories needed)."""
    extra: list[str] = []
    if values:
        path = tmp / f"values-{len(list(tmp.glob('values-*.yaml')))}.yaml"
        path.write_text(yaml.safe_dump(dict(values)))
        extra = ["--values", str(path)]
    env = {**os.environ, **{f"HELM_{kind}_HOME": str(tmp / f"helm-{kind.lower()}") for kind in ("CACHE", "CONFIG",
                                                                                                "DATA")}}
    return subprocess.run([str(helm_path()), *args, *extra], capture_output=True, text=True, timeout=120,
                          env=env, check=False)


def template(tmp: Path, values: Mapping[str, Any] | None = None, *, hooks: bool = False) -> list[dict[str, Any]]:
    """``helm template preemptguard charts/preemptguard -n preemptguard`` with ``values``, as objects: the
    release's own, or with ``hooks`` only the hooks (``helm test``'s, the pre-delete cleanup)."""
    run = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, values=values, tmp=tmp)
    if run.returncode != 0:
        pytest.fail(f"helm template failed:\n{run.stderr}", pytrace=False)
    return [doc for doc in yaml.safe_load_all(run.stdout) if doc and is_hook(doc) == hooks]


def is_hook(obj: Mapping[str, Any]) -> bool:
    return "helm.sh/hook" in ((obj.get("metadata") or {}).get("annotations") or {})
