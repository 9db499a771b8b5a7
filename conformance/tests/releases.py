"""The releases the conformance tier runs: the default one (conformance/go.mod, ``$PREEMPTGUARD_KUBE_BIN`` or
conformance/bin) for everything, and one older release for the examples and a seeded sample
(``$PREEMPTGUARD_KUBE_BIN_OLDER`` or conformance/bin/<OLDER_RELEASE>, as ``conformance/build --kube-version``
builds it). Missing binaries fail the test loudly, naming the command that builds them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from controlplane import REPO, ControlPlaneError, kube_bin_dir, kubernetes_version

OLDER_RELEASE = "v1.34.4"
OLDER_ENV = "PREEMPTGUARD_KUBE_BIN_OLDER"


def default_bin() -> Path:
    try:
        return kube_bin_dir()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)


def older_bin() -> Path:
    where = os.environ.get(OLDER_ENV) or str(REPO / "conformance" / "bin" / OLDER_RELEASE)
    try:
        found = kube_bin_dir(where)
    except ControlPlaneError as exc:
        pytest.fail(f"{exc} (the older release: conformance/build --kube-version {OLDER_RELEASE}, or set "
                    f"{OLDER_ENV})", pytrace=False)
    version = kubernetes_version(found)
    if version != OLDER_RELEASE:
        pytest.fail(f"{found} holds Kubernetes {version}, not {OLDER_RELEASE}: conformance/build --kube-version "
                    f"{OLDER_RELEASE} --out {found}", pytrace=False)
    return found
