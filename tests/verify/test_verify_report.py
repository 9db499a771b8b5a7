"""The ``VerificationReport`` shapes (docs/interfaces.md §8) and the exit status, from results built by hand."""

from __future__ import annotations

import json

import pytest

from webhook.observe.compare import ERROR, Observed, Predicted, compare
from webhook.preemption.results import Outcome as Out
from webhook.verify.engine import Prediction
from webhook.verify.observe import Observation
from webhook.verify.report import exit_status, format_table, render, report_json
from webhook.verify.runner import VerifyResult


def result(scenario: str, pod: str, predicted: tuple[str, str | None, tuple[str, ...], tuple[str, ...]],
           observed: Observation, *, tied_victims: tuple[tuple[str, tuple[str, ...]], ...] = (),
           fidelity: tuple[str, ...] = ()) -> VerifyResult:
    outcome, node, victims, tied = predicted
    tied_victims = tied_victims or tuple((n, victims) for n in tied)
    prediction = Prediction(pod=pod, outcome=outcome, node=node, victims=victims, tied_nodes=tied,
                            tied_victims=tied_victims, candidate_nodes=len(tied), sampled=False, message="m",
                            preview={})
    comparison = compare(Predicted(outcome, node, victims, tied, tied_victims=tied_victims),
                         Observed(observed.outcome, observed.node, observed.victims, observed.message))
    return VerifyResult(scenario, pod, prediction, observed, comparison, fidelity)


AGREE = result("s1", "team-a/web-0", (Out.PREEMPTS, "n1", ("batch/a",), ("n1",)),
               Observation(Out.PREEMPTS, "n1", ("batch/a",), "preempting 1 victims", pod_name="web-0", bound_node="n1"))
TIED = result("s2", "team-a/web-1", (Out.PREEMPTS, "n1", ("batch/b",), ("n1", "n2")),
              Observation(Out.PREEMPTS, "n2", ("batch/c",), "preempting 1 victims", pod_name="web-1"),
              tied_victims=(("n1", ("batch/b",)), ("n2", ("batch/c",))))
FITS = result("s5", "team-a/small", (Out.FITS, "n1", (), ()), Observation(Out.FITS, "n3", pod_name="small"),
              fidelity=("RuntimeClass gvisor is not in the snapshot",))
SCORED_TIE = result("s6", "team-a/web-2", (Out.FITS, "n1", (), ("n1", "n2")), Observation(Out.FITS, "n2",
                    pod_name="web-2"))
DIFFER = result("s3", "team-a/api", (Out.FITS, "n1", (), ()), Observation(Out.UNSCHEDULABLE, message="0/3 nodes"))
UNOBSERVED = result("s4", "team-a/slow", (Out.FITS, "n1", (), ()), Observation(ERROR, message="no decision within 5s"))


def test_json_has_the_contract_shape() -> None:
    report = report_json([AGREE], "v1.37.2")
    assert report["apiVersion"] == "preemptguard.io/v1alpha1"
    assert report["kind"] == "VerificationReport"
    assert report["kubernetesVersion"] == "v1.37.2"
    entry = report["results"][0]
    assert entry["scenario"] == "s1" and entry["pod"] == "team-a/web-0"
    assert {k: entry["predicted"][k] for k in ("outcome", "node", "victims", "tiedNodes")} == {
        "outcome": "Preempts", "node": "n1", "victims": ["batch/a"], "tiedNodes": ["n1"]}
    assert {k: entry["observed"][k] for k in ("outcome", "node", "victims", "message")} == {
        "outcome": "Preempts", "node": "n1", "victims": ["batch/a"], "message": "preempting 1 victims"}
    assert entry["agree"] is True and entry["why"] == "" and entry["verdict"] == "agree"
    assert report["summary"]["pods"] == 1 and report["summary"]["agree"] == 1
    json.dumps(report)  # plain JSON all the way down


def test_single_snapshot_results_carry_no_scenario() -> None:
    single = result("", "team-a/web-0", (Out.FITS, "n1", (), ()), Observation(Out.FITS, "n2", pod_name="web-0"))
    assert "scenario" not in report_json([single], "v1.37.2")["results"][0]
    assert "SCENARIO" not in format_table([single], "v1.37.2")


def test_summary_counts_agreement_ties_disagreements_and_errors() -> None:
    summary = report_json([AGREE, TIED, DIFFER, UNOBSERVED], "v1.37.2")["summary"]
    assert summary == {"pods": 4, "agree": 2, "disagree": 1, "errors": 1, "tied": 1, "explainedBySampling": 0,
                       "scenarios": 4, "nodeNotCompared": 0, "scenariosWithFidelityNotes": 0}


@pytest.mark.parametrize(("results", "status"), [
    ([AGREE, TIED], 0), ([AGREE, DIFFER], 1), ([AGREE, DIFFER, UNOBSERVED], 2), ([UNOBSERVED], 2), ([], 2)])
def test_exit_status(results: list[VerifyResult], status: int) -> None:
    assert exit_status(results) == status


def test_table_lists_every_pod_says_why_and_sums_up() -> None:
    table = render([AGREE, DIFFER, UNOBSERVED], "v1.37.2", "table")
    lines = table.splitlines()
    assert lines[0].split() == ["SCENARIO", "POD", "PREDICTED", "NODE", "VICTIMS", "OBSERVED", "NODE", "VICTIMS",
                                "AGREE"]
    assert lines[1].split() == ["s1", "team-a/web-0", "Preempts", "n1", "1", "Preempts", "n1", "1", "yes"]
    assert lines[2].split()[-1] == "NO" and lines[3].split()[-1] == "error"
    assert "s3 team-a/api: predicted Fits, observed Unschedulable." in lines
    assert "s4 team-a/slow: not observed: no decision within 5s" in lines
    assert lines[-1] == "kube-scheduler v1.37.2: 1/3 pods agree (1 disagree, 1 not observed, 0 tied)"


def test_json_output_is_the_report() -> None:
    assert json.loads(render([AGREE], "v1.37.2", "json")) == report_json([AGREE], "v1.37.2")


def test_a_tie_reports_the_victims_predicted_for_every_tied_node() -> None:
    entry = report_json([TIED], "v1.36.3")["results"][0]
    assert entry["predicted"]["tiedNodeVictims"] == {"n1": ["batch/b"], "n2": ["batch/c"]}
    assert entry["agree"] and entry["compared"] == ["outcome", "node", "victims"]


def test_a_fit_says_its_node_was_not_compared_and_fidelity_notes_are_reported() -> None:
    report = report_json([FITS, AGREE], "v1.34.4")
    entry = report["results"][0]
    assert entry["compared"] == ["outcome"] and entry["notCompared"] == "node not compared"
    assert entry["fidelity"] == ["RuntimeClass gvisor is not in the snapshot"]
    assert "notCompared" not in report["results"][1] and "fidelity" not in report["results"][1]
    assert report["summary"]["nodeNotCompared"] == 1 and report["summary"]["scenariosWithFidelityNotes"] == 1
    table = format_table([FITS, AGREE], "v1.34.4").splitlines()
    assert "fidelity s5: RuntimeClass gvisor is not in the snapshot" in table
    assert table[-1] == ("kube-scheduler v1.34.4: 2/2 pods agree (0 disagree, 0 not observed, 0 tied, "
                         "1 Fits: node not compared)")


def test_the_report_names_the_release_the_prediction_followed_when_it_is_not_the_binaries() -> None:
    assert report_json([AGREE], "v1.34.4", "v1.34")["predictionRelease"] == "v1.34"
    assert "predictionRelease" not in report_json([AGREE], "v1.34.4")
    assert format_table([AGREE], "v1.34.4", "v1.34").splitlines()[-1].startswith("kube-scheduler v1.34.4: 1/1")
    assert format_table([AGREE], "v1.37.2", "v1.34").splitlines()[-1].startswith(
        "kube-scheduler v1.37.2 (predicted as v1.34): 1/1")


def test_a_fit_with_a_claimed_node_compares_it_and_counts_its_tie() -> None:
    report = report_json([SCORED_TIE, FITS], "v1.37.2")
    entry = report["results"][0]
    assert entry["agree"] and entry["compared"] == ["outcome", "node"] and "notCompared" not in entry
    assert report["summary"]["tied"] == 1 and report["summary"]["nodeNotCompared"] == 1
