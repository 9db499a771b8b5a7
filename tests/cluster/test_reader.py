"""API dicts -> slim model: requests and quota facts on the model, status fields, wrong types."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from webhook.cluster.model import (
    NO_QUOTA_FACTS,
    LabelSelectorRequirement,
    Namespace,
    PodAffinityTerm,
    PredictionTrace,
    Taint,
    Toleration,
)
from webhook.cluster.quantity import parse_quantity
from webhook.cluster.reader import (
    label_selector,
    node_from_dict,
    object_from_dict,
    pdb_from_dict,
    pod_from_dict,
    priority_class_from_dict,
    resource_quota_from_dict,
    state_pod_from_dict,
)
from webhook.errors import InvalidInput
from webhook.routes import GUARDRAIL_DECISION_ANNOTATION, PREDICTION_ANNOTATION, PREDICTION_ID_ANNOTATION

Gi = 2**30
Mi = 2**20


def ctr(name: str, cpu: str | None = None, memory: str | None = None, *, limits: dict[str, Any] | None = None,
        sidecar: bool = False) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    container: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def pod(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", **(metadata or {})},
            "spec": {"containers": [ctr("app", "100m", "64Mi")], **(spec or {})},
            "status": status or {}}


# ---- requests on the model ---------------------------------------------------------------------

def test_pod_requests_on_the_model() -> None:
    model = pod_from_dict(pod({"containers": [ctr("a", "1", "1Gi", limits={"nvidia.com/gpu": "2"})]}))
    assert model.requests.milli_cpu == 1000
    assert model.requests.memory == Gi
    assert dict(model.requests.scalar) == {"nvidia.com/gpu": 2}


def test_pod_without_requests_has_zero_requests() -> None:
    model = pod_from_dict(pod({"containers": [{"name": "a", "image": "x"}]}))
    assert model.requests.is_zero()


# ---- status and metadata ------------------------------------------------------------------------

@pytest.mark.parametrize(("phase", "terminal"), [("Succeeded", True), ("Failed", True), ("Running", False),
                                                 ("Pending", False), ("", False)])
def test_terminal_phases(phase: str, terminal: bool) -> None:
    assert pod_from_dict(pod(status={"phase": phase})).is_terminal is terminal


def test_start_time_and_nanosecond_ordering() -> None:
    older = pod_from_dict(pod(status={"startTime": "2025-06-02T09:30:00.000000001Z"}))
    newer = pod_from_dict(pod(status={"startTime": "2025-06-02T09:30:00.000000002Z"}))
    assert older.start_time_ns is not None and newer.start_time_ns is not None
    assert newer.start_time_ns - older.start_time_ns == 1
    assert pod_from_dict(pod()).start_time_ns is None


def test_invalid_time_names_the_field() -> None:
    with pytest.raises(InvalidInput, match=r"status\.startTime"):
        pod_from_dict(pod(status={"startTime": "yesterday"}))


def test_deletion_timestamp_and_disruption_target() -> None:
    raw = pod(metadata={"deletionTimestamp": "2025-06-02T09:30:00Z"},
              status={"conditions": [
                  {"type": "Ready", "status": "False"},
                  {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
                  {"type": "DisruptionTarget", "status": "False", "reason": "Other"},
              ]})
    model = pod_from_dict(raw)
    assert model.deleting
    assert model.preempted_by_scheduler


@pytest.mark.parametrize(
    "condition",
    [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"},
     {"type": "DisruptionTarget", "status": "False", "reason": "PreemptionByScheduler"}],
)
def test_other_disruption_targets_are_not_preemption(condition: dict[str, str]) -> None:
    model = pod_from_dict(pod(status={"conditions": [condition]}))
    assert not model.preempted_by_scheduler
    assert not model.deleting


def test_only_the_first_disruption_target_condition_counts() -> None:
    raw = pod(status={"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"},
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
    ]})
    assert not pod_from_dict(raw).preempted_by_scheduler


def test_a_predicted_pod_carries_its_prediction_id_and_the_scheduler_s_refusal_until_bound() -> None:
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for"
                            " pod on node n1, preempting 2 victims"}
    meta = {"annotations": {PREDICTION_ID_ANNOTATION: "a1b2"}}
    pending = state_pod_from_dict(pod(metadata=meta, status={"conditions": [scheduled]}))
    assert pending.trace == PredictionTrace("a1b2", True, scheduled["message"])
    assert state_pod_from_dict(pod(metadata=meta)).trace == PredictionTrace("a1b2")
    gated = {**scheduled, "reason": "SchedulingGated", "message": ""}
    assert state_pod_from_dict(pod(metadata=meta, status={"conditions": [gated]})).trace == PredictionTrace("a1b2")
    # Bound: the observer holds the pending pod already; the cache's bound pods carry nothing.
    assert state_pod_from_dict(pod({"nodeName": "n1"}, metadata=meta)).trace is None
    assert state_pod_from_dict(pod(metadata={"annotations": {"other": "x"}})).trace is None
    assert state_pod_from_dict(pod()).trace is None


def test_priority_fields_and_nomination() -> None:
    model = pod_from_dict(pod({"priority": 1000, "priorityClassName": "high", "preemptionPolicy": "Never"},
                              status={"nominatedNodeName": "node-3", "phase": "Pending"}))
    assert (model.priority, model.priority_class_name, model.preemption_policy) == (1000, "high", "Never")
    assert model.nominated_node_name == "node-3"
    assert model.effective_priority == 1000
    unset = pod_from_dict(pod())
    assert unset.priority is None and unset.preemption_policy is None and unset.effective_priority == 0


def test_empty_preemption_policy_is_kept_as_given() -> None:
    # a non-nil "" differs from the computed policy, so admission must see it
    assert pod_from_dict(pod({"preemptionPolicy": ""})).preemption_policy == ""


def test_generate_name_and_default_namespace() -> None:
    model = pod_from_dict({"kind": "Pod", "metadata": {"generateName": "web-"}, "spec": {"containers": []}})
    assert model.name == "web-"
    assert model.namespace == "default"
    assert model.key == "default/web-"


def test_affinity_tolerations_and_scheduling_constraints() -> None:
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    raw = pod({
        "nodeSelector": {"pool": "gpu"},
        "affinity": {
            "nodeAffinity": {required: {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            ]}},
            "podAffinity": {required: [{"labelSelector": {"matchLabels": {"app": "db"}},
                                        "topologyKey": "topology.kubernetes.io/zone"}]},
            "podAntiAffinity": {required: [{"labelSelector": {"matchExpressions": [
                {"key": "app", "operator": "Exists"}]}, "topologyKey": "kubernetes.io/hostname",
                "namespaces": ["team-a"], "namespaceSelector": {}}]},
        },
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "dedicated", "value": "batch"}],
        "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                       "labelSelector": {"matchLabels": {"app": "web"}}}],
        "containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}],
        "terminationGracePeriodSeconds": 120,
    })
    model = pod_from_dict(raw)
    assert dict(model.node_selector) == {"pool": "gpu"}
    assert model.required_node_affinity is not None
    first, second = model.required_node_affinity
    assert first.match_expressions == (LabelSelectorRequirement("zone", "In", ("a", "b")),)
    assert second.match_fields == (LabelSelectorRequirement("metadata.name", "In", ("n1",)),)
    assert model.pod_affinity[0].topology_key == "topology.kubernetes.io/zone"
    anti: PodAffinityTerm = model.pod_anti_affinity[0]
    assert anti.namespaces == ("team-a",)
    assert anti.namespace_selector is not None and anti.namespace_selector.is_empty()
    assert anti.label_selector is not None
    assert anti.label_selector.match_expressions == (LabelSelectorRequirement("app", "Exists"),)
    assert model.tolerations == (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),
                                 Toleration("dedicated", "Equal", "batch", ""))
    assert model.topology_spread[0].max_skew == 2
    assert model.host_ports[0].port == 8080 and model.host_ports[0].protocol == "TCP"
    assert model.termination_grace_period_seconds == 120


def test_no_node_affinity_is_none_not_empty() -> None:
    assert pod_from_dict(pod()).required_node_affinity is None


def test_label_selector_nil_versus_empty() -> None:
    assert label_selector(None, "spec.selector") is None
    empty = label_selector({}, "spec.selector")
    assert empty is not None and empty.is_empty()


# ---- wrong types name the field -----------------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (pod({"priority": "high"}), "spec.priority"),
        (pod({"priority": True}), "spec.priority"),
        (pod({"priorityClassName": 7}), "spec.priorityClassName"),
        (pod({"preemptionPolicy": False}), "spec.preemptionPolicy"),
        (pod({"containers": {"name": "a"}}), "spec.containers"),
        (pod({"containers": [ctr("a", "lots")]}), "spec.containers[0].resources.requests.cpu"),
        (pod({"containers": ["a"]}), "spec.containers[0]"),
        (pod({"initContainers": [ctr("i", limits={"memory": "1 Gi"})]}), "spec.initContainers[0]"),
        (pod({"overhead": {"cpu": []}}), "spec.overhead.cpu"),
        (pod({"nodeSelector": {"a": 1}}), "spec.nodeSelector.a"),
        (pod({"tolerations": "all"}), "spec.tolerations"),
        (pod({"tolerations": [{"key": 1}]}), "spec.tolerations[0].key"),
        (pod(metadata={"labels": ["a"]}), "metadata.labels"),
        (pod(status={"nominatedNodeName": 3}), "status.nominatedNodeName"),
        (pod(status={"startTime": 12}), "status.startTime"),
        ({"kind": "Pod", "metadata": "x"}, "metadata"),
        ({"kind": "Pod", "spec": []}, "spec"),
    ],
)
def test_wrong_types_raise_invalid_input_naming_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as excinfo:
        pod_from_dict(raw)
    assert field in str(excinfo.value)


def test_other_kinds_wrong_types_name_the_field() -> None:
    with pytest.raises(InvalidInput, match=r"^value"):
        priority_class_from_dict({"metadata": {"name": "x"}, "value": "1000"})
    with pytest.raises(InvalidInput, match=r"spec\.unschedulable"):
        node_from_dict({"metadata": {"name": "n"}, "spec": {"unschedulable": "yes"}})
    with pytest.raises(InvalidInput, match=r"status\.allocatable"):
        node_from_dict({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "x"}}})
    with pytest.raises(InvalidInput, match=r"status\.disruptionsAllowed"):
        pdb_from_dict({"metadata": {"name": "p"}, "status": {"disruptionsAllowed": "1"}})
    with pytest.raises(InvalidInput, match=r"spec\.scopeSelector\.matchExpressions\[0\]\.values"):
        resource_quota_from_dict({"metadata": {"name": "q"}, "spec": {"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": [1]}]}}})


# ---- the other kinds ----------------------------------------------------------------------------

def test_node_from_dict() -> None:
    node = node_from_dict({
        "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "a"}},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]},
        "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                   "allocatable": {"cpu": "15890m", "memory": "62594924Ki", "pods": "110",
                                   "ephemeral-storage": "187149391190", "nvidia.com/gpu": "4"}},
    })
    assert node.unschedulable
    assert node.taints == (Taint("k", "v", "NoExecute"),)
    assert node.allocatable.milli_cpu == 15890
    assert node.allocatable.memory == 62594924 * 1024
    assert node.allocatable.pods == 110
    assert node.allocatable.ephemeral_storage == 187149391190
    assert dict(node.allocatable.scalar) == {"nvidia.com/gpu": 4}


def test_node_without_allocatable_uses_capacity() -> None:
    node = node_from_dict({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2", "pods": "10"}}})
    assert (node.allocatable.milli_cpu, node.allocatable.pods) == (2000, 10)


def test_priority_class_defaults() -> None:
    pc = priority_class_from_dict({"metadata": {"name": "x"}})
    assert (pc.value, pc.global_default, pc.preemption_policy) == (0, False, "PreemptLowerPriority")


def test_pdb_and_quota() -> None:
    pdb = pdb_from_dict({"metadata": {"name": "p", "namespace": "ns"},
                         "spec": {"selector": {"matchLabels": {"app": "a"}}},
                         "status": {"disruptionsAllowed": 1, "disruptedPods": {"a-1": "2025-06-02T09:30:00Z"}}})
    assert pdb.disruptions_allowed == 1 and pdb.disrupted_pods == frozenset({"a-1"})
    assert pdb_from_dict({"metadata": {"name": "p"}, "spec": {}}).selector is None
    quota = resource_quota_from_dict({
        "metadata": {"name": "q", "namespace": "ns"},
        "spec": {"hard": {"pods": "5"}, "scopes": ["NotTerminating"], "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
        "status": {"hard": {"pods": "10"}, "used": {"pods": "3"}},
    })
    assert str(quota.hard["pods"]) == "10"  # status.hard is what the controller enforces
    assert str(quota.used["pods"]) == "3"
    assert quota.scopes == ("NotTerminating",)
    assert quota.scope_selector[0].values == ("high",)
    spec_only = resource_quota_from_dict({"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "2"}}})
    assert str(spec_only.hard["cpu"]) == "2"


def test_object_from_dict_dispatches_on_kind() -> None:
    assert isinstance(object_from_dict({"kind": "Namespace", "metadata": {"name": "a"}}), Namespace)
    assert object_from_dict({"kind": "ConfigMap", "metadata": {"name": "a"}}) is None
    assert object_from_dict({"metadata": {"name": "a"}}) is None


# ---- what ResourceQuota admission reads -----------------------------------------------------------------

def test_quota_facts_on_the_model() -> None:
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    raw = pod({"containers": [ctr("app", "250m", limits={"cpu": "1", "memory": "1Gi"})],
               "initContainers": [ctr("proxy", "100m", sidecar=True), ctr("setup", memory="64Mi")],
               "resources": {"limits": {"memory": "2Gi"}}, "overhead": {"cpu": "10m"},
               "activeDeadlineSeconds": 60,
               "affinity": {"podAffinity": {preferred: [
                   {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "namespaces": ["other"]}}]}}},
              status={"qosClass": "Burstable"},
              metadata={"deletionTimestamp": "2025-06-02T09:30:00Z", "deletionGracePeriodSeconds": 30})
    facts = pod_from_dict(raw).quota
    app, = facts.resources.containers
    assert (app.name, app.sidecar) == ("app", False)
    assert {n: str(q) for n, q in app.requests.items()} == {"cpu": "250m", "memory": "1Gi"}  # memory from the limit
    assert {n: str(q) for n, q in app.limits.items()} == {"cpu": "1", "memory": "1Gi"}
    assert [(c.name, c.sidecar) for c in facts.resources.init_containers] == [("proxy", True), ("setup", False)]
    assert {n: str(q) for n, q in facts.resources.pod_limits.items()} == {"memory": "2Gi"}
    assert not facts.resources.pod_requests
    assert {n: str(q) for n, q in facts.resources.overhead.items()} == {"cpu": "10m"}
    assert (facts.qos_class, facts.active_deadline_seconds, facts.cross_namespace_pod_affinity) == \
        ("Burstable", 60, True)
    assert (facts.deletion_timestamp_ns, facts.deletion_grace_period_seconds) == (1_748_856_600 * 10**9, 30)


@pytest.mark.parametrize(("affinity", "cross"), [
    ({}, False),
    ({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "namespaceSelector": {}}]}}, True),
    ({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "namespaces": []}]}}, False),
    ({"nodeAffinity": {}, "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}, False),
])
def test_cross_namespace_pod_affinity(affinity: dict[str, Any], cross: bool) -> None:
    assert pod_from_dict(pod({"affinity": affinity})).quota.cross_namespace_pod_affinity is cross


def test_pods_of_one_workload_share_their_quota_facts() -> None:
    first, second = pod_from_dict(pod(metadata={"name": "a"})), pod_from_dict(pod(metadata={"name": "b"}))
    assert first.quota is second.quota
    assert first.quota.resources.containers[0].requests["cpu"] == parse_quantity("100m")


def test_cluster_state_pods_carry_no_quota_facts() -> None:
    raw = pod(status={"qosClass": "Burstable"})
    assert state_pod_from_dict(raw).quota == NO_QUOTA_FACTS
    assert object_from_dict(raw) == state_pod_from_dict(raw)  # snapshot files read as the informer reads
    # Nor what only the pod under prediction needs (#28): its images (ImageLocality) and its controller's
    # selector (PodTopologySpread's default constraints).
    assert state_pod_from_dict(raw) == replace(pod_from_dict(raw), quota=NO_QUOTA_FACTS, images=(),
                                               controller_selector=None)


@pytest.mark.parametrize(("raw", "message"), [
    (pod({"containers": [ctr("a", "1", limits={"cpu": "lots"})]}),
     "spec.containers[0].resources.limits.cpu: quantities must match the regular expression"),
    (pod({"resources": {"limits": {"memory": []}}}),
     "spec.resources.limits.memory: quantity must be a string or number, not list"),
    (pod({"activeDeadlineSeconds": "60"}), "spec.activeDeadlineSeconds: expected an integer, got str"),
    (pod(status={"qosClass": 1}), "status.qosClass: expected a string, got int"),
    (pod(metadata={"deletionTimestamp": "soon"}), "metadata.deletionTimestamp: invalid RFC 3339 time 'soon'"),
    (pod({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"podAffinityTerm": 1}]}}}),
     "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm: "
     "expected an object, got int"),
])
def test_quota_fields_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput) as excinfo:
        pod_from_dict(raw)
    assert str(excinfo.value).startswith(message)


def test_match_and_mismatch_label_keys_merge_into_the_affinity_selector_as_the_api_server_does() -> None:
    """pkg/registry/core/pod/strategy.go (applyMatchLabelKeysAndMismatchLabelKeys), found by the real-scheduler
    bench: the pod's own values become ``key In`` / ``key NotIn`` requirements; a missing label adds nothing."""
    term = {"labelSelector": {"matchLabels": {"tier": "backend"}}, "topologyKey": "zone",
            "matchLabelKeys": ["app", "absent"], "mismatchLabelKeys": ["team"]}
    pod = pod_from_dict({"metadata": {"name": "p", "labels": {"app": "etl", "team": "data"}}, "spec": {"affinity": {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{**term, "labelSelector": None}]}}}})
    (anti,) = pod.pod_anti_affinity
    assert anti.label_selector is not None
    assert [(r.key, r.operator, r.values) for r in anti.label_selector.match_expressions] == [
        ("app", "In", ("etl",)), ("team", "NotIn", ("data",))]
    (affinity,) = pod.pod_affinity
    assert affinity.label_selector is None  # a nil selector matches nothing: nothing to merge into


def test_a_predicted_pod_s_trace_carries_what_its_admission_patch_wrote_beside_the_id() -> None:
    meta = {"annotations": {PREDICTION_ID_ANNOTATION: "a1b2", GUARDRAIL_DECISION_ANNOTATION: "warned: maxVictims",
                            PREDICTION_ANNOTATION: '{"outcome":"Preempts","node":"n1","victims":2,"pdbViolations":0}'}}
    trace = state_pod_from_dict(pod(metadata=meta)).trace
    assert trace == PredictionTrace("a1b2", False, "", "Preempts", "n1", 2, "warned: maxVictims")
    # Whatever else a pod's owner may have written there is read as absent, never as an error.
    for junk in ("{", "[1]", '{"outcome": 3, "victims": -1}', '{"victims": true}', "x" * 5000):
        odd = {"annotations": {PREDICTION_ID_ANNOTATION: "a1b2", PREDICTION_ANNOTATION: junk}}
        assert state_pod_from_dict(pod(metadata=odd)).trace == PredictionTrace("a1b2")
