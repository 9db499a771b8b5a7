"""``kubectl preempt-preview --snapshot``: the real kubectl runs the plugin; outputs, exit status and errors."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import (
    CLUSTER,
    EXAMPLES,
    PLUGIN,
    POD_FILES,
    ROOT,
    Kubectl,
    Run,
    expected_outcome,
    expected_results,
    results_of,
)

OFFLINE = ("--snapshot", str(CLUSTER))
EXIT_FOR = {"Fits": 0, "Preempts": 1, "Unschedulable": 1, "Rejected": 1}


def preview_of(kubectl: Kubectl, *args: str, stdin: str | None = None) -> tuple[Run, dict[str, Any]]:
    run = kubectl.run("preempt-preview", *OFFLINE, *args, "-o", "json", stdin=stdin)
    assert run.returncode in (0, 1), run.stderr
    return run, json.loads(run.stdout)


def test_kubectl_plugin_list_shows_the_plugin(kubectl: Kubectl) -> None:
    run = kubectl.run("plugin", "list")
    assert run.returncode == 0, run.stderr
    assert str(kubectl.plugin_dir / PLUGIN) in run.stdout


@pytest.fixture(scope="module")
def example_runs(kubectl: Kubectl) -> dict[Path, Run]:
    """Every example through kubectl, two at a time (the machine has two cores)."""
    def run(path: Path) -> Run:
        return kubectl.run("preempt-preview", *OFFLINE, "-f", str(path), "-o", "json")

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(POD_FILES, pool.map(run, POD_FILES), strict=True))


@pytest.mark.parametrize("path", POD_FILES, ids=[p.stem for p in POD_FILES])
def test_every_example_gives_its_expected_outcome_and_exit_status(
        path: Path, example_runs: dict[Path, Run]) -> None:
    run = example_runs[path]
    expect = expected_outcome(path)
    preview = json.loads(run.stdout)
    assert preview["kind"] == "PreemptionPreview" and preview["apiVersion"] == "preemptguard.io/v1alpha1"
    assert preview["results"], "no results"
    assert {r["outcome"] for r in preview["results"]} == {expect}
    assert run.returncode == EXIT_FOR[expect]
    assert run.stderr == ""
    assert results_of(preview) == expected_results(path)


def test_table_output(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", str(EXAMPLES / "pods/14-deployment-high.yaml"))
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["POD", "PRIORITY", "CLASS", "OUTCOME", "NODE", "VICTIMS", "PDB", "VIOLATIONS"]
    rows = [line.split() for line in lines[1:5]]
    assert [r[0] for r in rows] == [f"team-a/recommendations-{i}" for i in range(4)]
    assert all(r[1] == "high" and r[2] == "Preempts" and r[4] == "1" and r[5] == "0" for r in rows)
    victims_header = lines.index("") + 1
    assert lines[victims_header].split() == ["NAMESPACE", "VICTIM", "NODE", "PDB", "VIOLATION", "PREEMPTED", "BY"]
    victim_rows = [line.split() for line in lines[victims_header + 1:victims_header + 5]]
    assert {r[0] for r in victim_rows} == {"batch"}
    assert [r[-1] for r in victim_rows] == [f"team-a/recommendations-{i}" for i in range(4)]
    assert lines[-1] == ("4 pods: 0 fit, 4 preempt, 0 unschedulable, 0 rejected; 4 victims in 1 namespace (batch), "
                         "0 PDB violations")
    assert "\033[" not in run.stdout  # not a terminal: no colour


def test_wide_output_adds_priorities_candidates_and_tied_nodes(kubectl: Kubectl) -> None:
    path = EXAMPLES / "pods/10-pdb-violation.yaml"
    _, preview = preview_of(kubectl, "-f", str(path))
    result = preview["results"][0]
    assert results_of(preview) == expected_results(path)
    assert (result["priority"], result["tiedNodes"], result["expectedDelaySeconds"]) == (1000000, [result["node"]], 30)
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", str(path), "-o", "wide")
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[0].split()[-6:] == ["PRIORITY", "CANDIDATE", "NODES", "TIED", "NODES", "DELAY"]
    row = lines[1].split()
    assert row[:6] == [result["pod"], result["priorityClassName"], "Preempts", result["node"], "1", "1"]
    assert row[6:] == [str(result["priority"]), str(result["candidateNodes"]), ",".join(result["tiedNodes"]),
                       f"{result['expectedDelaySeconds']}s"]
    victim = result["victims"][0]
    header = lines.index("") + 1
    assert lines[header].split() == ["NAMESPACE", "VICTIM", "NODE", "PRIORITY", "PDB", "VIOLATION", "PREEMPTED", "BY"]
    assert lines[header + 1].split() == [victim["namespace"], victim["name"], victim["node"], str(victim["priority"]),
                                         "yes", result["pod"]]
    assert f"{result['pod']}: {result['message']}" in lines


def test_name_output_is_one_pod_line_per_pod_and_keeps_the_exit_status(kubectl: Kubectl) -> None:
    """kubectl create --dry-run=client -o name prints pod/NAME: here one line per previewed pod, rejected or not."""
    deployment, rejected, fits = (str(EXAMPLES / f"pods/{n}.yaml")
                                  for n in ("14-deployment-high", "04-unknown-class", "08-small-fits"))
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", deployment, "-f", rejected, "-o", "name")
    assert (run.returncode, run.stderr) == (1, "")
    assert run.stdout.splitlines() == [f"pod/recommendations-{i}" for i in range(4)] + ["pod/vip-api"]
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", fits, "-o", "name")
    assert (run.returncode, run.stdout, run.stderr) == (0, "pod/checkout-debug\n", "")
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", deployment, "--replicas", "0", "-o", "name")
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")


@pytest.mark.parametrize("output", ["table", "wide"])
def test_no_headers_prints_the_rows_alone_and_the_summary_on_stderr(kubectl: Kubectl, output: str) -> None:
    """As kubectl get a,b --no-headers: the rows of both tables, no header and no blank line between them; the
    messages and the summary line, which are not rows, go to stderr (where kubectl says "No resources found")."""
    files = ("-f", str(EXAMPLES / "pods/14-deployment-high.yaml"), "-f", str(EXAMPLES / "pods/04-unknown-class.yaml"))
    full = kubectl.run("preempt-preview", *OFFLINE, *files, "-o", output)
    bare = kubectl.run("preempt-preview", *OFFLINE, *files, "-o", output, "--no-headers")
    assert bare.returncode == full.returncode == 1
    blocks = full.stdout.split("\n\n")  # pods, victims, messages, summary
    assert len(blocks) == 4
    pods, victims = blocks[0].splitlines()[1:], blocks[1].splitlines()[1:]
    assert [line.split() for line in bare.stdout.splitlines()] == [line.split() for line in pods + victims]
    assert len(bare.stdout.splitlines()) == 9 and "" not in bare.stdout.splitlines()
    assert bare.stderr == blocks[2] + "\n" + blocks[3]
    assert bare.stderr.splitlines()[-1].startswith("5 pods: 0 fit, 4 preempt, 0 unschedulable, 1 rejected")
    # Widths come from the rows alone: the POD column is as wide as its longest name, plus three spaces.
    assert bare.stdout.splitlines()[0].startswith("team-a/recommendations-0   high   Preempts")
    # Other outputs ignore --no-headers, as kubectl's do.
    as_json = kubectl.run("preempt-preview", *OFFLINE, *files, "-o", "json", "--no-headers")
    assert json.loads(as_json.stdout)["summary"]["pods"] == 5 and as_json.stderr == ""


def test_no_headers_with_nothing_to_preview(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", str(EXAMPLES / "pods/14-deployment-high.yaml"),
                      "--replicas", "0", "--no-headers")
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "No pods to preview.\n")


def test_yaml_output_is_the_preview(kubectl: Kubectl) -> None:
    path = EXAMPLES / "pods/09-preempts-batch.yaml"
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", str(path), "-o", "yaml")
    assert run.returncode == 1
    _, as_json = preview_of(kubectl, "-f", str(path))
    assert yaml.safe_load(run.stdout) == as_json
    assert results_of(as_json) == expected_results(path)


def test_messages_of_pods_that_would_not_run_are_shown(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", str(EXAMPLES / "pods/04-unknown-class.yaml"))
    assert run.returncode == 1
    assert ("team-a/vip-api: pods \"vip-api\" is forbidden: no PriorityClass with name gold was found"
            in run.stdout.splitlines())


def test_stdin_multi_document_and_list(kubectl: Kubectl) -> None:
    small = (EXAMPLES / "pods/08-small-fits.yaml").read_text(encoding="utf-8")
    big = (EXAMPLES / "pods/09-preempts-batch.yaml").read_text(encoding="utf-8")
    run, preview = preview_of(kubectl, "-f", "-", stdin=f"{small}\n---\n{big}")
    assert [r["outcome"] for r in preview["results"]] == ["Fits", "Preempts"]
    assert run.returncode == 1
    listed = {"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(small), yaml.safe_load(small)]}
    run, preview = preview_of(kubectl, "-f", "-", stdin=json.dumps(listed))
    assert [r["outcome"] for r in preview["results"]] == ["Fits", "Fits"]
    assert run.returncode == 0


def test_directory_and_repeated_files_keep_their_order(kubectl: Kubectl, tmp_path: Path) -> None:
    for name in ("b.yaml", "a.yaml"):
        (tmp_path / name).write_text((EXAMPLES / "pods/08-small-fits.yaml").read_text(encoding="utf-8")
                                     .replace("checkout-debug", f"debug-{name[0]}"), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a manifest", encoding="utf-8")
    _, preview = preview_of(kubectl, "-f", str(tmp_path), "-f", str(EXAMPLES / "pods/01-user-class.yaml"))
    assert [r["pod"] for r in preview["results"]] == ["team-b/debug-a", "team-b/debug-b", "team-a/web-canary"]


def test_priority_class_namespace_and_replicas_flags(kubectl: Kubectl) -> None:
    path = EXAMPLES / "pods/08-small-fits.yaml"
    run, preview = preview_of(kubectl, "-f", str(path), "--priority-class", "gold")
    assert preview["results"][0]["outcome"] == "Rejected" and run.returncode == 1
    no_namespace = path.read_text(encoding="utf-8").replace("namespace: team-b", "")
    _, preview = preview_of(kubectl, "-f", "-", "--priority-class", "high", "-n", "team-c", "--replicas", "3",
                            stdin=no_namespace)
    assert [r["pod"] for r in preview["results"]] == [f"team-c/checkout-debug-{i}" for i in range(3)]
    assert {r["priorityClassName"] for r in preview["results"]} == {"high"}
    assert {r["priority"] for r in preview["results"]} == {1000000}
    run, preview = preview_of(kubectl, "-f", str(EXAMPLES / "pods/14-deployment-high.yaml"), "--replicas", "0")
    assert preview["results"] == [] and run.returncode == 0


def test_help_is_kubectl_style(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", "--help")
    assert run.returncode == 0
    assert "Examples:\n  # Preview a manifest" in run.stdout
    assert "\nUsage:\n  kubectl preempt-preview (-f FILENAME [-R] [--strict] | TYPE/NAME)" in run.stdout
    assert "    -f, --filename=[]:\n" in run.stdout and "    -o, --output=table:\n" in run.stdout
    assert all(len(line) <= 120 for line in run.stdout.splitlines())


# ---- errors: one line on stderr, exit status 2 or more, never a traceback ------------------------------
def error_of(run: Run) -> str:
    assert run.returncode >= 2, (run.returncode, run.stdout)
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_missing_file(kubectl: Kubectl) -> None:
    line = error_of(kubectl.run("preempt-preview", *OFFLINE, "-f", "does-not-exist.yaml"))
    assert line == 'error: the path "does-not-exist.yaml" does not exist'


def test_missing_snapshot(kubectl: Kubectl) -> None:
    line = error_of(kubectl.run("preempt-preview", "--snapshot", "nope.yaml", "-f",
                                str(EXAMPLES / "pods/08-small-fits.yaml")))
    assert "nope.yaml" in line and "not found" in line


def test_bad_yaml_names_the_line(kubectl: Kubectl, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  labels: [a\nspec: {}\n", encoding="utf-8")
    line = error_of(kubectl.run("preempt-preview", *OFFLINE, "-f", str(bad)))
    assert line.startswith(f"error: {bad}:6:")
    assert "invalid YAML" in line


def test_bad_yaml_on_stdin(kubectl: Kubectl) -> None:
    line = error_of(kubectl.run("preempt-preview", *OFFLINE, "-f", "-", stdin="kind: Pod\n  oops: : :\n"))
    assert line.startswith("error: <stdin>:2:") and "invalid YAML" in line


def test_a_kind_that_is_not_a_workload_is_skipped_with_a_note(kubectl: Kubectl) -> None:
    service = ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n"
               "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", "-", "-o", "name", stdin=service)
    assert (run.returncode, run.stdout) == (0, "pod/a\n")
    assert run.stderr == "Note: skipped 1 object that is not a workload (1 Service); --strict refuses them\n"


def test_usage_errors(kubectl: Kubectl) -> None:
    cases = {
        "-f FILENAME or TYPE/NAME": [],
        "--replicas must not be negative": ["-f", "x.yaml", "--replicas", "-1"],
        'unable to match a printer suitable for the output format "xml"': ["-f", "x.yaml", "-o", "xml"],
        "with --snapshot use -f": ["deploy/web"],
        "--token applies to --webhook-url": ["-f", "x.yaml", "--token", "t"],
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = pool.map(lambda args: kubectl.run("preempt-preview", *OFFLINE, *args), cases.values())
        for expected, run in zip(cases, runs, strict=True):
            assert expected in error_of(run)


def test_snapshot_cache_without_snapshot_is_a_usage_error(kubectl: Kubectl) -> None:
    pod = str(EXAMPLES / "pods/08-small-fits.yaml")
    alone = kubectl.run("preempt-preview", "-f", pod, "--snapshot-cache")
    with_url = kubectl.run("preempt-preview", "-f", pod, "--webhook-url", "https://127.0.0.1:1", "--snapshot-cache")
    other_usage_error = kubectl.run("preempt-preview", *OFFLINE, "-f", pod, "--token", "t")
    for run in (alone, with_url):
        assert error_of(run) == "error: --snapshot-cache applies to --snapshot"
        assert run.returncode == other_usage_error.returncode


def test_no_kubeconfig_without_snapshot(kubectl: Kubectl) -> None:
    line = error_of(kubectl.run("preempt-preview", "-f", str(EXAMPLES / "pods/08-small-fits.yaml")))
    assert "no kubeconfig found" in line and "--snapshot" in line


def test_version(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", "--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"kubectl preempt-preview {metadata.version('preemptguard')}"


def test_snapshot_cache_is_written_and_the_next_run_reads_it(kubectl: Kubectl, tmp_path: Path) -> None:
    snapshot = tmp_path / "cluster.yaml"
    shutil.copyfile(CLUSTER, snapshot)
    cache = tmp_path / ".cluster.yaml.pgcache"
    pods = ["-f", str(EXAMPLES / "pods/14-deployment-high.yaml"), "-f", str(EXAMPLES / "pods/10-pdb-violation.yaml")]
    for output in ("table", "json"):
        cache.unlink(missing_ok=True)
        plain = kubectl.run("preempt-preview", "--snapshot", str(snapshot), *pods, "-o", output)
        first = kubectl.run("preempt-preview", "--snapshot", str(snapshot), "--snapshot-cache", *pods, "-o", output)
        written = cache.stat()
        second = kubectl.run("preempt-preview", "--snapshot", str(snapshot), "--snapshot-cache", *pods, "-o", output)
        assert (plain.returncode, plain.stderr) == (1, ""), plain.stderr
        assert first == plain and second == plain
        # Read, not rewritten: a stale or unreadable cache would have been replaced by a new file.
        assert (cache.stat().st_ino, cache.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cluster.yaml.pgcache", "cluster.yaml"]


def test_snapshot_cache_of_a_broken_snapshot_gives_the_same_error(kubectl: Kubectl, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: Node\nmetadata:\n"
                      "  name: [n1\n", encoding="utf-8")
    pod = str(EXAMPLES / "pods/08-small-fits.yaml")
    line = error_of(kubectl.run("preempt-preview", "--snapshot", str(broken), "--snapshot-cache", "-f", pod))
    assert line == error_of(kubectl.run("preempt-preview", "--snapshot", str(broken), "-f", pod))
    assert line.startswith(f"error: {broken}: document 1, line ") and "invalid YAML" in line
    assert not (tmp_path / ".broken.yaml.pgcache").exists()


def test_a_pod_manifest_given_as_the_snapshot(kubectl: Kubectl) -> None:
    pod = str(EXAMPLES / "pods/08-small-fits.yaml")
    line = error_of(kubectl.run("preempt-preview", "--snapshot", pod, "-f", pod))
    assert line.startswith(f"error: {pod}: not a cluster snapshot: it holds Pod and no Node")


def test_a_namespace_flag_that_contradicts_the_manifest_is_kubectls_error(kubectl: Kubectl) -> None:
    pod = str(EXAMPLES / "pods/08-small-fits.yaml")  # namespace team-b
    line = error_of(kubectl.run("preempt-preview", *OFFLINE, "-f", pod, "-n", "team-a"))
    assert line == ('error: the namespace from the provided object "team-b" does not match the namespace "team-a". '
                    "You must pass '--namespace=team-b' to perform this operation.")
    same = kubectl.run("preempt-preview", *OFFLINE, "-f", pod, "-n", "team-b")
    assert same.returncode == 0, same.stderr


def test_one_rejected_pod_does_not_reject_the_others(kubectl: Kubectl) -> None:
    run, preview = preview_of(kubectl, "-f", str(EXAMPLES / "pods/08-small-fits.yaml"),
                              "-f", str(EXAMPLES / "pods/04-unknown-class.yaml"))
    assert [r["outcome"] for r in preview["results"]] == ["Fits", "Rejected"]
    assert "no PriorityClass with name gold" in preview["results"][1]["message"]
    assert run.returncode == 1


def test_the_whole_examples_directory_gives_each_pod_its_own_outcome(kubectl: Kubectl) -> None:
    """Simulated in one batch, so placements differ from the files alone; rejections do not."""
    _, preview = preview_of(kubectl, "-f", str(EXAMPLES / "pods"))
    expected = [result for path in POD_FILES for result in expected_results(path)]
    assert len(preview["results"]) == len(expected) == 19
    got = [(r["pod"], r["outcome"] == "Rejected") for r in preview["results"]]
    assert got == [(pod, outcome == "Rejected") for pod, outcome, _, _ in expected]
    assert preview["summary"]["rejected"] == 4


def test_a_pod_with_node_name_is_never_preempted_for(kubectl: Kubectl) -> None:
    """The scheduler never handles it: it fits where the kubelet admits it, else it is Unschedulable."""
    text = (EXAMPLES / "pods/09-preempts-batch.yaml").read_text(encoding="utf-8")
    pinned = text.replace("  priorityClassName: high\n", "  priorityClassName: high\n  nodeName: pool-batch-04\n")
    assert pinned != text
    run, preview = preview_of(kubectl, "-f", "-", stdin=pinned)
    (result,) = preview["results"]
    assert (result["outcome"], result["node"], result["victims"]) == ("Unschedulable", None, [])
    assert "kubelet will reject it" in result["message"] and run.returncode == 1


# ---- the README shows real output ------------------------------------------------------------------------
def readme_offline_runs() -> list[tuple[list[str], str, str]]:
    """(arguments, stream, output) of every ``$ kubectl preempt-preview --snapshot ...`` in the README, with
    ``2>/dev/null`` (stdout shown) or ``>/dev/null`` (stderr shown) at the end."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    runs = []
    for block in re.findall(r"^```\w*\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        for command, output in re.findall(r"^\$ (kubectl preempt-preview --snapshot .*?)\n((?:(?!\$ ).*\n)*)",
                                          block.replace("\\\n", " "), re.MULTILINE):
            words = shlex.split(command)
            stream = {"2>/dev/null": "stdout", ">/dev/null": "stderr"}.get(words[-1], "stdout")
            runs.append(([w for w in words[2:] if not w.endswith("/dev/null")], stream, output))
    return runs


def test_the_readme_shows_real_output(kubectl: Kubectl) -> None:
    runs = readme_offline_runs()
    assert len(runs) >= 4, runs
    for args, stream, output in runs:
        run = kubectl.run("preempt-preview", *args)
        assert getattr(run, stream) == output, args


def test_kube_version_predicts_as_that_release_preempts(kubectl: Kubectl, tmp_path: Path) -> None:
    """A pod nominated to the only node while it still has a scheduling gate reserves room from v1.37 only
    (docs/preemption.md §12): the same pod fits as v1.36 predicts it, and stays pending as v1.37 does."""
    alloc = {"cpu": "2", "memory": "8Gi", "pods": "10"}
    waiting = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waiting", "namespace": "default"},
               "spec": {"priority": 5000, "schedulingGates": [{"name": "example.com/hold"}],
                        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1500m"}}}]},
               "status": {"phase": "Pending", "nominatedNodeName": "n1"}}
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
         "status": {"allocatable": alloc, "capacity": alloc}}, waiting]}), encoding="utf-8")
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new"}, "spec": {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}), encoding="utf-8")
    outcomes = {}
    for version in ("v1.36", "v1.37.2", None):
        flags = ("--kube-version", version) if version else ()
        run = kubectl.run("preempt-preview", "--snapshot", str(snapshot), "-f", str(pod), *flags, "-o", "json")
        assert run.returncode in (0, 1), run.stderr
        outcomes[version] = json.loads(run.stdout)["results"][0]["outcome"]
    assert outcomes == {"v1.36": "Fits", "v1.37.2": "Unschedulable", None: "Unschedulable"}  # default: v1.37


def test_kube_version_applies_to_the_snapshot_and_names_the_supported_releases(kubectl: Kubectl) -> None:
    pod = str(EXAMPLES / "pods/08-small-fits.yaml")
    assert "--kube-version applies to --snapshot" in error_of(
        kubectl.run("preempt-preview", "-f", pod, "--webhook-url", "https://127.0.0.1:1", "--kube-version", "v1.34"))
    assert "supported: v1.33 .. v1.37" in error_of(
        kubectl.run("preempt-preview", *OFFLINE, "-f", pod, "--kube-version", "v1.29"))
