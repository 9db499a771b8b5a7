"""The cases the real control plane decided (tests/vectors/real_scheduler/), predicted offline: PreemptGuard must
say what kube-scheduler and kube-apiserver did. A disagreement is fixed before its case is recorded here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.observe.compare import Observed, Predicted, compare
from webhook.verify.engine import DEFAULT_CONFIG, predict_in_order, scheduler_for_release, state_from_objects
from webhook.verify.loader import read_objects
from webhook.verify.scenarios import discover, read_pods

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "real_scheduler"


def expected(case: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((case / "expected.yaml").read_text(encoding="utf-8"))
    return loaded


CASES = [s.snapshot.parent for s in discover(VECTORS)]


def test_every_case_says_what_the_real_control_plane_did() -> None:
    assert CASES
    for case in CASES:
        record = expected(case)
        assert record["kubernetesVersion"].startswith("v1.") and record["observed"]
        assert all(set(o) >= {"pod", "outcome", "node", "victims"} for o in record["observed"])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_preemptguard_predicts_what_the_real_control_plane_did(case: Path) -> None:
    """Predicted for the release the case was observed on (``kubernetesVersion``), as ``verify`` predicts it."""
    state = state_from_objects(read_objects(case / "snapshot.yaml"), str(case / "snapshot.yaml"))
    scheduler, _ = scheduler_for_release(DEFAULT_CONFIG.scheduler, None, expected(case)["kubernetesVersion"])
    predictions = predict_in_order(state, read_pods([case / "pod.yaml"]), scheduler)
    observed = expected(case)["observed"]
    assert [p.pod for p in predictions] == [o["pod"] for o in observed]
    for prediction, seen in zip(predictions, observed, strict=True):
        verdict = compare(Predicted(prediction.outcome, prediction.node, prediction.victims, prediction.tied_nodes,
                                    tied_victims=prediction.tied_victims),
                          Observed(seen["outcome"], seen["node"], tuple(seen["victims"])))
        assert verdict.agree, f"{prediction.pod}: {verdict.why}"


def test_each_release_difference_is_a_case_on_the_releases_the_tier_runs() -> None:
    releases = {case.name: expected(case)["kubernetesVersion"] for case in CASES if case.name.startswith("release-")}
    assert set(releases.values()) == {"v1.34.4", "v1.37.2"}, releases  # the older CI release and the default
