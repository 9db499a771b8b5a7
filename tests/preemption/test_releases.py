"""The prediction follows the release it is asked for (docs/preemption.md §12): each behaviour that changed
between v1.33 and v1.37 on a cluster where it decides the outcome, predicted for the releases on both sides.
The same clusters are the real-scheduler vectors ``release-*`` (tests/vectors/real_scheduler), observed on
kube-scheduler v1.34.4 and v1.37.2."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webhook.cluster.release import DEFAULT_RELEASE, RELEASES, closest_release, parse_release
from webhook.cluster.snapshot import ClusterState
from webhook.errors import ConfigError
from webhook.preemption.results import Outcome, PreemptionArgs, PreemptionResult
from webhook.preemption.simulate import predict_objects
from webhook.sources.loader import parse_documents

PAUSE = "registry.k8s.io/pause:3.10"


def _state(objects: list[dict[str, Any]]) -> ClusterState:
    state = ClusterState()
    for obj in parse_documents(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}), "test"):
        state.upsert(obj)
    return state


def node(name: str, cpu: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "10"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": alloc, "capacity": alloc}}


def pod(name: str, cpu: str, *, node_name: str = "", priority: int = 0, labels: dict[str, str] | None = None,
        start: str = "2025-01-01T00:00:00Z", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": cpu}}}],
                            "priority": priority, **spec}
    if node_name:
        body["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}, "uid": f"uid-{name}"},
            "spec": body, "status": {"phase": "Running" if node_name else "Pending", "startTime": start}}


def pdb(name: str, selector: dict[str, str], allowed: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": selector}}, "status": {"disruptionsAllowed": allowed}}


HIGH = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}


def predict(objects: list[dict[str, Any]], incoming: dict[str, Any], version: str) -> PreemptionResult:
    [result] = predict_objects(_state(objects), [incoming], args=PreemptionArgs.for_release(parse_release(version)))
    return result


def two_pdbs() -> list[dict[str, Any]]:
    """Two victims of one node under two PDBs: `a` is selected by both (`a-tier` budget 0, `b-app` budget 1), `b`
    by `b-app`. Up to v1.36 `a` spends both budgets and `b` violates `b-app`; v1.37 stops at `a`'s first violation
    and leaves `b-app` to `b`. (Which PDB is first is the order upstream lists them in, its informer's map order;
    PreemptGuard takes them by namespace and name, so `a-tier` is first.)"""
    return [HIGH, node("n1", "2"),
            pod("a", "1", node_name="n1", priority=10, labels={"app": "x", "tier": "y"}, start="2025-01-01T00:00:00Z"),
            pod("b", "1", node_name="n1", priority=10, labels={"app": "x"}, start="2025-01-02T00:00:00Z"),
            pdb("a-tier", {"tier": "y"}, 0), pdb("b-app", {"app": "x"}, 1)]


INCOMING = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new", "namespace": "default"},
            "spec": {"priorityClassName": "high",
                     "containers": [{"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": "2"}}}]}}


@pytest.mark.parametrize(("version", "violations"), [("v1.34", 2), ("v1.36", 2), ("v1.37", 1)])
def test_a_victim_under_two_pdbs_spends_both_budgets_before_v1_37(version: str, violations: int) -> None:
    result = predict(two_pdbs(), INCOMING, version)
    assert (result.outcome, result.node, result.pdb_violations) == (Outcome.PREEMPTS, "n1", violations)


def gated_nomination() -> list[dict[str, Any]]:
    """A pod nominated to the only node that still has a scheduling gate (set by another component)."""
    waiting = pod("waiting", "1500m", priority=5000, schedulingGates=[{"name": "example.com/hold"}])
    waiting["status"]["nominatedNodeName"] = "n1"
    return [HIGH, node("n1", "2"), waiting]


@pytest.mark.parametrize(("version", "outcome"), [("v1.33", Outcome.FITS), ("v1.36", Outcome.FITS),
                                                  ("v1.37", Outcome.UNSCHEDULABLE)])
def test_a_gated_pods_nomination_reserves_room_from_v1_37(version: str, outcome: Outcome) -> None:
    incoming = {**INCOMING, "spec": {**INCOMING["spec"], "containers": [
        {"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": "1"}}}]}}
    assert predict(gated_nomination(), incoming, version).outcome == outcome


def pod_level_incoming() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new", "namespace": "default"},
            "spec": {"priorityClassName": "high", "resources": {"requests": {"cpu": "3"}},
                     "containers": [{"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": "100m"}}}]}}


@pytest.mark.parametrize(("version", "outcome"), [("v1.33", Outcome.FITS), ("v1.34", Outcome.UNSCHEDULABLE),
                                                  ("v1.37", Outcome.UNSCHEDULABLE)])
def test_pod_level_requests_count_from_v1_34(version: str, outcome: Outcome) -> None:
    assert predict([HIGH, node("n1", "2")], pod_level_incoming(), version).outcome == outcome


def test_every_supported_release_has_a_row_and_the_newest_is_the_default() -> None:
    assert sorted(RELEASES) == [33, 34, 35, 36, 37] and DEFAULT_RELEASE is RELEASES[37]
    assert PreemptionArgs() == PreemptionArgs.for_release(DEFAULT_RELEASE)  # the default args are v1.37's


@pytest.mark.parametrize("text", ["v1.34", "1.34", "v1.34.4", " v1.34.0 "])
def test_a_release_is_named_by_its_minor(text: str) -> None:
    assert parse_release(text).name == "v1.34"


@pytest.mark.parametrize(("text", "message"), [("v1.32", "not a release PreemptGuard predicts for"),
                                               ("1.38.0", "supported: v1.33 .. v1.37"),
                                               ("latest", "not a Kubernetes version"), ("v2.0", "not a Kubernetes")])
def test_an_unknown_release_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_release(text)


def test_the_binaries_release_or_the_nearest_with_a_note() -> None:
    assert closest_release("v1.36.3") == (RELEASES[36], "")
    release, note = closest_release("v1.39.0")
    assert release is RELEASES[37] and "predicting as v1.37" in note
    release, note = closest_release("unknown")
    assert release is DEFAULT_RELEASE and "unknown" in note
