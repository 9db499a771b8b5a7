"""Turn a case of tests/vectors/preemption.yaml into model objects (via raw API dicts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from webhook.cluster.model import Node, Pod, PodDisruptionBudget
from webhook.cluster.reader import label_selector, node_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.framework.status import Status
from webhook.preemption.results import PreemptionArgs

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors"


def load_vectors(name: str) -> dict[str, Any]:
    path = VECTORS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"test vectors missing: {path} (they are part of the repository: tests/vectors)")
    with path.open(encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.safe_load(fh)
    return data


def _time(value: object) -> str | None:
    return None if value is None else str(value)


def _requests(raw: dict[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in (raw or {}).items():
        out[name] = f"{value}m" if name == "cpu" else str(value)
    return out


def _affinity(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if not raw:
        return None
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    out: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if kind in raw:
            out[kind] = {key: raw[kind].get("required", [])}
    if "nodeAffinity" in raw:
        out["nodeAffinity"] = {key: raw["nodeAffinity"].get("required")}
    return out


def pod_dict(raw: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": _requests(raw.get("requests"))}}],
        "priority": raw.get("priority"),
    }
    if raw.get("node"):
        spec["nodeName"] = raw["node"]
    if raw.get("preemptionPolicy"):
        spec["preemptionPolicy"] = raw["preemptionPolicy"]
    for field in ("nodeSelector", "tolerations", "topologySpreadConstraints"):
        if raw.get(field):
            spec[field] = raw[field]
    affinity = _affinity(raw.get("affinity"))
    if affinity:
        spec["affinity"] = affinity
    status: dict[str, Any] = {"phase": "Running" if raw.get("node") else "Pending"}
    if raw.get("startTime") is not None:
        status["startTime"] = _time(raw["startTime"])
    if raw.get("nominatedNodeName"):
        status["nominatedNodeName"] = raw["nominatedNodeName"]
    if raw.get("conditions"):
        status["conditions"] = raw["conditions"]
    meta: dict[str, Any] = {"name": raw["name"], "namespace": raw.get("namespace") or "default",
                            "labels": raw.get("labels") or {}, "uid": f"uid-{raw['name']}"}
    if raw.get("deletionTimestamp"):
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def build_pod(raw: dict[str, Any]) -> Pod:
    return pod_from_dict(pod_dict(raw))


def build_node(raw: dict[str, Any]) -> Node:
    alloc = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in (raw.get("allocatable") or {}).items()}
    alloc.setdefault("pods", "32")
    return node_from_dict({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": raw["name"], "labels": raw.get("labels") or {}},
        "spec": {"taints": raw.get("taints") or [], "unschedulable": bool(raw.get("unschedulable"))},
        "status": {"allocatable": alloc},
    })


def build_pdb(raw: dict[str, Any]) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        name=raw["name"], namespace=raw.get("namespace") or "default",
        selector=label_selector(raw.get("selector"), "selector"),
        disruptions_allowed=int(raw.get("disruptionsAllowed") or 0),
        disrupted_pods=frozenset(raw.get("disruptedPods") or ()),
    )


def build_state(case: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    for node in case.get("nodes") or []:
        state.upsert(build_node(node))
    for pod in case.get("pods") or []:
        state.upsert(build_pod(pod))
    for pdb in case.get("pdbs") or []:
        state.upsert(build_pdb(pdb))
    return state


def status_overrides(case: dict[str, Any]) -> dict[str, Status]:
    return {n["name"]: Status(n["status_override"]) for n in case.get("nodes") or [] if n.get("status_override")}


def case_args(case: dict[str, Any], defaults: dict[str, Any], **extra: bool) -> PreemptionArgs:
    raw = {**defaults.get("preemption_args", {}), **(case.get("preemption_args") or {})}
    return PreemptionArgs(min_candidate_nodes_percentage=raw["minCandidateNodesPercentage"],
                          min_candidate_nodes_absolute=raw["minCandidateNodesAbsolute"], **extra)
