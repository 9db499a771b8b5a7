"""examples/: the cluster snapshot has the promised content, and every pod example is what its `# expect:` says.

The expectations are checked here with a deliberately simple reference fit check (requests, pod count, taints,
nodeSelector, cordon, nominated pods) so that the example files stay honest independently of the predictor.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cluster.model import Node, Pod
from webhook.cluster.reader import pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.priority.resolution import (
    PriorityRejection,
    effective_priority_classes,
    resolve_pod_priority,
)
from webhook.sources.loader import load_snapshot

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
POD_FILES = sorted((EXAMPLES / "pods").glob("*.yaml"))
OUTCOMES = {"Fits", "Preempts", "Unschedulable", "Rejected"}
EXPECT_RE = re.compile(r"^# expect: (\S+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def cluster() -> ClusterState:
    return load_snapshot(EXAMPLES / "cluster.yaml")


@pytest.fixture(scope="module")
def raw_items() -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document = yaml.load((EXAMPLES / "cluster.yaml").read_text(encoding="utf-8"), Loader=loader)
    assert document["apiVersion"] == "v1" and document["kind"] == "List"
    items: list[dict[str, Any]] = document["items"]
    return items


# ---- cluster.yaml -------------------------------------------------------------------------------

def test_cluster_has_the_promised_size(cluster: ClusterState) -> None:
    counts = cluster.counts()
    assert counts["Node"] >= 24
    assert counts["Pod"] >= 200
    assert counts["PodDisruptionBudget"] >= 3
    assert (EXAMPLES / "cluster.yaml").stat().st_size < 600_000


def test_priority_classes(cluster: ClusterState) -> None:
    classes = cluster.priority_classes
    assert classes["system-node-critical"].value == 2000001000
    assert classes["system-cluster-critical"].value == 2000000000
    assert len(cluster.global_default_classes()) == 1
    assert any(pc.preemption_policy == "Never" for pc in classes.values())
    assert "high" in classes


def test_namespaces_and_tenants(cluster: ClusterState) -> None:
    tenants = [ns.labels.get("tenant") for ns in cluster.namespaces.values() if ns.labels.get("tenant")]
    assert len(set(tenants)) >= 3
    assert len(tenants) > len(set(tenants)), "two namespaces must share a tenant"
    assert {"kube-system", "monitoring", "team-a", "team-b", "team-c", "batch"} <= set(cluster.namespaces)


def test_nodes_have_topology_taints_and_one_cordon(cluster: ClusterState) -> None:
    nodes = list(cluster.nodes.values())
    assert all("topology.kubernetes.io/zone" in n.labels and "kubernetes.io/hostname" in n.labels for n in nodes)
    assert len({n.labels["topology.kubernetes.io/zone"] for n in nodes}) >= 3
    assert sum(1 for n in nodes if n.taints) >= 3
    assert sum(1 for n in nodes if n.unschedulable) == 1


def test_pods_cover_the_interesting_states(cluster: ClusterState) -> None:
    pods = list(cluster.pods.values())
    assert {p.phase for p in pods} >= {"Running", "Pending", "Succeeded", "Failed"}
    terminating = [p for p in pods if p.deleting]
    assert len(terminating) == 1 and terminating[0].preempted_by_scheduler
    nominated = [p for p in pods if p.nominated_node_name]
    assert len(nominated) == 1 and not nominated[0].node_name
    assert nominated[0].nominated_node_name == terminating[0].node_name
    assert len({p.effective_priority for p in pods}) >= 6
    assert all(p.priority is not None and p.preemption_policy for p in pods), "pods are stored after admission"
    assert all(p.node_name in cluster.nodes for p in pods if p.node_name)
    assert all(p.start_time_ns is not None for p in pods if p.node_name)


def test_stored_priorities_match_their_classes(cluster: ClusterState) -> None:
    for pod in cluster.pods.values():
        pc = cluster.priority_classes[pod.priority_class_name]
        assert (pod.priority, pod.preemption_policy) == (pc.value, pc.preemption_policy), pod.key


def test_scoped_quotas(cluster: ClusterState) -> None:
    critical = cluster.quotas_in("kube-system")
    assert any(req.scope_name == "PriorityClass" and req.operator == "In"
               and set(req.values) == {"system-node-critical", "system-cluster-critical"}
               for q in critical for req in q.scope_selector)
    assert any(req.values == ("high",) for q in cluster.quotas_in("team-a") for req in q.scope_selector)


def test_quota_usage_matches_the_pods(cluster: ClusterState) -> None:
    for quotas in cluster.quotas_by_namespace.values():
        for quota in quotas.values():
            classes = {v for req in quota.scope_selector for v in req.values}
            pods = [p for p in cluster.pods_by_namespace.get(quota.namespace, {}).values()
                    if not p.is_terminal and (not classes or p.priority_class_name in classes)]
            assert quota.used["pods"].value == len(pods), quota.name
            if "requests.cpu" in quota.used:
                assert quota.used["requests.cpu"].value * 1000 == sum(p.requests.milli_cpu for p in pods)
                assert quota.used["requests.memory"].value == sum(p.requests.memory for p in pods)
            for name, used in quota.used.items():
                assert used.value <= quota.hard[name].value, (quota.name, name)


def test_pdb_status_is_consistent(raw_items: list[dict[str, Any]], cluster: ClusterState) -> None:
    pdbs = [i for i in raw_items if i["kind"] == "PodDisruptionBudget"]
    for pdb in pdbs:
        status = pdb["status"]
        assert status["disruptionsAllowed"] == max(0, status["currentHealthy"] - status["desiredHealthy"])
        selector = pdb["spec"]["selector"]["matchLabels"]
        matching = [p for p in cluster.pods_by_namespace[pdb["metadata"]["namespace"]].values()
                    if p.node_name and not p.is_terminal and all(p.labels.get(k) == v for k, v in selector.items())]
        assert status["expectedPods"] == len(matching)
    assert any(p["status"]["disruptionsAllowed"] == 0 for p in pdbs)


def test_looks_like_kubectl_output(raw_items: list[dict[str, Any]]) -> None:
    for item in raw_items:
        meta = item["metadata"]
        assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"], meta["name"]
    pods = [i for i in raw_items if i["kind"] == "Pod"]
    assert all(p["metadata"].get("ownerReferences") for p in pods)
    keys = [(i["kind"], i["metadata"].get("namespace", ""), i["metadata"]["name"]) for i in raw_items]
    assert len(keys) == len(set(keys))


def test_generator_output_is_committed() -> None:
    result = subprocess.run([sys.executable, str(EXAMPLES / "generate.py"), "--check", "--quiet"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr


# ---- pods/*.yaml --------------------------------------------------------------------------------

def _expectation(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# expect: "), f"{path.name} must start with '# expect: <outcome>'"
    match = EXPECT_RE.search(text)
    assert match is not None
    return match.group(1)


def _pod_template(document: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    if document["kind"] == "Pod":
        return dict(document), 1
    template = document["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"namespace": document["metadata"].get("namespace"),
                        "generateName": document["metadata"]["name"] + "-", **template.get("metadata", {})},
           "spec": template["spec"]}
    return pod, int(document["spec"].get("replicas", 1))


def _tolerates(pod: Pod, node: Node) -> bool:
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(((t.operator == "Exists" and (not t.key or t.key == taint.key))
                    or (t.operator == "Equal" and t.key == taint.key and t.value == taint.value))
                   and (not t.effect or t.effect == taint.effect) for t in pod.tolerations):
            return False
    return True


def _feasible(pod: Pod, node: Node) -> bool:
    """Everything except resources (the UU filters), in the reference check's simple form."""
    if node.unschedulable and not any(t.key == "node.kubernetes.io/unschedulable" for t in pod.tolerations):
        return False
    return _tolerates(pod, node) and all(node.labels.get(k) == v for k, v in pod.node_selector.items())


def _fits(pod: Pod, priority: int, node: Node, cluster: ClusterState, *, evict_below: int | None = None) -> bool:
    bound = [p for p in cluster.pods_by_node.get(node.name, {}).values()
             if evict_below is None or p.effective_priority >= evict_below]
    nominated = [p for p in cluster.nominated_by_node.get(node.name, {}).values()
                 if p.effective_priority >= priority]
    members = bound + nominated
    alloc = node.allocatable
    if len(members) + 1 > alloc.pods:
        return False
    if pod.requests.milli_cpu > alloc.milli_cpu - sum(p.requests.milli_cpu for p in members):
        return False
    if pod.requests.memory > alloc.memory - sum(p.requests.memory for p in members):
        return False
    return all(value <= alloc.scalar.get(name, 0) - sum(p.requests.scalar.get(name, 0) for p in members)
               for name, value in pod.requests.scalar.items())


def test_there_are_pod_examples_for_every_outcome() -> None:
    assert len(POD_FILES) >= 15
    assert {_expectation(p) for p in POD_FILES} == OUTCOMES


@pytest.mark.parametrize("path", POD_FILES, ids=lambda p: p.name)
def test_pod_example_matches_its_expectation(path: Path, cluster: ClusterState) -> None:
    expect = _expectation(path)
    assert expect in OUTCOMES
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[1].startswith("# ") and len(lines[1]) > 20, "second line says what the file shows"
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw_pod, replicas = _pod_template(document)
    pod = pod_from_dict(raw_pod)
    assert pod.namespace in cluster.namespaces
    classes = effective_priority_classes(cluster.priority_classes)
    try:
        resolved = resolve_pod_priority(pod.priority_class_name, pod.priority, pod.preemption_policy, classes)
    except PriorityRejection:
        assert expect == "Rejected", path.name
        return
    assert expect != "Rejected", f"{path.name}: the Priority plugin admits it"
    nodes = [n for n in cluster.nodes.values() if _feasible(pod, n)]
    fits_now = [n.name for n in nodes if _fits(pod, resolved.priority, n, cluster)]
    room_after_preemption = [n.name for n in nodes
                             if _fits(pod, resolved.priority, n, cluster, evict_below=resolved.priority)]
    if expect == "Fits":
        assert fits_now, path.name
        assert replicas == 1 or len(fits_now) >= replicas
    elif expect == "Preempts":
        assert not fits_now and room_after_preemption, path.name
        assert resolved.preemption_policy == "PreemptLowerPriority"
        assert len(room_after_preemption) >= replicas
    else:  # Unschedulable
        assert not fits_now
        assert not room_after_preemption or resolved.preemption_policy == "Never"


def test_config_example_declares_the_critical_quota_rule() -> None:
    config = yaml.safe_load((EXAMPLES / "config.yaml").read_text(encoding="utf-8"))
    (limited,) = config["quota"]["limitedResources"]
    assert limited["resource"] == "pods"
    assert limited["matchScopes"][0]["values"] == ["system-node-critical", "system-cluster-critical"]
    with_config = [p.name for p in POD_FILES if "# expect-with-config: Rejected" in p.read_text(encoding="utf-8")]
    assert with_config == ["15-critical-outside-kube-system.yaml"]


def test_readme_lists_every_pod_file() -> None:
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for path in POD_FILES:
        row = next((line for line in readme.splitlines() if f"`{path.name}`" in line), None)
        assert row is not None, path.name
        assert f"| {_expectation(path)}" in row, path.name
