"""``kubectl preempt-preview``: would these pods preempt anyone, and whom? (docs/interfaces.md §5)

Installed as the executable ``kubectl-preempt_preview``, which kubectl runs for ``kubectl preempt-preview``.
Exit status: 0 every pod fits without evicting anyone; 1 preemption predicted, or a pod would stay pending or
be rejected; 2 or more an error, printed as one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn, TextIO

from kubectl_plugin.inputs import (
    JsonObject,
    check_namespace_flag,
    parse_workload_ref,
    read_manifests,
    scale_up_object,
    with_priority_class,
)
from kubectl_plugin.render import OUTPUTS, Progress, colour_wanted, render
from kubectl_plugin.sources import (
    SEQUENTIAL_NOTE,
    ClusterPreviewSource,
    KubeCluster,
    PreviewSource,
    SnapshotPreviewSource,
    WebhookPreviewSource,
)
from webhook.errors import PreemptGuardError
from webhook.preemption.preview import preview_exit_code
from webhook.version import package_version

PROG = "kubectl preempt-preview"
EXIT_ERROR = 2

DESCRIPTION = """\
Predict what kube-scheduler would do with new pods before you create them: whether each pod fits, which
lower-priority pods it would preempt (evict) to make room and on which node, how many PodDisruptionBudgets
that would violate, and whether admission would reject it.

By default the pods are sent to the cluster of the current kubeconfig context as a server-side dry-run
create (nothing is created): the API server authenticates you and the PreemptGuard webhook answers with
its prediction. --webhook-url asks a PreemptGuard server directly, and --snapshot predicts offline from a
cluster snapshot file.

A dry-run create changes nothing, so with the default source each replica of a workload is predicted
against the cluster as it is now, not after the earlier replicas have been placed. --webhook-url and
--snapshot simulate replicas in order, applying each replica's placement and evictions before the next."""

EXAMPLES = """\
  # Preview a manifest against the cluster of the current context (server-side dry run)
  kubectl preempt-preview -f deploy.yaml

  # What if this pod used the "high" PriorityClass?
  kubectl preempt-preview -f pod.yaml --priority-class high

  # Preview scaling an existing Deployment up by 3 replicas
  kubectl preempt-preview deployment/web --replicas 3 -n team-a

  # Ask a PreemptGuard server directly, replicas simulated in order
  kubectl preempt-preview -f deploy.yaml --webhook-url https://127.0.0.1:8443 --certificate-authority ca.crt

  # Offline, from a snapshot taken with
  # kubectl get priorityclasses,nodes,pods,poddisruptionbudgets,resourcequotas,namespaces -A -o yaml
  kubectl preempt-preview -f deploy.yaml --snapshot cluster.yaml -o wide

  # As a CI gate: exit status 1 when anything would be preempted, stay pending or be rejected
  kubectl preempt-preview -f manifests/ -o json > preview.json"""

USAGE = """\
  kubectl preempt-preview (-f FILENAME | TYPE/NAME) [-n NAMESPACE] [--replicas N] [--priority-class NAME]
      [--snapshot FILE | --webhook-url URL [--token TOKEN] [--certificate-authority FILE]
      [--insecure-skip-tls-verify]] [--kubeconfig PATH] [--context NAME] [-o table|wide|json|yaml] [options]"""


class UsageError(PreemptGuardError):
    exit_code = EXIT_ERROR


class KubectlHelpFormatter(argparse.HelpFormatter):
    """kubectl's layout: each option as ``-f, --filename='':`` with its help indented below."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings:
            return str(action.metavar or action.dest)
        default = "false" if action.nargs == 0 else ("[]" if isinstance(action, argparse._AppendAction) else "''")
        if action.default not in (None, False, []) and action.nargs != 0:
            default = str(action.default)
        return f"{', '.join(action.option_strings)}={default}:"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line on stderr instead of usage + message
        raise UsageError(f"{message} (see '{PROG} --help')")

    def format_help(self) -> str:
        options = []
        for action in self._actions:
            if not action.option_strings:
                continue
            invocation = KubectlHelpFormatter(PROG)._format_action_invocation(action)
            text = textwrap.fill(action.help or "", width=90, initial_indent="\t", subsequent_indent="\t")
            options.append(f"    {invocation}\n{text}\n")
        return (f"{DESCRIPTION}\n\nExamples:\n{EXAMPLES}\n\nOptions:\n" + "\n".join(options)
                + f"\nUsage:\n{USAGE}\n")

    def format_usage(self) -> str:
        return f"Usage:\n{USAGE}\n"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, add_help=False)
    add = parser.add_argument
    add("target", nargs="*", metavar="TYPE/NAME", help="an existing workload (e.g. deployment/web)")
    add("-f", "--filename", action="append", default=[], metavar="FILENAME",
        help="Pod, Deployment, StatefulSet, ReplicaSet, Job or CronJob manifests (or Lists of them): a file, a "
             "directory, or - for standard input. Repeatable.")
    add("-n", "--namespace", metavar="NAMESPACE",
        help="Namespace of the pods (default: the manifest's, then the context's). As with kubectl, a manifest "
             "that names another namespace is an error.")
    add("--replicas", type=int, metavar="N",
        help="With -f: how many replicas to preview (default: the workload's). With TYPE/NAME: how many replicas "
             "to add to the existing workload (default 1).")
    add("--priority-class", metavar="NAME", help="Preview the pods as if they used this PriorityClass.")
    add("--snapshot", metavar="FILE", help="Predict offline from a cluster snapshot file (no cluster needed).")
    add("--webhook-url", metavar="URL", help="Ask a PreemptGuard server's /preview endpoint directly.")
    add("--token", metavar="TOKEN", help="Bearer token for --webhook-url.")
    add("--certificate-authority", metavar="FILE", help="CA bundle that verifies the --webhook-url certificate.")
    add("--insecure-skip-tls-verify", action="store_true",
        help="Do not verify the --webhook-url certificate (insecure).")
    add("--kubeconfig", metavar="PATH", help="Path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config).")
    add("--context", metavar="NAME", help="The kubeconfig context to use.")
    add("-o", "--output", choices=OUTPUTS, default="table", metavar="FORMAT",
        help="Output format: table, wide, json or yaml (json and yaml print the PreemptionPreview).")
    add("--version", action="version", version=f"{PROG} {package_version()}",
        help="Print the PreemptGuard version and exit.")
    add("-h", "--help", action="help", help="help for preempt-preview")
    return parser


@dataclass(frozen=True, slots=True)
class Streams:
    stdin: TextIO
    stdout: TextIO
    stderr: TextIO


def validate_args(args: argparse.Namespace) -> None:
    if args.target and args.filename:
        raise UsageError("give either -f FILENAME or TYPE/NAME, not both")
    if not args.target and not args.filename:
        raise UsageError(f"you must specify -f FILENAME or TYPE/NAME (see '{PROG} --help')")
    if args.replicas is not None and args.replicas < 0:
        raise UsageError("--replicas must not be negative")
    if args.snapshot and args.webhook_url:
        raise UsageError("--snapshot and --webhook-url cannot be used together")
    if args.snapshot and args.target:
        raise UsageError("TYPE/NAME is read from the cluster; with --snapshot use -f FILENAME")
    webhook_only = [flag for flag, value in (("--token", args.token),
                                             ("--certificate-authority", args.certificate_authority),
                                             ("--insecure-skip-tls-verify", args.insecure_skip_tls_verify)) if value]
    if webhook_only and not args.webhook_url:
        raise UsageError(f"{webhook_only[0]} applies to --webhook-url")


def needs_cluster(args: argparse.Namespace) -> bool:
    return bool(args.target) or not (args.snapshot or args.webhook_url)


async def gather_objects(args: argparse.Namespace, streams: Streams,
                         cluster: KubeCluster | None) -> tuple[list[JsonObject], int | None]:
    """The objects to preview and the replica count to ask for."""
    if args.target:
        assert cluster is not None
        ref = parse_workload_ref(args.target)
        namespace = args.namespace or cluster.namespace
        obj = scale_up_object(await cluster.get_object(ref, namespace), ref, 1)
        objects, replicas = [obj], (1 if args.replicas is None else args.replicas)
    else:
        objects, replicas = read_manifests(args.filename, streams.stdin), args.replicas
        check_namespace_flag(objects, args.namespace)
    return [with_priority_class(o, args.priority_class) for o in objects], replicas


def make_source(args: argparse.Namespace, cluster: KubeCluster | None) -> PreviewSource:
    if args.snapshot:
        return SnapshotPreviewSource(args.snapshot)
    if args.webhook_url:
        return WebhookPreviewSource(args.webhook_url, token=args.token,
                                    certificate_authority=args.certificate_authority,
                                    insecure_skip_tls_verify=args.insecure_skip_tls_verify)
    assert cluster is not None
    return ClusterPreviewSource(cluster)


async def run(args: argparse.Namespace, streams: Streams, environ: Mapping[str, str]) -> int:
    # Reading the manifests first: a bad file fails before any connection is made.
    objects: list[JsonObject] | None = None
    replicas = args.replicas
    if not args.target:
        objects, replicas = await gather_objects(args, streams, None)
    cluster = await KubeCluster.connect(kubeconfig=args.kubeconfig, context=args.context, environ=environ) \
        if needs_cluster(args) else None
    try:
        if objects is None:
            objects, replicas = await gather_objects(args, streams, cluster)
        source = make_source(args, cluster)
        answer = await source.preview(objects, namespace=args.namespace, replicas=replicas,
                                      progress=Progress.for_stream(streams.stderr))
    finally:
        if cluster is not None:
            await cluster.close()
    for warning in answer.warnings:
        streams.stderr.write(f"Warning: {warning}\n")
    if isinstance(source, ClusterPreviewSource) and len(answer.preview["results"]) > 1:
        streams.stderr.write(f"Note: {SEQUENTIAL_NOTE}.\n")
    streams.stdout.write(render(answer.preview, args.output, colour=colour_wanted(streams.stdout, environ)))
    return preview_exit_code(answer.preview)


def one_line(message: object) -> str:
    return " ".join(str(message).split())


def main(argv: Sequence[str] | None = None) -> int:
    streams = Streams(sys.stdin, sys.stdout, sys.stderr)
    # Libraries log their own failures; the one error line below says it all.
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        args = build_parser().parse_args(argv)
        validate_args(args)
        return asyncio.run(run(args, streams, os.environ))
    except PreemptGuardError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return max(exc.exit_code, EXIT_ERROR)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception as exc:  # one line, never a traceback (docs/interfaces.md §5)
        print(f"error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
