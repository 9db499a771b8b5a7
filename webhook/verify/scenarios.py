"""Scenarios: a snapshot and the pods to create on it, found on disk and expanded into Pod manifests."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.errors import InvalidInput
from webhook.preemption.workloads import controller_owner
from webhook.verify.engine import expand_object
from webhook.verify.loader import read_objects

SNAPSHOT_FILE = "snapshot.yaml"
POD_FILE = "pod.yaml"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str  # the subdirectory of --scenarios; "" for --snapshot/-f
    snapshot: Path
    pod_files: tuple[Path, ...]


def discover(directory: Path) -> list[Scenario]:
    """Every subdirectory of ``directory`` holding ``snapshot.yaml`` and ``pod.yaml``, in name order."""
    if not directory.is_dir():
        raise InvalidInput(f"--scenarios {directory}: not a directory")
    found = [Scenario(sub.name, sub / SNAPSHOT_FILE, (sub / POD_FILE,)) for sub in sorted(directory.iterdir())
             if sub.is_dir() and (sub / SNAPSHOT_FILE).is_file() and (sub / POD_FILE).is_file()]
    if not found:
        raise InvalidInput(f"--scenarios {directory}: no scenario in it (a scenario is a subdirectory holding "
                           f"{SNAPSHOT_FILE} and {POD_FILE})")
    return found


def single(snapshot: Path, pod_files: Sequence[Path]) -> Scenario:
    return Scenario("", snapshot, tuple(pod_files))


def _template(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return spec.get("template") or {}, spec.get("replicas", 1)
    if kind == "Job":
        return spec.get("template") or {}, _job_pods(spec)
    if kind == "CronJob":
        job = (spec.get("jobTemplate") or {}).get("spec") or {}
        return job.get("template") or {}, _job_pods(job)
    return obj, 1


def _job_pods(spec: Mapping[str, Any]) -> int:
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions")
    return int(min(parallelism, completions) if completions is not None else parallelism)


def pod_manifests(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Pod objects to create for a Pod, a workload (each replica, named ``<name>-<i>`` as PreemptGuard's
    expansion names them) or a List, in order. The expansion itself is PreemptGuard's (it validates)."""
    if obj.get("kind") == "List" or str(obj.get("kind", "")).endswith("List"):
        return [pod for item in obj.get("items") or [] for pod in pod_manifests(item)]
    expanded = expand_object(obj)
    meta = obj.get("metadata") or {}
    template, _ = _template(obj)
    tmeta = dict(template.get("metadata") or {})
    manifests = []
    for pod in expanded:
        metadata: dict[str, Any] = {**tmeta, "name": pod.name, "namespace": pod.namespace}
        owner = controller_owner(obj)
        if owner is not None:  # observe_pod creates the owner first (its selector spreads the replicas)
            metadata["ownerReferences"] = [owner]
        for server_set in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generateName"):
            metadata.pop(server_set, None)
        if obj.get("kind") == "Pod" and meta.get("generateName") and not meta.get("name"):
            # Created as the user would: the API server picks the name (and names the prefix when refusing).
            metadata.pop("name")
            metadata["generateName"] = meta["generateName"]
        manifests.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                          "spec": copy.deepcopy(dict(template.get("spec") or {}))})
    return manifests


def read_pods(pod_files: Sequence[Path]) -> list[dict[str, Any]]:
    """Every pod to create, in file order."""
    return [pod for path in pod_files for obj in read_objects(path) for pod in pod_manifests(obj)]
