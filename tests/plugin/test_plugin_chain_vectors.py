"""``kubectl preempt-preview --snapshot`` on the admission-chain vectors the real control plane decided
(tests/vectors/real_scheduler/chain-*, issue #26): a LimitRange-defaulted namespace, a RuntimeClass with overhead
and scheduling, a missing RuntimeClass, a missing namespace, a resized pod, a gated pod and a pod of another
scheduler. The plugin must say what kube-apiserver and kube-scheduler v1.37.2 did (``observed``), with the exit
status that goes with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubectl_plugin.cli import main

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "real_scheduler"
CASES = sorted(p for p in VECTORS.iterdir() if p.name.startswith("chain-"))


def test_every_admission_chain_feature_has_a_case() -> None:
    outcomes = {yaml.safe_load((c / "expected.yaml").read_text())["observed"][0]["outcome"] for c in CASES}
    assert len(CASES) == 7 and outcomes == {"Preempts", "Rejected", "Gated", "NotScheduled"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_plugin_says_what_the_real_control_plane_did(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = yaml.safe_load((case / "expected.yaml").read_text())
    assert record["kubernetesVersion"] == "v1.37.2"
    code = main(["--snapshot", str(case / "snapshot.yaml"), "-f", str(case / "pod.yaml"), "-o", "json"])
    preview = json.loads(capsys.readouterr().out)
    [seen] = record["observed"]
    [result] = preview["results"]
    victims = sorted(f"{v['namespace']}/{v['name']}" for v in result.get("victims") or [])
    assert (result["pod"], result["outcome"], result["node"], victims) == (
        seen["pod"], seen["outcome"], seen["node"], sorted(seen["victims"]))
    if seen["outcome"] == "Rejected":
        assert result["message"] == seen["message"]
    assert code == 1  # none of them fits without evicting anyone
