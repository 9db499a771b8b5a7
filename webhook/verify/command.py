"""``preempt-guard verify``: PreemptGuard's prediction held against a real kube-scheduler (docs/interfaces.md §8).

```
preempt-guard verify [--kube-bin DIR] (--snapshot FILE -f FILE [-f ...] | --scenarios DIR)
                     [--config FILE] [--kube-version VERSION] [--timeout SECONDS] [-o table|json]
```
Exit status: 0 every pod agrees, 1 a disagreement, 2 an error (missing binaries, a bad file, a control plane
that does not start, or an observation that could not be made).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.errors import ConfigError

if TYPE_CHECKING:
    from webhook.verify.runner import Progress, VerifyResult

OUTPUTS = ("table", "json")
DEFAULT_TIMEOUT_SECONDS = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Start etcd, kube-apiserver and kube-scheduler of one Kubernetes release on loopback, "
                          "load a cluster snapshot, and for each pod compare PreemptGuard's prediction with what "
                          "kube-scheduler does.")
    parser.add_argument("--kube-bin", metavar="DIR",
                        help="directory holding etcd, kube-apiserver and kube-scheduler (default "
                             "$PREEMPTGUARD_KUBE_BIN, then conformance/bin; build them with conformance/build)")
    parser.add_argument("--snapshot", metavar="FILE", help="cluster snapshot (docs/interfaces.md §1) to load")
    parser.add_argument("-f", "--filename", dest="pod_files", metavar="FILE", action="append", default=[],
                        help="pods or workloads to create on the snapshot, in order (repeatable)")
    parser.add_argument("--scenarios", metavar="DIR",
                        help="every subdirectory holding snapshot.yaml and pod.yaml is one scenario")
    parser.add_argument("--config", metavar="FILE",
                        help="PreemptGuard configuration; its scheduler.* becomes the scheduler's "
                             "DefaultPreemptionArgs")
    parser.add_argument("--kube-version", metavar="VERSION",
                        help="predict as kube-scheduler of this release preempts (v1.33 .. v1.37; default: "
                             "scheduler.kubernetesVersion of --config, else the release of the binaries)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", default=DEFAULT_TIMEOUT_SECONDS,
                        help=f"longest wait for one scheduling decision (default {DEFAULT_TIMEOUT_SECONDS:g})")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table", help="output format (default table)")
    parser.add_argument("--workdir", metavar="DIR",
                        help="keep the control plane's files and logs in DIR (default: a removed temporary directory)")


def validate(args: argparse.Namespace) -> None:
    if args.scenarios and (args.snapshot or args.pod_files):
        raise ConfigError("--scenarios cannot be combined with --snapshot/-f")
    if not args.scenarios and not (args.snapshot and args.pod_files):
        raise ConfigError("give --snapshot FILE with at least one -f FILE, or --scenarios DIR")
    if args.timeout <= 0:
        raise ConfigError(f"--timeout must be positive, got {args.timeout:g}")


def _progress(total: int) -> Progress:
    done = [0]
    started = time.monotonic()

    def report(name: str, results: Sequence[VerifyResult]) -> None:
        done[0] += 1
        agree = sum(r.comparison.agree for r in results)
        print(f"verify: [{done[0]}/{total}] {name or 'snapshot'}: {agree}/{len(results)} agree"
              f" ({time.monotonic() - started:.0f}s)", file=sys.stderr, flush=True)

    return report


def run(args: argparse.Namespace) -> int:
    from webhook.verify.controlplane import kube_bin_dir, kubernetes_version
    from webhook.verify.engine import DEFAULT_CONFIG, check_snapshot, load_config, scheduler_for_release
    from webhook.verify.report import exit_status, render
    from webhook.verify.runner import run_scenarios, start_plane
    from webhook.verify.scenarios import discover, read_pods, single

    validate(args)
    bin_dir = kube_bin_dir(args.kube_bin)
    config = load_config(args.config) if args.config else DEFAULT_CONFIG
    if args.scenarios:
        scenarios = discover(Path(args.scenarios))
    else:
        scenarios = [single(Path(args.snapshot), [Path(f) for f in args.pod_files])]
        check_snapshot(scenarios[0].snapshot)  # a bad file is one line and exit 2, before anything starts
        read_pods(scenarios[0].pod_files)
    version = kubernetes_version(bin_dir)
    scheduler, note = scheduler_for_release(config.scheduler, args.kube_version, version)
    if note:
        print(f"verify: {note}", file=sys.stderr)
    progress = _progress(len(scenarios)) if sys.stderr.isatty() and len(scenarios) > 1 else None
    with tempfile.TemporaryDirectory(prefix="preemptguard-verify-") as temporary:
        workdir = Path(args.workdir) if args.workdir else Path(temporary)
        with start_plane(workdir, bin_dir, scheduler) as plane:
            results = run_scenarios(plane, scenarios, scheduler, timeout=args.timeout, progress=progress)
    print(render(results, version, args.output, prediction_release=scheduler.kubernetes_version))
    return exit_status(results)
