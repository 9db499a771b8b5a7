"""A decision as reported: other tenants' victims as counts (docs/interfaces.md §7), and the summary."""

from __future__ import annotations

from datetime import UTC, datetime

from webhook.cluster.model import Namespace
from webhook.config import GuardrailsConfig
from webhook.observe.compare import ERROR, SAMPLING, Observed, Predicted, Verdict, compare
from webhook.observe.report import (
    EVENT_MESSAGE_LIMIT,
    PredictionSummary,
    audience_for,
    mismatch_line,
    redacted_why,
    render_decision,
)
from webhook.observe.tracker import Decision, PredictionRecord
from webhook.preemption.results import Outcome

NAMESPACES = {"team-a": Namespace("team-a", {"tenant": "red"}), "team-a2": Namespace("team-a2", {"tenant": "red"}),
              "team-b": Namespace("team-b", {"tenant": "blue"})}
TENANTS = GuardrailsConfig(tenant_label="tenant")
AT = datetime(2025, 6, 2, 9, 30, tzinfo=UTC)


def decision(predicted: Predicted, observed: Observed) -> Decision:
    return Decision(PredictionRecord("id-1", "team-a", "web-", 1000, predicted), "web-x7k2p", "uid-1", observed,
                    compare(predicted, observed), 2.5)


VICTIMS_DIFFER = decision(Predicted(Outcome.PREEMPTS, "n1", ("team-a2/cache", "team-b/batch-0"), ("n1",)),
                          Observed(Outcome.PREEMPTS, "n1", ("team-b/batch-1",), "preempting 1 victims"))


def test_victims_of_other_tenants_are_counts_in_every_field() -> None:
    audience = audience_for(VICTIMS_DIFFER, NAMESPACES, TENANTS)
    entry = render_decision(VICTIMS_DIFFER, audience)
    assert entry["predicted"] == {"outcome": "Preempts", "node": "n1", "victims": ["team-a2/cache"],
                                  "otherTenantVictims": 1, "tiedNodes": ["n1"]}
    assert entry["observed"] == {"outcome": "Preempts", "node": "n1", "victims": [], "otherTenantVictims": 1,
                                 "message": "preempting 1 victims"}
    assert entry["verdict"] == "victims_differ" and entry["pod"] == "web-x7k2p" and entry["namespace"] == "team-a"
    line = mismatch_line(VICTIMS_DIFFER, audience)
    assert "team-b" not in str(entry) and "team-b" not in line and "batch" not in line
    assert entry["why"] == ("on n1 the scheduler evicted 1 pod of other tenants; predicted on n1: team-a2/cache, 1 pod"
                            " of other tenants.")
    assert line.startswith("PreemptGuard predicted Preempts on n1 evicting team-a2/cache, 1 pod of other tenants; the"
                           " scheduler's outcome was Preempts on n1 evicting 1 pod of other tenants [victims_differ]")


def test_disclosure_cluster_names_everything() -> None:
    audience = audience_for(VICTIMS_DIFFER, NAMESPACES, GuardrailsConfig(tenant_label="tenant", disclosure="cluster"))
    entry = render_decision(VICTIMS_DIFFER, audience)
    assert entry["observed"]["victims"] == ["team-b/batch-1"] and "otherTenantVictims" not in entry["observed"]
    assert redacted_why(VICTIMS_DIFFER, audience) == VICTIMS_DIFFER.comparison.why


def test_without_a_tenant_label_each_namespace_is_a_tenant() -> None:
    audience = audience_for(VICTIMS_DIFFER, NAMESPACES, GuardrailsConfig())
    assert render_decision(VICTIMS_DIFFER, audience)["predicted"]["otherTenantVictims"] == 2


def test_reasons_without_victim_names_are_kept_and_sampling_is_said() -> None:
    sampled = decision(Predicted(Outcome.PREEMPTS, "n1", ("team-b/x",), ("n1",), sampled=True),
                       Observed(Outcome.PREEMPTS, "n9", ("team-b/y",)))
    audience = audience_for(sampled, NAMESPACES, TENANTS)
    entry = render_decision(sampled, audience)
    assert entry["verdict"] == "node_differs" and entry["explainedBy"] == SAMPLING
    assert entry["why"] == sampled.comparison.why and "team-b" not in entry["why"]
    unobserved = decision(Predicted(Outcome.FITS, "n1"), Observed(ERROR, message="the pod was deleted before it was"
                                                                                 " scheduled"))
    assert mismatch_line(unobserved, audience).startswith(
        "PreemptGuard predicted Fits on n1; the scheduler's decision was not observed (the pod was deleted")


def test_the_line_fits_an_event() -> None:
    many = tuple(f"team-a/pod-{i:04d}" for i in range(200))
    big = decision(Predicted(Outcome.PREEMPTS, "n1", many, ("n1",)), Observed(Outcome.PREEMPTS, "n1", many[:3]))
    line = mismatch_line(big, audience_for(big, NAMESPACES, TENANTS))
    assert len(line) == EVENT_MESSAGE_LIMIT and line.endswith("...")


def test_the_summary_counts_every_verdict_and_keeps_the_latest_mismatches() -> None:
    summary = PredictionSummary(recent=2)
    audience = audience_for(VICTIMS_DIFFER, NAMESPACES, TENANTS)
    agree = decision(Predicted(Outcome.FITS, "n1"), Observed(Outcome.FITS, "n2"))
    unobserved = decision(Predicted(Outcome.FITS, "n1"), Observed(ERROR, message="window"))
    for item in (agree, agree, agree, VICTIMS_DIFFER, unobserved, VICTIMS_DIFFER):
        summary.add(item, render_decision(item, audience), AT)
    document = summary.document(observing=True, following=4, window_seconds=600)
    assert document["verdicts"] == {"agree": 3, "node_differs": 0, "victims_differ": 2, "outcome_differs": 0,
                                    "unobserved": 1}
    assert document["agreement"] == 3 / 5  # unobserved predictions are neither right nor wrong
    assert [m["verdict"] for m in document["recentMismatches"]] == ["victims_differ", "unobserved"]
    assert document["recentMismatches"][0]["decidedAt"] == "2025-06-02T09:30:00+00:00"
    assert (document["kind"], document["following"], document["windowSeconds"]) == ("PredictionSummary", 4, 600)
    assert PredictionSummary().document(observing=False, following=0, window_seconds=None)["agreement"] is None
    assert set(summary.counts) == set(Verdict)
