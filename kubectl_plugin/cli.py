"""``kubectl preempt-preview``: what would this pod evict? (contract §5)

Only the offline mode (``--snapshot FILE``) exists so far; the cluster (server-side dry run) and
``--webhook-url`` modes come with the plugin issue and extend this same parser.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import yaml

from webhook.cluster.loader import load_snapshot
from webhook.errors import InvalidInput, PreemptGuardError
from webhook.preemption.preview import preview_exit_code, preview_objects

EXIT_ERROR = 2
OUTPUTS = ("table", "wide", "json", "yaml")


class UsageError(PreemptGuardError):
    exit_code = EXIT_ERROR


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line on stderr instead of usage + message
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kubectl preempt-preview",
        description="Predict whether kube-scheduler would preempt pods to place a new pod, and which ones.")
    parser.add_argument("target", nargs="?", metavar="TYPE/NAME", help="an existing workload (cluster mode)")
    parser.add_argument("-f", "--filename", metavar="FILE", help="pod or workload manifest, '-' for stdin")
    parser.add_argument("-n", "--namespace", metavar="NS")
    parser.add_argument("--replicas", type=int, metavar="N")
    parser.add_argument("--priority-class", metavar="NAME")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--snapshot", metavar="FILE", help="predict offline from a cluster snapshot file")
    source.add_argument("--webhook-url", metavar="URL")
    parser.add_argument("--kubeconfig", metavar="PATH")
    parser.add_argument("--context", metavar="NAME")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    return parser


def read_manifests(filename: str, stdin: TextIO) -> list[Mapping[str, Any]]:
    try:
        text = stdin.read() if filename == "-" else Path(filename).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{filename}: cannot read: {exc}") from exc
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{filename}: invalid YAML: {str(exc).splitlines()[0]}") from exc
    if not documents:
        raise InvalidInput(f"{filename}: no object found")
    if not all(isinstance(d, Mapping) for d in documents):
        raise InvalidInput(f"{filename}: expected Kubernetes objects")
    return documents


def format_table(preview: Mapping[str, Any], *, wide: bool) -> str:
    header = ["POD", "OUTCOME", "NODE", "VICTIMS", "PDB-VIOLATIONS"] + (["CANDIDATES", "MESSAGE"] if wide else [])
    rows = [header]
    for r in preview["results"]:
        victims = ",".join(f"{v['namespace']}/{v['name']}" for v in r["victims"]) or "-"
        row = [r["pod"], r["outcome"], r["node"] or "-", victims, str(r["pdbViolations"])]
        if wide:
            row += [str(r["candidateNodes"]), r["message"]]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - (1 if wide else 0))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) if i < len(widths) else cell for i, cell in enumerate(row)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def render(preview: Mapping[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(preview, indent=2) + "\n"
    if output == "yaml":
        return str(yaml.safe_dump(dict(preview), sort_keys=False))
    return format_table(preview, wide=output == "wide")


def run(argv: Sequence[str] | None, stdin: TextIO, stdout: TextIO) -> int:
    args = build_parser().parse_args(argv)
    if args.snapshot is None:
        raise UsageError("only offline mode is available so far: pass --snapshot FILE "
                         "(the cluster and --webhook-url modes come later)")
    if args.target is not None or args.filename is None:
        raise UsageError("offline mode needs -f FILE (or -f - for stdin); TYPE/NAME needs a cluster")
    if args.replicas is not None and args.replicas < 0:
        raise UsageError("--replicas must not be negative")
    objects = read_manifests(args.filename, stdin)
    state = load_snapshot(args.snapshot)
    preview = preview_objects(state, objects, namespace=args.namespace, replicas=args.replicas,
                              priority_class=args.priority_class)
    stdout.write(render(preview, args.output))
    return preview_exit_code(preview)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv, sys.stdin, sys.stdout)
    except PreemptGuardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return max(exc.exit_code, EXIT_ERROR)
    except Exception as exc:  # one line, never a traceback (contract §5)
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
