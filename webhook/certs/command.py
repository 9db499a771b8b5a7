"""``preempt-guard certs``: create or renew the webhook's serving certificate and publish its CA.

In a cluster (the ``self-signed`` overlay runs it as a Job and a daily CronJob): reuse the certificate in
the TLS Secret while it has more than ``--renew-before-days`` left, otherwise issue a new CA and serving
certificate, store them, and patch ``caBundle`` into every webhook of both configurations.
``--dry-run`` prints the Secret and both patches as YAML and ``--out-dir`` writes PEM files, both
without a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import yaml

from webhook.certs.kube import CertsApi, CertsSettings, reconcile
from webhook.certs.material import ServingMaterial, describe, issue_serving_material, service_dns_names
from webhook.certs.plan import (
    MUTATING_KIND,
    VALIDATING_KIND,
    ca_bundle_patch,
    decide_renewal,
    tls_secret,
)
from webhook.errors import ConfigError, PreemptGuardError
from webhook.kubeapi import KubeClient
from webhook.routes import (
    MUTATING_WEBHOOK_CONFIGURATION,
    PODS_WEBHOOK,
    PRIORITYCLASSES_WEBHOOK,
    VALIDATING_WEBHOOK_CONFIGURATION,
)

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``preempt-guard certs``."""
    target = parser.add_argument_group("what to manage")
    target.add_argument("--namespace", default="preemptguard", help="namespace of the Service and the Secret")
    target.add_argument("--secret-name", default="preemptguard-tls", help="kubernetes.io/tls Secret to keep")
    target.add_argument("--service-name", default="preemptguard", help="Service the API server calls")
    target.add_argument("--cluster-domain", default="cluster.local", help="cluster DNS domain for the FQDN SAN")
    target.add_argument("--san", action="append", default=[], metavar="NAME",
                        help="extra subject alternative name (DNS name or IP); repeatable")
    target.add_argument("--mutating-webhook-config", default=MUTATING_WEBHOOK_CONFIGURATION, metavar="NAME",
                        help="MutatingWebhookConfiguration whose webhooks get caBundle")
    target.add_argument("--validating-webhook-config", default=VALIDATING_WEBHOOK_CONFIGURATION, metavar="NAME",
                        help="ValidatingWebhookConfiguration whose webhooks get caBundle")
    lifetime = parser.add_argument_group("certificate lifetime")
    lifetime.add_argument("--days", type=int, default=365, help="validity of a new CA and serving certificate")
    lifetime.add_argument("--renew-before-days", type=int, default=30,
                          help="issue a new certificate when the stored one expires within this many days")
    lifetime.add_argument("--force", action="store_true", help="issue a new certificate even if the stored is sound")
    cluster = parser.add_argument_group("cluster access")
    cluster.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    cluster.add_argument("--context", default=None, help="kubeconfig context")
    cluster.add_argument("--in-cluster", action="store_true", default=None,
                         help="use the pod's service account (default inside a pod)")
    local = parser.add_argument_group("without a cluster")
    local.add_argument("--dry-run", action="store_true",
                       help="print the Secret and the two caBundle patches as YAML; contact no cluster")
    local.add_argument("--out-dir", type=Path, default=None,
                       help="write tls.crt, tls.key and ca.crt here (reused while still sound); contact no cluster")


def settings_from_args(args: argparse.Namespace) -> CertsSettings:
    if args.days <= 0:
        raise ConfigError(f"--days must be positive, got {args.days}")
    if not 0 <= args.renew_before_days < args.days:
        raise ConfigError(f"--renew-before-days must be at least 0 and less than --days ({args.days}), "
                          f"got {args.renew_before_days}")
    sans = service_dns_names(args.service_name, args.namespace, args.cluster_domain)
    sans += [san for san in args.san if san not in sans]
    return CertsSettings(
        namespace=args.namespace,
        secret_name=args.secret_name,
        sans=tuple(sans),
        mutating_configuration=args.mutating_webhook_config,
        validating_configuration=args.validating_webhook_config,
        days=args.days,
        renew_before=datetime.timedelta(days=args.renew_before_days),
        force=args.force,
    )


def dry_run_documents(settings: CertsSettings, material: ServingMaterial) -> list[dict[str, Any]]:
    """The Secret and the two strategic merge patches the cluster mode would send for fresh ``material``."""
    return [
        tls_secret(settings.namespace, settings.secret_name, material),
        ca_bundle_patch(MUTATING_KIND, settings.mutating_configuration, [PODS_WEBHOOK], material.ca_bundle_pem),
        ca_bundle_patch(VALIDATING_KIND, settings.validating_configuration, [PRIORITYCLASSES_WEBHOOK],
                        material.ca_bundle_pem),
    ]


def print_dry_run(settings: CertsSettings, material: ServingMaterial, out: TextIO) -> None:
    out.write("# preempt-guard certs --dry-run: the Secret, then the strategic merge patches "
              "(Content-Type: application/strategic-merge-patch+json) for both webhook configurations.\n")
    out.write("# The Secret holds a private key: do not paste this output anywhere.\n")
    yaml.safe_dump_all(dry_run_documents(settings, material), out, sort_keys=False, explicit_start=True)


def _read_files(out_dir: Path) -> ServingMaterial | None:
    paths = [out_dir / "tls.crt", out_dir / "tls.key", out_dir / "ca.crt"]
    if not all(path.is_file() for path in paths):
        return None
    cert, key, ca = (path.read_bytes() for path in paths)
    return ServingMaterial(cert, key, ca)


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def write_out_dir(settings: CertsSettings, out_dir: Path, now: datetime.datetime) -> ServingMaterial:
    """Keep PEM files in ``out_dir`` with the same reuse-or-renew rule as the Secret; returns what is there."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stored = _read_files(out_dir)
    decision = decide_renewal(stored, settings.sans, now, settings.renew_before, force=settings.force)
    if not decision.renew and stored is not None:
        log.info("%s: %s (%s); reusing it", out_dir, decision.reason, describe(stored.cert_pem))
        return stored
    material = issue_serving_material(settings.sans, settings.days,
                                      previous_bundle_pem=stored.ca_bundle_pem if stored else b"", now=now)
    # Key before certificate: a server re-reading the pair never sees a new certificate with an old key
    # for longer than one write.
    _write_private(out_dir / "tls.key", material.key_pem)
    _write_private(out_dir / "tls.crt", material.cert_pem)
    _write_private(out_dir / "ca.crt", material.ca_bundle_pem)
    log.info("%s: %s; wrote %s", out_dir, decision.reason, describe(material.cert_pem))
    return material


async def _run_in_cluster(args: argparse.Namespace, settings: CertsSettings) -> None:
    api = await KubeClient.connect(kubeconfig=args.kubeconfig, context=args.context, in_cluster=args.in_cluster)
    try:
        await reconcile(CertsApi(api), settings)
    finally:
        await api.close()


def run(args: argparse.Namespace) -> int:
    """Run ``preempt-guard certs``; 0 on success, the error's exit code (one line on stderr) otherwise."""
    if not logging.getLogger().handlers:
        # Through `preempt-guard certs` nothing has configured logging yet; the Job's log is the audit trail.
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            stream=sys.stderr)
    try:
        settings = settings_from_args(args)
        now = datetime.datetime.now(datetime.UTC)
        if args.dry_run or args.out_dir is not None:
            if args.out_dir is not None:
                material = write_out_dir(settings, args.out_dir, now)
            else:
                material = issue_serving_material(settings.sans, settings.days, previous_bundle_pem=b"", now=now)
            if args.dry_run:
                print_dry_run(settings, material, sys.stdout)
            return 0
        asyncio.run(_run_in_cluster(args, settings))
        return 0
    except PreemptGuardError as exc:
        print(f"preempt-guard certs: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # the kube client's own errors: one line, never a traceback with key material
        print(f"preempt-guard certs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2

