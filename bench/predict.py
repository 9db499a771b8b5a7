"""Benchmark the preemption predictor on synthetic clusters (not a test).

    .venv/bin/python bench/predict.py [--nodes 500 5000] [--pods-per-node 30] [--quick]

Prints p50/p99 per-prediction latency for pods that fit, pods that preempt and pods that cannot
be placed, the one-off cost of the first prediction after a state change (index build), and the
ratio reference-time / fast-time on the same inputs (the slow oracle of tests/preemption/reference.py,
measured on fewer samples and, by default, on a smaller cluster because it is O(nodes x pods) per filter).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "preemption")]

from clustergen import generate_cluster  # noqa: E402
from reference import reference_predict  # noqa: E402

from webhook.cluster.convert import object_from_dict, pod_from_dict  # noqa: E402
from webhook.cluster.model import Pod  # noqa: E402
from webhook.cluster.snapshot import ClusterState  # noqa: E402
from webhook.preemption.predictor import predict_preemption, resolve_priority  # noqa: E402
from webhook.preemption.results import FITS, PREEMPTS, UNSCHEDULABLE_OUTCOME  # noqa: E402


def build_state(nodes: int, pods_per_node: int, seed: int) -> ClusterState:
    state = ClusterState()
    for raw in generate_cluster(nodes, pods_per_node, seed=seed):
        obj = object_from_dict(raw)
        if obj is not None:
            state.upsert(obj)
    return state


def probe(kind: str, i: int, rng: random.Random) -> Pod:
    """A pending pod that fits ("fit"), must preempt ("preempt") or cannot be placed ("unplaceable")."""
    if kind == "fit":
        cls, cpu, mem = "standard", rng.choice((50, 100, 200)), rng.choice((64, 128))
    elif kind == "preempt":
        cls, cpu, mem = "high", rng.choice((2000, 3000, 4000)), rng.choice((2048, 4096))
    else:
        # Only batch-low pods (~35%) are lower than "standard": removing them never frees 12 CPUs.
        cls, cpu, mem = "standard", rng.choice((12000, 13000)), 1024
    return pod_from_dict({"kind": "Pod", "metadata": {"name": f"probe-{kind}-{i}", "namespace": "team-00",
                                                      "labels": {"app": "probe"}},
                          "spec": {"priorityClassName": cls, "containers": [{"name": "c", "resources": {
                              "requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}]}})


EXPECTED = {"fit": FITS, "preempt": PREEMPTS, "unplaceable": UNSCHEDULABLE_OUTCOME}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def bench_cluster(nodes: int, pods_per_node: int, samples: int, ref_samples: int, ref_nodes: int) -> None:
    t0 = time.perf_counter()
    state = build_state(nodes, pods_per_node, seed=nodes)
    print(f"\n== {nodes} nodes x {pods_per_node} pods = {len(state.pods)} pods, "
          f"{sum(len(v) for v in state.pdbs_by_namespace.values())} PDBs "
          f"(generated+loaded in {time.perf_counter() - t0:.1f}s)")
    rng = random.Random(1)
    for kind in ("fit", "preempt", "unplaceable"):
        cold, result = timed(lambda kind=kind: predict_preemption(state, probe(kind, -1, rng)))
        print(f"first {kind} prediction after a state change (builds the cached per-version indexes): "
              f"{cold:.1f} ms -> {result[0].outcome}")
    for kind in ("fit", "preempt", "unplaceable"):
        times = []
        outcomes = set()
        candidates = []
        for i in range(samples):
            pod = probe(kind, i, rng)
            ms, results = timed(lambda pod=pod: predict_preemption(state, pod))
            times.append(ms)
            outcomes.add(results[0].outcome)
            candidates.append(results[0].candidate_nodes)
        assert outcomes == {EXPECTED[kind]}, (kind, outcomes)
        print(f"{kind:12s} n={samples:4d}  p50 {percentile(times, 50):7.2f} ms  p99 {percentile(times, 99):7.2f} ms"
              f"  max {max(times):7.2f} ms  (candidate nodes ~{statistics.median(candidates):.0f})")
    ref_state = state if ref_nodes >= nodes else build_state(ref_nodes, pods_per_node, seed=nodes)
    label = "same cluster" if ref_state is state else f"{ref_nodes}-node cluster of the same generator"
    for kind in ("fit", "preempt", "unplaceable"):
        ratios = []
        for i in range(ref_samples):
            pod = resolve_priority(ref_state, probe(kind, 1000 + i, rng))
            fast_ms = min(timed(lambda pod=pod: predict_preemption(ref_state, pod))[0] for _ in range(3))
            slow_ms, slow = timed(lambda pod=pod: reference_predict(ref_state, [pod]))
            fast = predict_preemption(ref_state, pod)[0]
            assert (slow[0]["outcome"], slow[0]["node"]) == (fast.outcome, fast.node), (kind, slow[0], fast)
            ratios.append(slow_ms / fast_ms)
        print(f"reference/fast {kind:12s} ({label}, n={ref_samples}): x{statistics.median(ratios):,.0f} "
              f"(min x{min(ratios):,.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--samples", type=int, default=None, help="predictions per pod kind (default 200, quick 40)")
    parser.add_argument("--reference-samples", type=int, default=None)
    parser.add_argument("--reference-nodes", type=int, default=100,
                        help="cluster size for the reference ratio (the oracle is O(nodes x pods) per filter)")
    parser.add_argument("--quick", action="store_true", help="fewer samples, so a run takes a few minutes")
    args = parser.parse_args()
    samples = args.samples or (40 if args.quick else 200)
    ref_samples = args.reference_samples or (2 if args.quick else 5)
    for nodes in args.nodes:
        bench_cluster(nodes, args.pods_per_node, samples, ref_samples, args.reference_nodes)


if __name__ == "__main__":
    main()
