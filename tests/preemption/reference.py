"""A deliberately simple, slow transcription of docs/preemption.md, used as an oracle.

No indexes and no incremental state: every Filter call recomputes resource sums, host ports,
inter-pod affinity counts, topology-spread counts and, for pods with claims, the storage filters from the whole
simulated world. The storage filters cover claims bound to CSI PersistentVolumes (``volumes``: VolumeRestrictions'
ReadWriteOncePod, NodeVolumeLimits, VolumeBinding's node affinity, VolumeZone), what the random volume clusters of
test_volume_fast_path.py draw. Only the
model dataclasses are shared with the fast predictor; selector matching, filters, PDB counting,
victim selection and node choice are written again here from the spec.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

from webhook.cluster.model import LabelSelector, LabelSelectorRequirement, Node, Pod, PodAffinityTerm
from webhook.cluster.snapshot import ClusterState
from webhook.preemption.results import ScoringArgs

from .reference_scoring import ReferenceScoring, num_to_find, pre_filter_names

NOW = 2**63
OFFSET = 2**31

World = dict[str, tuple[Pod, str]]  # pod key -> (pod, node name)


# ---- selectors ---------------------------------------------------------------------------------------

def req_ok(r: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    if r.operator == "In":
        return r.key in labels and labels[r.key] in r.values
    if r.operator == "NotIn":
        return r.key not in labels or labels[r.key] not in r.values
    if r.operator == "Exists":
        return r.key in labels
    if r.operator == "DoesNotExist":
        return r.key not in labels
    if r.operator in ("Gt", "Lt") and r.key in labels and len(r.values) == 1:
        try:
            a, b = int(labels[r.key]), int(r.values[0])
        except ValueError:
            return False
        return a > b if r.operator == "Gt" else a < b
    return False


def sel_ok(s: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    if s is None:
        return False
    return all(labels.get(k) == v for k, v in s.match_labels.items()) and all(
        req_ok(r, labels) for r in s.match_expressions)


def node_affinity_ok(pod: Pod, node: Node) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_node_affinity is None:
        return True
    for term in pod.required_node_affinity:
        if not term.match_expressions and not term.match_fields:
            continue
        if all(req_ok(r, node.labels) for r in term.match_expressions) and all(
                r.key == "metadata.name" and req_ok(r, {"metadata.name": node.name}) for r in term.match_fields):
            return True
    return False


def tolerated(pod: Pod, key: str, value: str, effect: str) -> bool:
    for t in pod.tolerations:
        if t.effect and t.effect != effect:
            continue
        if t.key and t.key != key:
            continue
        if t.operator == "Exists" or (t.operator in ("", "Equal") and t.value == value):
            return True
    return False


def term_ok(term: PodAffinityTerm, owner_ns: str, target: Pod, ns_labels: Mapping[str, str]) -> bool:
    namespaces = set(term.namespaces)
    if not term.namespaces and term.namespace_selector is None:
        namespaces = {owner_ns}
    in_ns = target.namespace in namespaces or (term.namespace_selector is not None
                                               and sel_ok(term.namespace_selector, ns_labels))
    return in_ns and sel_ok(term.label_selector, target.labels)


# ---- the reference simulator -------------------------------------------------------------------------

def prio(p: Pod) -> int:
    return p.priority if p.priority is not None else 0


def start(p: Pod) -> int:
    return p.start_time_ns if p.start_time_ns is not None else NOW


def importance(p: Pod) -> tuple[int, int, str, str, str]:
    return (-prio(p), start(p), p.uid, p.namespace, p.name)


class Reference:
    def __init__(self, state: ClusterState, *, empty_selector_matches_all: bool = False,
                 stop_at_first: bool = True, gated_reserve: bool = True, percentage: int = 10,
                 absolute: int = 100, scoring: ScoringArgs | None = None) -> None:
        self.nodes = dict(state.nodes)
        self.ns_labels = {n: ns.labels for n, ns in state.namespaces.items()}
        self.world: World = {p.key: (p, p.node_name) for p in state.pods.values()
                             if p.node_name in self.nodes and p.phase not in ("Succeeded", "Failed")}
        # Before v1.37 the queue never records a gated pod's nomination.
        self.nominated = [p for p in state.pods.values() if not p.node_name and p.nominated_node_name
                          and p.phase not in ("Succeeded", "Failed") and (gated_reserve or not p.scheduling_gated)]
        self.pdbs = sorted((b for per in state.pdbs_by_namespace.values() for b in per.values()),
                           key=lambda b: (b.namespace, b.name))
        self.empty_all = empty_selector_matches_all
        self.stop_at_first = stop_at_first
        self.percentage = percentage
        self.absolute = absolute
        self.scoring = ReferenceScoring(self, scoring or ScoringArgs())
        self.pvcs = dict(state.volumes.pvcs)
        self.pvs = dict(state.volumes.pvs)
        self.csinodes = dict(state.volumes.csinodes)

    def nsl(self, ns: str) -> Mapping[str, str]:
        return self.ns_labels.get(ns, {})

    # -- filters --
    def static(self, pod: Pod, node: Node) -> tuple[str, tuple[str, ...]] | None:
        if node.unschedulable and not tolerated(pod, "node.kubernetes.io/unschedulable", "", "NoSchedule"):
            return ("UU", ("node(s) were unschedulable",))
        if pod.node_name and pod.node_name != node.name:
            return ("UU", ("node(s) didn't match the requested node name",))
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not tolerated(pod, taint.key, taint.value,
                                                                               taint.effect):
                return ("UU", ("node(s) had untolerated taint(s)",))
        if not node_affinity_ok(pod, node):
            return ("UU", ("node(s) didn't match Pod's node affinity/selector",))
        return None

    def resources(self, pod: Pod, node: Node, on_node: list[Pod]) -> tuple[str, tuple[str, ...]] | None:
        a, r = node.allocatable, pod.requests
        reasons = []
        if len(on_node) + 1 > a.pods:
            reasons.append("Too many pods")
        if r.milli_cpu or r.memory or r.ephemeral_storage or r.scalar:
            uu = False
            checks = [("cpu", r.milli_cpu, a.milli_cpu, sum(p.requests.milli_cpu for p in on_node)),
                      ("memory", r.memory, a.memory, sum(p.requests.memory for p in on_node)),
                      ("ephemeral-storage", r.ephemeral_storage, a.ephemeral_storage,
                       sum(p.requests.ephemeral_storage for p in on_node))]
            checks += [(k, v, a.scalar.get(k, 0), sum(p.requests.scalar.get(k, 0) for p in on_node))
                       for k, v in sorted(r.scalar.items())]
            for name, want, have, used in checks:
                if want > 0 and want > have - used:
                    reasons.append(f"Insufficient {name}")
                    uu = uu or want > have
            if reasons and uu:
                return ("UU", tuple(reasons))
        return ("U", tuple(reasons)) if reasons else None

    def spread(self, pod: Pod, node: Node, world: World, initial: World) -> tuple[str, tuple[str, ...]] | None:
        hard = [c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]
        for c in hard:
            if c.topology_key not in node.labels:
                return ("UU", ("node(s) didn't match pod topology spread constraints (missing required label)",))
        for c in hard:
            s = c.label_selector
            keys = [k for k in c.match_label_keys if k in pod.labels]
            if s is not None and keys:
                s = LabelSelector(s.match_labels, s.match_expressions + tuple(
                    LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in keys))

            def eligible(n: Node, c: Any = c) -> bool:
                if not all(x.topology_key in n.labels for x in hard):
                    return False
                if c.node_affinity_policy == "Honor" and not node_affinity_ok(pod, n):
                    return False
                return not (c.node_taints_policy == "Honor" and any(
                    t.effect in ("NoSchedule", "NoExecute") and not tolerated(pod, t.key, t.value, t.effect)
                    for t in n.taints))

            domains = {n.labels[c.topology_key] for n in self.nodes.values() if eligible(n)}
            counts = dict.fromkeys(domains, 0)
            # Upstream quirk: PreFilter skips terminating pods (and counts nothing for an empty selector),
            # but RemovePod/AddPod during preemption do not; so removed terminating pods count -1.
            counted_initially = s is not None and not s.is_empty()
            for key in set(world) | set(initial):
                p, n_name = world.get(key) or initial[key]
                n = self.nodes[n_name]
                if p.namespace != pod.namespace or not eligible(n) or not sel_ok(s, p.labels):
                    continue
                value = n.labels[c.topology_key]
                present, initially = key in world, key in initial
                contribution = 1 if initially and counted_initially and not p.deleting else 0
                if initially and not present:
                    contribution -= 1
                if present and not initially:
                    contribution += 1
                counts[value] = counts.get(value, 0) + contribution
            floor = min((counts[d] for d in domains), default=2**31 - 1)
            if c.min_domains is not None and len(domains) < c.min_domains:
                floor = 0
            self_match = 1 if sel_ok(s, pod.labels) else 0
            if counts.get(node.labels[c.topology_key], 0) + self_match - floor > c.max_skew:
                return ("U", ("node(s) didn't match pod topology spread constraints",))
        return None

    def inter_pod(self, pod: Pod, node: Node, world: World) -> tuple[str, tuple[str, ...]] | None:
        placed = [(p, self.nodes[n]) for p, n in world.values()]
        if pod.pod_affinity:
            counts: Counter[tuple[str, str]] = Counter()
            for p, n in placed:
                if all(term_ok(t, pod.namespace, p, self.nsl(p.namespace)) for t in pod.pod_affinity):
                    for t in pod.pod_affinity:
                        if t.topology_key in n.labels:
                            counts[(t.topology_key, n.labels[t.topology_key])] += 1
            if any(t.topology_key not in node.labels for t in pod.pod_affinity):
                return ("UU", ("node(s) didn't match pod affinity rules",))
            if not all(counts[(t.topology_key, node.labels[t.topology_key])] > 0 for t in pod.pod_affinity) and not (
                    not counts and all(term_ok(t, pod.namespace, pod, self.nsl(pod.namespace))
                                        for t in pod.pod_affinity)):
                return ("UU", ("node(s) didn't match pod affinity rules",))
        for t in pod.pod_anti_affinity:
            value = node.labels.get(t.topology_key)
            if value is not None and any(
                    n.labels.get(t.topology_key) == value and term_ok(t, pod.namespace, p, self.nsl(p.namespace))
                    for p, n in placed):
                return ("U", ("node(s) didn't match pod anti-affinity rules",))
        for p, n in placed:
            for t in p.pod_anti_affinity:
                value = n.labels.get(t.topology_key)
                if value is not None and node.labels.get(t.topology_key) == value and term_ok(
                        t, p.namespace, pod, self.nsl(pod.namespace)):
                    return ("U", ("node(s) didn't satisfy existing pods anti-affinity rules",))
        return None

    def dynamic(self, pod: Pod, node: Node, world: World, initial: World) -> tuple[str, tuple[str, ...]] | None:
        on_node = [p for p, n in world.values() if n == node.name]
        wanted = [h for h in pod.host_ports if h.port]
        for h in wanted:
            for p in on_node:
                for u in p.host_ports:
                    if u.port == h.port and u.protocol == h.protocol and "0.0.0.0" in (u.host_ip, h.host_ip):
                        return ("U", ("node(s) didn't have free ports for the requested pod ports",))
                    if u.port == h.port and u.protocol == h.protocol and u.host_ip == h.host_ip:
                        return ("U", ("node(s) didn't have free ports for the requested pod ports",))
        return (self.resources(pod, node, on_node) or self.volumes(pod, node, world, initial)
                or self.spread(pod, node, world, initial) or self.inter_pod(pod, node, world))

    # -- storage (claims bound to CSI volumes) --
    def claims_of(self, pod: Pod) -> list[tuple[str, str]]:
        """(namespace, claim name) of each persistentVolumeClaim volume."""
        if pod.volumes is None:
            return []
        return [(pod.namespace, c.claim_name) for c in pod.volumes.claims if c.template is None]

    def csi_volumes(self, pod: Pod) -> set[tuple[str, str]]:
        found = set()
        for key in self.claims_of(pod):
            claim = self.pvcs.get(f"{key[0]}/{key[1]}")
            pv = self.pvs.get(claim.volume_name) if claim is not None else None
            if pv is not None and pv.csi_driver:
                found.add((pv.csi_driver, pv.csi_volume_handle))
        return found

    def volumes(self, pod: Pod, node: Node, world: World, initial: World) -> tuple[str, tuple[str, ...]] | None:
        claims = self.claims_of(pod)
        if not claims:
            return None
        # VolumeRestrictions: PreFilter counts the pod's ReadWriteOncePod claims a bound pod uses (same namespace);
        # the dry run's AddPod/RemovePod then add and subtract each pod's references by claim name alone.
        exclusive = {name for ns, name in claims
                     if "ReadWriteOncePod" in self.pvcs[f"{ns}/{name}"].access_modes}
        if exclusive:
            count = sum(1 for name in exclusive if any(
                (pod.namespace, name) in self.claims_of(p) for p, _ in initial.values()))
            for key in set(world) ^ set(initial):
                p = (world.get(key) or initial[key])[0]
                refs = sum(1 for _, name in self.claims_of(p) if name in exclusive)
                count += refs if key in world else -refs
            if count > 0:
                return ("U", ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
                              "already in-use by another pod",))
        # NodeVolumeLimits: the distinct volumes of the node's pods per driver, plus the pod's new ones.
        csinode = self.csinodes.get(node.name)
        limits = {d.name: d.allocatable_count for d in csinode.drivers
                  if d.allocatable_count is not None} if csinode is not None else {}
        attached: set[tuple[str, str]] = set()
        for p, n in world.values():
            if n == node.name:
                attached |= self.csi_volumes(p)
        new = self.csi_volumes(pod) - attached
        for driver in {d for d, _ in new}:
            if driver in limits and (sum(1 for d, _ in attached if d == driver)
                                     + sum(1 for d, _ in new if d == driver)) > limits[driver]:
                return ("U", ("node(s) exceed max volume count",))
        pvs = [self.pvs[self.pvcs[f"{ns}/{name}"].volume_name] for ns, name in claims]
        # VolumeBinding: each bound volume's required node affinity.
        for pv in pvs:
            if pv.node_affinity is not None and not any(
                    (term.match_expressions or term.match_fields)
                    and all(req_ok(r, node.labels) for r in term.match_expressions)
                    and all(r.key == "metadata.name" and req_ok(r, {"metadata.name": node.name})
                            for r in term.match_fields) for term in pv.node_affinity):
                return ("UU", ("node(s) didn't match PersistentVolume's node affinity",))
        # VolumeZone: a node with a zone or region label must hold one of each volume's zones (or regions).
        keys = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
        if any(k in node.labels for k in keys):
            for pv in pvs:
                for k in keys:
                    if k not in pv.labels:
                        continue
                    allowed = [z.strip() for z in pv.labels[k].split("__")]
                    if not all(allowed):
                        continue
                    value = node.labels.get(k)
                    if value is None:
                        value = node.labels.get(k.replace("failure-domain.beta", "topology"))
                    if value not in allowed:
                        return ("UU", ("node(s) had no available volume zone",))
        return None

    def filter(self, pod: Pod, name: str, world: World, initial: World) -> tuple[str, tuple[str, ...]] | None:
        node = self.nodes[name]
        failed = self.static(pod, node)
        if failed:
            return failed
        noms = [p for p in self.nominated if p.nominated_node_name == name and prio(p) >= prio(pod)
                and p.key != pod.key and not (pod.uid and p.uid == pod.uid)]
        if noms:
            with_noms = dict(world)
            for p in noms:
                with_noms[p.key] = (p, name)
            failed = self.dynamic(pod, node, with_noms, initial)
            if failed:
                return failed
        return self.dynamic(pod, node, world, initial)

    # -- preemption --
    def pdb_flags(self, victims: list[Pod]) -> list[bool]:
        allowed = [b.disruptions_allowed for b in self.pdbs]
        flags = []
        for v in victims:
            bad = False
            for i, b in enumerate(self.pdbs):
                if b.namespace != v.namespace or b.selector is None:
                    continue
                if b.selector.is_empty():
                    if not self.empty_all:
                        continue
                elif (not v.labels and not self.empty_all) or not sel_ok(b.selector, v.labels):
                    continue
                if v.name in b.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    bad = True
                    if self.stop_at_first:
                        break
            flags.append(bad)
        return flags

    def select_victims(self, pod: Pod, name: str) -> tuple[list[Pod], set[str]] | tuple[str, tuple[str, ...]]:
        lower = sorted((p for p, n in self.world.values() if n == name and prio(p) < prio(pod)), key=importance)
        if not lower:
            return ("UU", ("No preemption victims found for incoming pod",))
        world = {k: v for k, v in self.world.items() if k not in {p.key for p in lower}}
        failed = self.filter(pod, name, world, self.world)
        if failed:
            return failed
        flags = self.pdb_flags(lower)
        victims: list[Pod] = []
        violating: set[str] = set()
        for group in (True, False):
            for p, bad in zip(lower, flags, strict=True):
                if bad != group:
                    continue
                world[p.key] = (p, name)
                if self.filter(pod, name, world, self.world):
                    del world[p.key]
                    victims.append(p)
                    if bad:
                        violating.add(p.key)
        return sorted(victims, key=importance), violating

    def kubelet_admits(self, pod: Pod, name: str) -> bool:
        """The kubelet's own admission (generalFilter) of a pod bound by spec.nodeName: node affinity,
        NoExecute taints, host ports and resources; no cordon, NoSchedule, inter-pod or spread checks."""
        node = self.nodes.get(name)
        if node is None or not node_affinity_ok(pod, node):
            return False
        if any(t.effect == "NoExecute" and not tolerated(pod, t.key, t.value, t.effect) for t in node.taints):
            return False
        on_node = [p for p, n in self.world.values() if n == name]
        for h in pod.host_ports:
            for p in on_node:
                if any(u.port == h.port and u.protocol == h.protocol
                       and (u.host_ip == h.host_ip or "0.0.0.0" in (u.host_ip, h.host_ip)) for u in p.host_ports):
                    return False
        return self.resources(pod, node, on_node) is None

    def predict(self, pod: Pod) -> dict[str, Any]:
        names = sorted(self.nodes)
        out: dict[str, Any] = {"outcome": "Unschedulable", "node": None, "victims": [], "pdb_violations": 0,
                               "candidate_nodes": 0, "tied_nodes": [], "expected_delay_seconds": 0,
                               "preemption_status": "", "tied_victims": {}}
        if not names:
            return out
        if pod.node_name:  # the scheduler never sees it: the kubelet admits it or rejects it
            if not self.kubelet_admits(pod, pod.node_name):
                return out
            self.world[pod.key] = (pod, pod.node_name)
            return {**out, "outcome": "Fits", "node": pod.node_name}
        statuses: dict[str, tuple[str, tuple[str, ...]]] = {}
        nominated = pod.nominated_node_name
        if nominated in self.nodes:
            failed = self.filter(pod, nominated, self.world, self.world)
            if failed is None:
                self.world[pod.key] = (dataclasses.replace(pod, node_name=nominated), nominated)
                return {**out, "outcome": "Fits", "node": nominated, "tied_nodes": [nominated]}
            statuses[nominated] = failed
        feasible = []
        for name in names:
            if name == nominated:
                continue
            failed = self.filter(pod, name, self.world, self.world)
            if failed is None:
                feasible.append(name)
            else:
                statuses[name] = failed
        if feasible:
            return self.fits(pod, feasible, out)

        def msg(reasons: list[tuple[str, ...]]) -> str:
            c = Counter(r for rs in reasons for r in rs)
            return f"preemption: 0/{len(names)} nodes are available: " + ", ".join(
                sorted(f"{n} {r}" for r, n in c.items())) + "."

        if pod.preemption_policy == "Never":
            return {**out, "preemption_status": "preemption: not eligible due to preemptionPolicy=Never."}
        nn = pod.nominated_node_name
        if nn and statuses.get(nn, ("UU", ()))[0] != "UU" and any(
                prio(p) < prio(pod) and p.deleting and p.preempted_by_scheduler
                for p, n in self.world.values() if n == nn):
            return {**out, "preemption_status":
                    "preemption: not eligible due to a terminating pod on the nominated node."}
        potential = [n for n in names if statuses.get(n, ("UU", ()))[0] == "U"]
        not_helpful = ("Preemption is not helpful for scheduling",)
        if not potential:
            return {**out, "preemption_status": msg([not_helpful] * len(names))}
        candidates: dict[str, tuple[list[Pod], set[str]]] = {}
        dry: dict[str, tuple[str, ...]] = {}
        for name in potential:
            got = self.select_victims(pod, name)
            if isinstance(got[0], list):
                candidates[name] = got
            else:
                dry[name] = got[1]
        if not candidates:
            return {**out, "preemption_status": msg([dry.get(n, not_helpful) for n in names])}

        def score(name: str) -> tuple[int, int, int, int, int]:
            victims, violating = candidates[name]
            top = prio(victims[0])
            return (len(violating), top, sum(prio(v) + OFFSET for v in victims), len(victims),
                    -min(start(v) for v in victims if prio(v) == top))

        best = min(score(n) for n in candidates)
        tied = sorted(n for n in candidates if score(n) == best)
        chosen = tied[0]
        victims, violating = candidates[chosen]
        for v in victims:
            del self.world[v.key]
        self.world[pod.key] = (dataclasses.replace(pod, node_name=chosen), chosen)
        return {**out, "outcome": "Preempts", "node": chosen,
                "victims": [(v.namespace, v.name, prio(v), v.key in violating) for v in victims],
                "pdb_violations": len(violating), "candidate_nodes": len(candidates), "tied_nodes": tied,
                "tied_victims": {n: [(v.namespace, v.name, prio(v)) for v in candidates[n][0]] for n in tied},
                "expected_delay_seconds": max(30 if v.termination_grace_period_seconds is None
                                              else v.termination_grace_period_seconds for v in victims)}


    def fits(self, pod: Pod, feasible: list[str], out: dict[str, Any]) -> dict[str, Any]:
        """schedulePod once nodes fit: the only one, or the best score of the first numFeasibleNodesToFind (by
        name); when more fit than that, the node is not claimed (no tiedNodes)."""
        narrowed = pre_filter_names(pod)
        total = len(self.nodes) if narrowed is None else len(narrowed & set(self.nodes))
        limit = num_to_find(self.scoring.args.percentage_of_nodes_to_score, total) if self.scoring.has_plugins() else 1
        sampled = len(feasible) > limit
        scored = feasible[:limit]
        if len(scored) == 1:
            chosen, tied = scored[0], [scored[0]]
        else:
            totals = self.scoring.totals(self.world, pod, scored)
            top = max(totals.values())
            tied = sorted(n for n in scored if totals[n] == top)
            chosen = tied[0]
        self.world[pod.key] = (dataclasses.replace(pod, node_name=chosen), chosen)
        return {**out, "outcome": "Fits", "node": chosen, "tied_nodes": [] if sampled else tied}


def reference_predict(state: ClusterState, pods: list[Pod], **options: Any) -> list[dict[str, Any]]:
    ref = Reference(state, **options)
    return [ref.predict(p) for p in pods]
