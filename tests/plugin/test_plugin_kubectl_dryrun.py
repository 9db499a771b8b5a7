"""The default source end to end: real kubectl -> plugin -> (kubeconfig) fake API server -> dry-run create ->
AdmissionReview to the real PreemptGuard server -> JSONPatch, warnings -> the preview in the annotation."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_apiserver_admission import EXPIRED_TOKEN, AdmissionApiServer, User

from conftest import EXAMPLES, Kubectl, PreemptGuard, Run, expected_outcome, expected_results, results_of

ALICE = "alice-token"
TOKENS = {ALICE: User("alice", ("team-a-devs", "system:authenticated"))}


@pytest.fixture(scope="module")
def existing_pods(snapshot_items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in snapshot_items if item["kind"] in ("Pod", "Node")]


@pytest.fixture
async def api(preemptguard_client_ca: PreemptGuard, tmp_path: Path,
              existing_pods: list[dict[str, Any]]) -> AsyncIterator[AdmissionApiServer]:
    preemptguard = preemptguard_client_ca
    async with AdmissionApiServer(tokens=TOKENS, webhook_url=preemptguard.url, webhook_ca=preemptguard.ca_pem,
                                  work_dir=tmp_path, client_certificate=preemptguard.client_certificate) as server:
        for pod in existing_pods:
            server.store(pod)
        yield server


def write_kubeconfig(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture
def kubeconfig(api: AdmissionApiServer, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", api.kubeconfig(ALICE))


async def preview(kubectl: Kubectl, kubeconfig: Path, *args: str, stdin: str | None = None) -> Run:
    return await kubectl.arun("preempt-preview", *args, stdin=stdin, env={"KUBECONFIG": str(kubeconfig)})


DRY_RUN_EXAMPLES = ["08-small-fits", "09-preempts-batch", "10-pdb-violation", "11-unschedulable-too-big"]


async def test_dry_run_returns_the_webhooks_full_preview(kubectl: Kubectl, api: AdmissionApiServer,
                                                        kubeconfig: Path) -> None:
    paths = [EXAMPLES / "pods" / f"{name}.yaml" for name in DRY_RUN_EXAMPLES]
    runs = await asyncio.gather(*(preview(kubectl, kubeconfig, "-f", str(p), "-o", "json") for p in paths))
    for path, run in zip(paths, runs, strict=True):
        expect = expected_outcome(path)
        assert run.returncode == (0 if expect == "Fits" else 1), run.stderr
        got = json.loads(run.stdout)
        # By default alice hears only her pod's tenant named: the victims of other tenants are counted.
        expected = [(pod, outcome, node, tuple(v for v in victims if same_namespace(v, pod)))
                    for pod, outcome, node, victims in expected_results(path)]
        assert results_of(got) == expected
        assert [others(r) for r in got["results"]] == [
            sum(not same_namespace(v, pod) for v in victims) for pod, _, _, victims in expected_results(path)]
        if expect == "Preempts":  # the webhook's warnings arrive as Warning headers, printed as kubectl does
            assert run.stderr.startswith("Warning: ")
            assert all(v["name"] in run.stderr for v in got["results"][0]["victims"])
            hidden = [v for pod, _, _, victims in expected_results(path) for v in victims if not same_namespace(v, pod)]
            # (the node's name, pool-batch-04, may contain a namespace's name: the victim's own name may not appear)
            assert all(v.split("/")[1] not in run.stderr + run.stdout for v in hidden)
    # The API server sent one dry-run review per pod with alice's identity; nothing else was created.
    assert len(api.reviews) == len(paths)
    assert all(r["request"]["dryRun"] is True and r["request"]["userInfo"]["username"] == "alice"
               for r in api.reviews)
    assert [(m, q) for m, p, q in api.requests if p.endswith("/pods")] == [
        ("POST", {"dryRun": "All", "timeout": "1m0s"})] * len(paths)  # --request-timeout (60s) as client-go sends it


def same_namespace(victim: str, pod: str) -> bool:
    return victim.split("/")[0] == pod.split("/")[0]


def others(result: dict[str, Any]) -> int:
    return int((result.get("otherTenantVictims") or {}).get("count") or 0)


async def test_dry_run_table_output(kubectl: Kubectl, api: AdmissionApiServer, kubeconfig: Path) -> None:
    run = await preview(kubectl, kubeconfig, "-f", str(EXAMPLES / "pods/10-pdb-violation.yaml"))
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[1].split()[:6] == ["team-b/payments-migration", "high", "Preempts", "pool-general-04", "1", "1"]
    assert lines[-1].endswith("1 victim in 1 namespace (team-b), 1 PDB violation")


async def test_admission_denial_is_a_rejected_pod(kubectl: Kubectl, api: AdmissionApiServer,
                                                  kubeconfig: Path) -> None:
    run = await preview(kubectl, kubeconfig, "-f", str(EXAMPLES / "pods/04-unknown-class.yaml"), "-o", "json")
    assert run.returncode == 1
    (result,) = json.loads(run.stdout)["results"]
    assert result["outcome"] == "Rejected" and result["pod"] == "team-a/vip-api"
    assert result["message"] == ('admission webhook "pods.preemptguard.io" denied the request: '
                                 'pods "vip-api" is forbidden: no PriorityClass with name gold was found')


async def test_workload_replicas_are_dry_run_one_by_one(kubectl: Kubectl, api: AdmissionApiServer,
                                                        kubeconfig: Path) -> None:
    run = await preview(kubectl, kubeconfig, "-f", str(EXAMPLES / "pods/14-deployment-high.yaml"), "-o", "json")
    assert run.returncode == 1
    results = json.loads(run.stdout)["results"]
    assert [r["pod"] for r in results] == [f"team-a/recommendations-{i}" for i in range(4)]
    assert {r["outcome"] for r in results} == {"Preempts"}
    assert [r["request"]["object"]["metadata"]["name"] for r in api.reviews] == [r["pod"][7:] for r in results]
    # Each replica sees the cluster as it is: the same node and victim (of another tenant: counted, not named),
    # and the message says why.
    assert len({r["node"] for r in results}) == 1
    assert [(r["victims"], others(r)) for r in results] == [([], 1)] * 4
    assert all("dry run: predicted against the cluster as it is" in r["message"] for r in results[1:])
    assert "Note: dry run: predicted against the cluster as it is" in run.stderr


async def test_existing_workload_by_type_and_name(kubectl: Kubectl, api: AdmissionApiServer, kubeconfig: Path) -> None:
    deployment = yaml.safe_load((EXAMPLES / "pods/14-deployment-high.yaml").read_text(encoding="utf-8"))
    deployment["status"] = {"replicas": 4, "readyReplicas": 4}
    api.store(deployment)
    run = await preview(kubectl, kubeconfig, "deployment/recommendations", "-n", "team-a", "--replicas", "2",
                        "--priority-class", "standard", "-o", "json")
    results = json.loads(run.stdout)["results"]
    assert [r["pod"] for r in results] == ["team-a/recommendations-0", "team-a/recommendations-1"]
    assert {(r["priorityClassName"], r["priority"]) for r in results} == {("standard", 1000)}
    assert ("GET", "/apis/apps/v1/namespaces/team-a/deployments/recommendations", {"timeout": "1m0s"}) in api.requests
    # The namespace comes from the kubeconfig context when -n is not given; TYPE NAME works too.
    context_ns = write_kubeconfig(kubeconfig.parent / "ns-kubeconfig", api.kubeconfig(ALICE, namespace="team-a"))
    run, missing = await asyncio.gather(preview(kubectl, context_ns, "deploy", "recommendations", "-o", "json"),
                                        preview(kubectl, kubeconfig, "sts/nothing", "-n", "team-a"))
    assert [r["pod"] for r in json.loads(run.stdout)["results"]] == ["team-a/recommendations"]
    assert missing.returncode == 2
    assert missing.stderr == 'error: statefulsets.apps "nothing" not found in namespace "team-a"\n'


async def test_existing_pod_name_is_previewed_under_a_generated_name(
        kubectl: Kubectl, api: AdmissionApiServer, kubeconfig: Path, existing_pods: list[dict[str, Any]]) -> None:
    pod = next(p for p in existing_pods if p["metadata"].get("namespace") == "team-b")
    run = await preview(kubectl, kubeconfig, f"pod/{pod['metadata']['name']}", "-n", "team-b", "-o", "json")
    assert run.returncode in (0, 1), run.stderr
    (result,) = json.loads(run.stdout)["results"]
    assert result["pod"].startswith(f"team-b/{pod['metadata']['name']}-")
    sent = api.reviews[-1]["request"]["object"]
    assert "nodeName" not in sent["spec"] and "status" not in sent
    # -o name prints the name the API server generated, as kubectl create -o name would.
    named = await preview(kubectl, kubeconfig, f"pod/{pod['metadata']['name']}", "-n", "team-b", "-o", "name")
    assert named.returncode == run.returncode
    assert named.stdout == f"pod/{api.reviews[-1]['request']['object']['metadata']['name']}\n"
    assert named.stdout.startswith(f"pod/{pod['metadata']['name']}-")


async def test_missing_webhook_is_an_error(kubectl: Kubectl, tmp_path: Path) -> None:
    async with AdmissionApiServer(tokens=TOKENS, webhook_url=None, work_dir=tmp_path) as bare:
        config = write_kubeconfig(tmp_path / "kubeconfig", bare.kubeconfig(ALICE))
        run = await preview(kubectl, config, "-f", str(EXAMPLES / "pods/08-small-fits.yaml"))
    assert run.returncode >= 2 and run.stdout == ""
    assert run.stderr.startswith("error: PreemptGuard webhook is not installed or did not answer")
    assert len(run.stderr.splitlines()) == 1


async def test_forbidden_and_unauthorized(kubectl: Kubectl, api: AdmissionApiServer, tmp_path: Path) -> None:
    pod = str(EXAMPLES / "pods/08-small-fits.yaml")
    stranger = write_kubeconfig(tmp_path / "stranger", api.kubeconfig("who-knows"))
    expired = write_kubeconfig(tmp_path / "expired", api.kubeconfig(EXPIRED_TOKEN))
    run, unauthorized = await asyncio.gather(preview(kubectl, stranger, "-f", pod),
                                             preview(kubectl, expired, "-f", pod))
    assert run.returncode >= 2 and run.stdout == ""
    assert run.stderr == ('error: pods is forbidden: User "system:anonymous" cannot create resource "pods" in API '
                          'group "" in the namespace "team-b"\n')
    assert api.reviews == []  # RBAC refused it before admission
    assert unauthorized.returncode >= 2
    assert unauthorized.stderr == "error: You must be logged in to the server (Unauthorized)\n"


async def test_unreachable_cluster(kubectl: Kubectl, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "gone",
              "clusters": [{"name": "gone", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}
    run = await preview(kubectl, write_kubeconfig(tmp_path / "kubeconfig", config), "-f",
                        str(EXAMPLES / "pods/08-small-fits.yaml"))
    assert run.returncode == 3 and run.stdout == ""
    assert run.stderr.startswith(f"error: cannot reach the API server https://127.0.0.1:{port}")
    assert len(run.stderr.splitlines()) == 1


# ---- kubeconfig handling: several KUBECONFIG files, --kubeconfig, --context, token files, exec plugins ----
def split_config(api: AdmissionApiServer, token_user: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two files the way people keep them: clusters and users in one, contexts in another."""
    full = api.kubeconfig(ALICE)
    first = {"apiVersion": "v1", "kind": "Config", "current-context": "fake-exec", "clusters": full["clusters"],
             "users": [{"name": "tester", "user": token_user}],
             "contexts": [{"name": "fake-exec", "context": {"cluster": "fake", "user": "tester"}}]}
    second = {"apiVersion": "v1", "kind": "Config", "current-context": "broken",
              "clusters": [{"name": "elsewhere", "cluster": {"server": "https://127.0.0.1:1"}}],
              "users": [{"name": "nobody", "user": {"token": "x"}}],
              "contexts": [{"name": "broken", "context": {"cluster": "elsewhere", "user": "nobody"}},
                           {"name": "team-c", "context": {"cluster": "fake", "user": "tester",
                                                          "namespace": "team-c"}}]}
    return first, second


async def test_several_kubeconfig_files_exec_plugin_and_context(kubectl: Kubectl, api: AdmissionApiServer,
                                                                tmp_path: Path) -> None:
    plugin = tmp_path / "credential-plugin"
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": ALICE}}
    plugin.write_text(f"#!{sys.executable}\nimport json, os\nassert 'KUBERNETES_EXEC_INFO' in os.environ\n"
                      f"print(json.dumps({credential!r}))\n", encoding="utf-8")
    plugin.chmod(0o755)
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                          "interactiveMode": "Never"}}
    first, second = split_config(api, exec_user)
    paths = [write_kubeconfig(tmp_path / "a", first), write_kubeconfig(tmp_path / "b", second)]
    env = {"KUBECONFIG": f"{paths[0]}:{tmp_path / 'missing'}:{paths[1]}"}
    pod = str(EXAMPLES / "pods/08-small-fits.yaml")
    manifest = yaml.safe_load(Path(pod).read_text(encoding="utf-8"))
    del manifest["metadata"]["namespace"]
    first_wins, other_context, missing = await asyncio.gather(
        # current-context comes from the first file that sets it (kubectl's rule): fake-exec, not broken.
        kubectl.arun("preempt-preview", "-f", pod, "-o", "json", env=env),
        # --context picks a context of the second file; its namespace applies to a pod without one.
        kubectl.arun("preempt-preview", "--context", "team-c", "-f", "-", "-o", "json", stdin=json.dumps(manifest),
                     env=env),
        kubectl.arun("preempt-preview", "--context", "nope", "-f", pod, env=env))
    assert first_wins.returncode == 0, first_wins.stderr
    assert json.loads(first_wins.stdout)["results"][0]["pod"] == "team-b/checkout-debug"
    assert json.loads(other_context.stdout)["results"][0]["pod"] == "team-c/checkout-debug"
    assert [r["request"]["userInfo"]["username"] for r in api.reviews] == ["alice", "alice"]  # via the exec plugin
    assert missing.returncode == 2
    assert missing.stderr.startswith('error: context "nope" does not exist in the kubeconfig')


async def test_kubeconfig_flag_with_a_token_file(kubectl: Kubectl, api: AdmissionApiServer, tmp_path: Path) -> None:
    (tmp_path / "token").write_text(ALICE, encoding="utf-8")
    config = api.kubeconfig("unused")
    config["users"] = [{"name": "tester", "user": {"tokenFile": str(tmp_path / "token")}}]
    path = write_kubeconfig(tmp_path / "explicit", config)
    # --kubeconfig wins over KUBECONFIG (which points nowhere useful here).
    run = await kubectl.arun("preempt-preview", "--kubeconfig", str(path), "-f",
                             str(EXAMPLES / "pods/08-small-fits.yaml"), "-o", "json",
                             env={"KUBECONFIG": str(tmp_path / "missing")})
    assert run.returncode == 0, run.stderr
    assert api.reviews[-1]["request"]["userInfo"]["username"] == "alice"


async def test_a_daemonset_is_dry_run_once_per_eligible_node_pinned_there(kubectl: Kubectl, api: AdmissionApiServer,
                                                                         kubeconfig: Path) -> None:
    gpu_agent = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "gpu-agent", "namespace": "team-a"},
                 "spec": {"selector": {"matchLabels": {"app": "gpu-agent"}}, "template": {
                     "metadata": {"labels": {"app": "gpu-agent"}},
                     "spec": {"priorityClassName": "high",
                              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                              "nodeSelector": {"pool": "gpu"},
                              "containers": [{"name": "agent", "image": "x",
                                              "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}
    gpu_nodes = sorted(n["metadata"]["name"] for (plural, _, _), n in api.objects.items()
                       if plural == "nodes" and n["metadata"].get("labels", {}).get("pool") == "gpu")
    assert gpu_nodes  # the example cluster has a tainted GPU pool
    run = await preview(kubectl, kubeconfig, "-f", "-", "-o", "json", stdin=yaml.safe_dump(gpu_agent))
    assert run.returncode in (0, 1), run.stderr
    results = json.loads(run.stdout)["results"]
    assert [r["pod"] for r in results] == [f"team-a/gpu-agent-{node}" for node in gpu_nodes]
    assert ("GET", "/api/v1/nodes") in [(m, p) for m, p, _ in api.requests]
    # Each dry-run pod carries the daemon tolerations and the affinity that pins it, as the controller sets them.
    for review, node in zip(api.reviews, gpu_nodes, strict=True):
        spec = review["request"]["object"]["spec"]
        assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in (
            spec["tolerations"])
