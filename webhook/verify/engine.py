"""PreemptGuard's own engine as ``verify`` uses it: the one module of this package that imports the predictor.

Everything ``verify`` predicts goes through the product's public entry points (the snapshot loader, the
workload expansion, ``predict_pods`` with the scheduler profile of ``--config``, ``result_json``), so what it
holds against the real scheduler is exactly what ``serve``, ``/preview`` and the plugin answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from webhook.cluster.release import closest_release, parse_release
from webhook.cluster.snapshot import ClusterState
from webhook.config import DEFAULT_CONFIG, Config, SchedulerConfig, load_config
from webhook.prediction.service import preemption_args
from webhook.preemption.preview import result_json
from webhook.preemption.simulate import predict_pods
from webhook.preemption.workloads import expand_object
from webhook.sources.loader import load_snapshot, parse_documents

__all__ = [
    "DEFAULT_CONFIG",
    "Config",
    "Prediction",
    "SchedulerConfig",
    "check_snapshot",
    "expand_object",
    "load_config",
    "predict",
    "predict_in_order",
    "scheduler_for_release",
    "state_from_objects",
]


@dataclass(frozen=True, slots=True)
class Prediction:
    """One pod's predicted outcome, in the words of the ``PreemptionPreview`` (docs/interfaces.md §4)."""

    pod: str
    outcome: str
    node: str | None
    victims: tuple[str, ...]  # "namespace/name", most important first
    tied_nodes: tuple[str, ...]
    tied_victims: tuple[tuple[str, tuple[str, ...]], ...]  # (node, its victims) for every tied node
    candidate_nodes: int
    sampled: bool  # more candidates than upstream's dry run collects (DefaultPreemptionArgs)
    message: str
    preview: Mapping[str, Any]  # the full PreemptionPreview entry


def scheduler_for_release(scheduler: SchedulerConfig, kube_version: str | None,
                          binaries_version: str) -> tuple[SchedulerConfig, str]:
    """The scheduler profile with the release whose preemption the prediction follows, and a note when it is not
    exactly the binaries': ``--kube-version``, else ``scheduler.kubernetesVersion`` of ``--config``, else the
    binaries' own (the nearest supported one when PreemptGuard does not know it). A bad ``--kube-version`` raises
    ``ConfigError``."""
    if kube_version:
        release = parse_release(kube_version)
        note = "" if release == closest_release(binaries_version)[0] else (
            f"predicting as {release.name} (--kube-version) against kube-scheduler {binaries_version}")
    elif scheduler.kubernetes_version:
        return scheduler, ""
    else:
        release, note = closest_release(binaries_version)
    return replace(scheduler, kubernetes_version=release.name), note


def check_snapshot(path: Path) -> None:
    """Raise ``SnapshotError`` (naming the file, document and reason) when ``path`` is no cluster snapshot."""
    load_snapshot(path, require_cluster=True)


def state_from_objects(objects: Sequence[Mapping[str, Any]], source: str) -> ClusterState:
    """The ``ClusterState`` PreemptGuard builds from these API objects (as its informers or a snapshot would)."""
    state = ClusterState()
    text = orjson.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}).decode()
    for obj in parse_documents(text, source):
        state.upsert(obj)
    return state


def predict(state: ClusterState, pod: Mapping[str, Any], scheduler: SchedulerConfig) -> Prediction:
    """The prediction for one raw Pod object on ``state`` under the scheduler profile (docs/interfaces.md §6)."""
    return predict_in_order(state, [pod], scheduler)[0]


def predict_in_order(state: ClusterState, pods: Sequence[Mapping[str, Any]],
                     scheduler: SchedulerConfig) -> list[Prediction]:
    """PreemptGuard's in-order simulation of raw Pod objects (each placement and eviction applied before the
    next), as ``/preview`` and the plugin answer it."""
    expanded = [p for pod in pods for p in expand_object(pod)]
    results = predict_pods(state, expanded, args=preemption_args(scheduler))
    return [Prediction(pod=r.pod, outcome=r.outcome, node=r.node,
                       victims=tuple(f"{v.namespace}/{v.name}" for v in r.victims), tied_nodes=tuple(r.tied_nodes),
                       tied_victims=tuple((node, tuple(v.key for v in victims)) for node, victims in r.tied_victims),
                       candidate_nodes=r.candidate_nodes, sampled=r.sampled, message=r.message,
                       preview=result_json(r)) for r in results]
