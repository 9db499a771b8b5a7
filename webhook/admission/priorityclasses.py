"""PriorityClass admission: API validation (422), the Priority plugin's single default (403), the registry's
AlreadyExists for bootstrapped classes (409) and its system-class delete guard (403), in upstream order.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.admission.decision import AdmissionDecision, already_exists, forbidden, invalid
from webhook.admission.review import AdmissionRequest, object_name_for_messages
from webhook.cluster.jsonfields import (
    JsonObject,
    json_bool,
    json_int32,
    json_optional_object,
    json_required_object,
    json_str,
)
from webhook.cluster.model import PriorityClass
from webhook.errors import InvalidInput
from webhook.priority.resolution import effective_priority_classes
from webhook.priority.validation import (
    PRIORITY_CLASS_KIND,
    PRIORITY_CLASS_RESOURCE,
    PriorityClassObject,
    check_single_global_default,
    check_system_class_delete,
    invalid_message,
    system_class_already_exists,
    validate_priority_class,
    validate_priority_class_update,
)

SCHEDULING_GROUP = "scheduling.k8s.io"
PRIORITY_CLASSES_RESOURCE = "priorityclasses"


def priority_class_object(obj: JsonObject, path: str) -> PriorityClassObject:
    """Read and type-check a PriorityClass object; anything else raises ``InvalidInput`` (HTTP 400)."""
    kind = obj.get("kind")
    if kind is not None and kind != "PriorityClass":
        raise InvalidInput(f"{path} is not a PriorityClass")
    meta = json_optional_object(obj.get("metadata"), f"{path}.metadata") or {}
    policy = obj.get("preemptionPolicy")
    return PriorityClassObject(
        name=json_str(meta.get("name"), f"{path}.metadata.name"),
        generate_name=json_str(meta.get("generateName"), f"{path}.metadata.generateName"),
        value=json_int32(obj.get("value"), f"{path}.value") or 0,
        global_default=json_bool(obj.get("globalDefault"), f"{path}.globalDefault"),
        preemption_policy=None if policy is None else json_str(policy, f"{path}.preemptionPolicy"),
        description=json_str(obj.get("description"), f"{path}.description"),
    )


def is_priority_class_admission(request: AdmissionRequest) -> bool:
    return request.targets(SCHEDULING_GROUP, PRIORITY_CLASSES_RESOURCE)


def admit_priority_class(request: AdmissionRequest, stored: Mapping[str, PriorityClass]) -> AdmissionDecision:
    """Validate a PriorityClass CREATE/UPDATE/DELETE against the stored classes (system classes implied)."""
    if not is_priority_class_admission(request):
        return AdmissionDecision.allow()
    if request.operation == "DELETE":
        # The guard lives in the registry's Delete by name. A delete-collection (`kubectl delete pc --all`)
        # reaches admission once per item with an empty request name and bypasses it: upstream deletes the
        # system classes then (they come back at the next kube-apiserver start).
        if not request.name:
            return AdmissionDecision.allow()
        refused = check_system_class_delete(request.name)
        return (AdmissionDecision.allow() if refused is None
                else forbidden(PRIORITY_CLASS_RESOURCE, request.name, refused))
    name = object_name_for_messages(request)
    if request.operation not in ("CREATE", "UPDATE"):
        return AdmissionDecision.allow()
    incoming = priority_class_object(json_required_object(request.object, "request.object"), "request.object")
    if request.operation == "CREATE":
        errors = validate_priority_class(incoming)
    else:
        old = priority_class_object(json_required_object(request.old_object, "request.oldObject"), "request.oldObject")
        errors = validate_priority_class_update(incoming, old)
    if errors:
        return invalid(invalid_message(PRIORITY_CLASS_KIND, incoming.name, errors))
    default_conflict = check_single_global_default(
        request.operation, incoming, effective_priority_classes(stored).values()
    )
    if default_conflict is not None:
        return forbidden(PRIORITY_CLASS_RESOURCE, incoming.name or name, default_conflict)
    # Only a class the store actually holds can collide; the API server's storage reports the rest.
    if request.operation == "CREATE" and system_class_already_exists(incoming.name, stored):
        return already_exists(PRIORITY_CLASS_RESOURCE, incoming.name)
    return AdmissionDecision.allow()
