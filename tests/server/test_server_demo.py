"""``preempt-guard demo``: every example pod through the real /mutate/pods over TLS, one line each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from webhook.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def demo_lines(capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    assert main(["demo", "--cluster-snapshot", str(EXAMPLES / "cluster.yaml"), *extra]) == 0
    return capsys.readouterr().out.splitlines()


def line_for(lines: list[str], prefix: str) -> str:
    (found,) = [line for line in lines if line.startswith(prefix)]
    return found


def test_demo_prints_one_line_per_example_pod(capsys: pytest.CaptureFixture[str]) -> None:
    lines = demo_lines(capsys)
    files = sorted(p.name for p in (EXAMPLES / "pods").glob("*.yaml"))
    assert len(lines) == len(files) and [line.split(":")[0].split(" ")[0] for line in lines] == files
    assert line_for(lines, "01-user-class.yaml").startswith("01-user-class.yaml: allowed, priority 1000000 (high)")
    assert line_for(lines, "02-no-class").startswith(
        "02-no-class-global-default.yaml: allowed, priority 1000 (standard)")
    assert line_for(lines, "04-unknown-class.yaml") == (
        '04-unknown-class.yaml: denied (403 Forbidden): pods "vip-api" is forbidden: '
        "no PriorityClass with name gold was found")
    # The victim is in another tenant (namespace batch): counted, never named (docs/interfaces.md §7).
    assert "would preempt 1 pod of other tenants on pool-batch-04" in line_for(lines, "09-preempts-batch.yaml")
    assert "report-daily" not in line_for(lines, "09-preempts-batch.yaml")
    assert "(1 PDB violation)" in line_for(lines, "10-pdb-violation.yaml")
    assert "it would stay Pending" in line_for(lines, "11-unschedulable-too-big.yaml")
    assert line_for(lines, "13-generate-name.yaml").startswith(
        '13-generate-name.yaml: denied (403 Forbidden): pods "report-"')
    assert line_for(lines, "14-deployment-high.yaml").startswith(
        "14-deployment-high.yaml (Deployment pod): allowed, priority 1000000 (high)")
    assert "fits on " in line_for(lines, "08-small-fits.yaml")


def test_demo_with_the_example_config_applies_the_critical_class_quota(capsys: pytest.CaptureFixture[str]) -> None:
    lines = demo_lines(capsys, "--config", str(EXAMPLES / "config.yaml"))
    assert line_for(lines, "15-critical-outside-kube-system.yaml") == (
        "15-critical-outside-kube-system.yaml: denied (500 Unknown): insufficient quota to match these scopes: "
        "[{PriorityClass In [system-node-critical system-cluster-critical]}]")
    assert line_for(lines, "03-system-cluster-critical.yaml").startswith(
        "03-system-cluster-critical.yaml: allowed, priority 2000000000 (system-cluster-critical)")


def test_demo_of_chosen_files_and_a_missing_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = demo_lines(capsys, str(EXAMPLES / "pods" / "08-small-fits.yaml"))
    assert len(lines) == 1 and lines[0].startswith("08-small-fits.yaml: allowed")
    assert main(["demo", "--cluster-snapshot", str(tmp_path / "none.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("preempt-guard: error: ")


def test_demo_into_a_closed_pipe_ends_quietly() -> None:
    # `preempt-guard demo | head -1`: the reader is gone before the output is written.
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook.cli", "demo", "--cluster-snapshot", str(EXAMPLES / "cluster.yaml"),
         str(EXAMPLES / "pods" / "08-small-fits.yaml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=EXAMPLES.parent)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141
    assert stderr == ""


def test_demo_without_arguments_runs_the_example_cluster_shipped_in_the_package(tmp_path: Path) -> None:
    # From a directory that has no examples/: the cluster and its pods come from the installed package.
    run = subprocess.run([sys.executable, "-m", "webhook.cli", "demo"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}, check=False)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line.split(":")[0].split(" ")[0] for line in lines] == sorted(
        p.name for p in (EXAMPLES / "pods").glob("*.yaml"))
    assert "would preempt 1 pod of other tenants on pool-batch-04" in line_for(lines, "09-preempts-batch.yaml")


def test_demo_keeps_the_whole_pending_reason_as_the_api_server_keeps_a_warning(
        capsys: pytest.CaptureFixture[str]) -> None:
    lines = demo_lines(capsys, str(EXAMPLES / "pods" / "07-never-class.yaml"))
    # The scheduler's message to its end (over 119 characters; the API server keeps 256 of a warning).
    reason = lines[0].split("it would stay Pending: ", 1)[1]
    assert reason.startswith("0/26 nodes are available: ")
    assert reason.endswith("preemption: not eligible due to preemptionPolicy=Never.")
    assert len(reason) > 119
