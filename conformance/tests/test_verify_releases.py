"""``preempt-guard verify`` against an older release (releases.OLDER_RELEASE, built by ``conformance/build
--kube-version``): before v1.37 the scheduler announces no victim count, so every ``Preempts`` is observed from
the API alone (DisruptionTarget, deletions, Preempted Events). The example pods and a seeded sample of the
lived-in random clusters must agree, with the report naming the release it ran against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from releases import OLDER_RELEASE, older_bin
from test_verify import disagreements, example_scenarios

from bench.scenariogen import write_scenarios
from webhook.cli import main

SAMPLE_SEED, SAMPLE_SIZE = 7, 10


def verify_older(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["verify", "--kube-bin", str(older_bin()), "-o", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.timeout(900)
def test_every_example_pod_agrees_on_the_older_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = verify_older(capsys, "--scenarios", str(example_scenarios(tmp_path / "examples")))
    print(f"\nexample pods against kube-scheduler {report['kubernetesVersion']}: {report['summary']}")
    assert report["kubernetesVersion"] == OLDER_RELEASE
    outcomes = {r["observed"]["outcome"] for r in report["results"]}
    assert outcomes == {"Fits", "Preempts", "Unschedulable", "Rejected"}  # Preempts observed, not timed out
    assert report["summary"]["errors"] == 0 and disagreements(report) == {} and code == 0


@pytest.mark.timeout(600)
def test_a_seeded_sample_of_lived_in_clusters_agrees_on_the_older_release(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_scenarios(tmp_path / "sample", SAMPLE_SIZE, SAMPLE_SEED)
    code, report = verify_older(capsys, "--scenarios", str(tmp_path / "sample"))
    summary = report["summary"]
    print(f"\nseed {SAMPLE_SEED}, {SAMPLE_SIZE} random clusters against kube-scheduler {report['kubernetesVersion']}:"
          f" {summary}")
    assert summary["scenarios"] == SAMPLE_SIZE and summary["errors"] == 0
    assert any(r["observed"]["outcome"] == "Preempts" for r in report["results"])
    assert disagreements(report) == {} and code == 0
