"""A namespace's exposure (webhook.exposure): who may use each class, the bands and their preempting classes,
the PDBs, held against a reference written from the rules in plain loops, on clusters drawn so that preemptible
and safe bands, restricted classes, shared tenants and PDB-protected pods all come up often."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cluster.model import (
    LabelSelector,
    Namespace,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    ResourceQuota,
    ScopedResourceSelectorRequirement,
)
from webhook.cluster.selectors import label_selector_matches
from webhook.cluster.snapshot import ClusterState
from webhook.config import Config, parse_config
from webhook.exposure import compute_exposure, index_of, running_pod
from webhook.exposure.compute import access_table
from webhook.exposure.report import policy_report

NAMESPACES = ("team-a", "team-b", "team-c", "kube-system")
TENANT_OF = {"team-a": "red", "team-b": "blue", "team-c": "blue"}  # kube-system: no label, its own tenant
CLASS_NAMES = ("low", "mid", "high", "never", "crit")


def cluster(classes: list[PriorityClass], pods: list[Pod], pdbs: list[PodDisruptionBudget],
            quotas: Sequence[ResourceQuota] = ()) -> ClusterState:
    state = ClusterState()
    for ns in NAMESPACES:
        labels = {"tenant": TENANT_OF[ns]} if ns in TENANT_OF else {}
        state.upsert(Namespace(ns, labels))
    for obj in [*classes, *pods, *pdbs, *quotas]:
        state.upsert(obj)
    return state


def config(**document: Any) -> Config:
    return parse_config({"guardrails": {"tenantLabel": "tenant"}, **document}, "test")


# ---- the reference --------------------------------------------------------------------------------------------
def reference_tenant(namespace: str, state: ClusterState) -> str:
    labels = state.namespaces[namespace].labels if namespace in state.namespaces else {}
    return f"label:{labels['tenant']}" if labels.get("tenant") else f"ns:{namespace}"


def reference_may_use(cls: PriorityClass, namespace: str, state: ClusterState, cfg: Config) -> bool:
    for rule in cfg.quota.classes:
        if cls.name in rule.match.names or (rule.match.value_at_least is not None
                                            and cls.value >= rule.match.value_at_least):
            labels = {**(state.namespaces[namespace].labels if namespace in state.namespaces else {}),
                      "kubernetes.io/metadata.name": namespace}
            allowed = namespace in rule.allowed_namespaces or (
                rule.namespace_selector is not None and label_selector_matches(rule.namespace_selector, labels))
            if not allowed:
                return False
            break
    limited = any(s.scope_name == "PriorityClass" and s.operator == "In" and cls.name in s.values
                  for entry in cfg.quota.limited_resources for s in entry.match_scopes)
    if not limited:
        return True
    return any(s.scope_name == "PriorityClass" and s.operator == "In" and cls.name in s.values
               for q in state.quotas_in(namespace) for s in q.scope_selector)


def reference(state: ClusterState, cfg: Config) -> dict[str, Any]:
    namespaces = sorted({*state.namespaces, *state.pods_by_namespace})
    tenants_using = {
        cls.name: {reference_tenant(ns, state) for ns in namespaces if reference_may_use(cls, ns, state, cfg)}
        for cls in state.priority_classes.values()}
    out: dict[str, Any] = {}
    for ns in namespaces:
        own = reference_tenant(ns, state)
        bands: dict[int, dict[str, Any]] = {}
        pdbs = sorted(state.pdbs_in(ns), key=lambda p: p.name)
        protected_names: dict[str, list[str]] = {p.name: [] for p in pdbs}
        for pod in state.pods.values():
            if pod.namespace != ns or not pod.node_name or pod.phase in ("Succeeded", "Failed") or pod.deleting:
                continue
            band = bands.setdefault(pod.priority or 0, {"pods": 0, "protected": 0, "classes": set()})
            band["pods"] += 1
            band["classes"].add(pod.priority_class_name)
            # disruptedPods does not matter: it is a moment of an eviction, not who the budget is for.
            selecting = [p for p in pdbs if p.selector is not None and not p.selector.is_empty() and pod.labels
                         and label_selector_matches(p.selector, pod.labels)]
            if selecting:
                band["protected"] += 1
            for p in selecting:
                protected_names[p.name].append(pod.name)
        out[ns] = {
            "bands": [(prio, sorted(b["classes"]), b["pods"], b["protected"],
                       [(c.name, c.value, len(tenants_using[c.name] - {own}), own in tenants_using[c.name])
                        for c in sorted(state.priority_classes.values(), key=lambda c: (-c.value, c.name))
                        if c.value > prio and c.preemption_policy == "PreemptLowerPriority"])
                      for prio, b in sorted(bands.items())],
            "pdbs": [(p.name, len(protected_names[p.name]), p.disruptions_allowed) for p in pdbs],
        }
    return out


def computed(state: ClusterState, cfg: Config) -> dict[str, Any]:
    return {e.namespace: {
        "bands": [(b.priority, list(b.classes), b.pods, b.pdb_protected,
                   [(c.name, c.value, c.other_tenants, c.own_tenant) for c in b.preempting_classes]) for b in e.bands],
        "pdbs": [(p.name, p.pods, p.disruptions_allowed) for p in e.pdbs]} for e in compute_exposure(state, cfg)}


# ---- drawn clusters -------------------------------------------------------------------------------------------
@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterState, Config]:
    values = draw(st.lists(st.sampled_from([0, 10, 100, 1000, 1000, 100000]), min_size=len(CLASS_NAMES),
                           max_size=len(CLASS_NAMES)))
    classes = [PriorityClass(name, value, preemption_policy="Never" if name == "never" else "PreemptLowerPriority")
               for name, value in zip(CLASS_NAMES, values, strict=True)]
    pods = []
    for i in range(draw(st.integers(0, 25))):
        cls = draw(st.sampled_from([*classes, None]))
        pods.append(Pod(
            name=f"p{i}", namespace=draw(st.sampled_from(NAMESPACES)), uid=f"u{i}",
            labels={"app": draw(st.sampled_from(["web", "db", "batch"]))} if draw(st.booleans()) else {},
            node_name=draw(st.sampled_from(["n1", "n2", ""])),
            priority=cls.value if cls is not None else draw(st.sampled_from([None, 0, 5])),
            priority_class_name=cls.name if cls is not None else "",
            phase=draw(st.sampled_from(["Running", "Running", "Pending", "Succeeded", "Failed"])),
            deleting=draw(st.booleans()) and draw(st.booleans())))
    pdbs = []
    for i in range(draw(st.integers(0, 4))):
        selector = draw(st.sampled_from([
            LabelSelector({"app": "web"}), LabelSelector({"app": "db"}), LabelSelector(), None,
            LabelSelector(match_expressions=()),
        ]))
        disrupted = frozenset({"p1"}) if draw(st.booleans()) else frozenset()
        pdbs.append(PodDisruptionBudget(f"pdb{i}", draw(st.sampled_from(NAMESPACES)), selector,
                                        draw(st.integers(0, 2)), disrupted))
    quotas = []
    if draw(st.booleans()):
        scope = ScopedResourceSelectorRequirement("PriorityClass", "In", ("crit",))
        quotas.append(ResourceQuota("crit-pods", draw(st.sampled_from(NAMESPACES)), hard={}, scope_selector=(scope,)))
    document: dict[str, Any] = {}
    rules = draw(st.sampled_from([
        [], [{"match": {"names": ["high"]}, "allowedNamespaces": ["team-a"]}],
        [{"match": {"valueAtLeast": 1000}, "namespaceSelector": {"matchLabels": {"tenant": "blue"}}}],
        [{"match": {"names": ["mid"]}, "allowedNamespaces": []},
         {"match": {"names": ["mid"]}, "allowedNamespaces": ["team-c"]}],
        # The first rule that selects a class decides, even when a later one would refuse.
        [{"match": {"names": ["mid", "low"]}, "allowedNamespaces": ["team-a", "team-b"]},
         {"match": {"valueAtLeast": 0}, "allowedNamespaces": ["team-c"]}]]))
    if rules:
        document["classes"] = rules
    if draw(st.booleans()):
        document["limitedResources"] = [{"resource": "pods", "matchScopes": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["crit"]}]}]
    cfg = config(quota=document) if document else config()
    return cluster(classes, pods, pdbs, quotas), cfg


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_the_exposure_equals_the_reference(drawn: tuple[ClusterState, Config]) -> None:
    state, cfg = drawn
    assert computed(state, cfg) == reference(state, cfg)


@st.composite
def changes(draw: st.DrawFn, state: ClusterState) -> list[Pod | PodDisruptionBudget | str]:
    """Pod updates (what the informers deliver: binding, phase, deletion, labels, class), pod deletions ("ns/name")
    PDB selector changes and PDB status changes (the budget left only), in any order."""
    found: list[Pod | PodDisruptionBudget | str] = []
    for _ in range(draw(st.integers(1, 12))):
        pods = sorted(state.pods)
        pdbs = sorted(((pdb.namespace, pdb.name), pdb) for pdbs in state.pdbs_by_namespace.values()
                      for pdb in pdbs.values())
        kind = draw(st.sampled_from(["pod", "pod", "pod", "delete", "pdb", "budget"]))
        if kind == "budget" and pdbs:
            pdb = draw(st.sampled_from(pdbs))[1]
            found.append(replace(pdb, disruptions_allowed=pdb.disruptions_allowed + draw(st.sampled_from([-1, 1]))))
        elif kind == "pdb":
            found.append(PodDisruptionBudget(draw(st.sampled_from(["pdb0", "pdb9"])), draw(st.sampled_from(NAMESPACES)),
                                             draw(st.sampled_from([LabelSelector({"app": "web"}),
                                                                   LabelSelector({"app": "batch"}), None])),
                                             draw(st.integers(0, 2))))
        elif kind == "delete" and pods:
            found.append(draw(st.sampled_from(pods)))
        else:
            base = state.pods[draw(st.sampled_from(pods))] if pods and draw(st.booleans()) else \
                Pod(name=f"new{len(found)}", namespace=draw(st.sampled_from(NAMESPACES)), priority=10,
                    priority_class_name="low", phase="Running")
            found.append(replace(base, node_name=draw(st.sampled_from(["n1", "", base.node_name])),
                                 phase=draw(st.sampled_from(["Running", "Succeeded", base.phase])),
                                 deleting=draw(st.booleans()) and draw(st.booleans()),
                                 labels=draw(st.sampled_from([{"app": "web"}, {"app": "batch"}, {}, base.labels])),
                                 priority=draw(st.sampled_from([10, 1000, base.priority]))))
    return found


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_index_kept_pod_change_by_pod_change_equals_one_built_afresh(data: st.DataObject) -> None:
    state, cfg = data.draw(clusters())
    index = index_of(state)
    state.pod_listener = index.pod_changed
    for change in data.draw(changes(state)):
        if isinstance(change, str):
            state.delete("Pod", change)
        else:
            state.upsert(change)
            if isinstance(change, PodDisruptionBudget):
                index.pdbs_changed(change.namespace, state.pdbs_in(change.namespace),
                                   state.pods_by_namespace.get(change.namespace, {}).values())
        if data.draw(st.booleans()):  # read between changes: what a read keeps (each PDB's budget) stays true
            table = access_table(state, cfg)
            kept = [index.exposure(ns, state.pdbs_in(ns), table, state.namespaces, "tenant") for ns in NAMESPACES]
            assert kept == compute_exposure(state, cfg, list(NAMESPACES))
    table = access_table(state, cfg)
    kept = [index.exposure(ns, state.pdbs_in(ns), table, state.namespaces, "tenant") for ns in NAMESPACES]
    assert kept == compute_exposure(state, cfg, list(NAMESPACES))
    assert computed(state, cfg) == reference(state, cfg)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_recount_in_steps_with_pod_changes_between_them_equals_one_built_afresh(data: st.DataObject) -> None:
    """The exposure scan recounts a namespace whose PDB selectors changed one step of pods at a time, giving the event
    loop (and so the informers) a turn between steps: what changed meanwhile is neither lost nor counted twice."""
    state, cfg = data.draw(clusters())
    index = index_of(state)
    state.pod_listener = index.pod_changed
    namespace = data.draw(st.sampled_from(NAMESPACES))
    state.upsert(PodDisruptionBudget("pdb-new", namespace, data.draw(st.sampled_from(
        [LabelSelector({"app": "web"}), LabelSelector({"app": "batch"})])), 1))
    steps = index.recount(namespace, state.pdbs_in(namespace), state.pods_by_namespace.get(namespace, {}).values(),
                          step=data.draw(st.integers(1, 3)))
    assert steps is not None
    for change in data.draw(changes(state)):  # pod changes only: this recount is about one PDB change
        next(steps, None)
        if isinstance(change, str):
            state.delete("Pod", change)
        elif isinstance(change, Pod):
            state.upsert(change)
    for _ in steps:
        pass
    table = access_table(state, cfg)
    fresh = index_of(state)
    assert [index.exposure(ns, state.pdbs_in(ns), table, state.namespaces, "tenant") for ns in NAMESPACES] == \
        [fresh.exposure(ns, state.pdbs_in(ns), table, state.namespaces, "tenant") for ns in NAMESPACES]


def test_a_recount_counts_a_bounded_step_of_pods_at_a_time_and_takes_over_only_at_its_end() -> None:
    pods = [victim(f"web-{i}", labels={"app": "web"}) for i in range(1000)]
    state = cluster([HIGH, LOW], pods, [])
    index = index_of(state)
    state.pod_listener = index.pod_changed
    pdb = PodDisruptionBudget("web", "team-b", LabelSelector({"app": "web"}), 0)
    state.upsert(pdb)
    steps = index.recount("team-b", [pdb], state.pods_by_namespace["team-b"].values(), step=100)
    assert steps is not None
    table = access_table(state, config())
    taken = 0
    for _ in steps:
        taken += 1
        # Until its last step the namespace reads the counts in use (and its PDB selects nothing yet).
        assert index.exposure("team-b", [pdb], table, state.namespaces, "tenant").pdbs[0].pods == 0
    assert taken == 10
    assert index.exposure("team-b", [pdb], table, state.namespaces, "tenant").pdbs[0].pods == 1000
    assert index.recount("team-b", [pdb], state.pods_by_namespace["team-b"].values()) is None  # counted now


def test_an_abandoned_recount_leaves_the_counts_in_use_and_keeps_no_log() -> None:
    state = cluster([HIGH, LOW], [victim(f"web-{i}", labels={"app": "web"}) for i in range(10)], [])
    index = index_of(state)
    state.pod_listener = index.pod_changed
    pdb = PodDisruptionBudget("web", "team-b", LabelSelector({"app": "web"}), 0)
    steps = index.recount("team-b", [pdb], state.pods_by_namespace["team-b"].values(), step=2)
    assert steps is not None
    next(steps)
    steps.close()  # e.g. the scan was cancelled
    state.upsert(victim("web-late", labels={"app": "web"}))
    assert not index._recounts
    table = access_table(state, config())
    assert index.exposure("team-b", [pdb], table, state.namespaces, "tenant").bands[0].pods == 11
    assert index.recount("team-b", [pdb], state.pods_by_namespace["team-b"].values()) is not None  # still to do


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_a_report_never_names_another_namespace_or_another_namespace_s_pod(drawn: tuple[ClusterState, Config]) -> None:
    state, cfg = drawn
    for exposure in compute_exposure(state, cfg):
        text = json.dumps(policy_report(exposure, timestamp=0))
        others = [ns for ns in NAMESPACES if ns != exposure.namespace]
        assert not [ns for ns in others if f'"{ns}"' in text or f"{ns}/" in text]
        for pod in state.pods.values():
            if pod.namespace != exposure.namespace:
                assert pod.name not in {n for p in exposure.pdbs for n in p.pod_names}


# ---- the rules, one at a time ----------------------------------------------------------------------------------
HIGH = PriorityClass("high", 1000)
LOW = PriorityClass("low", 10)
NEVER = PriorityClass("polite", 5000, preemption_policy="Never")
SAME = PriorityClass("same", 10)


def victim(name: str, ns: str = "team-b", **fields: Any) -> Pod:
    return Pod(name=name, namespace=ns, node_name="n1", priority=10, priority_class_name="low",
               **{"phase": "Running", **fields})


def test_only_higher_classes_that_preempt_threaten_a_band() -> None:
    state = cluster([HIGH, LOW, NEVER, SAME], [victim("v")], [])
    (exposure,) = [e for e in compute_exposure(state, config()) if e.namespace == "team-b"]
    (band,) = exposure.bands
    assert [c.name for c in band.preempting_classes] == ["high"]  # not Never, not an equal value


def test_a_class_quota_classes_restricts_counts_only_the_tenants_it_allows() -> None:
    state = cluster([HIGH, LOW], [victim("v")], [])
    cfg = config(quota={"classes": [{"match": {"names": ["high"]}, "allowedNamespaces": ["team-c"]}]})
    (exposure,) = compute_exposure(state, cfg, ["team-b"])
    (cls,) = exposure.bands[0].preempting_classes
    # team-c is tenant blue, team-b's own: no other tenant may use it.
    assert (cls.other_tenants, cls.own_tenant, cls.restricted_by) == (0, True, ("quota.classes[0]",))
    assert exposure.preemptible_pods == 1 and exposure.preemptible_by_other_tenants == 0


def test_a_limited_class_is_usable_only_where_a_quota_covers_its_scope() -> None:
    crit = PriorityClass("crit", 2000)
    quota = ResourceQuota("crit", "kube-system", hard={},
                          scope_selector=(ScopedResourceSelectorRequirement("PriorityClass", "In", ("crit",)),))
    cfg = config(quota={"limitedResources": [{"resource": "pods", "matchScopes": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["crit"]}]}]})
    (exposure,) = compute_exposure(cluster([crit, LOW], [victim("v")], [], [quota]), cfg, ["team-b"])
    (cls,) = exposure.bands[0].preempting_classes
    assert (cls.other_tenants, cls.own_tenant, cls.restricted_by) == (1, False, ("quota.limitedResources",))


def test_running_means_bound_not_terminal_not_being_deleted() -> None:
    assert running_pod(victim("v"))
    assert running_pod(victim("v", phase="Pending"))  # bound, its kubelet not started yet
    assert not running_pod(Pod(name="p", namespace="team-b"))
    assert not running_pod(victim("v", phase="Succeeded"))
    assert not running_pod(victim("v", deleting=True))


def test_a_pdb_protects_the_pods_it_selects_and_reports_its_budget() -> None:
    pods = [victim(f"web-{i}", labels={"app": "web"}) for i in range(25)] + [victim("other", labels={"app": "x"})]
    pdb = PodDisruptionBudget("web", "team-b", LabelSelector({"app": "web"}), 0)
    (exposure,) = compute_exposure(cluster([HIGH, LOW], pods, [pdb]), config(), ["team-b"])
    assert exposure.bands[0].pdb_protected == 25 and exposure.bands[0].pods == 26
    (budget,) = exposure.pdbs
    assert (budget.pods, budget.disruptions_allowed, len(budget.pod_names)) == (25, 0, 20)
    report = policy_report(exposure, timestamp=0)
    (result,) = [r for r in report["results"] if r["rule"] == "pdb-budget"]
    assert result["result"] == "warn" and result["properties"]["pods"].endswith("(+5 more)")
