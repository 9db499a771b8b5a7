"""Read a pod's API dict (JSON/YAML) into the model ``Pod``, fast.

The reader has fast paths for the shape the API server sends (inline ``type(...) is`` checks, values
remembered by their raw items); tests/cluster/test_reader_fast_path.py holds them equal to the checked reading
of ``webhook.cluster.jsonfields``, ``reader_constraints`` and ``reader_resources``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import orjson

from webhook.cluster.building import builder
from webhook.cluster.jsonfields import JsonObject, json_int, json_list, json_object, json_str, parse_time_ns
from webhook.cluster.model import NO_QUOTA_FACTS, HostPort, LabelSelector, Pod, PredictionTrace
from webhook.cluster.reader_constraints import (
    affinity_terms,
    distinct,
    node_selector_terms,
    preferred_node_terms,
    read_labels,
    read_tolerations,
    spread_constraints,
    weighted_affinity_terms,
)
from webhook.cluster.reader_devices import may_have_pod_claims, pod_claims
from webhook.cluster.reader_resources import (
    NO_EXTRAS,
    QuotaExtras,
    pod_non_zero_requests_of,
    pod_non_zero_requests_with_status,
    pod_requests_resources,
    pod_requests_with_status,
    pod_resources,
    quota_extras,
    says_more_than_spec,
)
from webhook.cluster.reader_volumes import pod_volumes
from webhook.cluster.sharing import BoundedCache, interned, shared
from webhook.routes import GUARDRAIL_DECISION_ANNOTATION, PREDICTION_ANNOTATION, PREDICTION_ID_ANNOTATION

# Pod(...) without a call per field (webhook.cluster.building): ~4.5 -> ~1.3 microseconds for each of a cluster's
# pods (timeit, keyword arguments as below).
_build_pod = builder(Pod)
# A compact prediction annotation is a few hundred bytes; anything much longer was not written by PreemptGuard.
_COMPACT_PREDICTION_LIMIT = 4096
_GUARDRAIL_DECISION_LIMIT = 256


def _holds_host_ports(ctr: object, init: bool) -> bool:
    """Upstream ``GetHostPorts``: app containers, and init containers only when they are sidecars
    (``restartPolicy: Always``); a regular init container has exited before the pod runs."""
    if type(ctr) is not dict and not isinstance(ctr, Mapping):
        return False
    return not init or ctr.get("restartPolicy") == "Always"


def _host_ports(spec: JsonObject) -> tuple[HostPort, ...]:
    ports = []
    for init, containers in ((True, json_list(spec.get("initContainers"), "spec.initContainers")),
                             (False, json_list(spec.get("containers"), "spec.containers"))):
        for ctr in containers:
            if not _holds_host_ports(ctr, init):
                continue
            container_ports = ctr.get("ports")
            if container_ports is None:
                continue
            for i, port in enumerate(json_list(container_ports, "ports")):
                if type(port) is not dict:
                    port = json_object(port, f"ports[{i}]")
                host_port = port.get("hostPort")
                if host_port is None:
                    continue
                host_port = json_int(host_port, f"ports[{i}].hostPort")
                if host_port:
                    ports.append(HostPort(json_str(port.get("hostIP"), "hostIP") or "0.0.0.0",
                                          json_str(port.get("protocol"), "protocol") or "TCP", host_port))
    return distinct(ports)


def _unmodeled_features(spec: JsonObject) -> tuple[str, ...]:
    """What the prediction does not model of this pod: nothing since scheduling gates and other schedulers (#26)
    and volumes and resource claims (#27) are; the field stays for the features still to come."""
    return ()


def _scheduling_gates(value: object) -> tuple[str, ...]:
    """``spec.schedulingGates[].name``: while any is left, the scheduler does not take the pod."""
    if not value:
        return ()
    names = []
    for i, gate in enumerate(json_list(value, "spec.schedulingGates")):
        gate = json_object(gate, f"spec.schedulingGates[{i}]")
        names.append(interned(json_str(gate.get("name"), f"spec.schedulingGates[{i}].name")))
    return tuple(names)


def _disruption_target_by_preemption(conditions: object) -> bool:
    for cond in json_list(conditions, "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "DisruptionTarget":
            return cond.get("status") == "True" and cond.get("reason") == "PreemptionByScheduler"
    return False


def _admission_facts(annotations: Mapping[str, object]) -> tuple[str, str, int, str]:
    """What the admission patch wrote beside the prediction id: the compact ``preemptguard.io/prediction``
    (outcome, node, victims) and ``preemptguard.io/guardrail-decision``; blanks for what is absent or unreadable."""
    outcome = node = decision = ""
    victims = 0
    compact = annotations.get(PREDICTION_ANNOTATION)
    if type(compact) is str and len(compact) <= _COMPACT_PREDICTION_LIMIT:
        try:
            fields = orjson.loads(compact)
        except orjson.JSONDecodeError:
            fields = None
        if isinstance(fields, dict):
            said, where, count = fields.get("outcome"), fields.get("node"), fields.get("victims")
            outcome = said if type(said) is str else ""
            node = where if type(where) is str else ""
            victims = count if type(count) is int and count >= 0 else 0
    value = annotations.get(GUARDRAIL_DECISION_ANNOTATION)
    if type(value) is str:
        decision = value[:_GUARDRAIL_DECISION_LIMIT]
    return outcome, node, victims, decision


def _prediction_trace(annotations: object, conditions: object) -> PredictionTrace | None:
    """The observer's view of a pod PreemptGuard predicted (None for every other pod: one dict lookup)."""
    if type(annotations) is not dict and not isinstance(annotations, Mapping):
        return None
    prediction_id = annotations.get(PREDICTION_ID_ANNOTATION)
    if type(prediction_id) is not str or not prediction_id:
        return None
    facts = _admission_facts(annotations)
    for cond in json_list(conditions, "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled":
            unschedulable = cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
            message = cond.get("message")
            return PredictionTrace(prediction_id, unschedulable, message if type(message) is str else "", *facts)
    return PredictionTrace(prediction_id, False, "", *facts)


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_NODE_AFFINITY_REQUIRED_PATH = f"spec.affinity.nodeAffinity.{_REQUIRED}"
_POD_AFFINITY_REQUIRED_PATH = f"spec.affinity.podAffinity.{_REQUIRED}"
_POD_ANTI_AFFINITY_REQUIRED_PATH = f"spec.affinity.podAntiAffinity.{_REQUIRED}"
_NODE_AFFINITY_PREFERRED_PATH = f"spec.affinity.nodeAffinity.{_PREFERRED}"
_POD_AFFINITY_PREFERRED_PATH = f"spec.affinity.podAffinity.{_PREFERRED}"
_POD_ANTI_AFFINITY_PREFERRED_PATH = f"spec.affinity.podAntiAffinity.{_PREFERRED}"
_NO_TERMS: tuple[object, object, object] = (None, None, None)
_NO_AFFINITY: tuple[tuple[object, object, object], tuple[object, object, object]] = (_NO_TERMS, _NO_TERMS)


def _raw_affinity(value: object) -> tuple[tuple[object, object, object], tuple[object, object, object]]:
    """The raw required, then preferred, node affinity, pod affinity and pod anti-affinity (None when absent)."""
    if value is None:
        return _NO_AFFINITY
    affinity = json_object(value, "spec.affinity")
    node_affinity = json_object(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    pod_affinity = json_object(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_affinity = json_object(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    return ((node_affinity.get(_REQUIRED), pod_affinity.get(_REQUIRED), anti_affinity.get(_REQUIRED)),
            (node_affinity.get(_PREFERRED), pod_affinity.get(_PREFERRED), anti_affinity.get(_PREFERRED)))


def normalized_image_name(name: str) -> str:
    """ImageLocality's ``normalizedImageName``: a name without a tag gets ``:latest`` (a digest counts as a tag
    only when its ``:`` follows the last ``/``)."""
    return name if name.rfind(":") > name.rfind("/") else name + ":latest"


def _images(spec: JsonObject) -> tuple[str, ...]:
    """The images ImageLocality reads (pkg/scheduler/framework/plugins/imagelocality, ``sumImageScores``): init
    containers, containers, then image volumes, each normalised; a repeat counts again, so it is kept."""
    names = []
    for key in ("initContainers", "containers"):
        for i, ctr in enumerate(json_list(spec.get(key), f"spec.{key}")):
            ctr = ctr if type(ctr) is dict else json_object(ctr, f"spec.{key}[{i}]")
            names.append(normalized_image_name(json_str(ctr.get("image"), f"spec.{key}[{i}].image")))
    for i, volume in enumerate(json_list(spec.get("volumes"), "spec.volumes")):
        image = json_object(volume, f"spec.volumes[{i}]").get("image")
        if image is not None:
            reference = json_object(image, f"spec.volumes[{i}].image").get("reference")
            names.append(normalized_image_name(json_str(reference, f"spec.volumes[{i}].image.reference")))
    return shared(tuple(sys.intern(n) for n in names)) if names else ()


# The owners whose selector upstream's DefaultSelector reads (with Services, which a snapshot does not hold).
_SELECTING_CONTROLLERS = ("ReplicaSet", "ReplicationController", "StatefulSet")
# Labels a StatefulSet's controller sets per pod or per revision: its selector never names them.
_STATEFULSET_POD_LABELS = ("statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index",
                           "controller-revision-hash")


def controller_selector(meta: JsonObject, labels: Mapping[str, str]) -> LabelSelector | None:
    """The selector of the ReplicaSet, ReplicationController or StatefulSet that controls the pod, as far as the
    pod shows it: its labels (a ReplicaSet's pods carry its template's labels, ``pod-template-hash`` included,
    which its selector names), without a StatefulSet's per-pod labels. None without such an owner: the snapshot
    holds no ReplicaSets or Services, so a bare pod gets no default spreading (nor does it upstream without a
    Service selecting it)."""
    owners = meta.get("ownerReferences")
    if not owners or not labels:
        return None
    for i, owner in enumerate(json_list(owners, "metadata.ownerReferences")):
        owner = json_object(owner, f"metadata.ownerReferences[{i}]")
        kind = owner.get("kind")
        if owner.get("controller") is True and kind in _SELECTING_CONTROLLERS:
            if kind == "StatefulSet":
                labels = {k: v for k, v in labels.items() if k not in _STATEFULSET_POD_LABELS}
            return LabelSelector(read_labels(dict(labels), "metadata.labels")) if labels else None
    return None


# A pod's priority is one of a few classes' values, and an int above 256 is a new object for every pod parsed: one
# object per value instead (with the interned preemptionPolicy and schedulerName, ~150 bytes less a pod, 70 MB at
# 450,000 pods: bench/snapshot.py). Its own cache, not ``shared``'s: an equal True must never stand in for 1.
_PRIORITIES: BoundedCache[int, int] = BoundedCache()


def _shared_priority(priority: int) -> int:
    found = _PRIORITIES.get(priority)
    return found if found is not None else _PRIORITIES.remember(priority, priority)


def _interned_str(value: object, path: str) -> str:
    if type(value) is str:
        return sys.intern(value) if value else value
    return "" if value is None else interned(json_str(value, path))


def pod_from_dict(raw: JsonObject, *, quota: bool = True) -> Pod:
    """The pod, with the ``QuotaFacts`` ResourceQuota admission reads unless ``quota`` is False.

    Only the pod under admission is quota-checked: upstream's ``CheckRequest``
    (staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go) charges the new object
    against ``ResourceQuota.status.used``. So the cluster state's pods (``state_pod_from_dict``,
    ``object_from_dict``) leave ``Pod.quota`` empty: 150,000 informer pods with mostly distinct request
    sets would otherwise each hold their own facts (bench/cluster_state.py).
    """
    # Fields are checked in this order, so the first wrong one is the one named. Plain JSON values pass the
    # inline ``type(...) is`` checks; anything else (absent, Mapping subclasses, wrong types) takes the
    # generic helpers, which apply the defaults and raise the errors.
    meta = raw.get("metadata")
    if type(meta) is not dict:
        meta = json_object(meta, "metadata")
    spec = raw.get("spec")
    if type(spec) is not dict:
        spec = json_object(spec, "spec")
    status = raw.get("status")
    if type(status) is not dict:
        status = json_object(status, "status")
    required, preferred = _raw_affinity(spec.get("affinity"))
    node_affinity, pod_affinity, pod_anti_affinity = required

    name = meta.get("name")
    if type(name) is not str or not name:
        name = json_str(name, "metadata.name") or json_str(meta.get("generateName"), "metadata.generateName")
    namespace = meta.get("namespace")
    if type(namespace) is str and namespace:
        namespace = sys.intern(namespace)
    else:
        namespace = interned(json_str(namespace, "metadata.namespace") or "default")
    uid = meta.get("uid")
    if type(uid) is not str:
        uid = "" if uid is None else json_str(uid, "metadata.uid")
    labels = read_labels(meta.get("labels"), "metadata.labels")
    node_name = _interned_str(spec.get("nodeName"), "spec.nodeName")
    priority = spec.get("priority")
    if priority is not None and type(priority) is not int:
        priority = json_int(priority, "spec.priority")
    if priority is not None:
        priority = _shared_priority(priority)
    priority_class_name = _interned_str(spec.get("priorityClassName"), "spec.priorityClassName")
    preemption_policy = spec.get("preemptionPolicy")
    if preemption_policy is not None:
        preemption_policy = sys.intern(preemption_policy if type(preemption_policy) is str
                                       else json_str(preemption_policy, "spec.preemptionPolicy"))
    phase = _interned_str(status.get("phase"), "status.phase")
    start_time = status.get("startTime")
    start_time_ns = None if start_time is None else parse_time_ns(start_time, "status.startTime")
    deleting = bool(meta.get("deletionTimestamp"))
    conditions = status.get("conditions")
    preempted_by_scheduler = conditions is not None and _disruption_target_by_preemption(conditions)
    nominated_node_name = _interned_str(status.get("nominatedNodeName"), "status.nominatedNodeName")
    annotations = meta.get("annotations")
    resources = pod_resources(spec) if quota else None
    with_status = False  # the status says more than the spec (in-place resize): the non-zero requests read it too
    if resources is not None:
        requests = resources.requests
    else:
        requests = pod_requests_resources(spec)
        # A running pod counts what its status says was allocated or actuated when that is more (in-place
        # resize). Only the cluster's pods: the API server drops the status of a pod it creates.
        if says_more_than_spec(status, spec):
            requests = pod_requests_with_status(spec, status, requests)
            with_status = True
    host_ports = _host_ports(spec)
    node_selector = read_labels(spec.get("nodeSelector"), "spec.nodeSelector")
    required_node_affinity = node_selector_terms(node_affinity, _NODE_AFFINITY_REQUIRED_PATH)
    pod_affinity_terms = affinity_terms(pod_affinity, _POD_AFFINITY_REQUIRED_PATH, labels)
    pod_anti_affinity_terms = affinity_terms(pod_anti_affinity, _POD_ANTI_AFFINITY_REQUIRED_PATH, labels)
    topology_spread = spread_constraints(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")
    tolerations = read_tolerations(spec.get("tolerations"), "spec.tolerations")
    grace_period = spec.get("terminationGracePeriodSeconds")
    if grace_period is not None and type(grace_period) is not int:
        grace_period = json_int(grace_period, "spec.terminationGracePeriodSeconds")
    scheduler_name = spec.get("schedulerName")
    if type(scheduler_name) is not str or not scheduler_name:
        scheduler_name = json_str(scheduler_name, "spec.schedulerName", "default-scheduler") or "default-scheduler"
    scheduler_name = sys.intern(scheduler_name)
    preferred_node, preferred_pod, preferred_anti = preferred
    return _build_pod(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        node_name=node_name,
        priority=priority,
        priority_class_name=priority_class_name,
        preemption_policy=preemption_policy,
        phase=phase,
        start_time_ns=start_time_ns,
        deleting=deleting,
        preempted_by_scheduler=preempted_by_scheduler,
        nominated_node_name=nominated_node_name,
        requests=requests,
        host_ports=host_ports,
        node_selector=node_selector,
        required_node_affinity=required_node_affinity,
        pod_affinity=pod_affinity_terms,
        pod_anti_affinity=pod_anti_affinity_terms,
        topology_spread=topology_spread,
        tolerations=tolerations,
        termination_grace_period_seconds=grace_period,
        scheduler_name=scheduler_name,
        scheduling_gates=_scheduling_gates(spec.get("schedulingGates")),
        runtime_class_name=_interned_str(spec.get("runtimeClassName"), "spec.runtimeClassName"),
        unmodeled=_unmodeled_features(spec),
        volumes=pod_volumes(spec) if "volumes" in spec else None,
        claims=pod_claims(spec, status) if may_have_pod_claims(spec) else None,
        quota=NO_QUOTA_FACTS if resources is None else resources.quota_facts(_quota_extras(meta, spec, status)),
        # A bound pod keeps none: the observer sees its binding as the change from the pending pod it holds.
        trace=None if annotations is None or node_name else _prediction_trace(annotations, conditions),
        preferred_node_affinity=preferred_node_terms(preferred_node, _NODE_AFFINITY_PREFERRED_PATH),
        preferred_pod_affinity=weighted_affinity_terms(preferred_pod, _POD_AFFINITY_PREFERRED_PATH, labels),
        preferred_pod_anti_affinity=weighted_affinity_terms(preferred_anti, _POD_ANTI_AFFINITY_PREFERRED_PATH, labels),
        non_zero_requests=pod_non_zero_requests_with_status(spec, status, requests) if with_status
        else pod_non_zero_requests_of(spec),
        images=_images(spec) if resources is not None else (),
        controller_selector=controller_selector(meta, labels) if resources is not None else None,
    )


def state_pod_from_dict(raw: JsonObject) -> Pod:
    """A pod of the cluster state (informers, snapshot files): ``pod_from_dict`` without quota facts."""
    return pod_from_dict(raw, quota=False)


def _quota_extras(meta: JsonObject, spec: JsonObject, status: JsonObject) -> QuotaExtras:
    """``quota_extras``, without a look at fields that most pods leave unset."""
    if ("qosClass" in status or "activeDeadlineSeconds" in spec or "affinity" in spec
            or "deletionTimestamp" in meta or "deletionGracePeriodSeconds" in meta):
        return quota_extras(meta, spec, status)
    return NO_EXTRAS
