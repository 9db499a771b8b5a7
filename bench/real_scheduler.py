"""PreemptGuard against the real kube-scheduler on random clusters (not a test).

    .venv/bin/python bench/real_scheduler.py --n 200 --seed 1 [--kube-version vX.Y.Z | --kube-bin DIR]
                                             [--features admission-chain,resize,volumes,dra] [--keep DIR] [--timeout 30]

``--kube-version vX.Y.Z`` takes the binaries ``conformance/build --kube-version vX.Y.Z`` builds
(``conformance/bin/vX.Y.Z``, or ``--kube-bin DIR``) and refuses binaries of another release.

Generates ``--n`` scenarios with ``bench/scenariogen.py`` (small random clusters across the predictor's
features, an incoming Pod or Deployment), runs them through ``preempt-guard verify``'s runner on one control
plane, and prints

    real-scheduler agreement: A/N (T tied)

A scenario agrees when every one of its pods does (``webhook.observe.compare``: tie-aware, so with a full tie
the observed node only has to be one of ``tiedNodes``); T counts scenarios with such a tie. Every scenario that
does not agree is copied to ``--keep`` (default ``bench/disagreements/seed-S``) with its ``snapshot.yaml``,
``pod.yaml`` and ``verdict.json``, ready for ``preempt-guard verify --scenarios``; ``README.md`` there has a line
per case saying what the real scheduler did.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from bench.scenariogen import FAMILIES, features, generate_scenario, scenario_name, write_scenarios  # noqa: E402
from webhook.config import DEFAULT_CONFIG, load_config  # noqa: E402
from webhook.observe.compare import ERROR, fits_node_compared  # noqa: E402
from webhook.preemption.results import Outcome  # noqa: E402
from webhook.verify.controlplane import kube_bin_dir, kubernetes_version  # noqa: E402
from webhook.verify.engine import scheduler_for_release  # noqa: E402
from webhook.verify.report import is_tied, result_json  # noqa: E402
from webhook.verify.runner import VerifyResult, run_scenarios, start_plane  # noqa: E402
from webhook.verify.scenarios import discover  # noqa: E402


def describe(results: Sequence[VerifyResult]) -> str:
    """One README line: what the real scheduler did with each pod, and why it is not what was predicted."""
    parts = []
    for r in results:
        observed = r.observed
        did = observed.outcome + (f" on {observed.node}" if observed.node else "")
        if observed.victims:
            did += f" evicting {', '.join(observed.victims)}"
        predicted = r.predicted
        said = "-" if predicted is None else predicted.outcome + (f" on {predicted.node}" if predicted.node else "")
        if predicted is not None and predicted.victims:
            said += f" evicting {', '.join(predicted.victims)}"
        parts.append(f"{r.pod}: observed {did}; PreemptGuard: {said}" + (f" ({r.comparison.why})"
                                                                                 if r.comparison.why else ""))
    return "; ".join(parts)


def keep(scenario_dir: Path, results: Sequence[VerifyResult], keep_dir: Path) -> None:
    target = keep_dir / scenario_dir.name
    shutil.copytree(scenario_dir, target, dirs_exist_ok=True)
    (target / "verdict.json").write_text(json.dumps([result_json(r) for r in results], indent=2) + "\n",
                                         encoding="utf-8")
    with (keep_dir / "README.md").open("a", encoding="utf-8") as readme:
        readme.write(f"- `{scenario_dir.name}`: {describe(results)}\n")


def print_coverage(seed: int, start: int, n: int, by_scenario: dict[str, list[VerifyResult]],
                   families: frozenset[str] = frozenset(), scoring: bool = False) -> None:
    """Per feature: the scenarios that used it, how many of them preempted, how many agreed."""
    used: Counter[str] = Counter()
    preempting: Counter[str] = Counter()
    agreeing: Counter[str] = Counter()
    for index in range(start, start + n):
        results = by_scenario.get(scenario_name(seed, index), [])
        for feature in features(*generate_scenario(seed, index, families, scoring)):
            used[feature] += 1
            preempting[feature] += any(r.observed.outcome == "Preempts" for r in results)
            agreeing[feature] += all(r.comparison.agree for r in results)
    width = max(map(len, used), default=0)
    print(f"{'feature':<{width}}   scenarios   preempting   agree")
    for feature in sorted(used):
        print(f"{feature:<{width}}   {used[feature]:>9}   {preempting[feature]:>10}   {agreeing[feature]:>5}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="scenarios (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generator (default 1)")
    parser.add_argument("--start", type=int, default=0, help="first scenario index (default 0)")
    parser.add_argument("--kube-bin", metavar="DIR", help="etcd, kube-apiserver, kube-scheduler (as verify)")
    parser.add_argument("--kube-version", metavar="vX.Y.Z",
                        help="the release to run against (default: the one in --kube-bin); without --kube-bin, "
                             "conformance/bin/vX.Y.Z as conformance/build --kube-version builds it")
    parser.add_argument("--config", metavar="FILE", help="PreemptGuard configuration (scheduler.*)")
    parser.add_argument("--features", metavar="LIST", default="",
                        help=f"feature families drawn on top, comma-separated: {', '.join(FAMILIES)}")
    parser.add_argument("--timeout", type=float, default=30.0, help="longest wait for one decision (default 30)")
    parser.add_argument("--keep", metavar="DIR", help="where disagreements go (default bench/disagreements/seed-S)")
    parser.add_argument("--coverage", action="store_true", help="print how many scenarios used each feature")
    parser.add_argument("--scoring", action="store_true",
                        help="draw what the Score plugins read on top (images, PreferNoSchedule taints, preferred"
                             " affinity, soft spread): the node of every Fits is compared")
    parser.add_argument("--quiet", action="store_true", help="no progress line per scenario on stderr")
    args = parser.parse_args(argv)
    families = frozenset(f for f in args.features.split(",") if f)
    if families - set(FAMILIES):
        unknown = ", ".join(sorted(families - set(FAMILIES)))
        parser.error(f"--features: unknown {unknown} (known: {', '.join(FAMILIES)})")
    if args.kube_version and not args.kube_bin:
        args.kube_bin = str(ROOT / "conformance" / "bin" / args.kube_version)
    bin_dir = kube_bin_dir(args.kube_bin)
    config = load_config(args.config) if args.config else DEFAULT_CONFIG
    version = kubernetes_version(bin_dir)
    if args.kube_version and version != args.kube_version:
        parser.error(f"--kube-version {args.kube_version}: the binaries in {bin_dir} are {version}")
    keep_dir = Path(args.keep) if args.keep else ROOT / "bench" / "disagreements" / f"{version}-seed-{args.seed}"
    # The prediction follows the release it is held against (scheduler.kubernetesVersion of --config wins).
    scheduler, note = scheduler_for_release(config.scheduler, None, version)
    if note:
        print(f"real_scheduler: {note}", file=sys.stderr)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="preemptguard-bench-") as work:
        scenarios_dir = Path(work) / "scenarios"
        write_scenarios(scenarios_dir, args.n, args.seed, args.start, families, args.scoring)
        scenarios = discover(scenarios_dir)
        by_scenario: dict[str, list[VerifyResult]] = {}
        disagreements: list[str] = []

        def progress(name: str, results: Sequence[VerifyResult]) -> None:
            by_scenario[name] = list(results)
            agree = all(r.comparison.agree for r in results)
            if not agree:
                disagreements.append(name)
                keep(scenarios_dir / name, results, keep_dir)
            if not args.quiet:
                verdict = "agree" if agree else "DISAGREE"
                print(f"[{len(by_scenario)}/{len(scenarios)} {time.monotonic() - started:5.0f}s] {name}: {verdict}"
                      f" {' '.join(r.observed.outcome for r in results)}", file=sys.stderr, flush=True)

        with start_plane(Path(work) / "plane", bin_dir, scheduler) as plane:
            run_scenarios(plane, scenarios, scheduler, timeout=args.timeout, progress=progress)
    elapsed = time.monotonic() - started
    results = [r for rs in by_scenario.values() for r in rs]
    agreeing = sum(all(r.comparison.agree for r in rs) for rs in by_scenario.values())
    tied = sum(any(is_tied(r) for r in rs) for rs in by_scenario.values())
    outcomes = Counter(r.observed.outcome for r in results)
    print(f"real-scheduler agreement: {agreeing}/{len(by_scenario)} ({tied} tied)")
    fits = [r for r in results if r.observed.outcome == Outcome.FITS]
    node_compared = [r for r in fits if fits_node_compared(r.comparison)]
    print(f"Fits node: {sum(r.comparison.agree for r in node_compared)}/{len(node_compared)} agree"
          f" ({sum(is_tied(r) for r in node_compared)} tied, {len(fits) - len(node_compared)} not compared)")
    drawn = f"; features {','.join(sorted(families))}" if families else ""
    print(f"kube-scheduler {version} (predicted as {scheduler.kubernetes_version}); seed {args.seed}{drawn};"
          f" {len(results)} pods observed: "
          + ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
          + f"; {elapsed:.0f}s")
    if args.coverage:
        print_coverage(args.seed, args.start, args.n, by_scenario, families, args.scoring)
    if disagreements:
        print(f"{len(disagreements)} disagreement(s) kept for replay in {keep_dir}: {' '.join(disagreements)}")
        print(f"replay: preempt-guard verify --scenarios {keep_dir}")
    return 0 if agreeing == len(by_scenario) and not outcomes.get(ERROR) else 1


if __name__ == "__main__":
    sys.exit(main())
