"""``preempt-guard demo``: the real server on 127.0.0.1 over self-signed TLS, fed pod manifests the way the
kube-apiserver would send them (AdmissionReview CREATE to /mutate/pods), one line printed per pod.

A workload manifest (Deployment, StatefulSet, ReplicaSet, Job, CronJob) is sent as one pod of its template,
named ``<name>-`` by generateName, created by the demo user (the demo does not impersonate controllers).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import yaml

from webhook.config import DEFAULT_CONFIG, Config, load_config
from webhook.errors import InvalidInput
from webhook.preemption.results import Outcome
from webhook.preemption.workloads import WORKLOAD_KINDS, pod_template
from webhook.routes import MUTATE_PODS_PATH, PREDICTION_ANNOTATION
from webhook.server.logs import configure_logging
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.sources.source import SnapshotSource

DEMO_USER = {"username": "demo-user@example.com", "uid": "demo-user", "groups": ["system:authenticated"]}


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster-snapshot", metavar="FILE",
                        help="cluster snapshot to serve from (default: the example cluster shipped in the package)")
    parser.add_argument("--config", metavar="FILE", help="PreemptGuard configuration file (default: none)")
    parser.add_argument("pods", nargs="*", metavar="FILE",
                        help="pod manifests to send (default: the pods/*.yaml beside the snapshot)")


@dataclass(frozen=True, slots=True)
class DemoPod:
    label: str  # file name, and the workload when the pod comes from a template
    namespace: str
    pod: dict[str, Any]


def _yaml_documents(path: Path) -> list[Any]:
    try:
        return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidInput(f"{path}: cannot read the manifest: {exc}") from exc


def pods_of(path: Path) -> Iterator[DemoPod]:
    """The pods a manifest file asks for: each Pod, and one pod per workload template."""
    for index, doc in enumerate(_yaml_documents(path)):
        if not isinstance(doc, dict):
            raise InvalidInput(f"{path}: document {index} is not a Kubernetes object")
        raw_meta = doc.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        namespace = str(meta.get("namespace") or "default")
        kind = doc.get("kind")
        if kind == "Pod":
            yield DemoPod(path.name, namespace, doc)
        elif kind in WORKLOAD_KINDS:
            template, _ = pod_template(doc)
            template_meta = dict(template.get("metadata") or {})
            template_meta.update({"generateName": f"{meta.get('name', 'pod')}-", "namespace": namespace})
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": template_meta, "spec": template.get("spec") or {}}
            yield DemoPod(f"{path.name} ({kind} pod)", namespace, pod)
        else:
            raise InvalidInput(f"{path}: document {index} is a {kind}, not a Pod or workload")


def create_request(item: DemoPod) -> dict[str, Any]:
    """The AdmissionReview the kube-apiserver sends for ``kubectl create`` of this pod."""
    meta = item.pod.get("metadata") or {}
    return admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": str(meta.get("name") or ""),
        "namespace": item.namespace,
        "operation": "CREATE",
        "userInfo": DEMO_USER,
        "object": item.pod,
        "oldObject": None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    })


@dataclass(frozen=True, slots=True)
class Patched:
    """What the response's JSONPatch sets: spec.priority, spec.priorityClassName, the prediction annotation."""

    priority: int | None = None
    class_name: str = ""
    prediction: Mapping[str, Any] | None = None


def read_patch(response: Mapping[str, Any]) -> Patched:
    priority: int | None = None
    class_name = ""
    annotation: object = None
    patch = response.get("patch")
    for op in json.loads(base64.b64decode(patch)) if isinstance(patch, str) else ():
        path, value = op.get("path"), op.get("value")
        if path == "/spec/priority":
            priority = value
        elif path == "/spec/priorityClassName":
            class_name = str(value or "")
        elif path == "/metadata/annotations" and isinstance(value, dict):
            annotation = value.get(PREDICTION_ANNOTATION)
        elif path == "/metadata/annotations/" + PREDICTION_ANNOTATION.replace("/", "~1"):
            annotation = value
    prediction = json.loads(annotation) if isinstance(annotation, str) else None
    return Patched(priority, class_name, prediction if isinstance(prediction, dict) else None)


def _prediction_note(prediction: Mapping[str, Any] | None) -> str:
    if prediction is None or prediction.get("outcome") != Outcome.FITS:
        return ""
    return f"; fits on {prediction.get('node')} without preemption"


def describe(item: DemoPod, response: Mapping[str, Any]) -> str:
    """One line: what the webhook answered for this pod."""
    warnings = "; ".join(response.get("warnings") or ())
    if not response.get("allowed"):
        status = response.get("status") or {}
        reason = status.get("reason") or "Unknown"
        return f"{item.label}: denied ({status.get('code')} {reason}): {status.get('message')}"
    patched = read_patch(response)
    spec = item.pod.get("spec") or {}
    class_name = patched.class_name or str(spec.get("priorityClassName") or "")
    priority = patched.priority if patched.priority is not None else spec.get("priority")
    head = f"{item.label}: allowed, priority {priority}" + (f" ({class_name})" if class_name else "")
    return f"{head}; {warnings}" if warnings else head + _prediction_note(patched.prediction)


def default_pod_files(snapshot: Path) -> list[Path]:
    return sorted((snapshot.parent / "pods").glob("*.yaml"))


async def run_demo_async(snapshot: Path, config: Config, files: Sequence[Path], out: TextIO) -> int:
    source = SnapshotSource(snapshot)
    items = [item for path in files for item in pods_of(path)]
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True)
    # As a kube-apiserver configured for --client-ca: authenticated, so the requester's own tenant is named.
    async with LoopbackWebhook(source, settings, config=config, as_api_server=True) as hook:
        for item in items:
            status, body = await hook.post_json(MUTATE_PODS_PATH, create_request(item))
            if status != 200:
                out.write(f"{item.label}: HTTP {status}: {body}\n")
                continue
            out.write(describe(item, body["response"]) + "\n")
    return 0


def bundled_example_cluster() -> Path:
    """examples/cluster.yaml as the package ships it (its pods/ beside it), in a checkout or an installed wheel."""
    return Path(str(resources.files("webhook") / "examples" / "cluster.yaml"))


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    configure_logging("warning")
    snapshot = Path(args.cluster_snapshot) if args.cluster_snapshot else bundled_example_cluster()
    config = load_config(args.config) if args.config else DEFAULT_CONFIG
    files = [Path(p) for p in args.pods] or default_pod_files(snapshot)
    if not files:
        raise InvalidInput(f"no pod manifests given and none found in {snapshot.parent / 'pods'}")
    out = out or sys.stdout
    code = asyncio.run(run_demo_async(snapshot, config, files, out))
    out.flush()  # here, where the program's entry can still handle a closed pipe (`preempt-guard demo | head -1`)
    return code
