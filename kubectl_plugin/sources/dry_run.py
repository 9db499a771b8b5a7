"""The default source: a server-side dry-run create of every pod through the API server of the kubeconfig.

The API server authenticates the user, runs admission (so the PreemptGuard webhook sees who asks and answers
with the full ``PreemptionPreview`` in the ``preemptguard.io/prediction`` annotation of the returned object)
and persists nothing. Because nothing is persisted, a workload's replicas are each predicted against the
cluster as it is, not after the earlier replicas' placement and evictions; every result after the first says
so in its message. ``--webhook-url`` simulates replicas in order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubectl_plugin.inputs import JsonObject, flatten, pod_manifests
from kubectl_plugin.render import Progress
from kubectl_plugin.sources.document import PreviewAnswer, rejected_result
from webhook.cluster.model import Node
from webhook.cluster.reader import node_from_dict
from webhook.errors import ApiError, ClusterUnavailable, Forbidden, InvalidInput, PreemptGuardError
from webhook.kubeapi import ApiAnswer, KubeClient
from webhook.preemption.preview import preview_document
from webhook.routes import PREDICTION_ANNOTATION

SEQUENTIAL_NOTE = ("dry run: predicted against the cluster as it is, without the earlier replicas' placement "
                   "(a dry-run create changes nothing); use --webhook-url for an in-order simulation")


class WebhookNotInstalled(PreemptGuardError):
    """The dry-run create came back without PreemptGuard's prediction."""


DRY_RUN = (("dryRun", "All"),)
_RBAC_FORBIDDEN = re.compile(r'\bUser ".*" cannot \S+ resource\b')


@dataclass(slots=True)
class ClusterPreviewSource:
    """Server-side dry-run creates of every pod, in order, read back from the prediction annotation."""

    cluster: KubeClient
    results: list[JsonObject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer:
        ns = namespace or self.cluster.namespace
        flat = flatten(objects)
        nodes = await self.list_nodes() if any(obj.get("kind") == "DaemonSet" for obj in flat) else None
        pods = [pod for obj in flat
                for pod in pod_manifests(obj, namespace=_object_namespace(obj, namespace, ns), replicas=replicas,
                                         nodes=nodes)]
        progress.start(len(pods), "dry-run create")
        for index, pod in enumerate(pods):
            result = await self.dry_run_pod(pod)
            if index > 0:
                result["message"] = f"{result.get('message') or ''} ({SEQUENTIAL_NOTE})".lstrip()
            self.results.append(result)
            progress.advance()
        progress.finish()
        return PreviewAnswer(preview_document(self.results), _unique(self.warnings))

    async def list_nodes(self) -> list[Node]:
        """The cluster's nodes, for a DaemonSet's pods (one per eligible node): needs ``list nodes``."""
        try:
            body = await self.cluster.get("/api/v1/nodes")
        except ApiError as exc:
            if exc.code == 403:
                raise Forbidden(f"a DaemonSet's preview lists the nodes: {exc.message}") from exc
            if exc.code == 401:
                raise
            raise ClusterUnavailable(f"cannot list nodes: HTTP {exc.code}: {exc.message}") from exc
        items = body.get("items")
        return [node_from_dict(item) for item in items or [] if isinstance(item, dict)]

    async def dry_run_pod(self, pod: JsonObject) -> JsonObject:
        namespace = pod["metadata"]["namespace"]
        path = f"/api/v1/namespaces/{namespace}/pods"
        try:
            try:
                answer = await self.cluster.request("POST", path, query=DRY_RUN, body=pod)
            except ApiError as exc:
                if exc.code != 409 or not pod["metadata"].get("name"):
                    raise
                # A pod of that name exists: preview another one like it under a generated name.
                renamed = {**pod, "metadata": {**pod["metadata"], "generateName": pod["metadata"]["name"] + "-"}}
                del renamed["metadata"]["name"]
                answer = await self.cluster.request("POST", path, query=DRY_RUN, body=renamed)
        except ApiError as exc:
            self.warnings += exc.warnings
            return self._refusal(pod, exc)
        self.warnings += answer.warnings
        return self._prediction(answer)

    def _prediction(self, answer: ApiAnswer) -> JsonObject:
        created = answer.json()
        annotations = ((created or {}).get("metadata") or {}).get("annotations") or {}
        value = annotations.get(PREDICTION_ANNOTATION) if isinstance(annotations, Mapping) else None
        if not isinstance(value, str):
            said = f" (it warned: {answer.warnings[0]})" if answer.warnings else ""
            raise WebhookNotInstalled(f"PreemptGuard webhook is not installed or did not answer: the dry-run "
                                      f"create on {self.cluster.server} returned no {PREDICTION_ANNOTATION} "
                                      f"annotation{said}")
        try:
            document = json.loads(value)
        except ValueError as exc:
            raise WebhookNotInstalled(f"the {PREDICTION_ANNOTATION} annotation is not JSON") from exc
        if not isinstance(document, Mapping) or not isinstance(document.get("results"), list):
            raise WebhookNotInstalled(f"the PreemptGuard webhook answered with a short {PREDICTION_ANNOTATION} "
                                      "(no results): it is older than this plugin; upgrade it or use --webhook-url")
        results = document["results"]
        if len(results) != 1 or not isinstance(results[0], dict):
            raise InvalidInput(f"the {PREDICTION_ANNOTATION} annotation has {len(results)} results, expected 1")
        result: JsonObject = results[0]
        return result

    def _refusal(self, pod: JsonObject, refused: ApiError) -> JsonObject:
        """A refused create is a ``Rejected`` pod, unless the refusal is about the user or the request."""
        message = refused.message
        if refused.code == 401:
            raise refused
        if refused.code == 403 and _RBAC_FORBIDDEN.search(message):
            raise Forbidden(message)
        if refused.code == 404:
            raise InvalidInput(message)
        denied_by_webhook = message.startswith("admission webhook ") and " denied the request" in message
        # 403: admission plugin Forbidden; 422: validation; 500 + "insufficient quota": the ResourceQuota
        # plugin's plain error (docs/admission.md §3).
        if denied_by_webhook or refused.code in (403, 422) or (
                refused.code == 500 and message.startswith("insufficient quota")):
            return rejected_result(pod, message)
        raise ClusterUnavailable(f"the API server refused the dry-run create: HTTP {refused.code}: {message}")


def _object_namespace(obj: Mapping[str, Any], explicit: str | None, context_namespace: str) -> str:
    """``-n`` wins, then the object's namespace, then the kubeconfig context's namespace (as kubectl does)."""
    meta = obj.get("metadata") or {}
    return explicit or (meta.get("namespace") if isinstance(meta, Mapping) else None) or context_namespace


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
