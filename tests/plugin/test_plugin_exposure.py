"""``kubectl preempt-preview exposure``: the real kubectl runs the plugin. Offline from a snapshot it prints what the
server's own code computes; from a cluster it reads the namespace's PolicyReport with the caller's credentials."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import CLUSTER, EXAMPLES, ROOT, Kubectl
from webhook.config import load_config
from webhook.exposure import compute_exposure
from webhook.exposure.report import policy_report
from webhook.sources.loader import load_snapshot

sys.path.insert(0, str(ROOT / "tests" / "sources"))

from fake_apiserver import FakeApiServer

CONFIG = EXAMPLES / "config.yaml"


def without_time(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "results": [{k: v for k, v in r.items() if k != "timestamp"} for r in report["results"]]}


def test_offline_it_prints_what_the_server_computes(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", "exposure", "--snapshot", str(CLUSTER), "--config", str(CONFIG), "-o", "json")
    assert run.returncode == 0, run.stderr
    listed = json.loads(run.stdout)
    assert listed["kind"] == "List"
    expected = [policy_report(e, timestamp=0) for e in compute_exposure(load_snapshot(CLUSTER), load_config(CONFIG))]
    assert [without_time(r) for r in listed["items"]] == [without_time(r) for r in expected]
    assert {r["metadata"]["namespace"] for r in listed["items"]} >= {"team-a", "team-b", "batch"}


def test_offline_table_for_one_namespace(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", "exposure", "--snapshot", str(CLUSTER), "--config", str(CONFIG),
                      "-n", "team-b")
    assert run.returncode == 0, run.stderr
    header, *rows = run.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "PRIORITY", "CLASSES", "RUNNING", "PDB-PROTECTED", "PREEMPTIBLE-BY"]
    assert rows[0].split()[:5] == ["team-b", "1000", "standard", "10", "10"]
    assert "system-node-critical (2000001000; 1 other tenant)" in rows[0]  # only kube-system's quota covers it
    assert "PODDISRUPTIONBUDGET" in run.stdout and "payments" in run.stdout
    assert "team-a" not in run.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["-n", "team-a", "-A"], "give either -n NAMESPACE or -A, not both"),
    (["--config", "x.yaml"], "--config applies to --snapshot"),
    (["--snapshot", "missing.yaml"], "--snapshot missing.yaml: file not found"),
    (["--snapshot", str(CLUSTER), "-n", "nowhere"], 'namespace "nowhere" is not in the snapshot'),
    (["-o", "wide"], "invalid choice: 'wide'"),
])
def test_usage_and_input_errors_are_one_line_and_exit_2(kubectl: Kubectl, args: list[str], message: str) -> None:
    run = kubectl.run("preempt-preview", "exposure", *args)
    assert run.returncode == 2 and message in run.stderr and run.stderr.count("\n") == 1, run.stderr


def test_help(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", "exposure", "--help")
    assert run.returncode == 0 and "kubectl preempt-preview exposure [-n NAMESPACE | -A]" in run.stdout
    assert "exposure -n team-a" in kubectl.run("preempt-preview", "--help").stdout


async def test_from_a_cluster_it_reads_the_namespace_s_report(kubectl: Kubectl, tmp_path: Path) -> None:
    async with FakeApiServer() as fake:
        kubeconfig = str(fake.write_kubeconfig(tmp_path))
        missing = await kubectl.arun("preempt-preview", "exposure", "--kubeconfig", kubeconfig, "-n", "team-b")
        assert missing.returncode == 2 and "no PreemptGuard exposure report in namespace \"team-b\"" in missing.stderr
        fake.policy_report_crd = True
        state = load_snapshot(CLUSTER)
        for exposure in compute_exposure(state, load_config(CONFIG), ["team-a", "team-b"]):
            report = policy_report(exposure, timestamp=1)
            fake.policy_reports[(exposure.namespace, report["metadata"]["name"])] = report
        run = await kubectl.arun("preempt-preview", "exposure", "--kubeconfig", kubeconfig, "-n", "team-b",
                                 "-o", "json")
        assert run.returncode == 0, run.stderr
        (report,) = json.loads(run.stdout)["items"]
        assert report == fake.policy_reports[("team-b", "preemptguard-exposure")]
        every = await kubectl.arun("preempt-preview", "exposure", "--kubeconfig", kubeconfig, "-A")
        assert every.returncode == 0, every.stderr
        assert {line.split()[0] for line in every.stdout.splitlines()[1:] if line} >= {"team-a", "team-b"}
