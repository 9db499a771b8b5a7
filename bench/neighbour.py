"""How much slower the same Python work runs on the webhook's CPU while the control plane churns next door (issue
29's churn target; not a test).

    .venv/bin/python bench/neighbour.py [--nodes 15000] [--seconds 15] [--rounds 3] [--json FILE]

bench/scale.py's churn target holds the webhook's p99s under 500 pod writes/s within 1.5x of its idle p99s, on one
2-core machine where the control plane churns on one CPU and the webhook answers on the other. This script runs no
webhook: it loads bench/scale.py's cluster into etcd and kube-apiserver the same way (``load_cluster``, ``settle``,
the same pinning: ``Cores``), then times two fixed pieces of work on the webhook's CPU, round after round, while
next door there is nothing (idle), ConfigMap churn (``scaleload churn -resource configmaps``) or pod churn no
client watches (``-resource pods``), each phase ``--seconds`` long, the phases interleaved:

- **memory-bound**: 20,000 steps of a pointer chase through 2,000,000 slotted objects in a random order (~150 MB,
  far beyond the last-level cache), as a prediction walks a 450,000-pod cache;
- **cache-resident**: a generator summing twice each of 20,000 integers (~0.6 MB of list and ints).

Each piece is timed alone, with 2 ms of sleep between rounds (the webhook wakes for each admission). The work is
the same in every phase, so whatever its p99 gains under churn is the machine's: shared last-level cache, memory
bus, the hypervisor. The table prints p50 and p99 per phase and their ratio to idle: the part of the 1.5x budget the
machine takes before the webhook does anything.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # bench/scale.py: the same control plane, cluster, loader and pinning

Samples = dict[str, list[float]]
PHASES = ("idle", "configmaps", "pods")
CHASE_OBJECTS = 2_000_000
CHASE_STEPS = 20_000
SUM_LENGTH = 20_000


class Link:
    __slots__ = ("next", "value")

    def __init__(self, value: int) -> None:
        self.value = value
        self.next: Link = self


def chain(length: int, seed: int = 1) -> Link:
    """``length`` links, each pointing to the next in a random order (so each step misses the caches)."""
    links = [Link(i) for i in range(length)]
    order = list(range(length))
    random.Random(seed).shuffle(order)
    for here, there in itertools.pairwise(order):
        links[here].next = links[there]
    links[order[-1]].next = links[order[0]]
    return links[order[0]]


def chase(start: Link, steps: int) -> int:
    link, total = start, 0
    for _ in range(steps):
        total += link.value
        link = link.next
    return total


def timed(start: Link, numbers: list[int], seconds: float) -> Samples:
    """Milliseconds per piece of work, each timed alone, for ``seconds``."""
    found: Samples = {"memory-bound": [], "cache-resident": []}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        began = time.perf_counter()
        chase(start, CHASE_STEPS)
        found["memory-bound"].append((time.perf_counter() - began) * 1e3)
        began = time.perf_counter()
        sum(n * 2 for n in numbers)
        found["cache-resident"].append((time.perf_counter() - began) * 1e3)
        time.sleep(0.002)
    return found


def figures_of(samples: dict[str, Samples], writes: dict[str, list[float]]) -> dict[str, float]:
    figures: dict[str, float] = {}
    for phase in PHASES:
        for work, values in samples[phase].items():
            figures[f"{phase} {work} p50"] = scale.percentile(values, 50)
            figures[f"{phase} {work} p99"] = scale.percentile(values, 99)
            figures[f"{phase} {work} samples"] = len(values)
        if phase != "idle":
            figures[f"{phase} writes/s"] = sum(writes[phase]) / len(writes[phase])
    return figures


def report(figures: dict[str, float]) -> list[str]:
    lines = [f"{'phase':<34}{'writes/s':>9}{'p50':>10}{'p99':>10}{'p50 / idle':>12}{'p99 / idle':>12}"]
    for work in ("memory-bound", "cache-resident"):
        for phase in PHASES:
            p50, p99 = figures[f"{phase} {work} p50"], figures[f"{phase} {work} p99"]
            rate = f"{figures[f'{phase} writes/s']:.0f}" if phase != "idle" else "-"
            lines.append(f"{work + ', ' + phase:<34}{rate:>9}{p50:>8.2f}ms{p99:>8.2f}ms"
                         f"{p50 / figures[f'idle {work} p50']:>11.2f}x{p99 / figures[f'idle {work} p99']:>11.2f}x")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=15000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=15.0, help="per phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--churn-rate", type=float, default=500.0)
    parser.add_argument("--apiserver-memory-limit", default="12GiB")
    parser.add_argument("--kube-bin", type=Path, help="etcd and kube-apiserver (default: $PREEMPTGUARD_KUBE_BIN)")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = parser.parse_args(argv)
    kube_bin = scale.kube_bin_dir(args.kube_bin)
    with tempfile.TemporaryDirectory(prefix="preemptguard-neighbour-") as tmp:
        workdir = Path(tmp)
        loader = scale.loader_binary(kube_bin, workdir)
        plane = scale.ControlPlane(workdir / "plane", kube_bin, with_scheduler=False,
                                   extra_etcd_args=["--quota-backend-bytes", str(scale.ETCD_QUOTA_BYTES)],
                                   component_env={"kube-apiserver": scale.apiserver_env(args)})
        try:
            plane.start()
            via = "api" if args.nodes <= 1000 else "etcd"
            scale.load_cluster(loader, plane, args.nodes, args.pods_per_node, via)
            kubeconfig = plane.kubeconfig()
            scale.settle(scale.apiserver_pid(plane))
            scale.CORES.isolate([c.process.pid for c in plane.components], [])
            start, numbers = chain(CHASE_OBJECTS), list(range(SUM_LENGTH))
            timed(start, numbers, 2.0)  # warm: the chain's pages touched once
            samples: dict[str, Samples] = {p: {"memory-bound": [], "cache-resident": []} for p in PHASES}
            writes: dict[str, list[float]] = {p: [] for p in PHASES}
            for round_ in range(args.rounds):
                for phase in PHASES:
                    finish = None
                    if phase != "idle":
                        _, finish = scale.run_churn(loader, kubeconfig, args.nodes, args.churn_rate, args.seconds + 2,
                                                    workdir / f"{phase}-{round_}.ndjson", f"nb-{phase}-{round_}",
                                                    resource=phase)
                        time.sleep(1)  # the churn up to speed
                    found = timed(start, numbers, args.seconds)
                    if finish is not None:
                        writes[phase].append(finish()[0]["achieved"])
                    for work, values in found.items():
                        samples[phase][work].extend(values)
                    print(f"round {round_ + 1} {phase}: memory-bound p99 "
                          f"{scale.percentile(found['memory-bound'], 99):.2f} ms", flush=True)
        finally:
            scale.CORES.release()
            plane.stop()
    figures = {"nodes": args.nodes, **figures_of(samples, writes)}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(f"\n{args.nodes:,} nodes in the API server; {args.rounds} rounds of {args.seconds:g} s a phase; "
          f"load average {scale.load_average()}")
    print("\n".join(report(figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
