"""Benchmark the preemption predictor on synthetic clusters (not a test).

    .venv/bin/python bench/predict.py [--nodes 500 5000] [--pods-per-node 30] [--quick] [--volume-fraction 0.25]

Prints p50/p99 per-prediction latency for pods that fit, pods that preempt and pods that cannot
be placed; the cost of the first prediction on a fresh state (the whole index is built) and after one
informer event (one node's entry is refreshed); a "live" regime where informer-like pod events
(MODIFIED status updates, pods deleted and re-created elsewhere) are applied between predictions, as
in the webhook; and the ratio reference-time / fast-time on the same inputs (the slow oracle of
tests/preemption/reference.py). The oracle rebuilds its world per prediction and re-sums every pod
per Filter call, so it is run on fewer samples and on a smaller cluster of the same generator: it
dry-runs every node for preempting and unplaceable pods, and scores every feasible node it samples for
pods that fit, each O(nodes x pods).

``--volume-fraction F`` (#27): that fraction of the bound pods, and of the probes, mount a claim bound to a zonal CSI
PersistentVolume in their node's zone (each node's CSINode allows 64 attachments of the driver), so VolumeBinding,
VolumeZone and NodeVolumeLimits run for them (VolumeRestrictions skips: no ReadWriteOncePod claim). The first probe
with a volume on a fresh state also builds NodeVolumeLimits' per-node attach index: its cost is printed on its own
line, like the node index's.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from clustergen import ZONES, generate_cluster  # noqa: E402

from tests.preemption.reference import reference_predict  # noqa: E402
from webhook.cluster.model import Pod  # noqa: E402
from webhook.cluster.reader import object_from_dict, pod_from_dict  # noqa: E402
from webhook.cluster.snapshot import ClusterState  # noqa: E402
from webhook.preemption.results import Outcome  # noqa: E402
from webhook.preemption.simulate import predict_pods, resolve_priority  # noqa: E402

CSI_DRIVER = "pd.csi.example.com"
ZONE_LABEL = "topology.kubernetes.io/zone"
# Set by --volume-fraction: which share of the bound pods and of the probes mount a zonal claim.
VOLUME_FRACTION = 0.0


def bound_claim(name: str, namespace: str, zone: str) -> list[dict[str, Any]]:
    """A claim bound to a CSI PersistentVolume pinned to ``zone`` (as a real cluster's PV controller leaves them)."""
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}]}}
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{namespace}-{name}",
                                                                     "labels": {ZONE_LABEL: zone}},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "zonal",
                  "csi": {"driver": CSI_DRIVER, "volumeHandle": f"vol-{namespace}-{name}"},
                  "claimRef": {"namespace": namespace, "name": name}, "nodeAffinity": affinity},
         "status": {"phase": "Bound"}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": name, "namespace": namespace, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "zonal", "volumeName": f"pv-{namespace}-{name}",
                  "resources": {"requests": {"storage": "1Gi"}}},
         "status": {"phase": "Bound"}},
    ]


def with_volumes(objects: list[dict[str, Any]], fraction: float, seed: int) -> list[dict[str, Any]]:
    """``fraction`` of the bound pods mount a claim bound in their node's zone; a CSINode per node; one probe claim
    per zone (``probe-<zone>`` in team-00)."""
    rng = random.Random(seed)
    zone_of = {o["metadata"]["name"]: o["metadata"]["labels"][ZONE_LABEL] for o in objects if o["kind"] == "Node"}
    extra: list[dict[str, Any]] = [
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
         "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": node, "allocatable": {"count": 64}}]}}
        for node in zone_of]
    for zone in ZONES:
        extra += bound_claim(f"probe-{zone}", "team-00", zone)
    for obj in objects:
        if obj["kind"] == "Pod" and rng.random() < fraction:
            meta, spec = obj["metadata"], obj["spec"]
            extra += bound_claim(f"data-{meta['name']}", meta["namespace"], zone_of[spec["nodeName"]])
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{meta['name']}"}}]
    return objects + extra


def build_state(nodes: int, pods_per_node: int, seed: int) -> ClusterState:
    state = ClusterState()
    objects = generate_cluster(nodes, pods_per_node, seed=seed)
    if VOLUME_FRACTION:
        objects = with_volumes(objects, VOLUME_FRACTION, seed)
    for raw in objects:
        obj = object_from_dict(raw)
        if obj is not None:
            state.upsert(obj)
    return state


def probe(kind: str, i: int, rng: random.Random, *, volume: bool | None = None) -> Pod:
    """A pending pod that fits ("fit"), must preempt ("preempt") or cannot be placed ("unplaceable"); with a zonal
    claim when ``volume`` says so, else (None) drawn with ``--volume-fraction``."""
    if kind == "fit":
        cls, cpu, mem = "standard", rng.choice((50, 100, 200)), rng.choice((64, 128))
    elif kind == "preempt":
        cls, cpu, mem = "high", rng.choice((2000, 3000, 4000)), rng.choice((2048, 4096))
    else:
        # Only batch-low pods (~35%) are lower than "standard": removing them never frees 12 CPUs.
        cls, cpu, mem = "standard", rng.choice((12000, 13000)), 1024
    spec: dict[str, Any] = {"priorityClassName": cls, "containers": [{"name": "c", "resources": {
        "requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}]}
    if volume or (volume is None and VOLUME_FRACTION and rng.random() < VOLUME_FRACTION):
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"probe-{rng.choice(ZONES)}"}}]
    return pod_from_dict({"kind": "Pod", "metadata": {"name": f"probe-{kind}-{i}", "namespace": "team-00",
                                                      "labels": {"app": "probe"}}, "spec": spec})


EXPECTED = {"fit": Outcome.FITS, "preempt": Outcome.PREEMPTS, "unplaceable": Outcome.UNSCHEDULABLE}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def measure(state: ClusterState, kind: str, samples: int, rng: random.Random,
            between: Callable[[], None] | None = None) -> tuple[list[float], list[int]]:
    times: list[float] = []
    candidates: list[int] = []
    outcomes = set()
    for i in range(samples):
        if between is not None:
            between()
        pod = probe(kind, i, rng)
        ms, results = timed(lambda pod=pod: predict_pods(state, [pod]))
        times.append(ms)
        outcomes.add(results[0].outcome)
        candidates.append(results[0].candidate_nodes)
    assert outcomes == {EXPECTED[kind]}, (kind, outcomes)
    return times, candidates


def summary_line(label: str, times: list[float]) -> str:
    return (f"{label:28s} n={len(times):4d}  p50 {percentile(times, 50):7.2f} ms  p99 {percentile(times, 99):7.2f} ms"
            f"  max {max(times):7.2f} ms")


class PodEvents:
    """Informer-like pod events: MODIFIED status updates (80%), and pods deleted then replaced by a new pod
    on the same node (a ReplicaSet replacing a pod; keeps the cluster's shape so outcomes stay comparable)."""

    def __init__(self, state: ClusterState, seed: int) -> None:
        self.state = state
        self.rng = random.Random(seed)
        self.keys = sorted(k for k, p in state.pods.items() if p.node_name)
        self.serial = 0

    def apply(self, count: int) -> None:
        for _ in range(count):
            i = self.rng.randrange(len(self.keys))
            pod = self.state.pods[self.keys[i]]
            if self.rng.random() < 0.8:
                self.state.upsert(dataclasses.replace(pod, start_time_ns=(pod.start_time_ns or 0) + 1))
            else:
                self.serial += 1
                moved = dataclasses.replace(pod, name=f"{pod.name}-r{self.serial}", uid=f"{pod.uid}-r{self.serial}")
                self.state.delete("Pod", pod.key)
                self.state.upsert(moved)
                self.keys[i] = moved.key


def bench_cluster(nodes: int, pods_per_node: int, samples: int, ref_samples: int, ref_nodes: int,
                  live_events: list[int]) -> None:
    t0 = time.perf_counter()
    state = build_state(nodes, pods_per_node, seed=nodes)
    print(f"\n== {nodes} nodes x {pods_per_node} pods = {len(state.pods)} pods, "
          f"{sum(len(v) for v in state.pdbs_by_namespace.values())} PDBs "
          f"(generated+loaded in {time.perf_counter() - t0:.1f}s)")
    rng = random.Random(1)
    events = PodEvents(state, seed=nodes)
    for kind in ("fit", "preempt", "unplaceable"):
        # Without volumes: the attach index is built by the first probe with one, timed below on its own.
        cold, result = timed(lambda kind=kind: predict_pods(state, [probe(kind, -1, rng, volume=False)]))
        events.apply(1)
        warm, again = timed(lambda kind=kind: predict_pods(state, [probe(kind, -2, rng, volume=False)]))
        print(f"first {kind:11s} prediction: on a fresh state (builds the index) {cold:7.1f} ms;"
              f" after one pod event (refreshes one node) {warm:6.2f} ms -> {result[0].outcome}/{again[0].outcome}")
    if VOLUME_FRACTION:
        with_volume = probe("preempt", -3, random.Random(0), volume=True)
        cold, result = timed(lambda: predict_pods(state, [with_volume]))
        events.apply(1)
        warm, again = timed(lambda: predict_pods(state, [dataclasses.replace(with_volume, name="probe-preempt-4")]))
        print(f"first prediction with a volume: builds the attach index {cold:7.1f} ms; after one pod event"
              f" {warm:6.2f} ms -> {result[0].outcome}/{again[0].outcome}")
    for kind in ("fit", "preempt", "unplaceable"):
        times, candidates = measure(state, kind, samples, rng)
        print(summary_line(kind, times) + f"  (candidate nodes ~{statistics.median(candidates):.0f})")
    for per_prediction in live_events:
        for kind in ("fit", "preempt"):
            times, _ = measure(state, kind, samples, rng, lambda n=per_prediction: events.apply(n))
            print(summary_line(f"live {kind}, {per_prediction} events/pred", times))
    ref_state = state if ref_nodes >= nodes else build_state(ref_nodes, pods_per_node, seed=nodes)
    label = "same cluster" if ref_state is state else f"{ref_nodes}-node cluster of the same generator"
    for kind in ("fit", "preempt", "unplaceable"):
        bench_reference(ref_state, kind, ref_samples, rng, label)


def bench_reference(state: ClusterState, kind: str, samples: int, rng: random.Random, label: str) -> None:
    """Reference time / fast time per input (fast: median of 5 runs on the warm index; reference: one run)."""
    ratios = []
    for i in range(samples):
        pod = resolve_priority(state, probe(kind, 1000 + i, rng))
        fast_ms = statistics.median(timed(lambda pod=pod: predict_pods(state, [pod]))[0] for _ in range(5))
        slow_ms, slow = timed(lambda pod=pod: reference_predict(state, [pod]))
        fast = predict_pods(state, [pod])[0]
        assert (slow[0]["outcome"], slow[0]["node"]) == (fast.outcome, fast.node), (kind, slow[0], fast)
        ratios.append(slow_ms / fast_ms)
    print(f"reference/fast {kind:12s} ({label}, n={samples}): x{statistics.median(ratios):,.0f} "
          f"(min x{min(ratios):,.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--samples", type=int, default=None, help="predictions per pod kind (default 200, quick 40)")
    parser.add_argument("--reference-samples", type=int, default=None)
    parser.add_argument("--reference-nodes", type=int, default=100,
                        help="cluster size for the reference ratio of preempting and unplaceable pods (the oracle "
                             "dry-runs every node, O(nodes x pods) each); fitting pods use the benchmarked cluster")
    parser.add_argument("--live-events", type=int, nargs="+", default=[1, 20],
                        help="pod events applied between two predictions in the live regime")
    parser.add_argument("--quick", action="store_true", help="fewer samples, so a run takes a few minutes")
    parser.add_argument("--volume-fraction", type=float, default=0.0,
                        help="share of the bound pods and probes that mount a zonal CSI claim (#27)")
    args = parser.parse_args()
    global VOLUME_FRACTION
    VOLUME_FRACTION = args.volume_fraction
    samples = args.samples or (40 if args.quick else 200)
    ref_samples = args.reference_samples or (2 if args.quick else 5)
    for nodes in args.nodes:
        bench_cluster(nodes, args.pods_per_node, samples, ref_samples, args.reference_nodes, args.live_events)


if __name__ == "__main__":
    main()
