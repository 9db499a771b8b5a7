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


def _names(items: Collection[str]) -> str:
    return ", ".join(sorted(items)) if items else "none"


def _sampling_note(predicted: Predicted) -> str:
    return (" Upstream dry-runs only a sample of the candidate nodes (DefaultPreemptionArgs"
            " minCandidateNodesPercentage/minCandidateNodesAbsolute) and PreemptGuard examined more candidates"
            " than that; set scheduler.minCandidateNodesAbsolute at least to the node count to compare exactly."
            if predicted.sampled else "")


def compare(predicted: Predicted, observed: Observed) -> Comparison:
    """``agree`` (docs/interfaces.md §8): the same outcome; for ``Preempts`` the observed node is the predicted one or
    among ``tiedNodes`` (upstream picks among full ties at random), and on the predicted node the victim sets
    are equal. On another tied node the victims cannot be compared one by one, but a full tie means as many
    victims (upstream's fourth criterion), so their number must match."""
    if observed.outcome == ERROR:
        return Comparison(False, f"not observed: {observed.message}".rstrip(": "), Verdict.UNOBSERVED)
    if predicted.outcome != observed.outcome:
        where = f" on {observed.node}" if observed.node else ""
        why = f"predicted {predicted.outcome}, observed {observed.outcome}{where}."
        # The API server's words say which rule refused it.
        if observed.outcome == Outcome.REJECTED and observed.message:
            why = f"{why[:-1]}: {observed.message}"
        if Outcome.PREEMPTS in (predicted.outcome, observed.outcome) and predicted.sampled:
            return Comparison(False, why + _sampling_note(predicted), Verdict.OUTCOME_DIFFERS, SAMPLING)
        return Comparison(False, why, Verdict.OUTCOME_DIFFERS)
    if predicted.outcome != Outcome.PREEMPTS:
        return Comparison(True, "", Verdict.AGREE)
    if observed.node == predicted.node:
        if set(observed.victims) == set(predicted.victims):
            return Comparison(True, "", Verdict.AGREE)
        missing = set(predicted.victims) - set(observed.victims)
        extra = set(observed.victims) - set(predicted.victims)
        why = (f"on {observed.node} the scheduler evicted {_names(observed.victims)};"
               f" predicted {_names(predicted.victims)} (not evicted: {_names(missing)}; unexpected: {_names(extra)}).")
        return Comparison(False, why, Verdict.VICTIMS_DIFFER)
    if observed.node in predicted.tied_nodes:
        if len(observed.victims) == len(predicted.victims):
            return Comparison(True, f"the scheduler picked {observed.node} among {len(predicted.tied_nodes)} tied nodes"
                                    f" (upstream picks one at random); PreemptGuard shows {predicted.node}.",
                              Verdict.AGREE)
        why = (f"the scheduler picked tied node {observed.node} with {len(observed.victims)} victim(s); a full tie"
               f" means {len(predicted.victims)} as on {predicted.node}.")
        return Comparison(False, why, Verdict.VICTIMS_DIFFER)
    why = (f"the scheduler nominated {observed.node}; predicted {predicted.node}"
           f"{' or one of ' + _names(predicted.tied_nodes) if len(predicted.tied_nodes) > 1 else ''}.")
    if predicted.sampled:
        return Comparison(False, why + _sampling_note(predicted), Verdict.NODE_DIFFERS, SAMPLING)
    return Comparison(False, why, Verdict.NODE_DIFFERS)
