"""AdmissionReview ``admission.k8s.io/v1``: typed parsing of requests, building of responses and JSONPatches.

Everything the API server sends is checked here once with the readers of ``webhook.cluster.jsonfields``; a
body that is not a well-formed AdmissionReview raises ``InvalidInput`` (HTTP 400) naming the offending field,
so the admission logic only sees typed values.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast, get_args

import orjson

from webhook.admission.decision import AdmissionDecision
from webhook.admission.patch import encode_patch
from webhook.cluster.jsonfields import (
    JsonObject,
    json_bool,
    json_optional_object,
    json_required_object,
    json_required_str,
    json_str,
    json_str_list,
)
from webhook.errors import InvalidInput
from webhook.identity import UserInfo

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_REVIEW_KIND = "AdmissionReview"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
OPERATIONS: tuple[str, ...] = get_args(Operation)


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict):
    group: str
    version: str
    resource: str


class Status(TypedDict):
    """metav1.Status as carried in an AdmissionResponse."""

    metadata: dict[str, str]
    status: Literal["Success", "Failure"]
    code: int
    reason: str
    message: str


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[Status]
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class AdmissionReviewResponse(TypedDict):
    apiVersion: str
    kind: str
    response: AdmissionResponse


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    sub_resource: str
    name: str
    namespace: str
    operation: Operation
    user_info: UserInfo
    object: JsonObject | None
    old_object: JsonObject | None
    dry_run: bool = False
    options: JsonObject | None = None
    request_kind: GroupVersionKind | None = None
    request_resource: GroupVersionResource | None = None
    request_sub_resource: str = ""

    def targets(self, group: str, resource: str) -> bool:
        """The request is for ``group/resource`` itself (no subresource)."""
        return self.resource["group"] == group and self.resource["resource"] == resource and not self.sub_resource


# ---- parsing ------------------------------------------------------------------------------------
def decode_json(body: bytes | bytearray | memoryview | str) -> object:
    """Strict RFC 8259 JSON (UTF-8, no NaN/Infinity, at most 1,024 levels deep); any problem is ``InvalidInput``."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise InvalidInput("request body is nested too deeply") from exc
        raise InvalidInput(f"request body is not valid JSON: {_short(str(exc))}") from exc


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _group_version(value: object, path: str, last: str) -> tuple[str, str, str]:
    """(group, version, kind or resource) of a GroupVersionKind/GroupVersionResource object."""
    raw = json_required_object(value, path)
    group, version, name = raw.get("group"), raw.get("version"), raw.get(last)
    if type(group) is str and type(version) is str and type(name) is str:  # well-formed: no paths to build
        return group, version, name
    return (json_str(group, f"{path}.group"), json_str(version, f"{path}.version"),
            json_required_str(name, f"{path}.{last}"))


def _group_version_kind(value: object, path: str) -> GroupVersionKind:
    group, version, kind = _group_version(value, path, "kind")
    return GroupVersionKind(group=group, version=version, kind=kind)


def _group_version_resource(value: object, path: str) -> GroupVersionResource:
    group, version, resource = _group_version(value, path, "resource")
    return GroupVersionResource(group=group, version=version, resource=resource)


def _user_info(value: object, path: str) -> UserInfo:
    raw = json_optional_object(value, path) or {}
    extra_raw = json_optional_object(raw.get("extra"), f"{path}.extra") or {}
    return UserInfo(
        username=json_str(raw.get("username"), f"{path}.username"),
        uid=json_str(raw.get("uid"), f"{path}.uid"),
        groups=tuple(json_str_list(raw.get("groups"), f"{path}.groups")),
        extra={key: tuple(json_str_list(val, f"{path}.extra.{key}")) for key, val in extra_raw.items()},
    )


def _operation(value: object, path: str) -> Operation:
    operation = json_required_str(value, path)
    if operation not in OPERATIONS:
        raise InvalidInput(f"{path} must be one of {', '.join(OPERATIONS)}, got {_short(operation, 40)!r}")
    return cast(Operation, operation)


def parse_admission_review(document: object) -> AdmissionRequest:
    """The request of an ``admission.k8s.io/v1`` AdmissionReview, every field type-checked."""
    review = json_required_object(document, "AdmissionReview")
    api_version = review.get("apiVersion")
    if api_version != ADMISSION_API_VERSION:
        raise InvalidInput(f"apiVersion must be {ADMISSION_API_VERSION}, got {_short(repr(api_version), 60)}")
    if review.get("kind") != ADMISSION_REVIEW_KIND:
        raise InvalidInput(f"kind must be {ADMISSION_REVIEW_KIND}, got {_short(repr(review.get('kind')), 60)}")
    if review.get("request") is None:
        raise InvalidInput("request is required")
    raw = json_required_object(review["request"], "request")
    uid = json_required_str(raw.get("uid"), "request.uid")
    if not uid:
        raise InvalidInput("request.uid must not be empty")
    request_kind = raw.get("requestKind")
    request_resource = raw.get("requestResource")
    return AdmissionRequest(
        uid=uid,
        kind=_group_version_kind(raw.get("kind"), "request.kind"),
        resource=_group_version_resource(raw.get("resource"), "request.resource"),
        sub_resource=json_str(raw.get("subResource"), "request.subResource"),
        name=json_str(raw.get("name"), "request.name"),
        namespace=json_str(raw.get("namespace"), "request.namespace"),
        operation=_operation(raw.get("operation"), "request.operation"),
        user_info=_user_info(raw.get("userInfo"), "request.userInfo"),
        object=json_optional_object(raw.get("object"), "request.object"),
        old_object=json_optional_object(raw.get("oldObject"), "request.oldObject"),
        dry_run=json_bool(raw.get("dryRun"), "request.dryRun"),
        options=json_optional_object(raw.get("options"), "request.options"),
        request_kind=None if request_kind is None else _group_version_kind(request_kind, "request.requestKind"),
        request_resource=(
            None if request_resource is None else _group_version_resource(request_resource, "request.requestResource")
        ),
        request_sub_resource=json_str(raw.get("requestSubResource"), "request.requestSubResource"),
    )


_SPACE = re.compile(r"[ \t\n\r]*")
_HEAD_DECODER = json.JSONDecoder()
# The fields of ``request`` that hold objects; a head stops before them.
_OBJECT_FIELDS = frozenset({"object", "oldObject"})


def _head_fields(text: str) -> dict[str, Any]:
    """The AdmissionReview's top-level fields and its request's fields up to its first object field, from a
    prefix of the document (stops quietly where the prefix ends)."""
    top: dict[str, Any] = {}
    request: dict[str, Any] = {}
    index = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[index:index + 1] != "{":
        return top
    index += 1

    def key_at(position: int) -> tuple[str, int] | None:
        position = _SPACE.match(text, position).end()  # type: ignore[union-attr]
        if text[position:position + 1] == ",":
            position = _SPACE.match(text, position + 1).end()  # type: ignore[union-attr]
        if text[position:position + 1] != '"':
            return None
        key, position = json.decoder.scanstring(text, position + 1)  # type: ignore[attr-defined]
        position = _SPACE.match(text, position).end()  # type: ignore[union-attr]
        if text[position:position + 1] != ":":
            return None
        return key, _SPACE.match(text, position + 1).end()  # type: ignore[union-attr]

    try:
        while (found := key_at(index)) is not None:
            key, index = found
            if key != "request":
                top[key], index = _HEAD_DECODER.raw_decode(text, index)
                continue
            top["request"] = request
            if text[index:index + 1] != "{":
                return top
            index += 1
            while (field := key_at(index)) is not None:
                name, index = field
                if name in _OBJECT_FIELDS:
                    return top
                request[name], index = _HEAD_DECODER.raw_decode(text, index)
            return top
    except ValueError:  # the prefix ends inside a value (or is not JSON): keep what was read
        pass
    return top


def peek_admission_request(prefix: bytes) -> AdmissionRequest | None:
    """The request of an AdmissionReview read from the first bytes of its body, without its objects: for a body
    too large, or too late, to be decoded whole. The API server encodes ``uid``, ``kind``, ``resource``, ``name``,
    ``namespace``, ``operation`` and ``userInfo`` before ``object`` (the field order of
    k8s.io/api/admission/v1.AdmissionRequest), so they are in the first few KiB. None when they are not all there
    or are malformed; ``object`` and ``oldObject`` are then None, ``dryRun`` false unless it came first."""
    fields = _head_fields(prefix.decode("utf-8", errors="replace"))
    try:
        return parse_admission_review(fields)
    except InvalidInput:
        return None


def object_name_for_messages(request: AdmissionRequest) -> str:
    """admission.extractResourceName: the request name, else the object's name, generateName, or Unknown."""
    if request.name:
        return request.name
    obj = request.object if request.object is not None else request.old_object
    meta = obj.get("metadata") if obj is not None else None
    if isinstance(meta, dict):
        for key in ("name", "generateName"):
            value = meta.get(key)
            if isinstance(value, str) and value:
                return value
    return "Unknown"


def build_admission_response(uid: str, decision: AdmissionDecision) -> AdmissionReviewResponse:
    """The AdmissionReview v1 the API server expects back, with ``response.uid`` = ``request.uid``."""
    response = AdmissionResponse(uid=uid, allowed=decision.allowed)
    if decision.status is not None:
        response["status"] = Status(
            metadata={},
            status="Success" if decision.allowed else "Failure",
            code=decision.status.code,
            reason=decision.status.reason,
            message=decision.status.message,
        )
    if decision.allowed and decision.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = encode_patch(decision.patch)
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    if decision.audit_annotations:
        response["auditAnnotations"] = dict(decision.audit_annotations)
    return AdmissionReviewResponse(apiVersion=ADMISSION_API_VERSION, kind=ADMISSION_REVIEW_KIND, response=response)
