"""Admission tail latencies idle and under churn, this tree against another, on one live kube-apiserver (not a test).

    .venv/bin/python bench/churn_ab.py --baseline DIR [--nodes 2000] [--rounds 2] [--samples 200]
                                       [--churn-seconds 20] [--churn-rate 500] [--json FILE]

bench/scale.py measures one tree at a size; this compares two on the same cluster, round after round interleaved
(the machine is shared: only back-to-back figures compare). etcd and kube-apiserver start once and hold the cluster
of bench/scale.py (N nodes, 30 pods per node, straight into etcd); then, per round and per tree, one
``preempt-guard serve --kubeconfig`` of that tree starts, is pinned apart from the control plane once ready and its
exposure scan's first pass is done (as bench/scale.py does), and answers ``POST /mutate/pods`` for a pod that fits,
one that preempts and one that cannot be placed (every answer checked): ``--samples`` rounds idle, then for as long
as scaleload churns pods at ``--churn-rate`` writes/s while /metrics is polled every 100 ms (bench/scale.py's
LagPoller). Printed: p50/p99/max per kind, idle and under churn, per tree (the median over rounds of each figure), and
the churn p99 / idle p99 ratios the issue's target reads (<= 1.5).

``--baseline DIR`` is another checkout (e.g. ``git worktree add --detach /tmp/base main``), run with this
interpreter and ``PYTHONPATH=DIR``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import scale  # noqa: E402

from webhook.verify.controlplane import ControlPlane, kube_bin_dir  # noqa: E402


def probe(prober: scale.Prober, samples: int | None = None, until: Any = None) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {kind: [] for kind in scale.KINDS}
    rounds = 0
    while (rounds < samples) if until is None else not until():
        for kind, values in found.items():
            values.append(prober.call("mutate", kind))
        rounds += 1
    return found


def figures_of(found: dict[str, list[float]]) -> dict[str, float]:
    figures: dict[str, float] = {}
    for kind, values in found.items():
        figures[f"{kind} p50"] = scale.percentile(values, 50)
        figures[f"{kind} p99"] = scale.percentile(values, 99)
        figures[f"{kind} max"] = max(values)
    return figures


def measure(tree: Path, args: argparse.Namespace, plane: ControlPlane, loader: Path, workdir: Path,
            name: str) -> dict[str, Any]:
    kubeconfig = plane.kubeconfig()
    replica = scale.start_replica(kubeconfig, workdir, name, tree)
    try:
        ready = replica.wait_ready()
        # As bench/scale.py: the exposure scan's first pass shares the loop with admissions; idle figures taken
        # during it (two runs at 15,000 nodes: idle preempt p99 2.7-3.3 ms, p50 0.9) made every ratio look met.
        exposure = replica.wait_first_exposure_scan()
        scale.CORES.isolate([c.process.pid for c in plane.components], [replica])
        prober = scale.Prober(replica, plane.tokens["admin"])
        for kind in scale.KINDS:
            prober.warm_up("mutate", kind)
        prober.tolerate_missing = True  # an admission past its budget counts (its latency kept)
        idle = probe(prober, samples=args.samples)
        idle_missing, prober.missing = prober.missing, 0
        process, finish = scale.run_churn(loader, kubeconfig, args.nodes, args.churn_rate, args.churn_seconds,
                                          workdir / f"{name}.ndjson", name)
        with scale.LagPoller([replica]):
            churn = probe(prober, until=lambda: process.poll() is not None)
        summary, _ = finish()
        prober.close()
        return {"tree": str(tree), "ready": ready, "exposure scanned": exposure,
                "idle": figures_of(idle), "churn": figures_of(churn),
                "idle samples": len(idle["fit"]), "churn samples": len(churn["fit"]),
                "without prediction": [idle_missing, prober.missing], "churn achieved": summary["achieved"]}
    finally:
        scale.CORES.release()
        replica.stop()


def report(results: list[dict[str, Any]], trees: list[Path]) -> None:
    print(f"\n{'figure (ms, median over rounds)':34s}" + "".join(f"{t.name[:18]:>20s}" for t in trees))
    for phase in ("idle", "churn"):
        for key in results[0][phase]:
            row = [statistics.median(r[phase][key] for r in results if r["tree"] == str(t)) for t in trees]
            print(f"{phase + ' ' + key:34s}" + "".join(f"{v:20.2f}" for v in row))
    for kind in scale.KINDS:
        row = [statistics.median(r["churn"][f"{kind} p99"] / r["idle"][f"{kind} p99"] for r in results
                                 if r["tree"] == str(t)) for t in trees]
        print(f"{'churn/idle p99 ' + kind:34s}" + "".join(f"{v:19.2f}x" for v in row))
    row = [statistics.median(r["churn achieved"] for r in results if r["tree"] == str(t)) for t in trees]
    print(f"{'churn writes/s achieved':34s}" + "".join(f"{v:20.0f}" for v in row))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="another checkout, measured side by side")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--samples", type=int, default=200, help="idle rounds of the three pods")
    parser.add_argument("--churn-seconds", type=float, default=20.0)
    parser.add_argument("--churn-rate", type=float, default=500.0)
    parser.add_argument("--apiserver-memory-limit", default="6GiB")
    parser.add_argument("--kube-bin", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    trees = [args.baseline.resolve(), ROOT]
    kube_bin = kube_bin_dir(args.kube_bin)
    scale.GUARD = scale.MemoryGuard()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="preemptguard-churn-ab-") as tmp:
        workdir = Path(tmp)
        loader = scale.loader_binary(kube_bin, workdir)
        plane = ControlPlane(workdir / "plane", kube_bin, with_scheduler=False,
                             extra_etcd_args=["--quota-backend-bytes", str(scale.ETCD_QUOTA_BYTES)],
                             component_env={"kube-apiserver": {"GOMEMLIMIT": args.apiserver_memory_limit}})
        try:
            plane.start()
            loaded = scale.load_cluster(loader, plane, args.nodes, 30, "etcd")
            print(f"{args.nodes:,} nodes loaded in {loaded['load seconds']:.0f}s (load average "
                  f"{scale.load_average()})", flush=True)
            for round_ in range(args.rounds):
                for i, tree in enumerate(trees):
                    result = measure(tree, args, plane, loader, workdir, f"r{round_}-{i}")
                    results.append(result)
                    print(json.dumps({k: v for k, v in result.items() if k not in ("idle", "churn")}), flush=True)
        finally:
            plane.stop()
            scale.GUARD.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"load average after: {scale.load_average()}")
    report(results, trees)
    return 0


if __name__ == "__main__":
    sys.exit(main())
