"""Scenarios through one control plane: load, then for each pod predict, create, observe, compare; then empty.

Each pod is predicted on the cluster as the API server holds it just before the pod is created (read back,
without the loader's stand-ins), so every pod of a workload meets the cluster its predecessors really left:
when upstream picked another of several tied nodes for replica 1, replica 2 is still predicted fairly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from webhook.cluster.snapshot import ClusterState
from webhook.config import ScoringStrategyConfig
from webhook.errors import PreemptGuardError
from webhook.observe.compare import ERROR, Comparison, Observed, Predicted, compare
from webhook.verify.controlplane import ControlPlane, PlaneApi
from webhook.verify.engine import Prediction, SchedulerConfig, check_snapshot, predict, state_from_objects
from webhook.verify.loader import (
    STORAGE_AND_DEVICE_KINDS,
    empty_cluster,
    load_cluster,
    read_back,
    read_objects,
    restore_cluster,
)
from webhook.verify.observe import Observation, observe_pod, settle
from webhook.verify.scenarios import Scenario, read_pods

# Loading waits for the scheduler to have the snapshot; --timeout bounds each scheduling decision.
LOAD_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """One pod of one scenario: what PreemptGuard predicted, what kube-scheduler did, and the verdict."""

    scenario: str
    pod: str
    predicted: Prediction | None  # None when there was nothing to predict (the scenario did not load)
    observed: Observation
    comparison: Comparison
    fidelity: tuple[str, ...] = ()  # what of the scenario's snapshot the control plane does not hold as it was


Progress = Callable[[str, Sequence[VerifyResult]], None]


def _failed(scenario: Scenario, pod: str, message: str) -> VerifyResult:
    observed = Observation(ERROR, message=message)
    return VerifyResult(scenario.name, pod, None, observed, compare(Predicted(ERROR), Observed(ERROR, message=message)))


def _pod_key(manifest: dict[str, object]) -> str:
    meta = manifest.get("metadata") or {}
    assert isinstance(meta, dict)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or meta.get('generateName') or '?'}"


def state_of_plane(plane: PlaneApi) -> ClusterState:
    """The cluster as the API server holds it, as PreemptGuard's informers would see it: every storage and device
    kind was listed, so one without objects is known to be empty (a claim that is not there is missing), not "not
    known" as in a snapshot taken without it."""
    state = state_from_objects(read_back(plane), "the control plane")
    for kind in STORAGE_AND_DEVICE_KINDS:
        state.mark_known(kind)
    return state


def run_scenario(plane: ControlPlane, scenario: Scenario, scheduler: SchedulerConfig, *,
                 timeout: float, restore: bool = False) -> list[VerifyResult]:
    """Every pod of ``scenario`` on ``plane``, which must be empty (or, with ``restore``, hold this scenario's
    snapshot as the previous scenario left it); ``plane`` is left as the pods left it."""
    try:
        check_snapshot(scenario.snapshot)
        objects = read_objects(scenario.snapshot)
        manifests = read_pods(scenario.pod_files)
    except PreemptGuardError as exc:
        return [_failed(scenario, "-", str(exc))]
    if not manifests:
        return [_failed(scenario, "-", f"no pod in {', '.join(map(str, scenario.pod_files))}")]
    try:
        load = restore_cluster if restore else load_cluster
        fidelity = tuple(load(plane, objects, timeout=max(timeout, LOAD_TIMEOUT_SECONDS), pods_under_test=manifests))
    except PreemptGuardError as exc:
        return [_failed(scenario, _pod_key(m), f"the snapshot did not load: {exc}") for m in manifests]
    results = []
    for manifest in manifests:
        try:
            prediction = predict(state_of_plane(plane), manifest, scheduler)
        except PreemptGuardError as exc:
            results.append(replace(_failed(scenario, _pod_key(manifest), f"PreemptGuard could not predict: {exc}"),
                                   fidelity=fidelity))
            continue
        observation = observe_pod(plane, manifest, timeout=timeout, scheduler_names=scheduler.scheduler_names)
        observation = settle(plane, observation, str(manifest["metadata"]["namespace"]), timeout=timeout)
        predicted = Predicted(prediction.outcome, prediction.node, prediction.victims, prediction.tied_nodes,
                              prediction.sampled, prediction.tied_victims)
        observed = Observed(observation.outcome, observation.node, observation.victims, observation.message)
        results.append(VerifyResult(scenario.name, prediction.pod, prediction, observation,
                                    compare(predicted, observed), fidelity))
    return results


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def start_plane(workdir: Path, bin_dir: Path, scheduler: SchedulerConfig) -> ControlPlane:
    """A control plane for verification (not started): the scheduler with the profile's DefaultPreemptionArgs
    (``scheduler.*`` of --config). The ServiceAccount admission plugin is off: snapshots carry no
    ServiceAccounts, and no controller here would create them."""
    return ControlPlane(workdir, bin_dir, extra_apiserver_args=["--disable-admission-plugins=ServiceAccount"],
                        scheduler_config=scheduler_config_of(scheduler))


def scheduler_config_of(scheduler: SchedulerConfig) -> dict[str, Any]:
    """``scheduler_configuration``'s keywords for the profile ``scheduler.*`` of --config describes: the same
    DefaultPreemptionArgs and scoring the prediction follows."""
    strategy = scheduler.scoring_strategy
    fit: dict[str, Any] | None = None
    if strategy != ScoringStrategyConfig():
        fit = {"type": strategy.type, "resources": [{"name": n, "weight": w} for n, w in strategy.resources]}
        if strategy.shape:
            fit["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": sc} for u, sc in strategy.shape]}
    return {"preemption": scheduler.preemption_enabled,
            "min_candidate_nodes_percentage": scheduler.min_candidate_nodes_percentage,
            "min_candidate_nodes_absolute": scheduler.min_candidate_nodes_absolute,
            "percentage_of_nodes_to_score": scheduler.percentage_of_nodes_to_score,
            "score_weights": scheduler.score_weights, "scoring_strategy": fit,
            "inter_pod_affinity": _inter_pod_affinity_args(scheduler),
            "scheduler_names": scheduler.scheduler_names}


def _inter_pod_affinity_args(scheduler: SchedulerConfig) -> dict[str, Any] | None:
    """InterPodAffinityArgs when they differ from upstream's defaults."""
    weight, ignore = scheduler.hard_pod_affinity_weight, scheduler.ignore_preferred_terms_of_existing_pods
    if (weight, ignore) == (1, False):
        return None
    return {"hardPodAffinityWeight": weight, "ignorePreferredTermsOfExistingPods": ignore}


def run_scenarios(plane: ControlPlane, scenarios: Sequence[Scenario], scheduler: SchedulerConfig, *,
                  timeout: float, progress: Progress | None = None) -> list[VerifyResult]:
    """Each scenario in order on one control plane, emptied between them (or, when the next scenario has the
    same snapshot file content and the previous one loaded, restored to that snapshot)."""
    results: list[VerifyResult] = []
    previous: bytes | None = None
    for i, scenario in enumerate(scenarios):
        snapshot = _read_bytes(scenario.snapshot)
        same = previous is not None and snapshot == previous
        if i and not same:
            empty_cluster(plane, timeout=max(timeout, LOAD_TIMEOUT_SECONDS))
        done = run_scenario(plane, scenario, scheduler, timeout=timeout, restore=same)
        loaded = not any(r.predicted is None for r in done)
        previous = snapshot if loaded else None
        results.extend(done)
        if progress is not None:
            progress(scenario.name, done)
    return results
