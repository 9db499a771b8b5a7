"""What a release ships, built by its scripts and used as a user would: the wheel installed into a fresh venv
outside the repository runs the demo; the chart and dashboard artifacts (release/build-artifacts) install as the
chart directory does; the krew archives (release/build-krew) are the ones the rendered krew manifest names, by
sha256, and the plugin inside runs. Needs PyPI (the wheels) and helm (conformance/build)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import jsonschema
import pytest
import yaml
from controlplane import REPO
from helm_tool import CHART, NAMESPACE, RELEASE, bin_dir, helm

from webhook.version import package_version

sys.path.insert(0, str(REPO / "tests" / "krew"))
from krew_schema import PLUGIN

VERSION = package_version()


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_the_wheel_in_a_fresh_venv_outside_the_repository_runs_the_demo(tmp_path: Path) -> None:
    """README command 1 as a pip or pipx user runs it: no checkout, the example cluster comes with the package."""
    built = run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", tmp_path / "dist", REPO,
                cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("preemptguard-*.whl")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    venv.create(elsewhere / "venv", with_pip=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    installed = run(elsewhere / "venv" / "bin" / "pip", "install", "--quiet", wheel, cwd=elsewhere, env=env)
    assert installed.returncode == 0, installed.stderr
    demo = run(elsewhere / "venv" / "bin" / "preempt-guard", "demo", cwd=elsewhere, env=env, timeout=300)
    assert demo.returncode == 0, demo.stderr
    lines = demo.stdout.splitlines()
    assert len(lines) == len(list((REPO / "examples" / "pods").glob("*.yaml")))
    assert any(line.startswith("09-preempts-batch.yaml: allowed") and "would preempt 1 pod of other tenants" in line
               for line in lines), demo.stdout
    version = run(elsewhere / "venv" / "bin" / "kubectl-preempt_preview", "--version", cwd=elsewhere, env=env)
    assert version.stdout.strip() == f"kubectl preempt-preview {VERSION}"


def test_chart_and_dashboard_artifacts(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    built = run(REPO / "release" / "build-artifacts", "--out", out, cwd=tmp_path,
                env={**os.environ, "HELM": str(bin_dir() / "helm")})
    assert built.returncode == 0, built.stderr
    names = {f"preemptguard-{VERSION}.tgz", f"preemptguard-grafana-dashboard-{VERSION}.json",
             f"preemptguard-prometheus-rules-{VERSION}.yaml"}
    sums = dict(reversed(line.split()) for line in (out / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == names
    for name, digest in sums.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    # The packaged chart renders exactly what the chart directory renders.
    packaged = helm("template", RELEASE, str(out / f"preemptguard-{VERSION}.tgz"), "--namespace", NAMESPACE,
                    tmp=tmp_path)
    directory = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, tmp=tmp_path)
    assert packaged.returncode == 0 and packaged.stdout == directory.stdout, packaged.stderr
    dashboard = json.loads((out / f"preemptguard-grafana-dashboard-{VERSION}.json").read_text())
    assert dashboard == json.loads((CHART / "files" / "grafana-dashboard.json").read_text())


@pytest.fixture(scope="module")
def krew(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("krew")
    built = run(REPO / "release" / "build-krew", "--out", out, cwd=out, timeout=1500)
    assert built.returncode == 0, built.stderr
    return out


def test_the_krew_manifest_names_the_built_archives_by_sha256(krew: Path) -> None:
    manifest = yaml.safe_load((krew / "preempt-preview.yaml").read_text())
    jsonschema.validate(manifest, PLUGIN)
    assert manifest["spec"]["version"] == f"v{VERSION}"
    for platform in manifest["spec"]["platforms"]:
        archive = krew / platform["uri"].rsplit("/", 1)[1]
        assert platform["uri"].startswith(f"https://github.com/preemptguard/preemptguard/releases/download/v{VERSION}/")
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == platform["sha256"], archive.name
        with tarfile.open(archive) as tar:
            assert sorted(tar.getnames()) == ["LICENSE", "kubectl-preempt_preview", "kubectl_complete-preempt_preview"]


def test_the_plugin_in_the_linux_archive_runs(krew: Path, tmp_path: Path) -> None:
    arch = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]
    with tarfile.open(krew / f"kubectl-preempt_preview_linux_{arch}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    plugin = tmp_path / "kubectl-preempt_preview"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    version = run(plugin, "--version", cwd=tmp_path, env=env)
    assert version.stdout.strip() == f"kubectl preempt-preview {VERSION}", version.stderr
    preview = run(plugin, "--snapshot", REPO / "examples" / "cluster.yaml", "-f",
                  REPO / "examples" / "pods" / "09-preempts-batch.yaml", "-o", "name", cwd=tmp_path, env=env)
    assert (preview.returncode, preview.stdout) == (1, "pod/search-reindex\n"), preview.stderr
