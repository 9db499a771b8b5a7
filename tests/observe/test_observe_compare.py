"""The verdict (docs/interfaces.md §8 ``agree``/``why``, §9 verdict labels): a pure function, table-driven."""

from __future__ import annotations

import pytest

from webhook.observe.compare import ERROR, SAMPLING, Comparison, Observed, Predicted, Verdict, compare
from webhook.preemption.results import Outcome as Out

P = Predicted(Out.PREEMPTS, "n1", ("b/a", "b/b"), ("n1",))
TIED = Predicted(Out.PREEMPTS, "n1", ("b/a",), ("n1", "n2", "n3"))

CASES = [
    # id, predicted, observed, agree, verdict
    ("fits-fits-any-node-when-no-node-claimed", Predicted(Out.FITS, "n1"), Observed(Out.FITS, "n7"), True,
     Verdict.AGREE),
    ("fits-scored-node", Predicted(Out.FITS, "n1", tied_nodes=("n1",)), Observed(Out.FITS, "n1"), True, Verdict.AGREE),
    ("fits-other-node", Predicted(Out.FITS, "n1", tied_nodes=("n1",)), Observed(Out.FITS, "n7"), False,
     Verdict.NODE_DIFFERS),
    ("fits-tied-node", Predicted(Out.FITS, "n1", tied_nodes=("n1", "n4")), Observed(Out.FITS, "n4"), True,
     Verdict.AGREE),
    ("fits-untied-node", Predicted(Out.FITS, "n1", tied_nodes=("n1", "n4")), Observed(Out.FITS, "n2"), False,
     Verdict.NODE_DIFFERS),
    ("unschedulable-both", Predicted(Out.UNSCHEDULABLE), Observed(Out.UNSCHEDULABLE), True, Verdict.AGREE),
    ("rejected-both", Predicted(Out.REJECTED), Observed(Out.REJECTED, message="forbidden"), True, Verdict.AGREE),
    ("preempts-same-node-same-victims", P, Observed(Out.PREEMPTS, "n1", ("b/b", "b/a")), True, Verdict.AGREE),
    ("preempts-same-node-other-victims", P, Observed(Out.PREEMPTS, "n1", ("b/a",)), False, Verdict.VICTIMS_DIFFER),
    ("preempts-other-node", P, Observed(Out.PREEMPTS, "n2", ("b/c", "b/d")), False, Verdict.NODE_DIFFERS),
    ("preempts-tied-node", TIED, Observed(Out.PREEMPTS, "n3", ("b/z",)), True, Verdict.AGREE),
    ("preempts-tied-node-more-victims", TIED, Observed(Out.PREEMPTS, "n2", ("b/y", "b/z")), False,
     Verdict.VICTIMS_DIFFER),
    ("preempts-untied-node", TIED, Observed(Out.PREEMPTS, "n9", ("b/z",)), False, Verdict.NODE_DIFFERS),
    ("fits-vs-preempts", Predicted(Out.FITS, "n1"), Observed(Out.PREEMPTS, "n1", ("b/a",)), False,
     Verdict.OUTCOME_DIFFERS),
    ("preempts-vs-unschedulable", P, Observed(Out.UNSCHEDULABLE), False, Verdict.OUTCOME_DIFFERS),
    ("unschedulable-vs-rejected", Predicted(Out.UNSCHEDULABLE), Observed(Out.REJECTED), False, Verdict.OUTCOME_DIFFERS),
    ("error-never-agrees", Predicted(Out.FITS, "n1"), Observed(ERROR, message="no decision within 5s"), False,
     Verdict.UNOBSERVED),
    ("error-even-when-predicted-error", Predicted(ERROR), Observed(ERROR, message="x"), False, Verdict.UNOBSERVED),
]


@pytest.mark.parametrize(("predicted", "observed", "agree", "verdict"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_compare(predicted: Predicted, observed: Observed, agree: bool, verdict: Verdict) -> None:
    result = compare(predicted, observed)
    assert (result.agree, result.verdict) == (agree, verdict)
    assert result.explained_by is None
    # A disagreement always says why; an agreement on the predicted node says nothing.
    assert bool(result.why) == (not agree or (observed.node not in (None, predicted.node)
                                              and (observed.outcome == Out.PREEMPTS or bool(predicted.tied_nodes))))


def test_verdict_labels_are_the_contract_names() -> None:
    assert [v.value for v in Verdict] == ["agree", "node_differs", "victims_differ", "outcome_differs", "unobserved"]


def test_why_names_the_victims_that_differ() -> None:
    why = compare(P, Observed(Out.PREEMPTS, "n1", ("b/a", "b/x"))).why
    assert "not evicted: b/b" in why and "unexpected: b/x" in why


def test_why_names_the_outcomes_and_the_node() -> None:
    assert compare(Predicted(Out.UNSCHEDULABLE), Observed(Out.PREEMPTS, "n4", ("b/a",))).why == (
        "predicted Unschedulable, observed Preempts on n4.")


def test_a_rejection_says_what_the_api_server_said() -> None:
    observed = Observed(Out.REJECTED, message='pods "p" is forbidden: exceeded quota: compute')
    assert compare(Predicted(Out.FITS, "n1"), observed).why == (
        'predicted Fits, observed Rejected: pods "p" is forbidden: exceeded quota: compute')


def test_a_tie_says_which_node_upstream_picked() -> None:
    result = compare(TIED, Observed(Out.PREEMPTS, "n2", ("b/q",)))
    assert result.agree and "n2" in result.why and "3 tied nodes" in result.why


@pytest.mark.parametrize("observed", [Observed(Out.PREEMPTS, "n5", ("b/q",)), Observed(Out.UNSCHEDULABLE)])
def test_a_disagreement_upstream_sampling_explains_is_reported_as_such(observed: Observed) -> None:
    sampled = Predicted(Out.PREEMPTS, "n1", ("b/a",), ("n1",), sampled=True)
    result = compare(sampled, observed)
    assert result == Comparison(False, result.why, result.verdict, SAMPLING, result.compared)
    assert not result.agree and "minCandidateNodesAbsolute" in result.why


def test_sampling_does_not_excuse_other_victims_on_the_same_node() -> None:
    sampled = Predicted(Out.PREEMPTS, "n1", ("b/a",), ("n1",), sampled=True)
    assert compare(sampled, Observed(Out.PREEMPTS, "n1", ("b/b",))).explained_by is None


STRICT_TIED = Predicted(Out.PREEMPTS, "n1", ("b/a",), ("n1", "n2", "n3"),
                        tied_victims=(("n1", ("b/a",)), ("n2", ("b/q",)), ("n3", ("b/z",))))


def test_on_a_tied_node_the_victims_predicted_for_that_node_are_compared_one_by_one() -> None:
    agree = compare(STRICT_TIED, Observed(Out.PREEMPTS, "n2", ("b/q",)))
    assert agree.agree and agree.compared == ("outcome", "node", "victims")
    assert agree.why.startswith("the scheduler picked n2 among 3 tied nodes")
    # The same number of victims, but not the ones predicted for n2: before the strict comparison, an agreement.
    other = compare(STRICT_TIED, Observed(Out.PREEMPTS, "n2", ("b/z",)))
    assert (other.agree, other.verdict) == (False, Verdict.VICTIMS_DIFFER)
    assert "not evicted: b/q" in other.why and "unexpected: b/z" in other.why


def test_what_was_compared_is_said() -> None:
    assert compare(Predicted(Out.FITS, "n1"), Observed(Out.FITS, "n7")).compared == ("outcome",)
    assert compare(P, Observed(Out.PREEMPTS, "n1", ("b/a", "b/b"))).compared == ("outcome", "node", "victims")
    # Without per-node victims (the live observer keeps none), a tied node is compared by the number of victims.
    assert compare(TIED, Observed(Out.PREEMPTS, "n3", ("b/z",))).compared == ("outcome", "node", "victim count")
    assert compare(P, Observed(ERROR, message="x")).compared == ()


def test_a_fit_compares_the_node_only_where_the_prediction_claims_one() -> None:
    """tiedNodes set (scored every feasible node): the node is held; empty (sampled, unscored): the outcome only."""
    tied = compare(Predicted(Out.FITS, "n1", tied_nodes=("n1", "n4")), Observed(Out.FITS, "n4"))
    assert tied.compared == ("outcome", "node")
    assert tied.why == ("the scheduler bound it to n4 among 2 nodes of the highest score (upstream picks one at"
                        " random; PreemptGuard shows n1).")
    other = compare(Predicted(Out.FITS, "n1", tied_nodes=("n1", "n4")), Observed(Out.FITS, "n2"))
    assert other.why == "the scheduler bound it to n2; predicted n1 or one of n1, n4."
    assert compare(Predicted(Out.FITS, "n1"), Observed(Out.FITS, "n2")).compared == ("outcome",)
