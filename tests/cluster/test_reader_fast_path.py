"""pod_from_dict's fast paths (inline type checks, caches by raw items) equal the plain checked reading.

The reference below is the straightforward reading the fast paths replaced: every field through the generic
helpers, no caches. Both must give the same Pod (same values and types) or the same error message.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cluster import reader_constraints, reader_pod, reader_resources
from webhook.cluster.jsonfields import json_int, json_list, json_object, json_str, parse_time_ns
from webhook.cluster.model import (
    NO_QUOTA_FACTS,
    HostPort,
    Pod,
    PredictionTrace,
    Toleration,
)
from webhook.cluster.reader import pod_from_dict, state_pod_from_dict
from webhook.cluster.reader_constraints import (
    affinity_terms,
    checked_labels,
    checked_tolerations,
    node_selector_terms,
    preferred_node_terms,
    spread_constraints,
    weighted_affinity_terms,
)
from webhook.cluster.reader_resources import pod_resource_spec, pod_resource_status, quota_extras, quota_facts
from webhook.cluster.resources import pod_non_zero_requests, pod_requests, requests_as_resources
from webhook.cluster.sharing import interned
from webhook.errors import InvalidInput
from webhook.routes import GUARDRAIL_DECISION_ANNOTATION, PREDICTION_ANNOTATION, PREDICTION_ID_ANNOTATION

# ---- the reference: every field through the generic checks, nothing remembered -------------------------

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


# The generic checked readers are shared; the reference below reads every field through them
# (its host ports and preemption condition are the versions the fast paths replaced).
_mapping, _list, _str, _int, _interned = json_object, json_list, json_str, json_int, interned
_labels, _tolerations = checked_labels, checked_tolerations
_node_selector_terms, _affinity_terms = node_selector_terms, affinity_terms
_spread_constraints, _unmodeled_features = spread_constraints, reader_pod._unmodeled_features
_scheduling_gates = reader_pod._scheduling_gates


from webhook.cluster.reader_devices import pod_claims  # noqa: E402
from webhook.cluster.reader_volumes import pod_volumes  # noqa: E402


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    ports = []
    # Upstream GetHostPorts: sidecar init containers (restartPolicy Always) and app containers only.
    sidecars = [c for c in _list(spec.get("initContainers"), "spec.initContainers")
                if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"]
    containers = [*sidecars, *_list(spec.get("containers"), "spec.containers")]
    for ctr in containers:
        if not isinstance(ctr, Mapping):
            continue
        for i, port in enumerate(_list(ctr.get("ports"), "ports")):
            port = _mapping(port, f"ports[{i}]")
            host_port = _int(port.get("hostPort"), f"ports[{i}].hostPort")
            if host_port:
                ports.append(HostPort(_str(port.get("hostIP"), "hostIP") or "0.0.0.0",
                                      _str(port.get("protocol"), "protocol") or "TCP", host_port))
    # A port given twice is one port (upstream NodePorts works on sets): each once, where it first appears.
    return tuple(dict.fromkeys(ports))


def _disruption_target_by_preemption(status: Mapping[str, Any]) -> bool:
    for cond in _list(status.get("conditions"), "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "DisruptionTarget":
            return cond.get("status") == "True" and cond.get("reason") == "PreemptionByScheduler"
    return False


def _admission_facts(annotations: Mapping[str, Any]) -> tuple[str, str, int, str]:
    outcome, node, victims, decision = "", "", 0, ""
    compact = annotations.get(PREDICTION_ANNOTATION)
    if isinstance(compact, str) and len(compact) <= 4096:
        try:
            fields = json.loads(compact)
        except ValueError:
            fields = None
        if isinstance(fields, dict):
            outcome = fields["outcome"] if isinstance(fields.get("outcome"), str) else ""
            node = fields["node"] if isinstance(fields.get("node"), str) else ""
            count = fields.get("victims")
            victims = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0
    if isinstance(annotations.get(GUARDRAIL_DECISION_ANNOTATION), str):
        decision = annotations[GUARDRAIL_DECISION_ANNOTATION][:256]
    return outcome, node, victims, decision


def _prediction_trace(meta: Mapping[str, Any], spec: Mapping[str, Any],
                      status: Mapping[str, Any]) -> PredictionTrace | None:
    annotations = meta.get("annotations")
    prediction_id = annotations.get(PREDICTION_ID_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(prediction_id, str) or not prediction_id or spec.get("nodeName"):
        return None
    assert isinstance(annotations, Mapping)
    facts = _admission_facts(annotations)
    for cond in _list(status.get("conditions"), "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled":
            message = cond.get("message")
            refused = cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
            return PredictionTrace(prediction_id, refused, message if isinstance(message, str) else "", *facts)
    return PredictionTrace(prediction_id, False, "", *facts)


def reference_pod_from_dict(raw: Mapping[str, Any], quota: bool = True) -> Pod:
    meta = _mapping(raw.get("metadata"), "metadata")
    spec = _mapping(raw.get("spec"), "spec")
    status = _mapping(raw.get("status"), "status")
    affinity = _mapping(spec.get("affinity"), "spec.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    pod_affinity = _mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_affinity = _mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    return Pod(
        name=_str(meta.get("name"), "metadata.name") or _str(meta.get("generateName"), "metadata.generateName"),
        namespace=_interned(_str(meta.get("namespace"), "metadata.namespace") or "default"),
        uid=_str(meta.get("uid"), "metadata.uid"),
        labels=(labels := _labels(meta.get("labels"), "metadata.labels")),
        node_name=_interned(_str(spec.get("nodeName"), "spec.nodeName")),
        priority=_int(spec.get("priority"), "spec.priority"),
        priority_class_name=_interned(_str(spec.get("priorityClassName"), "spec.priorityClassName")),
        preemption_policy=None if spec.get("preemptionPolicy") is None
        else _str(spec.get("preemptionPolicy"), "spec.preemptionPolicy"),
        phase=_interned(_str(status.get("phase"), "status.phase")),
        start_time_ns=parse_time_ns(status.get("startTime"), "status.startTime"),
        deleting=bool(meta.get("deletionTimestamp")),
        preempted_by_scheduler=_disruption_target_by_preemption(status),
        nominated_node_name=_interned(_str(status.get("nominatedNodeName"), "status.nominatedNodeName")),
        # The cluster's pods count their status too (in-place resize); an empty status changes nothing.
        requests=(requests := requests_as_resources(pod_requests(
            resources := pod_resource_spec(spec), resource_status := None if quota else pod_resource_status(status)))),
        host_ports=_host_ports(spec),
        node_selector=_labels(spec.get("nodeSelector"), "spec.nodeSelector"),
        required_node_affinity=_node_selector_terms(node_affinity.get(_REQUIRED),
                                                    f"spec.affinity.nodeAffinity.{_REQUIRED}"),
        pod_affinity=_affinity_terms(pod_affinity.get(_REQUIRED), f"spec.affinity.podAffinity.{_REQUIRED}"),
        pod_anti_affinity=_affinity_terms(anti_affinity.get(_REQUIRED),
                                          f"spec.affinity.podAntiAffinity.{_REQUIRED}"),
        topology_spread=_spread_constraints(spec.get("topologySpreadConstraints"),
                                            "spec.topologySpreadConstraints"),
        tolerations=_tolerations(spec.get("tolerations"), "spec.tolerations"),
        termination_grace_period_seconds=_int(spec.get("terminationGracePeriodSeconds"),
                                              "spec.terminationGracePeriodSeconds"),
        scheduler_name=_str(spec.get("schedulerName"), "spec.schedulerName", "default-scheduler")
        or "default-scheduler",
        scheduling_gates=_scheduling_gates(spec.get("schedulingGates")),
        runtime_class_name=_interned(_str(spec.get("runtimeClassName"), "spec.runtimeClassName")),
        unmodeled=_unmodeled_features(spec),
        volumes=pod_volumes(spec),
        claims=pod_claims(spec, status),
        quota=quota_facts(resources, quota_extras(meta, spec, status)) if quota else NO_QUOTA_FACTS,
        trace=_prediction_trace(meta, spec, status),
        # What the Score plugins read (#28), by the reader's checked readers: this reference holds the fast
        # path's shortcuts and caches to them, not their own reading (tests/preemption/test_score_plugins.py).
        preferred_node_affinity=preferred_node_terms(node_affinity.get(_PREFERRED),
                                                     f"spec.affinity.nodeAffinity.{_PREFERRED}"),
        preferred_pod_affinity=weighted_affinity_terms(pod_affinity.get(_PREFERRED),
                                                       f"spec.affinity.podAffinity.{_PREFERRED}", labels),
        preferred_pod_anti_affinity=weighted_affinity_terms(anti_affinity.get(_PREFERRED),
                                                            f"spec.affinity.podAntiAffinity.{_PREFERRED}", labels),
        non_zero_requests=None if (non_zero := pod_non_zero_requests(resources, resource_status)) == (
            requests.milli_cpu, requests.memory) else non_zero,
        images=reader_pod._images(spec) if quota else (),
        controller_selector=reader_pod.controller_selector(meta, labels) if quota else None,
    )


def reference_state_pod_from_dict(raw: Mapping[str, Any]) -> Pod:
    return reference_pod_from_dict(raw, quota=False)


# ---- comparing outcomes -------------------------------------------------------------------------------

def typed(value: object) -> object:
    """The value with the type of every part, so 1 and True or 5 and 5.0 differ."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value).__name__, tuple(typed(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, Mapping):
        return type(value).__name__, frozenset((typed(k), typed(v)) for k, v in value.items())
    if isinstance(value, tuple):
        return "tuple", tuple(typed(v) for v in value)
    return type(value).__name__, value


def outcome(read: Callable[[Mapping[str, Any]], Pod], raw: Mapping[str, Any]) -> object:
    try:
        return "pod", typed(read(raw))
    except Exception as exc:  # any error must be the same error
        return "error", type(exc).__name__, str(exc)


def assert_same_as_reference(raw: Mapping[str, Any]) -> None:
    expected = outcome(reference_pod_from_dict, raw)
    assert outcome(pod_from_dict, raw) == expected
    assert outcome(pod_from_dict, raw) == expected  # again: now from the caches
    expected = outcome(reference_state_pod_from_dict, raw)  # the cluster state's pods: no quota facts
    assert outcome(state_pod_from_dict, raw) == expected
    assert outcome(state_pod_from_dict, raw) == expected


# ---- generated pods: absent fields, nulls, Mapping subclasses, then a few values of a wrong type ---------------

@st.composite
def often(draw: st.DrawFn, usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> Any:
    """``usual`` three times in four, else ``rare`` (without repeating strategies: their repr would explode)."""
    return draw(usual) if draw(st.integers(0, 3)) else draw(rare)


WRONG = st.sampled_from([0, 1, True, False, 1.0, 2.5, "x", [], ["a"], {}, {"a": "b"}])
TEXT = st.sampled_from(["", "a", "web", "node.kubernetes.io/not-ready", "Exists", "Equal", "NoExecute", "Always",
                        "default-scheduler", "other-scheduler"])
# Numbers and strings that are equal keys but not equal quantities, and a few that are no quantity at all.
QUANTITY = often(st.sampled_from(["100m", "1", "0.5", "64Mi", " 1Gi ", "2e3", "-1", "1e30"]),
                 st.sampled_from([1, 0, -1, 1.0, 2.5, 10**30, 1e30, "lots", "", True, False, float("inf"), None]))
RESOURCE = st.sampled_from(["cpu", "memory", "ephemeral-storage", "pods", "nvidia.com/gpu", "hugepages-2Mi"])
_ABSENT = object()


def objects(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An object with most of the fields (each absent one time in four), or null."""
    maybe = {name: often(field, st.just(_ABSENT)) for name, field in fields.items()}
    plain = st.fixed_dictionaries(maybe).map(lambda obj: {k: v for k, v in obj.items() if v is not _ABSENT})
    return often(plain, st.none())


def lists(elements: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return often(st.lists(elements, min_size=1, max_size=3), st.one_of(st.none(), st.builds(list)))


def value(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return often(valid, st.none())


LABELS = often(st.dictionaries(st.sampled_from(["app", "tier", "pod-template-hash"]), TEXT, min_size=1, max_size=3),
               st.one_of(st.none(), st.dictionaries(st.sampled_from(["app", 1]), TEXT, max_size=2)))
RESOURCE_LIST = often(st.dictionaries(RESOURCE, QUANTITY, min_size=1, max_size=3),
                      st.one_of(st.none(), st.builds(dict)))
PORTS = lists(objects(hostPort=st.sampled_from([None, 0, 80, 8080, 80.0, 80.5]), hostIP=value(TEXT),
                      protocol=value(st.sampled_from(["TCP", "UDP"])), containerPort=st.just(80)))
CONTAINER = objects(name=st.sampled_from(["c", "app", None]), ports=PORTS,
                    restartPolicy=value(st.sampled_from(["Always", "OnFailure"])),
                    resources=objects(requests=RESOURCE_LIST, limits=RESOURCE_LIST))
TOLERATION = objects(key=value(TEXT), operator=value(st.sampled_from(["Exists", "Equal", ""])), value=value(TEXT),
                     effect=value(st.sampled_from(["NoExecute", "NoSchedule", ""])),
                     tolerationSeconds=st.sampled_from([300, 300.0, None, True]))
SELECTOR = objects(matchLabels=LABELS, matchExpressions=lists(objects(
    key=value(TEXT), operator=value(TEXT), values=lists(TEXT))))
AFFINITY_TERMS = lists(objects(labelSelector=SELECTOR, topologyKey=value(TEXT), namespaces=lists(TEXT),
                               namespaceSelector=SELECTOR))
# Preferred terms only count for the CrossNamespacePodAffinity quota scope: a few fixed shapes, drawn by
# index so that the strategies' repr stays small.
PREFERRED_SHAPES: list[Any] = [
    None, [], "x", [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}],
    [{"weight": 1, "podAffinityTerm": {"namespaces": ["a"]}}],
    [{"weight": 1, "podAffinityTerm": {"namespaceSelector": {}}}],
    [{"weight": 1}], [{"podAffinityTerm": 1}], [7],
]
WEIGHTED_TERMS = st.integers(0, len(PREFERRED_SHAPES) - 1).map(PREFERRED_SHAPES.__getitem__)
REQUIREMENTS = lists(objects(key=value(TEXT), operator=value(TEXT), values=lists(TEXT)))
_AFFINITY = objects(
    nodeAffinity=objects(**{_REQUIRED: objects(nodeSelectorTerms=lists(objects(
        matchExpressions=REQUIREMENTS, matchFields=REQUIREMENTS)))}),
    podAffinity=objects(**{_REQUIRED: AFFINITY_TERMS, _PREFERRED: WEIGHTED_TERMS}),
    podAntiAffinity=objects(**{_REQUIRED: AFFINITY_TERMS, _PREFERRED: WEIGHTED_TERMS}),
)
AFFINITY = st.deferred(lambda: _AFFINITY)  # named, so that the repr of every strategy using it stays small
SPREAD = lists(objects(maxSkew=value(st.sampled_from([1, 2, 0])), topologyKey=value(TEXT),
                       whenUnsatisfiable=value(TEXT), labelSelector=SELECTOR, minDomains=value(st.just(2)),
                       matchLabelKeys=lists(TEXT)))
INTEGER = value(st.sampled_from([0, 30, 1000, -5, 5.0, 2**40]))
SPEC = objects(
    containers=lists(CONTAINER), initContainers=lists(CONTAINER), overhead=RESOURCE_LIST,
    resources=objects(requests=RESOURCE_LIST, limits=RESOURCE_LIST), nodeName=value(TEXT), priority=INTEGER,
    activeDeadlineSeconds=INTEGER,
    priorityClassName=value(TEXT), preemptionPolicy=value(st.sampled_from(["Never", "PreemptLowerPriority", ""])),
    affinity=AFFINITY, tolerations=lists(TOLERATION), nodeSelector=LABELS, topologySpreadConstraints=SPREAD,
    terminationGracePeriodSeconds=INTEGER, schedulerName=value(TEXT),
    volumes=lists(objects(name=st.just("v"), persistentVolumeClaim=st.just({"claimName": "c"}))),
    resourceClaims=value(st.just([{"name": "r"}])), schedulingGates=lists(objects(name=value(TEXT))),
    runtimeClassName=value(TEXT),
)
# What a running pod's status says of its resources (in-place resize).
CONTAINER_STATUS = objects(name=st.sampled_from(["c", "app", None]), allocatedResources=RESOURCE_LIST,
                           resources=objects(requests=RESOURCE_LIST, limits=RESOURCE_LIST))
STATUS = objects(
    phase=value(st.sampled_from(["Pending", "Running", "Succeeded"])),
    startTime=value(st.sampled_from(["2025-06-02T09:30:00Z", "2025-06-02T09:30:00.5+01:00", "yesterday"])),
    nominatedNodeName=value(TEXT), qosClass=value(st.sampled_from(["BestEffort", "Burstable", "Guaranteed"])),
    conditions=lists(objects(type=st.sampled_from(["DisruptionTarget", "PodScheduled", "PodResizePending"]),
                             status=st.sampled_from(["True", "False"]),
                             reason=st.sampled_from(["PreemptionByScheduler", "Unschedulable", "Other",
                                                     "Infeasible", "Deferred"]),
                             message=value(st.sampled_from(["preempting 2 victims", 3])))),
    containerStatuses=lists(CONTAINER_STATUS), initContainerStatuses=lists(CONTAINER_STATUS),
    allocatedResources=RESOURCE_LIST, resources=objects(requests=RESOURCE_LIST, limits=RESOURCE_LIST),
)
METADATA = objects(name=value(TEXT), generateName=value(TEXT), namespace=value(TEXT), uid=value(TEXT),
                   labels=LABELS, deletionTimestamp=value(st.just("2025-06-02T09:30:00Z")),
                   annotations=value(st.sampled_from([
                       {PREDICTION_ID_ANNOTATION: "p-1"}, {PREDICTION_ID_ANNOTATION: ""}, {"other": "x"}, ["a"],
                       {PREDICTION_ID_ANNOTATION: "p-2", GUARDRAIL_DECISION_ANNOTATION: "warned: maxVictims",
                        PREDICTION_ANNOTATION: '{"outcome":"Preempts","node":"n1","victims":2}'},
                       {PREDICTION_ID_ANNOTATION: "p-3", GUARDRAIL_DECISION_ANNOTATION: 7,
                        PREDICTION_ANNOTATION: '{"outcome":3,"node":null,"victims":true}'},
                       {PREDICTION_ID_ANNOTATION: "p-4", PREDICTION_ANNOTATION: "not json {"},
                       {PREDICTION_ID_ANNOTATION: "p-5", PREDICTION_ANNOTATION: '["Fits"]'}])),
                   deletionGracePeriodSeconds=INTEGER)
POD = st.fixed_dictionaries({"kind": st.just("Pod")}, optional={"metadata": METADATA, "spec": SPEC, "status": STATUS})
# Pods that differ only in what decides their requests (the remembered request sets).
SOME_CONTAINERS = st.lists(objects(name=st.sampled_from(["c", "app", None]),
                                   resources=objects(requests=RESOURCE_LIST, limits=RESOURCE_LIST),
                                   restartPolicy=st.sampled_from(["Always", "OnFailure"])), min_size=1, max_size=3)
REQUESTS_POD = st.fixed_dictionaries({"kind": st.just("Pod"), "spec": st.fixed_dictionaries(
    {"containers": SOME_CONTAINERS},
    optional={"initContainers": SOME_CONTAINERS, "overhead": RESOURCE_LIST,
              "resources": objects(requests=RESOURCE_LIST, limits=RESOURCE_LIST)},
)}, optional={"status": STATUS})

Slot = tuple[Any, Any]  # (a dict or list, a key or index in it)


def slots(node: object) -> list[Slot]:
    """Every place in the object tree that holds a value."""
    places: list[Slot] = []
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        places.append((node, key))
        places.extend(slots(child))
    return places


@st.composite
def damaged_pods(draw: st.DrawFn, pods: st.SearchStrategy[dict[str, Any]] = POD) -> dict[str, Any]:
    """A generated pod with up to two values replaced by a wrong type and up to two objects made read-only."""
    raw = copy.deepcopy(draw(pods))  # drawn values may be shared (st.just): damage a copy
    places = slots(raw)
    for i in draw(st.lists(st.integers(0, len(places) - 1), max_size=2)):
        parent, key = places[i]
        parent[key] = copy.deepcopy(draw(WRONG))  # never share (and so grow) one sampled list or dict
    objects_inside = [(parent, key) for parent, key in slots(raw) if isinstance(parent[key], dict)]
    if objects_inside:
        for i in sorted(draw(st.lists(st.integers(0, len(objects_inside) - 1), max_size=2, unique=True)),
                        reverse=True):  # innermost first: an outer proxy would hide the inner dict
            parent, key = objects_inside[i]
            parent[key] = MappingProxyType(parent[key])
    return raw


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_pods())
def test_generated_pods_read_like_the_reference(raw: dict[str, Any]) -> None:
    assert_same_as_reference(raw)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_pods(REQUESTS_POD))
def test_generated_requests_read_like_the_reference(raw: dict[str, Any]) -> None:
    assert_same_as_reference(raw)


def deployment_pod(**spec: Any) -> dict[str, Any]:
    """The shape the API server sends for a Deployment-made pod (after defaulting)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-7c9f8d6b5-", "name": "web-1", "namespace": "team-a",
                     "labels": {"app": "web", "pod-template-hash": "7c9f8d6b5"}},
        "spec": {
            "containers": [{"name": "app", "image": "web:1", "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                          "limits": {"memory": "128Mi"}}}],
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
            ],
            **spec,
        },
        "status": {},
    }


def full_pod() -> dict[str, Any]:
    """A bound pod using every field the model reads."""
    raw = deployment_pod(
        nodeName="node-1", priority=1000, priorityClassName="high", preemptionPolicy="Never",
        initContainers=[
            {"name": "init", "ports": [{"containerPort": 53, "hostPort": 53, "protocol": "UDP"}],
             "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}},
            {"name": "proxy", "restartPolicy": "Always", "ports": [{"containerPort": 9901, "hostPort": 9901}],
             "resources": {"requests": {"cpu": "100m"}}},
        ],
        overhead={"cpu": "10m"}, resources={"requests": {"memory": "2Gi"}, "limits": {"memory": "4Gi"}},
        activeDeadlineSeconds=600,
        nodeSelector={"pool": "general"},
        affinity={
            "nodeAffinity": {_REQUIRED: {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}},
            "podAffinity": {_REQUIRED: [{"labelSelector": {"matchLabels": {"app": "db"}},
                                         "topologyKey": "zone", "namespaces": ["data"]}]},
            "podAntiAffinity": {_REQUIRED: [{"labelSelector": {"matchExpressions": [
                {"key": "app", "operator": "Exists"}]}, "topologyKey": "kubernetes.io/hostname",
                "namespaceSelector": {"matchLabels": {"team": "a"}}}],
                                _PREFERRED: [{"weight": 10, "podAffinityTerm": {"topologyKey": "zone",
                                                                                "namespaces": ["data"]}}]},
        },
        topologySpreadConstraints=[{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                                    "labelSelector": {"matchLabels": {"app": "web"}}, "minDomains": 2,
                                    "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor",
                                    "matchLabelKeys": ["pod-template-hash"]}],
        terminationGracePeriodSeconds=30,
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}],
        schedulingGates=[{"name": "wait"}], resourceClaims=[{"name": "gpu"}],
    )
    raw["spec"]["containers"][0]["ports"].append({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"})
    raw["spec"]["tolerations"][0]["value"] = ""
    raw["metadata"].update(uid="u-1", deletionTimestamp="2025-06-02T09:31:00Z", deletionGracePeriodSeconds=30)
    raw["status"] = {"phase": "Running", "startTime": "2025-06-02T09:30:00.25Z", "nominatedNodeName": "node-2",
                     "qosClass": "Burstable",
                     "conditions": [{"type": "DisruptionTarget", "status": "True",
                                     "reason": "PreemptionByScheduler"}]}
    return raw


FULL_POD_PLACES = len(slots(full_pod()))


def test_the_full_pod_reads_every_field() -> None:
    pod = pod_from_dict(full_pod())
    assert [(p.port, p.protocol, p.host_ip) for p in pod.host_ports] == \
        [(9901, "TCP", "0.0.0.0"), (8080, "TCP", "10.0.0.1")]  # sidecars first; regular init containers hold none
    # max(50m app + 100m sidecar, 1000m init that runs before the sidecar) + 10m overhead; pod-level memory wins
    assert (pod.requests.milli_cpu, pod.requests.memory) == (1010, 2 * 2**30)
    assert pod.required_node_affinity is not None and len(pod.pod_affinity) == len(pod.pod_anti_affinity) == 1
    assert pod.topology_spread[0].match_label_keys == ("pod-template-hash",)
    assert (pod.priority, pod.preemption_policy, pod.termination_grace_period_seconds) == (1000, "Never", 30)
    assert pod.deleting and pod.preempted_by_scheduler and pod.unmodeled == ()
    assert pod.scheduling_gates == ("wait",)  # an outcome of its own now (Gated), no longer a gap
    # Claims and resourceClaims are modelled (#27): read into the pod's volumes and claims.
    assert pod.volumes is not None and pod.volumes.claims and pod.claims is not None and pod.claims.claims
    assert pod.start_time_ns == 1_748_856_600_250_000_000
    facts = pod.quota
    assert [c.name for c in (*facts.resources.containers, *facts.resources.init_containers)] == \
        ["app", "init", "proxy"]
    assert (str(facts.resources.pod_limits["memory"]), str(facts.resources.overhead["cpu"])) == ("4Gi", "10m")
    assert (facts.qos_class, facts.active_deadline_seconds, facts.cross_namespace_pod_affinity) == \
        ("Burstable", 600, True)
    assert (facts.deletion_timestamp_ns, facts.deletion_grace_period_seconds) == (1_748_856_660 * 10**9, 30)
    assert_same_as_reference(full_pod())


@pytest.mark.parametrize("place", range(FULL_POD_PLACES))
def test_every_field_damaged_alone_reads_like_the_reference(place: int) -> None:
    assert_same_as_reference(full_pod())
    for wrong in ([0, 1, True, False, 1.0, 2.5, "", "x", None, [], ["a"], {}, {"a": "b"}]):
        raw = full_pod()
        parent, key = slots(raw)[place]
        parent[key] = wrong
        assert_same_as_reference(raw)
        if isinstance(wrong, dict):
            parent[key] = MappingProxyType(wrong)
            assert_same_as_reference(raw)
    raw = full_pod()
    parent, key = slots(raw)[place]
    if isinstance(parent[key], dict):
        parent[key] = MappingProxyType(parent[key])
        assert_same_as_reference(raw)


# ---- remembered values never stand in for a different input ------------------------------------------

@pytest.mark.parametrize("order", [[" 1 ", "1", 1, 1.0, True, 10**30, 1e30, "1e30"],
                                   [1e30, 10**30, True, 1.0, 1, "1"]])
def test_equal_but_differently_typed_quantities_are_read_separately(order: list[object]) -> None:
    for quantity in order:
        for name in ("cpu", "memory", "nvidia.com/gpu"):
            raw = deployment_pod(containers=[{"name": "a", "resources": {"requests": {name: quantity}}}])
            assert_same_as_reference(raw)


@pytest.mark.parametrize("spec", [
    # The summed requests lose the GPU (a negative overhead or a second container cancels it); the container
    # still names it, and pod_claims reads each container's own requests (the draw hypothesis once found).
    {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
     "overhead": {"cpu": 1, "nvidia.com/gpu": "-1"}},
    {"containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
                    {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "-1"}}}]},
    {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
     "initContainers": [{"name": "i", "resources": {"limits": {"deviceclass.resource.kubernetes.io/gpu": "2"}}}],
     "overhead": {"deviceclass.resource.kubernetes.io/gpu": "-2"}},
])
def test_extended_resources_cancelled_in_the_sum_are_still_read_as_claims(spec: dict[str, Any]) -> None:
    pod = state_pod_from_dict(deployment_pod(**spec))
    assert pod.claims is not None and pod.claims.containers
    assert_same_as_reference(deployment_pod(**spec))


@pytest.mark.parametrize("limit", ["lots", "1e", 7])
def test_a_limit_beside_its_request_is_still_read_as_a_quantity(limit: object) -> None:
    # The request decides the sum, but the checked reading refuses a limit that is no quantity (a draw found it).
    raw = deployment_pod(containers=[{"name": "a", "resources": {"requests": {"cpu": "100m"},
                                                                 "limits": {"memory": "1", "cpu": limit}}}])
    assert_same_as_reference(raw)
    if isinstance(limit, str):
        with pytest.raises(InvalidInput, match=r"^spec.containers\[0\].resources.limits.cpu: "):
            state_pod_from_dict(raw)


def test_a_remembered_request_set_does_not_hide_a_bool_quantity() -> None:
    pod_from_dict(deployment_pod(containers=[{"name": "a", "resources": {"requests": {"cpu": 1}}}]))
    with pytest.raises(InvalidInput) as excinfo:
        pod_from_dict(deployment_pod(containers=[{"name": "a", "resources": {"requests": {"cpu": True}}}]))
    assert str(excinfo.value) == \
        "spec.containers[0].resources.requests.cpu: quantity must be a string or number, not True"


def test_requests_with_init_containers_and_sidecars_are_remembered_by_role() -> None:
    app = {"name": "app", "resources": {"requests": {"cpu": "300m", "memory": "1Gi"}}}
    init = {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}
    sidecar = {**init, "restartPolicy": "Always"}
    as_init = pod_from_dict(deployment_pod(containers=[app], initContainers=[init])).requests
    as_sidecar = pod_from_dict(deployment_pod(containers=[app], initContainers=[sidecar])).requests
    assert (as_init.milli_cpu, as_init.memory) == (2000, 2**30)
    assert (as_sidecar.milli_cpu, as_sidecar.memory) == (2300, 2**30 + 64 * 2**20)
    assert pod_from_dict(deployment_pod(containers=[app], initContainers=[init])).requests is as_init
    for raw in (deployment_pod(containers=[app], initContainers=[init]),
                deployment_pod(containers=[app], initContainers=[sidecar]),
                deployment_pod(containers=[app], initContainers=[sidecar], overhead={"cpu": "100m"}),
                deployment_pod(containers=[app], resources={"requests": {"cpu": "4"}})):
        assert_same_as_reference(raw)


def test_remembered_labels_and_tolerations_do_not_hide_wrong_types() -> None:
    pod_from_dict(deployment_pod())
    raw = deployment_pod()
    raw["metadata"]["labels"] = {"app": 1, "pod-template-hash": "7c9f8d6b5"}
    with pytest.raises(InvalidInput) as excinfo:
        pod_from_dict(raw)
    assert str(excinfo.value) == "metadata.labels.app: expected a string, got int"
    raw = deployment_pod()
    raw["spec"]["tolerations"][1]["key"] = 7
    with pytest.raises(InvalidInput) as excinfo:
        pod_from_dict(raw)
    assert str(excinfo.value) == "spec.tolerations[1].key: expected a string, got int"


# ---- error messages name the exact field ----------------------------------------------------------------

@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p["spec"]["tolerations"].append({"key": 1}), "spec.tolerations[2].key: expected a string, got int"),
        (lambda p: p["spec"]["tolerations"].append("all"), "spec.tolerations[2]: expected an object, got str"),
        (lambda p: p["spec"].update(tolerations={"key": "k"}), "spec.tolerations: expected a list, got dict"),
        (lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"),
         "spec.containers[0].resources.requests.cpu: quantities must match the regular expression "
         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': 'lots'"),
        (lambda p: p["spec"]["containers"][0]["resources"].update(limits={"nvidia.com/gpu": []}),
         "spec.containers[0].resources.requests.nvidia.com/gpu: quantity must be a string or number, not list"),
        (lambda p: p["spec"]["containers"][0]["resources"].update(limits=["memory"]),
         "spec.containers[0].resources.limits: expected an object, got list"),
        (lambda p: p["spec"]["containers"][0].update(resources="big"),
         "spec.containers[0].resources: expected an object, got str"),
        (lambda p: p["spec"]["containers"].append(["sidecar"]), "spec.containers[1]: expected an object, got list"),
        (lambda p: p["spec"].update(initContainers=[{"name": "i", "resources": {"requests": {"cpu": {}}}}]),
         "spec.initContainers[0].resources.requests.cpu: quantity must be a string or number, not dict"),
        (lambda p: p["spec"]["containers"][0]["ports"][0].update(hostPort="80"),
         "ports[0].hostPort: expected an integer, got str"),
        (lambda p: p["spec"].update(nodeSelector={"pool": 1}), "spec.nodeSelector.pool: expected a string, got int"),
        (lambda p: p["metadata"].update(labels={1: "a"}), "metadata.labels: keys must be strings"),
        (lambda p: p["metadata"].update(name=None, generateName=5),
         "metadata.generateName: expected a string, got int"),
        (lambda p: p["metadata"].update(namespace=[]), "metadata.namespace: expected a string, got list"),
        (lambda p: p["spec"].update(priority="high"), "spec.priority: expected an integer, got str"),
        (lambda p: p["spec"].update(priority=True), "spec.priority: expected an integer, got bool"),
        (lambda p: p["spec"].update(schedulerName=0), "spec.schedulerName: expected a string, got int"),
        (lambda p: p["spec"].update(affinity={"podAffinity": []}),
         "spec.affinity.podAffinity: expected an object, got list"),
        (lambda p: p["status"].update(phase=1), "status.phase: expected a string, got int"),
    ],
)
def test_error_messages_name_the_field(change: Callable[[dict[str, Any]], None], message: str) -> None:
    pod_from_dict(deployment_pod())  # the unchanged pod is remembered first
    raw = deployment_pod()
    change(raw)
    with pytest.raises(InvalidInput) as excinfo:
        pod_from_dict(raw)
    assert str(excinfo.value) == message
    assert_same_as_reference(raw)


def test_the_first_wrong_field_in_reading_order_is_named() -> None:
    raw = deployment_pod(affinity={"nodeAffinity": "x"}, tolerations=[{"key": 1}])
    raw["metadata"]["uid"] = 5
    with pytest.raises(InvalidInput, match=r"^spec\.affinity\.nodeAffinity: expected an object, got str$"):
        pod_from_dict(raw)
    raw["spec"]["affinity"] = None
    with pytest.raises(InvalidInput, match=r"^metadata\.uid: "):
        pod_from_dict(raw)
    raw["metadata"]["uid"] = "u"
    raw["spec"]["containers"][0]["ports"] = [{"hostPort": "1"}]
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "?"
    with pytest.raises(InvalidInput, match=r"^spec\.containers\[0\]\.resources\.requests\.cpu: "):
        pod_from_dict(raw)


# ---- the caches stay bounded and share equal values ---------------------------------------------------

def test_fast_path_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # The cluster state's pods sum whole-unit requests from the quantities' texts (_whole_units_by_text).
    caches = (reader_constraints._labels_by_items, reader_constraints._tolerations_by_items,
              reader_resources._resources_by_containers, reader_resources._whole_units_by_text)
    for cache in caches:
        monkeypatch.setattr(cache, "limit", 4)
        cache.clear()
    pods = []
    for i in range(40):
        raw = deployment_pod(tolerations=[{"key": f"k{i}", "operator": "Exists"}])
        raw["metadata"]["labels"] = {"app": "web", "n": str(i)}
        raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{i + 1}m"
        pods.append(pod_from_dict(raw))
        assert state_pod_from_dict(raw).requests is pods[-1].requests
    for cache in caches:
        assert 0 < len(cache) <= 4
    assert [(p.labels["n"], p.tolerations[0].key, p.requests.milli_cpu) for p in pods] == \
        [(str(i), f"k{i}", i + 1) for i in range(40)]


def test_pods_of_one_deployment_share_labels_requests_and_tolerations() -> None:
    first, second = pod_from_dict(deployment_pod()), pod_from_dict(deployment_pod())
    assert first.labels is second.labels
    assert first.requests is second.requests
    assert first.tolerations is second.tolerations
    assert first.quota is second.quota
    assert first.tolerations == (Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
                                 Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"))
    assert (first.requests.milli_cpu, first.requests.memory) == (50, 64 * 2**20)


# ---- built pods are ordinary frozen Pods ------------------------------------------------------------------

def test_built_pods_are_ordinary_frozen_pods() -> None:
    raw = full_pod()
    pod = pod_from_dict(raw)
    expected = reference_pod_from_dict(raw)
    assert type(pod) is Pod and pod == expected and hash(pod) == hash(expected)
    assert repr(pod) == repr(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pod.name = "other"  # type: ignore[misc]
    for frozen in (pod, expected):  # no new attributes either (the error type varies with the Python version)
        with pytest.raises((AttributeError, TypeError)):
            frozen.extra = 1  # type: ignore[attr-defined]
    assert copy.copy(pod) == pod
    assert dataclasses.replace(pod, name="other").name == "other"


@pytest.mark.parametrize(("cpus", "milli_cpu"), [(["100m", "200m"], 300), (["0.5m", "0.5m"], 1), (["0.1", "1.5m"], 102),
                                                 (["1", "250m"], 1250)])
def test_requests_in_whole_units_equal_the_exact_sum(cpus: list[str], milli_cpu: int) -> None:
    # Whole millicores are summed as integers; a fraction of one takes the exact sum, rounded once, as upstream.
    raw = deployment_pod(containers=[{"name": f"c{i}", "resources": {"requests": {"cpu": cpu}}}
                                     for i, cpu in enumerate(cpus)])
    assert state_pod_from_dict(raw).requests.milli_cpu == milli_cpu == pod_from_dict(raw).requests.milli_cpu


# ---- running pods whose status resources differ from their spec (in-place resize) ------------------------------

# Whole units mostly (the fast path's domain), now and then a value only the exact reading takes ("0.5m").
SOME_REQUESTS = st.fixed_dictionaries({}, optional={
    "cpu": st.sampled_from(["100m", "250m", "1", "2", "1500m", "0.5m"]),
    "memory": st.sampled_from(["64Mi", "128Mi", "1Gi", "1.5"])})


@st.composite
def resized_pods(draw: st.DrawFn) -> dict[str, Any]:
    """A bound pod with valid quantities whose container (or pod-level) statuses report other requests."""
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    containers = [{"name": n, "resources": {"requests": draw(SOME_REQUESTS), "limits": draw(SOME_REQUESTS)}}
                  for n in names]
    statuses = []
    for name in draw(st.lists(st.sampled_from([*names, *names, "other"]), max_size=3)):
        cs: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            cs["allocatedResources"] = draw(SOME_REQUESTS)
        if draw(st.integers(0, 3)):
            cs["resources"] = {"requests": draw(SOME_REQUESTS)} if draw(st.integers(0, 3)) else {}
        statuses.append(cs)
    status: dict[str, Any] = {"phase": "Running", "containerStatuses": statuses}
    if draw(st.integers(0, 3)) == 0:
        status.update(allocatedResources=draw(SOME_REQUESTS), resources={"requests": draw(SOME_REQUESTS)})
    if draw(st.integers(0, 4)) == 0:
        status["conditions"] = [{"type": "PodResizePending", "status": "True",
                                 "reason": draw(st.sampled_from(["Infeasible", "Deferred"]))}]
    return {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": containers},
            "status": status}


@settings(max_examples=300, deadline=None)
@given(resized_pods())
def test_resized_pods_count_what_the_exact_reading_counts(raw: dict[str, Any]) -> None:
    exact = requests_as_resources(pod_requests(pod_resource_spec(raw["spec"]), pod_resource_status(raw["status"])))
    assert state_pod_from_dict(raw).requests == exact


@st.composite
def running_pods_reporting_their_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A bound pod whose container statuses repeat their containers' requests, as a v1.33+ kubelet reports every
    running container's ``resources``; now and then one reports other requests, allocated resources, or a status
    of a container the spec does not have, a sidecar's status, or an Infeasible resize."""
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    containers = [{"name": n, "resources": {"requests": draw(SOME_REQUESTS), "limits": draw(SOME_REQUESTS)}}
                  for n in names]
    spec: dict[str, Any] = {"nodeName": "n", "containers": containers}
    statuses = [{"name": c["name"], "resources": {"requests": dict(c["resources"]["requests"])}} for c in containers]
    init_statuses = []
    if draw(st.booleans()):
        sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": draw(SOME_REQUESTS)}}
        spec["initContainers"] = [sidecar]
        init_statuses.append({"name": "s", "resources": {"requests": dict(sidecar["resources"]["requests"])}})
    twist = draw(st.integers(0, 5))
    if twist == 1:
        statuses[0]["resources"] = {"requests": draw(SOME_REQUESTS)}
    elif twist == 2:
        statuses[0]["allocatedResources"] = draw(SOME_REQUESTS)
    elif twist == 3:
        statuses.append({"name": "other", "resources": {"requests": draw(SOME_REQUESTS)}})
    elif twist == 4:
        statuses[0]["resources"] = {}
    status: dict[str, Any] = {"phase": "Running", "containerStatuses": statuses}
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if draw(st.integers(0, 4)) == 0:
        status["conditions"] = [{"type": "PodResizePending", "status": "True",
                                 "reason": draw(st.sampled_from(["Infeasible", "Deferred"]))}]
    return {"kind": "Pod", "metadata": {"name": "p"}, "spec": spec, "status": status}


@settings(max_examples=300, deadline=None)
@given(running_pods_reporting_their_requests())
def test_statuses_that_repeat_the_spec_count_what_the_full_reading_counts(raw: dict[str, Any]) -> None:
    """The reader skips the status of a pod whose container statuses only repeat their requests: its requests and
    non-zero requests are still those of the full reading of spec and status (upstream's podRequests)."""
    spec, status = pod_resource_spec(raw["spec"]), pod_resource_status(raw["status"])
    pod = state_pod_from_dict(raw)
    assert pod.requests == requests_as_resources(pod_requests(spec, status))
    assert pod.non_zero == pod_non_zero_requests(spec, status)


def test_a_status_repeating_the_spec_is_not_read_again() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}
    repeated = {"containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}
    resized = {"containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]}
    assert not reader_resources.says_more_than_spec(repeated, spec)
    assert reader_resources.says_more_than_spec(resized, spec)
    assert reader_resources.says_more_than_spec(repeated)  # without the spec: read in full, as before
