"""The command line of ``kubectl preempt-preview``: its flags, kubectl-style help and one-line usage errors.

Kept apart from the work the flags ask for, so that shell completion (``kubectl_plugin.completion``), which
runs on every TAB, reads the same flags without loading the sources or the predictor.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Sequence
from typing import Any, NoReturn

from kubectl_plugin.sources.http import DEFAULT_REQUEST_TIMEOUT
from webhook.errors import PreemptGuardError

PROG = "kubectl preempt-preview"
EXIT_ERROR = 2
OUTPUTS = ("table", "wide", "json", "yaml", "name", "jsonpath=", "custom-columns=")
# -o FORMAT=ARGUMENT: the template or the column spec follows the "=".
TEMPLATE_OUTPUTS = ("jsonpath", "custom-columns")
SHELLS = ("bash", "zsh")

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

  # Ask a PreemptGuard server directly, replicas simulated in order (in a cluster: its Service's preview port)
  kubectl preempt-preview -f deploy.yaml --webhook-url https://preemptguard.preemptguard.svc:8444 \\
      --token "$(kubectl create token ci -n team-a)" --certificate-authority ca.crt

  # Offline, from a snapshot taken with
  # kinds=priorityclasses,nodes,pods,poddisruptionbudgets,resourcequotas,namespaces,runtimeclasses,limitranges
  # kinds=$kinds,persistentvolumes,persistentvolumeclaims,storageclasses,csinodes
  # kinds=$kinds,resourceslices,resourceclaims,deviceclasses,resourceclaimtemplates,volumeattachments  # v1.34+
  # kubectl get "$kinds" -A -o yaml > cluster.yaml
  kubectl preempt-preview -f deploy.yaml --snapshot cluster.yaml -o wide

  # As a CI gate: exit status 1 when anything would be preempted, stay pending or be rejected; objects that are
  # not workloads (Services, ConfigMaps, ...) are skipped with a note (--strict refuses them)
  helm template charts/app | kubectl preempt-preview -f - --snapshot cluster.yaml
  kubectl preempt-preview -f manifests/ -R -o json > preview.json

  # One line per pod, kubectl's JSONPath and custom columns
  kubectl preempt-preview -f deploy.yaml -o jsonpath='{range .results[*]}{.pod}{"\t"}{.outcome}{"\n"}{end}'
  kubectl preempt-preview -f deploy.yaml -o custom-columns=POD:.pod,OUTCOME:.outcome,NODE:.node

  # Which of your running pods could be preempted, and by which classes (see exposure --help)
  kubectl preempt-preview exposure -n team-a

  # Shell completion for kubectl-preempt_preview run directly (through kubectl, see the README)
  source <(kubectl preempt-preview completion bash)"""

USAGE = """\
  kubectl preempt-preview (-f FILENAME [-R] [--strict] | TYPE/NAME) [-n NAMESPACE] [--replicas N]
      [--priority-class NAME] [--snapshot FILE [--snapshot-cache] [--kube-version VERSION]
       | --webhook-url URL [--token TOKEN] [--certificate-authority FILE] [--insecure-skip-tls-verify]]
      [--kubeconfig PATH] [--context NAME]
      [-o table|wide|json|yaml|name|jsonpath=TEMPLATE|custom-columns=SPEC] [options]
  kubectl preempt-preview exposure [-n NAMESPACE | -A] [--snapshot FILE [--config FILE]] [-o table|json|yaml]
  kubectl preempt-preview completion bash|zsh"""


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


class _Version(argparse.Action):
    """``--version``, reading the installed version only when asked (completion builds this parser on every TAB)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from webhook.version import package_version

        print(f"{PROG} {package_version()}")
        parser.exit()


def output_format(value: str) -> str:
    """``-o``: a format name, or ``jsonpath=TEMPLATE`` / ``custom-columns=SPEC`` (checked here, so a bad template
    is a usage error before anything is read or sent), with kubectl's message for anything else."""
    name, equals, argument = value.partition("=")
    if (name in OUTPUTS and not equals) or (name in TEMPLATE_OUTPUTS and equals):
        if name == "jsonpath":
            from kubectl_plugin.templates import TemplateError, parse_template

            try:
                parse_template(argument)
            except TemplateError as exc:
                raise UsageError(f"error parsing jsonpath {argument}, {exc}") from exc
        elif name == "custom-columns":
            from kubectl_plugin.templates import TemplateError, parse_custom_columns

            try:
                parse_custom_columns(argument)
            except TemplateError as exc:
                raise UsageError(str(exc)) from exc
        return value
    allowed = ",".join(sorted({o.rstrip("=") for o in OUTPUTS}))
    raise UsageError(f'unable to match a printer suitable for the output format "{value}", allowed formats are: '
                     f"{allowed}")


def webhook_url(value: str) -> str:
    """``--webhook-url``: an absolute http(s) URL; anything else is a usage error, never a failed connection."""
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise UsageError(f'--webhook-url "{value}": expected an absolute URL such as https://HOST:PORT '
                         "(the scheme https:// and a host)")
    return value


# argparse's messages in pflag's (kubectl's) words.
_ARGPARSE_MESSAGES = (
    (re.compile(r"^unrecognized arguments: (\S+).*"), r"unknown flag: \1"),
    (re.compile(r"^argument (?:-\w/)?(--[\w-]+): expected one argument$"), r"flag needs an argument: \1"),
    (re.compile(r"^argument (?:-\w/)?(--[\w-]+): invalid int value: '(.*)'$"),
     r'invalid argument "\2" for "\1" flag: strconv.ParseInt: parsing "\2": invalid syntax'),
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line on stderr instead of usage + message
        for pattern, replacement in _ARGPARSE_MESSAGES:
            if pattern.match(message):
                message = pattern.sub(replacement, message)
                break
        raise UsageError(f"{message} (see '{PROG} --help')")

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # A usage error raised by a type function keeps its own (kubectl's) message.
        if action.type in (output_format, webhook_url):
            return action.type(arg_string)
        return super()._get_value(action, arg_string)

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
        help="Manifests of Pods, Deployments, StatefulSets, ReplicaSets, DaemonSets (one pod per eligible node), "
             "Jobs or CronJobs (or Lists of them): a file, a directory, or - for standard input. Other objects "
             "are skipped with a note. Repeatable.")
    add("-R", "--recursive", action="store_true",
        help="Process the directory used in -f, --filename recursively.")
    add("--strict", action="store_true",
        help="Refuse objects that are not workloads (exit 2) instead of skipping them with a note.")
    add("-n", "--namespace", metavar="NAMESPACE",
        help="Namespace of the pods (default: the manifest's, then the context's). As with kubectl, a manifest "
             "that names another namespace is an error.")
    add("--replicas", type=int, metavar="N",
        help="With -f: how many replicas to preview (default: the workload's). With TYPE/NAME: how many replicas "
             "to add to the existing workload (default 1).")
    add("--priority-class", metavar="NAME", help="Preview the pods as if they used this PriorityClass.")
    add("--snapshot", metavar="FILE", help="Predict offline from a cluster snapshot file (no cluster needed).")
    add("--kube-version", metavar="VERSION",
        help="With --snapshot: predict as kube-scheduler of this release preempts (v1.33 .. v1.37; default "
             "v1.37). A server answers for its own release (scheduler.kubernetesVersion in its --config).")
    add("--snapshot-cache", action="store_true",
        help="With --snapshot: keep the loaded cluster in .FILE.pgcache next to the snapshot and start from it next "
             "time (any change to the file, or another PreemptGuard version, makes it stale).")
    add("--webhook-url", type=webhook_url, metavar="URL",
        help="Ask a PreemptGuard server's /preview endpoint directly (https://HOST:PORT; in a cluster its Service's "
             "preview port, 8444). A 429 with Retry-After is asked again as it says, within --request-timeout.")
    add("--token", metavar="TOKEN", help="Bearer token for --webhook-url.")
    add("--certificate-authority", metavar="FILE", help="CA bundle that verifies the --webhook-url certificate.")
    add("--insecure-skip-tls-verify", action="store_true",
        help="Do not verify the --webhook-url certificate (insecure).")
    add("--kubeconfig", metavar="PATH", help="Path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config).")
    add("--context", metavar="NAME", help="The kubeconfig context to use.")
    add("--request-timeout", default=DEFAULT_REQUEST_TIMEOUT, metavar="DURATION",
        help="How long to wait for each request to the API server or to PreemptGuard before giving up: whole "
             "seconds, or a number with a unit (1s, 2m, 3h); 0 waits as long as it takes.")
    add("-o", "--output", type=output_format, default="table", metavar="FORMAT",
        help="Output format: table, wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=SPEC (json, yaml "
             "and jsonpath read the PreemptionPreview; custom-columns has one row per pod, its results[]; name "
             "prints pod/NAME for each pod, as kubectl create -o name does).")
    add("--no-headers", action="store_true",
        help="With table or wide output, print the rows without headers; the messages and the summary line go to "
             "stderr.")
    add("--version", action=_Version, help="Print the PreemptGuard version and exit.")
    add("-h", "--help", action="help", help="help for preempt-preview")
    return parser
