"""The verdict: a predicted outcome held against what kube-scheduler did (docs/interfaces.md §8, reused by §9).

Pure and small on purpose: ``verify`` compares a prediction with an observation on a throwaway control plane,
and the live observer compares the same two things in a real cluster; both call ``compare``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

from webhook.preemption.results import Outcome

# An observed outcome beyond the predictor's ``Outcome``s: the observation could not be made (timeout, an API
# failure); never an agreement.
ERROR = "Error"


class Verdict(StrEnum):
    """Contract §9 ``verdict`` label values."""

    AGREE = "agree"
    NODE_DIFFERS = "node_differs"
    VICTIMS_DIFFER = "victims_differ"
    OUTCOME_DIFFERS = "outcome_differs"
    UNOBSERVED = "unobserved"


SAMPLING = "sampling"  # ``Comparison.explained_by``: upstream sampled fewer candidates than PreemptGuard examined


@dataclass(frozen=True, slots=True)
class Predicted:
    outcome: str
    node: str | None = None
    victims: tuple[str, ...] = ()  # "namespace/name"
    tied_nodes: tuple[str, ...] = ()
    sampled: bool = False  # candidateNodes exceeded what upstream's dry run collects
    # The victims predicted on each tied node ("namespace/name"), where known (``verify``); the live observer
    # keeps none (its memory is bounded), and there a tied node's victims are compared by number only.
    tied_victims: tuple[tuple[str, tuple[str, ...]], ...] | None = None


@dataclass(frozen=True, slots=True)
class Observed:
    outcome: str
    node: str | None = None
    victims: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True, slots=True)
class Comparison:
    agree: bool
    why: str
    verdict: Verdict
    explained_by: str | None = None  # SAMPLING when upstream's candidate sampling explains a disagreement
    # What was held against the observation: "outcome", "node", "victims" (or "victim count" on a tied node
    # whose victims were not predicted one by one). A ``Fits`` compares the node too when the prediction claims
    # one (``tiedNodes`` set: the scored choice of every feasible node, or the nominated or only node); not when
    # the scheduler scores a sample of the feasible nodes (placement ``sampled``) or scores nothing.
    compared: tuple[str, ...] = ()


def _names(items: Collection[str]) -> str:
    return ", ".join(sorted(items)) if items else "none"


def _sampling_note(predicted: Predicted) -> str:
    return (" Upstream dry-runs only a sample of the candidate nodes (DefaultPreemptionArgs"
            " minCandidateNodesPercentage/minCandidateNodesAbsolute) and PreemptGuard examined more candidates"
            " than that; set scheduler.minCandidateNodesAbsolute at least to the node count to compare exactly."
            if predicted.sampled else "")


OUTCOME, NODE, VICTIMS, VICTIM_COUNT = "outcome", "node", "victims", "victim count"
NODE_NOT_COMPARED = "node not compared"


def compare(predicted: Predicted, observed: Observed) -> Comparison:
    """``agree`` (docs/interfaces.md §8): the same outcome; for ``Preempts`` the observed node is the predicted one
    or among ``tiedNodes`` (upstream picks among full ties at random), and the victims the scheduler evicted there
    are exactly those PreemptGuard predicts for that node (by number only where the prediction does not list a
    tied node's victims). A ``Fits`` compares the node when the prediction claims one (``tiedNodes`` set): the
    observed node is the predicted one or among ``tiedNodes`` (selectHost picks among equal scores at random);
    else the outcome only: "node not compared"."""
    if observed.outcome == ERROR:
        return Comparison(False, f"not observed: {observed.message}".rstrip(": "), Verdict.UNOBSERVED)
    if predicted.outcome != observed.outcome:
        where = f" on {observed.node}" if observed.node else ""
        why = f"predicted {predicted.outcome}, observed {observed.outcome}{where}."
        # The API server's words say which rule refused it.
        if observed.outcome == Outcome.REJECTED and observed.message:
            why = f"{why[:-1]}: {observed.message}"
        if Outcome.PREEMPTS in (predicted.outcome, observed.outcome) and predicted.sampled:
            return Comparison(False, why + _sampling_note(predicted), Verdict.OUTCOME_DIFFERS, SAMPLING, (OUTCOME,))
        return Comparison(False, why, Verdict.OUTCOME_DIFFERS, compared=(OUTCOME,))
    if predicted.outcome == Outcome.FITS and predicted.tied_nodes and observed.node:
        return _fits_node(predicted, observed)
    if predicted.outcome != Outcome.PREEMPTS:
        return Comparison(True, "", Verdict.AGREE, compared=(OUTCOME,))
    if observed.node == predicted.node:
        return _same_victims(predicted.victims, observed, "")
    if observed.node in predicted.tied_nodes:
        tied = f"the scheduler picked {observed.node} among {len(predicted.tied_nodes)} tied nodes" \
               f" (upstream picks one at random; PreemptGuard shows {predicted.node})"
        expected = dict(predicted.tied_victims).get(str(observed.node)) if predicted.tied_victims is not None \
            else None
        if expected is not None:
            return _same_victims(expected, observed, tied)
        if len(observed.victims) == len(predicted.victims):
            return Comparison(True, f"{tied}; a full tie means as many victims.", Verdict.AGREE,
                              compared=(OUTCOME, NODE, VICTIM_COUNT))
        why = (f"{tied} with {len(observed.victims)} victim(s); a full tie means {len(predicted.victims)}"
               f" as on {predicted.node}.")
        return Comparison(False, why, Verdict.VICTIMS_DIFFER, compared=(OUTCOME, NODE, VICTIM_COUNT))
    why = (f"the scheduler nominated {observed.node}; predicted {predicted.node}"
           f"{' or one of ' + _names(predicted.tied_nodes) if len(predicted.tied_nodes) > 1 else ''}.")
    if predicted.sampled:
        return Comparison(False, why + _sampling_note(predicted), Verdict.NODE_DIFFERS, SAMPLING, (OUTCOME, NODE))
    return Comparison(False, why, Verdict.NODE_DIFFERS, compared=(OUTCOME, NODE))


def _same_victims(expected: Collection[str], observed: Observed, tied: str) -> Comparison:
    """The victim sets on the node the scheduler nominated (``tied``: how it came to be a tied node, or "")."""
    compared = (OUTCOME, NODE, VICTIMS)
    if set(observed.victims) == set(expected):
        return Comparison(True, f"{tied}; its victims are the ones PreemptGuard predicts there." if tied else "",
                          Verdict.AGREE, compared=compared)
    missing = set(expected) - set(observed.victims)
    extra = set(observed.victims) - set(expected)
    why = (f"on {observed.node} the scheduler evicted {_names(observed.victims)};"
           f" predicted {_names(expected)} (not evicted: {_names(missing)}; unexpected: {_names(extra)}).")
    return Comparison(False, f"{tied}: {why}" if tied else why, Verdict.VICTIMS_DIFFER, compared=compared)


def fits_node_compared(comparison: Comparison) -> bool:
    """Whether a ``Fits`` comparison held the node (else the report says "node not compared")."""
    return NODE in comparison.compared


def _fits_node(predicted: Predicted, observed: Observed) -> Comparison:
    """The node the scheduler bound a ``Fits`` pod to against the scored one (schedulePod's selectHost takes one
    of the nodes of the highest score at random: any of ``tiedNodes`` agrees)."""
    compared = (OUTCOME, NODE)
    if observed.node == predicted.node:
        return Comparison(True, "", Verdict.AGREE, compared=compared)
    if observed.node in predicted.tied_nodes:
        return Comparison(True, f"the scheduler bound it to {observed.node} among {len(predicted.tied_nodes)} nodes"
                          f" of the highest score (upstream picks one at random; PreemptGuard shows {predicted.node}).",
                          Verdict.AGREE, compared=compared)
    why = (f"the scheduler bound it to {observed.node}; predicted {predicted.node}"
           f"{' or one of ' + _names(predicted.tied_nodes) if len(predicted.tied_nodes) > 1 else ''}.")
    return Comparison(False, why, Verdict.NODE_DIFFERS, compared=compared)
