"""``kubectl preempt-preview`` as a CI gate over a real repository, through the real kubectl: objects that are not
workloads skipped with a note (``--strict`` refuses them), the manifests' own PriorityClasses, DaemonSets (one pod
per eligible node), ``-R``, ``-o jsonpath=`` / ``-o custom-columns=`` in kubectl's syntax, and usage errors."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CLUSTER, EXAMPLES, ROOT, Kubectl
from webhook.cluster.snapshot import ClusterState

OFFLINE = ("--snapshot", str(CLUSTER))
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "team-a"},
           "spec": {"ports": [{"port": 80}]}}
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "team-a"}}


def pod(name: str, cpu: str = "100m", priority_class: str = "standard", namespace: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"priorityClassName": priority_class,
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}


def stream(*objects: dict[str, Any]) -> str:
    return yaml.safe_dump_all(objects)


def daemonset(name: str, *, tolerations: list[dict[str, str]] | None = None, cpu: str = "100m",
              node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"priorityClassName": "high",
                            "containers": [{"name": "agent", "image": "x",
                                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


# ---- objects that are not workloads ---------------------------------------------------------------
def test_other_objects_are_skipped_with_one_note(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", "-", "-o", "name",
                      stdin=stream(SERVICE, pod("small"), CONFIGMAP, {**SERVICE, "metadata": {"name": "api"}}))
    assert run.returncode == 0, run.stderr
    assert run.stdout == "pod/small\n"
    assert run.stderr == ("Note: skipped 3 objects that are not workloads (2 Service, 1 ConfigMap); "
                          "--strict refuses them\n")


def test_strict_refuses_them_naming_the_document(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", *OFFLINE, "--strict", "-f", "-", stdin=stream(pod("small"), SERVICE))
    assert run.returncode == 2
    assert run.stderr == ("error: <stdin>: document 2: Service is not a workload (--strict): expected Pod, "
                          "Deployment, StatefulSet, ReplicaSet, DaemonSet, Job, CronJob or a List of them\n")


def test_only_other_objects_is_nothing_to_preview(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", "-", stdin=stream(SERVICE, CONFIGMAP))
    assert (run.returncode, run.stdout) == (0, "")
    assert run.stderr.splitlines()[-1] == "No workloads to preview in -."


def test_the_manifests_own_priority_class_is_used_with_a_snapshot(kubectl: Kubectl) -> None:
    own_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "ci-gate-class"},
                 "value": 5000}
    alone = kubectl.run("preempt-preview", *OFFLINE, "-f", "-", "-o", "json",
                        stdin=stream(pod("agent", priority_class="ci-gate-class")))
    assert json.loads(alone.stdout)["results"][0]["outcome"] == "Rejected"  # the snapshot has no such class
    together = kubectl.run("preempt-preview", *OFFLINE, "-f", "-", "-o", "json",
                           stdin=stream(own_class, pod("agent", priority_class="ci-gate-class")))
    assert together.returncode == 0, together.stderr
    (result,) = json.loads(together.stdout)["results"]
    assert (result["outcome"], result["priority"]) == ("Fits", 5000)
    assert "Note: using PriorityClass ci-gate-class from the manifests" in together.stderr


# ---- DaemonSets ---------------------------------------------------------------------------------------
DAEMON_TOLERATED = {"node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready",
                    "node.kubernetes.io/unreachable", "node.kubernetes.io/disk-pressure",
                    "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure"}


def eligible_nodes(snapshot_state: ClusterState, selector: dict[str, str] | None = None) -> list[str]:
    """Independently of the plugin: nodes matching ``selector`` whose every taint is one a daemon pod tolerates
    (upstream AddOrUpdateDaemonPodTolerations): a cordoned node still runs a daemon pod."""
    return sorted(n.name for n in snapshot_state.nodes.values()
                  if all(t.key in DAEMON_TOLERATED for t in n.taints)
                  and all(n.labels.get(k) == v for k, v in (selector or {}).items()))


def test_a_daemonset_is_one_pod_per_eligible_node(kubectl: Kubectl, snapshot_state: ClusterState) -> None:
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", "-", "-o", "json", stdin=stream(daemonset("agent")))
    results = json.loads(run.stdout)["results"]
    expected = eligible_nodes(snapshot_state)
    assert 0 < len(expected) < len(snapshot_state.nodes)  # the tainted pools are left out
    assert "pool-general-12" in expected and snapshot_state.nodes["pool-general-12"].unschedulable  # cordoned
    assert [r["pod"] for r in results] == [f"team-a/agent-{node}" for node in expected]
    # Each pod is pinned to its own node: placed there, or preempting there, never elsewhere.
    for result in results:
        assert result["outcome"] in ("Fits", "Preempts"), result
        assert result["node"] == result["pod"].removeprefix("team-a/agent-"), result


def test_a_daemonset_tolerating_everything_runs_on_every_node(kubectl: Kubectl, snapshot_state: ClusterState) -> None:
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", "-", "-o", "name",
                      stdin=stream(daemonset("logs", tolerations=[{"operator": "Exists"}])))
    assert sorted(run.stdout.split()) == sorted(f"pod/logs-{n}" for n in snapshot_state.nodes)


def test_a_daemonset_with_a_node_selector_and_a_big_request_preempts_on_its_nodes(
        kubectl: Kubectl, snapshot_state: ClusterState) -> None:
    nodes = sorted(snapshot_state.nodes)
    label_key, label_value = next(iter(snapshot_state.nodes[nodes[0]].labels.items()))
    selected = eligible_nodes(snapshot_state, {label_key: label_value})
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", "-", "-o", "json",
                      stdin=stream(daemonset("big", node_selector={label_key: label_value}, cpu="3")))
    results = json.loads(run.stdout)["results"]
    assert [r["pod"].removeprefix("team-a/big-") for r in results] == selected
    placed = [r for r in results if r["outcome"] in ("Fits", "Preempts")]
    assert placed and all(r["node"] == r["pod"].removeprefix("team-a/big-") for r in placed)
    assert any(r["outcome"] == "Preempts" for r in placed), [r["outcome"] for r in results]


# ---- -R ------------------------------------------------------------------------------------------------
def test_recursive_reads_subdirectories_in_kubectls_order(kubectl: Kubectl, tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "deep").mkdir()
    (tmp_path / "a.yaml").write_text(stream(pod("first")))
    (tmp_path / "b" / "deep" / "c.yaml").write_text(stream(pod("third")))
    (tmp_path / "b" / "b.yaml").write_text(stream(pod("second"), SERVICE))
    (tmp_path / "c.yaml").write_text(stream(pod("fourth")))
    flat = kubectl.run("preempt-preview", *OFFLINE, "-f", str(tmp_path), "-o", "name")
    assert flat.stdout.split() == ["pod/first", "pod/fourth"]
    deep = kubectl.run("preempt-preview", *OFFLINE, "-f", str(tmp_path), "-R", "-o", "name")
    assert deep.stdout.split() == ["pod/first", "pod/second", "pod/third", "pod/fourth"]
    assert "skipped 1 object that is not a workload (1 Service)" in deep.stderr


# ---- -o jsonpath / custom-columns ---------------------------------------------------------------------
DEPLOYMENT = str(EXAMPLES / "pods" / "14-deployment-high.yaml")


def test_jsonpath_template_with_range_literals_and_a_filter(kubectl: Kubectl) -> None:
    as_json = json.loads(kubectl.run("preempt-preview", *OFFLINE, "-f", DEPLOYMENT, "-o", "json").stdout)
    template = '{range .results[*]}{.pod}{"\\t"}{.outcome}{"\\n"}{end}'
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", DEPLOYMENT, "-o", f"jsonpath={template}")
    assert run.returncode == 1  # the exit status of any output
    assert run.stdout == "".join(f"{r['pod']}\t{r['outcome']}\n" for r in as_json["results"])
    nodes = kubectl.run("preempt-preview", *OFFLINE, "-f", DEPLOYMENT, "-o",
                        'jsonpath={.results[?(@.node=="pool-general-01")].pod}')
    assert nodes.stdout == " ".join(r["pod"] for r in as_json["results"] if r["node"] == "pool-general-01")
    first = kubectl.run("preempt-preview", *OFFLINE, "-f", DEPLOYMENT, "-o", "jsonpath=pods: {.results[0].victims}")
    assert first.stdout == "pods: " + json.dumps(as_json["results"][0]["victims"], separators=(",", ":"),
                                                 sort_keys=True)


def test_custom_columns_one_row_per_pod(kubectl: Kubectl) -> None:
    as_json = json.loads(kubectl.run("preempt-preview", *OFFLINE, "-f", DEPLOYMENT, "-o", "json").stdout)
    spec = "POD:.pod,OUTCOME:outcome,VICTIM:{.victims[*].name},GONE:.missing"
    run = kubectl.run("preempt-preview", *OFFLINE, "-f", DEPLOYMENT, "-o", f"custom-columns={spec}")
    rows = [line.split() for line in run.stdout.splitlines()]
    assert rows[0] == ["POD", "OUTCOME", "VICTIM", "GONE"]
    assert rows[1:] == [[r["pod"], r["outcome"], ",".join(v["name"] for v in r["victims"]), "<none>"]
                        for r in as_json["results"]]
    headless = kubectl.run("preempt-preview", *OFFLINE, "-f", DEPLOYMENT, "-o", f"custom-columns={spec}",
                           "--no-headers")
    assert [line.split() for line in headless.stdout.splitlines()] == rows[1:]


# ---- usage errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "message"), [
    (["--webhook-url", "127.0.0.1:8443"], 'error: --webhook-url "127.0.0.1:8443": expected an absolute URL such as '
                                          "https://HOST:PORT (the scheme https:// and a host)"),
    (["--webhook-url", "preemptguard.example"], 'error: --webhook-url "preemptguard.example": expected an absolute '
                                                "URL such as https://HOST:PORT (the scheme https:// and a host)"),
    (["-o", "xml"], 'error: unable to match a printer suitable for the output format "xml", allowed formats are: '
                    "custom-columns,json,jsonpath,name,table,wide,yaml"),
    (["-o", "custom-columns=POD"], "error: unexpected custom-columns spec: POD, expected <header>:<json-path-expr>"),
    (["-o", "custom-columns="], "error: custom-columns format specified but no custom columns given"),
    (["--bogus"], "error: unknown flag: --bogus (see 'kubectl preempt-preview --help')"),
    (["--replicas", "two"], 'error: invalid argument "two" for "--replicas" flag: strconv.ParseInt: parsing "two": '
                            "invalid syntax (see 'kubectl preempt-preview --help')"),
])
def test_usage_errors_in_kubectls_words(kubectl: Kubectl, args: list[str], message: str) -> None:
    run = kubectl.run("preempt-preview", "-f", str(EXAMPLES / "pods" / "08-small-fits.yaml"), *args)
    assert run.stderr.splitlines() == [message]
    assert run.returncode == 2  # docs/interfaces.md §5: 2 for usage errors, 3 only for an unreachable server


def test_a_bad_jsonpath_template_is_a_usage_error(kubectl: Kubectl) -> None:
    for template in ("{.results[}", "{range .results[*]}{.pod}", "{end}"):
        run = kubectl.run("preempt-preview", *OFFLINE, "-f", DEPLOYMENT, "-o", f"jsonpath={template}")
        assert run.returncode == 2 and run.stdout == ""
        assert run.stderr.startswith(f"error: error parsing jsonpath {template}, "), run.stderr


def documented_gate_steps() -> dict[str, tuple[str, dict[str, str]]]:
    """The preview step of each CI snippet of docs/ci.md, with its variables, as the file writes them."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "ci.md").read_text(), re.DOTALL)
    github, gitlab = (yaml.safe_load(block) for block in blocks[:2])
    job = github["jobs"]["preempt-preview"]
    (step,) = [s["run"] for s in job["steps"] if "kubectl-preempt_preview" in s.get("run", "")]
    gate = gitlab["preemption-gate"]
    return {"github": (step, job["env"]), "gitlab": ("\n".join(gate["script"]), gate["variables"])}


@pytest.mark.parametrize("ci", ["github", "gitlab"])
def test_the_documented_ci_gate_fails_a_merge_request_that_would_preempt_another_tenant(
        kubectl: Kubectl, tmp_path: Path, ci: str) -> None:
    script, variables = documented_gate_steps()[ci]
    snapshot = tmp_path / variables["SNAPSHOT"]
    snapshot.write_bytes(gzip.compress(CLUSTER.read_bytes()))
    manifests = tmp_path / variables["MANIFESTS"]
    (manifests / "app").mkdir(parents=True)
    (manifests / "app" / "service.yaml").write_text(stream(SERVICE))
    env = kubectl.env(variables)
    (manifests / "app" / "pod.yaml").write_text(stream(pod("small")))
    passing = subprocess.run(["bash", "-ec", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120, check=False)
    assert passing.returncode == 0, passing.stderr
    assert "skipped 1 object that is not a workload (1 Service)" in passing.stderr
    # The merge request adds a pod that evicts a batch pod of another tenant: the job fails.
    shutil.copy(EXAMPLES / "pods" / "09-preempts-batch.yaml", manifests / "app" / "reindex.yaml")
    failing = subprocess.run(["bash", "-ec", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120, check=False)
    assert failing.returncode == 1, failing.stderr
    assert "team-a/search-reindex" in failing.stdout and "Preempts" in failing.stdout
