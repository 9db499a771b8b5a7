"""Every whole-flow case of tests/vectors/preemption.yaml through ``POST /preview`` of a server on loopback over TLS.

The cases run as a user would meet them: the vector's nodes, pods and PDBs become a snapshot file, the
preemptor becomes a ``PreviewRequest``, and its priority comes from a PriorityClass through admission (a pod
that sets ``spec.priority`` without a class is rejected, as kube-apiserver rejects it).

Only mode ``full`` can go through ``/preview``: it starts from a pending pod and a cluster. The other modes
test one step in isolation (``dry_run`` treats every node as a potential node, ``full_with_status_override``
injects filter statuses no cluster produces, ``eligibility`` and ``potential_nodes`` check a single
predicate); they run against the predictor's steps in tests/preemption/test_preemption_vectors.py.
One ``full`` case, ``derived_pdb_empty_selector_semantics``, states newest-master PDB semantics, which the
server does not expose as configuration (it follows the released rule, tested there too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from admission_vectors import write_snapshot

from tests.preemption.vector_adapter import load_vectors, pod_dict
from webhook.config import parse_config
from webhook.routes import PREVIEW_PATH
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import SnapshotSource

VECTORS = load_vectors("preemption.yaml")
NEWEST_MASTER_ONLY = {"derived_pdb_empty_selector_semantics"}
CASES = [c for c in VECTORS["cases"] if c["mode"] == "full" and c["name"] not in NEWEST_MASTER_ONLY]


def _node(raw: dict[str, Any]) -> dict[str, Any]:
    allocatable = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in (raw.get("allocatable") or {}).items()}
    allocatable.setdefault("pods", "32")
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": raw["name"], "labels": raw.get("labels") or {}},
            "spec": {"taints": raw.get("taints") or [], "unschedulable": bool(raw.get("unschedulable"))},
            "status": {"allocatable": allocatable}}


def _pdb(raw: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = {"disruptionsAllowed": int(raw.get("disruptionsAllowed") or 0)}
    if raw.get("disruptedPods"):
        status["disruptedPods"] = dict.fromkeys(raw["disruptedPods"], "2024-01-01T00:00:00Z")
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": raw["name"], "namespace": raw.get("namespace") or "default"},
            "spec": {"selector": raw.get("selector")}, "status": status}


def _preemptor_and_class(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The preemptor naming a class that admission resolves to the vector's priority and policy."""
    pod = pod_dict(raw)
    priority = pod["spec"].pop("priority") or 0
    policy = pod["spec"].pop("preemptionPolicy", None) or "PreemptLowerPriority"
    name = f"vector-{priority}-{policy.lower()}"
    pod["spec"]["priorityClassName"] = name
    pod.pop("status")
    cls = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
           "value": priority, "preemptionPolicy": policy}
    return pod, cls


def _config(case: dict[str, Any]) -> Any:
    raw = {**VECTORS["defaults"]["preemption_args"], **(case.get("preemption_args") or {})}
    return parse_config({"scheduler": raw}, "vector")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_preemption_vector_through_preview(case: dict[str, Any], tmp_path: Path) -> None:
    preemptor, cls = _preemptor_and_class(case["preemptor"])
    objects = [cls, *(_node(n) for n in case.get("nodes") or []), *(pod_dict(p) for p in case.get("pods") or []),
               *(_pdb(b) for b in case.get("pdbs") or [])]
    source = SnapshotSource(write_snapshot(tmp_path, objects))
    async with LoopbackWebhook(source, config=_config(case)) as hook:
        status, preview = await hook.post_json(PREVIEW_PATH, {"pod": preemptor})
    assert status == 200, preview
    (result,) = preview["results"]
    expected = case["expected"]
    if expected.get("fits_without_preemption"):
        assert result["outcome"] == "Fits", result["message"]
        return
    if not expected["preempts"]:
        assert result["outcome"] == "Unschedulable" and result["node"] is None and result["victims"] == []
        for key in ("message", "reason"):
            if key in expected:
                assert expected[key] in result["message"]
        return
    assert result["outcome"] == "Preempts", result["message"]
    victims = [v["name"] for v in result["victims"]]
    if "nominated_node_any_of" in expected:
        assert set(result["tiedNodes"]) == set(expected["nominated_node_any_of"])
        assert result["node"] == min(expected["nominated_node_any_of"])
        return
    assert result["node"] == expected["nominated_node"]
    if expected.get("victims") is not None:
        assert set(victims) == set(expected["victims"])
    if "victims_order" in expected:
        assert victims == expected["victims_order"]
    if "num_pdb_violations" in expected:
        assert result["pdbViolations"] == expected["num_pdb_violations"]


def test_most_whole_flow_vectors_go_through_preview() -> None:
    assert len(CASES) == 20
