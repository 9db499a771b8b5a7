"""How the predictor's latency grows with the cluster (issue 29; not a test), this tree side by side with another.

    .venv/bin/python bench/predict_growth.py [--nodes 1000 15000] [--samples 200] [--rounds 4] [--baseline DIR]

For each size, bench/predict.py's generated cluster (30 pods per node, PDBs) is built in a fresh process of each
tree, and ``predict_pods`` is timed on the warm index for a pod that fits, one that preempts and one that cannot
be placed (bench/predict.py's probes; every outcome checked). With ``--baseline DIR`` (another checkout, e.g.
``git worktree add /tmp/base main``) the trees alternate, round after round (the machine is shared: only
back-to-back figures compare), both with the round's hash seed (see ``run_tree``). Printed: p50/p99 per tree, size
and pod kind over every round's samples, the growth of each p50 from the smallest to the largest size, and this
tree's p50 over the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("fit", "preempt", "unplaceable")


def child(nodes: int, samples: int) -> None:
    """Runs in the tree under test (its bench/ and webhook/ first on sys.path): prints one JSON line of times."""
    import dataclasses
    import random

    sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "preemption")]
    import predict

    probe = predict.probe

    def probe_at_scale(kind: str, i: int, rng: random.Random) -> Any:
        # bench/predict.py's unplaceable pod asks 12-13 CPUs, which some of 15,000 generated nodes free by removing
        # their batch-low pods: 15 CPUs of a 16-CPU node, where almost every pod would have to be batch-low.
        pod = probe(kind, i, rng)
        if kind != "unplaceable":
            return pod
        return dataclasses.replace(pod, requests=dataclasses.replace(pod.requests, milli_cpu=15000))

    predict.probe = probe_at_scale
    state = predict.build_state(nodes, 30, seed=nodes)
    rng = random.Random(1)
    for kind in KINDS:  # builds the index, warms the caches
        predict.measure(state, kind, 5, rng)
    times = {kind: predict.measure(state, kind, samples, rng)[0] for kind in KINDS}
    print(json.dumps(times))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run_tree(tree: Path, nodes: int, samples: int, hash_seed: int) -> dict[str, list[float]]:
    """This script in a fresh process with ``tree`` first on its path (so an older tree needs no copy of it).

    ``hash_seed``: the process' PYTHONHASHSEED, the same for both trees within a round and another each round. The
    string hashes set the iteration order of the index's sets of node names, and with it a prediction's cost: at
    1,000 nodes one tree's preempt p50 was 0.25 or 0.43 ms from one process to the next, by seed."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), str(nodes), str(samples)]
    out = subprocess.run(command, capture_output=True, text=True, cwd=tree,
                         env={**os.environ, "PYTHONHASHSEED": str(hash_seed)})
    if out.returncode:
        raise SystemExit(f"{tree} at {nodes:,} nodes failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 15000])
    parser.add_argument("--samples", type=int, default=200, help="predictions per pod kind, size, tree and round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        global ROOT
        ROOT = Path(args.child[0]).resolve()
        child(int(args.child[1]), int(args.child[2]))
        return
    trees = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    times: dict[tuple[str, int, str], list[float]] = {}
    for round_ in range(args.rounds):
        for nodes in args.nodes:
            for label, tree in (trees.items() if round_ % 2 == 0 else reversed(list(trees.items()))):
                got = run_tree(tree, nodes, args.samples, hash_seed=round_ + 1)
                for kind in KINDS:
                    times.setdefault((label, nodes, kind), []).extend(got[kind])
                print(f"round {round_ + 1}: {label} {nodes:,} nodes: " + ", ".join(
                    f"{kind} p50 {percentile(got[kind], 50):.2f} ms" for kind in KINDS), flush=True)
    print(f"\n{'tree':9s} {'nodes':>7s} {'kind':12s} {'n':>5s} {'p50 ms':>8s} {'p99 ms':>8s}")
    for (label, nodes, kind), values in times.items():
        print(f"{label:9s} {nodes:>7,d} {kind:12s} {len(values):>5d} {percentile(values, 50):>8.2f} "
              f"{percentile(values, 99):>8.2f}")
    small, large = min(args.nodes), max(args.nodes)
    for label in trees:
        print(f"{label}: p50 growth {small:,} -> {large:,} nodes: " + ", ".join(
            f"{kind} x{percentile(times[(label, large, kind)], 50) / percentile(times[(label, small, kind)], 50):.2f}"
            for kind in KINDS))
    if args.baseline:
        for nodes in args.nodes:
            ratios = (percentile(times[("this", nodes, kind)], 50) / percentile(times[("baseline", nodes, kind)], 50)
                      for kind in KINDS)
            print(f"this / baseline p50 at {nodes:,} nodes: "
                  + ", ".join(f"{kind} x{ratio:.2f}" for kind, ratio in zip(KINDS, ratios, strict=True)))


if __name__ == "__main__":
    main()
