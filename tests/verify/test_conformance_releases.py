"""The release matrix's pins (conformance/releases/vX.Y.Z, written by conformance/pin) and the build script's
arguments, checked without Go or the network: each pinned release requires exactly its k8s.io/kubernetes, maps
every staging module to the same release's v0.MINOR.PATCH, and has a go.sum for -mod=readonly."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"
RELEASES = sorted(p for p in (CONFORMANCE / "releases").iterdir() if p.is_dir())
OLDER = re.search(r'^OLDER_RELEASE = "(v[0-9.]+)"$', (CONFORMANCE / "tests" / "releases.py").read_text(),
                  re.MULTILINE)


def test_the_served_releases_are_pinned_and_the_older_ci_release_among_them() -> None:
    assert [p.name for p in RELEASES] == ["v1.33.13", "v1.34.4", "v1.35.4", "v1.36.3"]
    assert OLDER is not None and (CONFORMANCE / "releases" / OLDER.group(1) / "go.mod").is_file()
    default = re.search(r"^\tk8s\.io/kubernetes (v[0-9.]+) ", (CONFORMANCE / "go.mod").read_text(), re.MULTILINE)
    assert default is not None and default.group(1) == "v1.37.2"


@pytest.mark.parametrize("release", RELEASES, ids=[p.name for p in RELEASES])
def test_a_release_module_pins_its_own_kubernetes_and_staging_modules(release: Path) -> None:
    version = release.name
    gomod = (release / "go.mod").read_text()
    assert f"module preemptguard.io/conformance/releases/{version}\n" in gomod
    assert re.search(rf"^\tk8s\.io/kubernetes {re.escape(version)}( |$)", gomod, re.MULTILINE) or \
        f"require k8s.io/kubernetes {version}\n" in gomod
    staging = "v0." + version.removeprefix("v1.")
    replaces = re.findall(r"^\t(k8s\.io/[a-z0-9-]+) => (k8s\.io/[a-z0-9-]+) (v[0-9.]+)$", gomod, re.MULTILINE)
    assert len(replaces) >= 25 and all(a == b and v == staging for a, b, v in replaces), replaces
    for tool in ("kube-apiserver", "kube-scheduler", "kubectl"):
        assert f"\tk8s.io/kubernetes/cmd/{tool}\n" in gomod
    gosum = (release / "go.sum").read_text()
    assert f"k8s.io/kubernetes {version} h1:" in gosum and f"k8s.io/api {staging} h1:" in gosum


@pytest.mark.parametrize(("script", "argv"), [
    ("build", ["--kube-version", "1.34"]), ("build", ["--nope"]), ("pin", ["--kube-version", "latest"]),
    ("pin", [])])
def test_bad_arguments_exit_2_with_the_usage(script: str, argv: list[str]) -> None:
    done = subprocess.run([str(CONFORMANCE / script), *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage: conformance/" in done.stderr, done.stderr
