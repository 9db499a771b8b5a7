"""``kubectl preempt-preview``: would these pods preempt anyone, and whom? (docs/interfaces.md §5)

Installed as the executable ``kubectl-preempt_preview``, which kubectl runs for ``kubectl preempt-preview``.
Exit status: 0 every pod fits without evicting anyone; 1 preemption predicted, or a pod would stay pending or
be rejected; 2 or more an error, printed as one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn, TextIO

from kubectl_plugin.completion import print_completions
from kubectl_plugin.inputs import (
    JsonObject,
    check_namespace_flag,
    parse_workload_ref,
    read_manifests,
    scale_up_object,
    select_workloads,
    skipped_note,
    with_priority_class,
)
from kubectl_plugin.options import EXIT_ERROR, PROG, SHELLS, UsageError, build_parser
from kubectl_plugin.render import Progress, colour_wanted, render, render_aside
from kubectl_plugin.shells import SCRIPTS
from kubectl_plugin.sources import kube_api
from kubectl_plugin.sources.document import PreviewSource
from kubectl_plugin.sources.dry_run import SEQUENTIAL_NOTE, ClusterPreviewSource
from kubectl_plugin.sources.http import RequestTimeout
from kubectl_plugin.sources.snapshot import SnapshotPreviewSource
from kubectl_plugin.sources.webhook_url import WebhookPreviewSource
from webhook.cluster.release import DEFAULT_RELEASE, parse_release
from webhook.errors import ConfigError, PreemptGuardError
from webhook.kubeapi import KubeClient
from webhook.preemption.preview import preview_exit_code


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
    if args.snapshot_cache and not args.snapshot:
        raise UsageError("--snapshot-cache applies to --snapshot")
    if args.kube_version is not None:
        if not args.snapshot:
            raise UsageError("--kube-version applies to --snapshot (a server predicts for its own release: "
                             "scheduler.kubernetesVersion in its --config)")
        try:
            args.kube_version = parse_release(args.kube_version)
        except ConfigError as exc:
            raise UsageError(f"--kube-version: {exc}") from exc
    if args.recursive and not args.filename:
        raise UsageError("-R, --recursive applies to -f FILENAME")
    webhook_only = [flag for flag, value in (("--token", args.token),
                                             ("--certificate-authority", args.certificate_authority),
                                             ("--insecure-skip-tls-verify", args.insecure_skip_tls_verify)) if value]
    if webhook_only and not args.webhook_url:
        raise UsageError(f"{webhook_only[0]} applies to --webhook-url")
    try:
        args.request_timeout = RequestTimeout.parse(args.request_timeout)
    except ValueError as exc:
        raise UsageError(f"--request-timeout {args.request_timeout}: {exc}") from exc


def needs_cluster(args: argparse.Namespace) -> bool:
    return bool(args.target) or not (args.snapshot or args.webhook_url)


async def gather_objects(args: argparse.Namespace, streams: Streams,
                         cluster: KubeClient | None) -> tuple[list[JsonObject], int | None]:
    """The objects to preview and the replica count to ask for; objects that are not workloads are set aside
    with a note on stderr (``--strict`` refused them while reading)."""
    if args.target:
        assert cluster is not None
        ref = parse_workload_ref(args.target)
        namespace = args.namespace or cluster.namespace
        obj = scale_up_object(await kube_api.get_object(cluster, ref, namespace), ref, 1)
        objects, replicas = [obj], (1 if args.replicas is None else args.replicas)
    else:
        read = read_manifests(args.filename, streams.stdin, recursive=args.recursive, strict=args.strict)
        objects, skipped = select_workloads(read)
        if args.snapshot:  # the manifests' own PriorityClasses join the snapshot's (SnapshotPreviewSource)
            args.manifest_priority_classes = [o for o in skipped if o.get("kind") == "PriorityClass"]
            skipped = [o for o in skipped if o.get("kind") != "PriorityClass"]
            for pc in args.manifest_priority_classes:
                streams.stderr.write(f"Note: using PriorityClass {(pc.get('metadata') or {}).get('name')} "
                                     "from the manifests\n")
        note = skipped_note(skipped)
        if note:
            streams.stderr.write(f"Note: {note}\n")
        replicas = args.replicas
        check_namespace_flag(objects, args.namespace)
    return [with_priority_class(o, args.priority_class) for o in objects], replicas


def make_source(args: argparse.Namespace, cluster: KubeClient | None) -> PreviewSource:
    if args.snapshot:
        return SnapshotPreviewSource(args.snapshot, cache=args.snapshot_cache,
                                     priority_classes=getattr(args, "manifest_priority_classes", ()),
                                     release=args.kube_version or DEFAULT_RELEASE)
    if args.webhook_url:
        return WebhookPreviewSource(args.webhook_url, token=args.token,
                                    certificate_authority=args.certificate_authority,
                                    insecure_skip_tls_verify=args.insecure_skip_tls_verify,
                                    timeout=args.request_timeout)
    assert cluster is not None
    return ClusterPreviewSource(cluster)


async def run(args: argparse.Namespace, streams: Streams, environ: Mapping[str, str]) -> int:
    # Reading the manifests first: a bad file fails before any connection is made.
    objects: list[JsonObject] | None = None
    replicas = args.replicas
    if not args.target:
        objects, replicas = await gather_objects(args, streams, None)
        if not objects:  # only objects that are not workloads: nothing can preempt anyone
            streams.stderr.write(f"No workloads to preview in {', '.join(args.filename)}.\n")
            return 0
    cluster = await kube_api.connect(kubeconfig=args.kubeconfig, context=args.context, environ=environ,
                                     timeout=args.request_timeout) if needs_cluster(args) else None
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
    streams.stdout.write(render(answer.preview, args.output, colour=colour_wanted(streams.stdout, environ),
                                no_headers=args.no_headers))
    streams.stderr.write(render_aside(answer.preview, args.output, no_headers=args.no_headers))
    return preview_exit_code(answer.preview)


def one_line(message: object) -> str:
    return " ".join(str(message).split())


def print_completion_script(words: Sequence[str], stdout: TextIO) -> int:
    """``completion bash|zsh``, with kubectl's errors for a missing or unknown shell."""
    if words[:1] in (["-h"], ["--help"]):
        stdout.write(f"Print the shell completion script for kubectl-preempt_preview run directly.\n\n"
                     f"Usage:\n  {PROG} completion {'|'.join(SHELLS)}\n")
        return 0
    if not words:
        raise UsageError(f"Shell not specified: {PROG} completion {'|'.join(SHELLS)}")
    if len(words) > 1:
        raise UsageError(f"Too many arguments. Expected only the shell type: {PROG} completion {'|'.join(SHELLS)}")
    if words[0] not in SCRIPTS:
        raise UsageError(f'Unsupported shell type "{words[0]}": expected {" or ".join(SHELLS)}')
    stdout.write(SCRIPTS[words[0]])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The exit status of one run; run as the program (``argv`` None: the console script, ``python -m``), the
    process ends here without freeing its objects, since a loaded 5,000-node snapshot takes most of a second to
    free and nothing is left to do with it (mypy's ``hard_exit`` does the same)."""
    code = run_words(sys.argv[1:] if argv is None else list(argv))
    if argv is None:
        exit_now(code)
    return code


def exit_now(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: its error was already reported
            stream.flush()
    os._exit(code)


def run_words(words: list[str]) -> int:
    streams = Streams(sys.stdin, sys.stdout, sys.stderr)
    if words[:1] in (["__complete"], ["__completeNoDesc"]):  # Cobra's hidden completion commands
        return print_completions(words[1:], descriptions=words[0] == "__complete")
    # Libraries log their own failures; the one error line below says it all.
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        if words[:1] == ["completion"]:
            return print_completion_script(words[1:], streams.stdout)
        if words[:1] == ["exposure"]:  # never a TYPE/NAME: those have a slash
            from kubectl_plugin import exposure

            return asyncio.run(exposure.run(words[1:], streams.stdout, os.environ))
        args = build_parser().parse_args(words)
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
