"""The pod of one AdmissionReview, read once.

``read_pod_review`` type-checks ``request.object`` (and ``request.oldObject`` on UPDATE) into the typed
``Pod`` of ``webhook.cluster.model``; priority resolution, quota, the prediction and the guardrails all read
that value. The raw object is kept only as the document the JSONPatch is built against.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.admission.patch import JsonPatchBuilder
from webhook.admission.review import AdmissionRequest
from webhook.cluster.copying import replace_fields
from webhook.cluster.jsonfields import INT32_MAX, INT32_MIN, JsonObject, json_required_object
from webhook.cluster.model import Pod
from webhook.cluster.reader import pod_from_dict
from webhook.errors import InvalidInput

PODS_RESOURCE = "pods"
POD_KIND = "Pod"


def is_pod_admission(request: AdmissionRequest) -> bool:
    """The Priority plugin mutates only CREATE and UPDATE of ``pods`` itself (no subresource)."""
    return request.targets("", PODS_RESOURCE) and request.operation in ("CREATE", "UPDATE")


@dataclass(slots=True)  # built for every review: no frozen-init cost
class PodReview:
    """One pod admission as the pipeline carries it from stage to stage."""

    request: AdmissionRequest
    # The typed pod as mutated so far (after the Priority plugin: the resolved priority fields).
    pod: Pod
    old_pod: Pod | None
    # Where the pod is created: the request's namespace, else the object's, else ``default``.
    namespace: str
    # admission.extractResourceName: the request name, else the object's name or generateName, else Unknown.
    name_for_messages: str
    # JSONPatch operations on ``request.object`` so far.
    patch: JsonPatchBuilder

    @property
    def is_create(self) -> bool:
        return self.request.operation == "CREATE"


def read_pod(obj: JsonObject, path: str) -> Pod:
    """The typed pod of an AdmissionReview object; a malformed one raises ``InvalidInput`` naming the field."""
    kind = obj.get("kind")
    if kind is not None and kind != POD_KIND:
        shown = kind[:60] if isinstance(kind, str) else type(kind).__name__
        raise InvalidInput(f"{path} is not a Pod (kind {shown!r})")
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version != "v1":
        raise InvalidInput(f"{path}.apiVersion must be v1 for a Pod")
    try:
        pod = pod_from_dict(obj)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}.{exc}") from exc
    if pod.priority is not None and not INT32_MIN <= pod.priority <= INT32_MAX:
        raise InvalidInput(f"{path}.spec.priority: expected a 32-bit integer, got {pod.priority}")
    return pod


def read_pod_review(request: AdmissionRequest) -> PodReview:
    """Read the pod (and, on UPDATE, the old pod) once; ``InvalidInput`` (HTTP 400) when they are not pods."""
    obj = json_required_object(request.object, "request.object")
    pod = read_pod(obj, "request.object")
    if request.namespace and pod.namespace != request.namespace:
        pod = replace_fields(pod, namespace=request.namespace)  # the API server creates it in the request's
    old_pod = None
    if request.operation == "UPDATE":
        old_pod = read_pod(json_required_object(request.old_object, "request.oldObject"), "request.oldObject")
    return PodReview(request, pod, old_pod, pod.namespace, request.name or pod.name or "Unknown",
                     JsonPatchBuilder(obj))
