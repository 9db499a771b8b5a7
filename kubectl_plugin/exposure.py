"""``kubectl preempt-preview exposure``: which of a namespace's running pods could be preempted, and by which
PriorityClasses (docs/interfaces.md §5 and §7).

From a cluster it reads the PolicyReport ``preemptguard-exposure`` the PreemptGuard server keeps in the
namespace (``serve --exposure-reports``), with the caller's own RBAC: a tenant reads its namespaces' reports and
no other. With ``--snapshot FILE`` it computes the same report offline with the server's own code
(``webhook.exposure``), ``--config`` supplying the quota rules and the tenant label the server would use. Either
way one document: ``-o json``/``yaml`` print a ``v1`` List of PolicyReports; the table is read from it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import yaml

from kubectl_plugin.options import PROG, UsageError
from kubectl_plugin.render import NONE, table
from kubectl_plugin.sources import kube_api
from kubectl_plugin.sources.http import DEFAULT_REQUEST_TIMEOUT, RequestTimeout
from webhook.config import Config, load_config
from webhook.errors import ApiError, ClusterUnavailable, Forbidden, InvalidInput
from webhook.exposure.report import (
    API_VERSION,
    CLASS_PROPERTY_PREFIX,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    REPORT_NAME,
    RULE_BAND,
    RULE_PDB,
    policy_report,
    report_list,
)

OUTPUTS = ("table", "json", "yaml")
USAGE = """\
  kubectl preempt-preview exposure [-n NAMESPACE | -A] [--snapshot FILE [--config FILE]] [--kubeconfig PATH]
      [--context NAME] [-o table|json|yaml] [--no-headers]"""
DESCRIPTION = """\
Show which of a namespace's running pods other workloads could preempt: its pods by priority band, the
PriorityClasses that could preempt each band (a higher value and preemptionPolicy PreemptLowerPriority) with how
many other tenants may use each class (never which), and how many pods each PodDisruptionBudget protects.

From the cluster it reads the PolicyReport preemptguard-exposure that PreemptGuard keeps in the namespace (you
need list or get on policyreports there, which the view role gives where the exposure-reports component is
installed). With --snapshot it computes the same report offline from a cluster snapshot file."""
EXAMPLES = """\
  # Your namespace's exposure, from the cluster
  kubectl preempt-preview exposure -n team-a

  # Every namespace of a snapshot, with the quota rules of PreemptGuard's configuration, as JSON
  kubectl preempt-preview exposure --snapshot cluster.yaml --config config.yaml -o json"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{PROG} exposure --help')")

    def format_help(self) -> str:
        lines = [f"    {', '.join(a.option_strings)}: {a.help}" for a in self._actions if a.option_strings]
        return f"{DESCRIPTION}\n\nExamples:\n{EXAMPLES}\n\nOptions:\n" + "\n".join(lines) + f"\n\nUsage:\n{USAGE}\n"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{PROG} exposure", add_help=False)
    add = parser.add_argument
    add("-n", "--namespace", metavar="NAMESPACE",
        help="The namespace (default: the context's; with --snapshot, every namespace).")
    add("-A", "--all-namespaces", action="store_true", help="Every namespace whose report you may list.")
    add("--snapshot", metavar="FILE", help="Compute the reports offline from a cluster snapshot file.")
    add("--config", metavar="FILE",
        help="With --snapshot: PreemptGuard's configuration file (quota.classes, limitedResources, tenantLabel).")
    add("--kubeconfig", metavar="PATH", help="Path to the kubeconfig file.")
    add("--context", metavar="NAME", help="The kubeconfig context to use.")
    add("--request-timeout", default=DEFAULT_REQUEST_TIMEOUT, metavar="DURATION",
        help="How long to wait for each request to the API server (0: as long as it takes).")
    add("-o", "--output", default="table", choices=OUTPUTS, metavar="FORMAT", help="table, json or yaml.")
    add("--no-headers", action="store_true", help="With table output, print the rows without headers.")
    add("-h", "--help", action="help", help="help for exposure")
    return parser


def validate(args: argparse.Namespace) -> None:
    if args.namespace and args.all_namespaces:
        raise UsageError("give either -n NAMESPACE or -A, not both")
    if args.config and not args.snapshot:
        raise UsageError("--config applies to --snapshot (the server reads its own configuration)")
    if args.snapshot and (args.kubeconfig or args.context):
        raise UsageError("--snapshot reads no cluster: --kubeconfig and --context do not apply")
    try:
        args.request_timeout = RequestTimeout.parse(args.request_timeout)
    except ValueError as exc:
        raise UsageError(f"--request-timeout {args.request_timeout}: {exc}") from exc


# ---- where the reports come from ----------------------------------------------------------------------------
def snapshot_reports(path: str, config: Config, namespace: str | None) -> list[dict[str, Any]]:
    """The reports of a snapshot, computed as the server computes them."""
    from webhook.exposure import compute_exposure
    from webhook.exposure.compute import known_namespaces
    from webhook.sources.loader import load_snapshot

    if not Path(path).is_file():
        raise InvalidInput(f"--snapshot {path}: file not found")
    state = load_snapshot(path, require_cluster=True)
    if namespace is not None and namespace not in known_namespaces(state):
        raise InvalidInput(f'namespace "{namespace}" is not in the snapshot {path}')
    chosen = None if namespace is None else [namespace]
    now = int(time.time())
    return [policy_report(exposure, timestamp=now) for exposure in compute_exposure(state, config, chosen)]


async def cluster_reports(args: argparse.Namespace, environ: Mapping[str, str]) -> list[dict[str, Any]]:
    client = await kube_api.connect(kubeconfig=args.kubeconfig, context=args.context, environ=environ,
                                    timeout=args.request_timeout)
    try:
        if args.all_namespaces:
            path = f"/apis/{API_VERSION}/policyreports"
            where = "in any namespace"
        else:
            namespace = args.namespace or client.namespace
            path = f"/apis/{API_VERSION}/namespaces/{namespace}/policyreports/{REPORT_NAME}"
            where = f'in namespace "{namespace}"'
        try:
            document = await client.get(path, query=(("labelSelector", f"{MANAGED_BY_LABEL}={MANAGED_BY}"),)
                                        if args.all_namespaces else ())
        except ApiError as exc:
            if exc.code == 404:
                raise InvalidInput(f"no PreemptGuard exposure report {where}: the server writes it with "
                                   "--exposure-reports (the exposure-reports component), or use --snapshot FILE"
                                   ) from exc
            if exc.code == 403:
                raise Forbidden(exc.message) from exc
            if exc.code == 401:
                raise
            raise ClusterUnavailable(f"GET {path}: HTTP {exc.code}: {exc.message}") from exc
    finally:
        await client.close()
    if args.all_namespaces:
        items = [item for item in document.get("items") or () if (item.get("metadata") or {}).get("name") ==
                 REPORT_NAME]
        return sorted(items, key=lambda r: str(r["metadata"].get("namespace")))
    return [document]


# ---- printing ---------------------------------------------------------------------------------------------------
def _class_cell(name: str, properties: Mapping[str, str]) -> str:
    described = properties.get(CLASS_PROPERTY_PREFIX + name, "")
    fields = dict(part.split("=", 1) for part in described.split() if "=" in part)
    others = fields.get("otherTenants", "?")
    tenants = "1 other tenant" if others == "1" else f"{others} other tenants"
    return f"{name} ({fields.get('value', '?')}; {tenants})"


def band_rows(reports: Sequence[Mapping[str, Any]]) -> list[list[tuple[str, str]]]:
    rows = []
    for report in reports:
        namespace = str((report.get("scope") or {}).get("name") or report["metadata"].get("namespace"))
        for result in report.get("results") or ():
            if result.get("rule") != RULE_BAND:
                continue
            props = result.get("properties") or {}
            classes = [c for c in props.get("preemptingClasses", "").split(",") if c]
            rows.append([(namespace, ""), (props.get("priority", ""), ""), (props.get("priorityClasses") or NONE, ""),
                         (props.get("runningPods", ""), ""), (props.get("pdbProtectedPods", ""), ""),
                         (", ".join(_class_cell(c, props) for c in classes) or NONE, "")])
    return rows


def pdb_rows(reports: Sequence[Mapping[str, Any]]) -> list[list[tuple[str, str]]]:
    rows = []
    for report in reports:
        namespace = str((report.get("scope") or {}).get("name") or report["metadata"].get("namespace"))
        for result in report.get("results") or ():
            if result.get("rule") != RULE_PDB:
                continue
            props = result.get("properties") or {}
            name = ((result.get("resources") or [{}])[0]).get("name", "")
            rows.append([(namespace, ""), (name, ""), (props.get("protectedPods", ""), ""),
                         (props.get("disruptionsAllowed", ""), "")])
    return rows


def render(reports: Sequence[Mapping[str, Any]], output: str, *, no_headers: bool = False) -> str:
    if output == "json":
        return json.dumps(report_list(reports), indent=2) + "\n"
    if output == "yaml":
        return str(yaml.safe_dump(report_list(reports), sort_keys=False, default_flow_style=False, width=1 << 16))
    bands = band_rows(reports)
    if not bands and not pdb_rows(reports):
        return "No running pods.\n"
    lines = table(["NAMESPACE", "PRIORITY", "CLASSES", "RUNNING", "PDB-PROTECTED", "PREEMPTIBLE-BY"], bands,
                  colour=False, headers=not no_headers)
    pdbs = pdb_rows(reports)
    if pdbs:
        lines += ["", *table(["NAMESPACE", "PODDISRUPTIONBUDGET", "PODS", "DISRUPTIONS-ALLOWED"], pdbs, colour=False,
                             headers=not no_headers)]
    return "".join(f"{line}\n" for line in lines)


async def run(words: Sequence[str], stdout: TextIO, environ: Mapping[str, str]) -> int:
    args = build_parser().parse_args(list(words))
    validate(args)
    if args.snapshot:
        config = load_config(Path(args.config)) if args.config else Config()
        reports = await asyncio.to_thread(snapshot_reports, args.snapshot, config, args.namespace)
    else:
        reports = await cluster_reports(args, environ)
    stdout.write(render(reports, args.output, no_headers=args.no_headers))
    return 0
