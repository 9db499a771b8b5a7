"""Pods kube-scheduler does not try now (issue #26): ``Gated`` (spec.schedulingGates left) and ``NotScheduled``
(spec.schedulerName names no profile of the configured scheduler). Neither preempts, takes room or is guarded."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_plugin.render import format_tables
from webhook.cluster.model import Pod
from webhook.config.model import GuardrailsConfig
from webhook.config.parse import parse_config
from webhook.errors import ConfigError
from webhook.guardrails.disclosure import audience_of
from webhook.guardrails.policy import evaluate_rules
from webhook.guardrails.report import prediction_warnings
from webhook.prediction.service import preemption_args
from webhook.preemption.preview import preview_exit_code, preview_objects
from webhook.preemption.results import Outcome, PreemptionArgs
from webhook.preemption.simulate import predict_objects
from webhook.verify.controlplane import scheduler_configuration

from .clusters import bound_item, cluster, node_item, pod_manifest

# One 2-cpu node, full of a low-priority pod: a high-priority 1-cpu pod preempts it when the scheduler tries it.
FULL = node_item("n1", cpu="2") + bound_item("batch-1", "n1", cpu="2")


def gated(name: str = "web", *gates: str) -> dict:
    return pod_manifest(name, schedulingGates=[{"name": g} for g in gates or ("example.com/quota",)])


def test_a_gated_pod_preempts_nothing_while_the_same_pod_ungated_would() -> None:
    (ungated,) = preview_objects(cluster(FULL), [pod_manifest()])["results"]
    assert ungated["outcome"] == Outcome.PREEMPTS and ungated["victims"]
    (result,) = preview_objects(cluster(FULL), [gated("web", "a", "b")])["results"]
    assert (result["outcome"], result["node"], result["victims"], result["pdbViolations"]) == \
        (Outcome.GATED, None, [], 0)
    assert "spec.schedulingGates (a, b)" in result["message"] and "nothing is preempted" in result["message"]
    assert "Not modelled" not in result["message"]  # an outcome of its own, no longer a gap


def test_a_gated_replica_takes_no_room_from_the_next() -> None:
    state = cluster(node_item("n1", cpu="2"))
    results = preview_objects(state, [gated("a"), pod_manifest("b", cpu="2")])["results"]
    assert [r["outcome"] for r in results] == [Outcome.GATED, Outcome.FITS]


def test_a_pod_of_another_scheduler_is_never_seen_by_the_configured_one() -> None:
    pod = pod_manifest(schedulerName="batch-scheduler")
    (result,) = preview_objects(cluster(FULL), [pod])["results"]
    assert (result["outcome"], result["node"], result["victims"]) == (Outcome.NOT_SCHEDULED, None, [])
    assert "spec.schedulerName batch-scheduler is not a profile" in result["message"]
    assert "(default-scheduler)" in result["message"]
    # A profile of that name: the configured scheduler takes it.
    args = PreemptionArgs(scheduler_names=("default-scheduler", "batch-scheduler"))
    (profiled,) = predict_objects(cluster(FULL), [pod], args=args)
    assert profiled.outcome == Outcome.PREEMPTS


def test_a_gated_pod_of_another_scheduler_is_gated_as_the_api_server_stores_it() -> None:
    pod = pod_manifest(schedulerName="batch-scheduler", schedulingGates=[{"name": "g"}])
    (result,) = predict_objects(cluster(FULL), [pod])
    assert result.outcome == Outcome.GATED and "so even then it is that scheduler's" in result.message


def test_a_pod_bound_by_node_name_is_the_kubelets_whatever_its_scheduler() -> None:
    pod = pod_manifest(schedulerName="batch-scheduler", nodeName="n1")
    (result,) = preview_objects(cluster(node_item("n1")), [pod])["results"]
    assert (result["outcome"], result["node"]) == (Outcome.FITS, "n1")


def test_the_summary_table_and_exit_status_count_them() -> None:
    preview = preview_objects(cluster(FULL), [gated("a"), pod_manifest("b", schedulerName="other"), pod_manifest("c")])
    summary = preview["summary"]
    assert (summary["gated"], summary["notScheduled"], summary["preempting"], summary["victims"]) == (1, 1, 1, 1)
    assert preview_exit_code(preview) == 1  # they stay Pending for now
    text = format_tables(preview, wide=False)
    assert "team-a/a: spec.schedulingGates" in text and "team-a/b: spec.schedulerName other" in text
    assert text.rstrip().splitlines()[-1].startswith(
        "3 pods: 0 fit, 1 preempt, 0 unschedulable, 0 rejected, 1 gated, 1 not scheduled (another scheduler); ")
    only_fits = preview_objects(cluster(node_item("n1")), [pod_manifest("c")])
    assert "gated" not in format_tables(only_fits, wide=False)


def test_neither_is_a_preemption_for_the_guardrails_but_both_are_said() -> None:
    (result,) = predict_objects(cluster(FULL), [gated()])
    audience = audience_of("team-a", {}, None, "tenant")
    assert evaluate_rules(GuardrailsConfig(mode="enforce", max_victims=0), result, audience) == ()
    assert prediction_warnings(result, audience) == [result.message]


def test_config_scheduler_names_select_the_profiles(tmp_path: Path) -> None:
    config = parse_config({"scheduler": {"schedulerNames": ["default-scheduler", "gpu"]}}, "x")
    assert preemption_args(config.scheduler).scheduler_names == ("default-scheduler", "gpu")
    assert preemption_args(parse_config({}, "x").scheduler).scheduler_names == ("default-scheduler",)
    for bad, message in (([], "scheduler.schedulerNames: Required value"),
                         (["a", "a"], "scheduler.schedulerNames[1]: Duplicate value: 'a'"),
                         ([""], "scheduler.schedulerNames[0]: Required value"),
                         ("a", "scheduler.schedulerNames: expected")):
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            parse_config({"scheduler": {"schedulerNames": bad}}, "x")
    written = scheduler_configuration(tmp_path / "kubeconfig", scheduler_names=("default-scheduler", "gpu"))
    assert [p["schedulerName"] for p in written["profiles"]] == ["default-scheduler", "gpu"]


def test_the_model_reads_the_gate_names() -> None:
    (result,) = predict_objects(cluster(node_item("n1")), [gated("web", "x")])
    assert result.outcome == Outcome.GATED
    assert Pod("p", "ns", scheduling_gates=("x",)).scheduling_gated and not Pod("p", "ns").scheduling_gated
