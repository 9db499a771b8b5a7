"""``preempt-guard verify`` without binaries: arguments, exit codes, the missing-binaries line, the scheduler's
configuration file."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from webhook.cli import main
from webhook.config import SchedulerConfig, parse_config
from webhook.verify.controlplane import (
    BINARIES,
    KUBE_BIN_ENV,
    REPO,
    MissingBinaries,
    default_kube_bin,
    kube_bin_dir,
    scheduler_configuration,
)
from webhook.verify.runner import scheduler_config_of

SNAPSHOT = REPO / "examples" / "cluster.yaml"
POD = REPO / "examples" / "pods" / "09-preempts-batch.yaml"


def fake_binaries(directory: Path, names: tuple[str, ...] = BINARIES) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = directory / name
        path.write_text("#!/bin/sh\necho 'Kubernetes v1.99.0'\n", encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return directory


def test_missing_binaries_exit_2_with_one_line_naming_conformance_build(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--kube-bin", str(tmp_path), "--snapshot", str(SNAPSHOT), "-f", str(POD)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "conformance/build" in err and str(tmp_path) in err
    assert err.startswith("preempt-guard: error: etcd, kube-apiserver, kube-scheduler not found")


def test_one_missing_binary_is_named(tmp_path: Path) -> None:
    fake_binaries(tmp_path, ("etcd", "kube-apiserver"))
    with pytest.raises(MissingBinaries, match=r"^kube-scheduler not found in .*conformance/build"):
        kube_bin_dir(tmp_path)


def test_kube_bin_flag_then_environment_then_conformance_bin(tmp_path: Path) -> None:
    flag, env = fake_binaries(tmp_path / "flag"), fake_binaries(tmp_path / "env")
    assert kube_bin_dir(flag, {KUBE_BIN_ENV: str(env)}) == flag
    assert kube_bin_dir(None, {KUBE_BIN_ENV: str(env)}) == env
    assert default_kube_bin({}) == REPO / "conformance" / "bin"
    assert default_kube_bin({KUBE_BIN_ENV: ""}) == REPO / "conformance" / "bin"


def test_a_relative_kube_bin_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The components run in a temporary working directory: `--kube-bin conformance/bin` must still find them."""
    fake_binaries(tmp_path / "bin")
    monkeypatch.chdir(tmp_path)
    assert kube_bin_dir("bin") == tmp_path / "bin"


@pytest.mark.parametrize(("argv", "message"), [
    (["--snapshot", str(SNAPSHOT)], "give --snapshot FILE with at least one -f FILE, or --scenarios DIR"),
    (["-f", str(POD)], "give --snapshot FILE"),
    ([], "give --snapshot FILE"),
    (["--scenarios", ".", "--snapshot", str(SNAPSHOT), "-f", str(POD)], "--scenarios cannot be combined"),
    (["--snapshot", str(SNAPSHOT), "-f", str(POD), "--timeout", "0"], "--timeout must be positive"),
])
def test_bad_arguments_exit_2_before_anything_starts(argv: list[str], message: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--kube-bin", str(fake_binaries(tmp_path)), *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_bad_snapshot_or_scenario_folder_exits_2_with_one_line(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = str(fake_binaries(tmp_path / "bin"))
    (tmp_path / "bad.yaml").write_text("kind: [", encoding="utf-8")
    assert main(["verify", "--kube-bin", bin_dir, "--snapshot", str(tmp_path / "bad.yaml"), "-f", str(POD)]) == 2
    assert main(["verify", "--kube-bin", bin_dir, "--snapshot", str(SNAPSHOT), "-f", str(tmp_path / "none.yaml")]) == 2
    assert main(["verify", "--kube-bin", bin_dir, "--scenarios", str(tmp_path / "bin")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all(line.startswith("preempt-guard: error: ") for line in lines)
    assert "bad.yaml" in lines[0] and "none.yaml" in lines[1] and "no scenario" in lines[2]


def test_a_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.yaml").write_text("scheduler: {minCandidateNodesAbsolut: 5}\n", encoding="utf-8")
    bin_dir = str(fake_binaries(tmp_path / "bin"))
    assert main(["verify", "--kube-bin", bin_dir, "--config", str(tmp_path / "config.yaml"),
                 "--snapshot", str(SNAPSHOT), "-f", str(POD)]) == 2
    assert "minCandidateNodesAbsolut" in capsys.readouterr().err


def test_scheduler_configuration_carries_default_preemption_args(tmp_path: Path) -> None:
    config = scheduler_configuration(tmp_path / "admin.kubeconfig", min_candidate_nodes_percentage=0,
                                     min_candidate_nodes_absolute=1000)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1" and config["kind"] == "KubeSchedulerConfiguration"
    assert config["clientConnection"]["kubeconfig"] == str(tmp_path / "admin.kubeconfig")
    [profile] = config["profiles"]
    assert profile["schedulerName"] == "default-scheduler" and "plugins" not in profile
    assert profile["pluginConfig"] == [{"name": "DefaultPreemption", "args": {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DefaultPreemptionArgs",
        "minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1000}}]


def test_the_scoring_of_the_profile_reaches_the_real_scheduler(tmp_path: Path) -> None:
    """percentageOfNodesToScore, Score plugin weights (0: disabled) and NodeResourcesFitArgs.scoringStrategy as
    upstream's KubeSchedulerConfiguration v1 spells them, from ``scheduler.*`` of --config."""
    scheduler = parse_config({"scheduler": {
        "percentageOfNodesToScore": 100, "scoreWeights": {"ImageLocality": 0, "TaintToleration": 5},
        "scoringStrategy": {"type": "MostAllocated"}, "interPodAffinity": {"hardPodAffinityWeight": 7}}},
        "t").scheduler
    [profile] = scheduler_configuration(tmp_path / "k", **scheduler_config_of(scheduler))["profiles"]
    assert profile["percentageOfNodesToScore"] == 100
    assert profile["plugins"] == {"score": {"enabled": [{"name": "TaintToleration", "weight": 5}],
                                            "disabled": [{"name": "ImageLocality"}]}}
    assert profile["pluginConfig"][1] == {"name": "NodeResourcesFit", "args": {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs",
        "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1},
                                                                   {"name": "memory", "weight": 1}]}}}
    assert profile["pluginConfig"][2] == {"name": "InterPodAffinity", "args": {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "InterPodAffinityArgs", "hardPodAffinityWeight": 7,
        "ignorePreferredTermsOfExistingPods": False}}
    [default] = scheduler_configuration(tmp_path / "k", **scheduler_config_of(SchedulerConfig()))["profiles"]
    assert "percentageOfNodesToScore" not in default and "plugins" not in default
    assert len(default["pluginConfig"]) == 1


def test_preemption_disabled_turns_the_post_filter_off(tmp_path: Path) -> None:
    [profile] = scheduler_configuration(tmp_path / "k", preemption=False)["profiles"]
    assert profile["plugins"] == {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}


def test_the_prediction_follows_the_flag_then_the_config_then_the_binaries() -> None:
    from webhook.config import SchedulerConfig
    from webhook.verify.engine import scheduler_for_release

    plain = SchedulerConfig()
    assert scheduler_for_release(plain, None, "v1.34.4") == (SchedulerConfig(kubernetes_version="v1.34"), "")
    configured = SchedulerConfig(kubernetes_version="v1.36")
    assert scheduler_for_release(configured, None, "v1.34.4") == (configured, "")
    chosen, note = scheduler_for_release(configured, "1.33", "v1.34.4")
    assert chosen.kubernetes_version == "v1.33" and "predicting as v1.33 (--kube-version)" in note
    chosen, note = scheduler_for_release(plain, None, "v1.40.1")
    assert chosen.kubernetes_version == "v1.37" and "not a release PreemptGuard knows" in note


def test_a_bad_kube_version_exits_2_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = fake_binaries(tmp_path / "bin")
    code = main(["verify", "--kube-bin", str(bin_dir), "--snapshot", str(SNAPSHOT), "-f", str(POD),
                 "--kube-version", "v1.30"])
    assert code == 2 and "not a release PreemptGuard predicts for" in capsys.readouterr().err
