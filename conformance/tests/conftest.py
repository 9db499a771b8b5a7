"""The conformance tier: PreemptGuard held against a real control plane (run with `pytest conformance/tests`
after `conformance/build`). Missing binaries fail the tier loudly; they never skip it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parents[1] / "tests" / "admission", HERE.parents[1] / "tests" / "manifests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from controlplane import ControlPlane, ControlPlaneError, kube_bin_dir  # noqa: E402


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        bin_dir = kube_bin_dir()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    plane = ControlPlane(tmp_path_factory.mktemp("controlplane"), bin_dir)
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield plane
    plane.stop()
