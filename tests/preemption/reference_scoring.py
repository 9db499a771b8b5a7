"""The reference oracle's Score step: upstream's score plugins written again, per node, from the whole simulated
world (no index, no grouping, no bulk form), with upstream's PreScore/Score/NormalizeScore and the weights.

Only the model dataclasses (and the ``ScoringArgs`` they are configured by) are shared with the fast predictor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from webhook.cluster.model import (
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
)
from webhook.preemption.results import ScoringArgs

if TYPE_CHECKING:
    from .reference import Reference, World

MAX = 100


def go_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_round(x: float) -> int:
    """math.Round of a non-negative float."""
    return math.floor(x + 0.5)


def default_normalize(scores: dict[str, int], reverse: bool) -> dict[str, int]:
    top = 0
    for v in scores.values():
        top = max(top, v)
    if top == 0:
        return {k: (MAX if reverse else v) for k, v in scores.items()}
    out = {}
    for k, v in scores.items():
        s = go_div(MAX * v, top)
        out[k] = MAX - s if reverse else s
    return out


def num_to_find(percentage: int, total: int) -> int:
    if total < 100:
        return total
    if percentage == 0:
        percentage = max(50 - total // 125, 5)
    return max(total * percentage // 100, 100)


def pre_filter_names(pod: Pod) -> set[str] | None:
    if not pod.required_node_affinity:
        return None
    out: set[str] = set()
    for term in pod.required_node_affinity:
        names: set[str] | None = None
        for r in term.match_fields:
            if r.key == "metadata.name" and r.operator == "In":
                names = set(r.values) if names is None else names & set(r.values)
        if names is None:
            return None
        out |= names
    return out


class ReferenceScoring:
    """Upstream's Score plugins over the reference's world."""

    def __init__(self, ref: Reference, args: ScoringArgs) -> None:
        self.ref = ref
        self.args = args

    def on_node(self, world: World, name: str) -> list[Pod]:
        return [p for p, n in world.values() if n == name]

    # -- TaintToleration --
    def taint(self, pod: Pod, feasible: list[str]) -> dict[str, int] | None:
        tolerations = [t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule")]
        raw = {}
        for name in feasible:
            count = 0
            for taint in self.ref.nodes[name].taints:
                if taint.effect != "PreferNoSchedule":
                    continue
                ok = False
                for t in tolerations:
                    if t.effect and t.effect != taint.effect:
                        continue
                    if t.key and t.key != taint.key:
                        continue
                    if t.operator == "Exists" or (t.operator in ("", "Equal") and t.value == taint.value):
                        ok = True
                if not ok:
                    count += 1
            raw[name] = count
        return default_normalize(raw, True)

    # -- NodeAffinity --
    def node_affinity(self, pod: Pod, feasible: list[str]) -> dict[str, int] | None:
        from .reference import req_ok
        if not pod.preferred_node_affinity:
            return None
        raw = {}
        for name in feasible:
            node = self.ref.nodes[name]
            total = 0
            for preferred in pod.preferred_node_affinity:
                term: NodeSelectorTerm = preferred.preference
                ok = all(req_ok(r, node.labels) for r in term.match_expressions) and all(
                    r.key == "metadata.name" and req_ok(r, {"metadata.name": name}) for r in term.match_fields)
                if ok and (term.match_expressions or term.match_fields):
                    total += preferred.weight
            raw[name] = total
        return default_normalize(raw, False)

    # -- resources --
    def node_resource(self, world: World, name: str, resource: str, non_zero: bool) -> tuple[int, int]:
        node = self.ref.nodes[name]
        pods = self.on_node(world, name)
        if resource == "cpu":
            return node.allocatable.milli_cpu, sum(p.non_zero[0] if non_zero else p.requests.milli_cpu for p in pods)
        if resource == "memory":
            return node.allocatable.memory, sum(p.non_zero[1] if non_zero else p.requests.memory for p in pods)
        if resource == "ephemeral-storage":
            return node.allocatable.ephemeral_storage, sum(p.requests.ephemeral_storage for p in pods)
        if resource not in node.allocatable.scalar:
            return 0, 0
        return node.allocatable.scalar[resource], sum(p.requests.scalar.get(resource, 0) for p in pods)

    def pod_resource(self, pod: Pod, resource: str, non_zero: bool) -> int:
        if resource == "cpu":
            return pod.non_zero[0] if non_zero else pod.requests.milli_cpu
        if resource == "memory":
            return pod.non_zero[1] if non_zero else pod.requests.memory
        if resource == "ephemeral-storage":
            return pod.requests.ephemeral_storage
        return pod.requests.scalar.get(resource, 0)

    def vectors(self, world: World, pod: Pod, name: str, resources: list[str], non_zero: bool,
                ) -> tuple[list[int], list[int], list[int]]:
        requested, allocated, allocatable = [], [], []
        for resource in resources:
            want = self.pod_resource(pod, resource, non_zero)
            scalar = resource not in ("cpu", "memory", "ephemeral-storage")
            have, used = (0, 0) if scalar and want == 0 else self.node_resource(world, name, resource, non_zero)
            if have == 0:
                requested.append(0)
                allocated.append(0)
                allocatable.append(0)
            else:
                requested.append(used + want)
                allocated.append(used)
                allocatable.append(have)
        return requested, allocated, allocatable

    def fit(self, world: World, pod: Pod, feasible: list[str]) -> dict[str, int]:
        strategy = self.args.fit_strategy
        names = [r.name for r in strategy.resources]
        weights = [r.weight for r in strategy.resources]
        out = {}
        for name in feasible:
            requested, _, allocatable = self.vectors(world, pod, name, names, True)
            score = total_weight = 0
            if strategy.type == "RequestedToCapacityRatio":
                shape = [(u, s * 10) for u, s in strategy.shape]

                def f(p: int, shape: list[tuple[int, int]] = shape) -> int:
                    for i, (u, s) in enumerate(shape):
                        if p <= u:
                            if i == 0:
                                return s
                            pu, ps = shape[i - 1]
                            return ps + go_div((s - ps) * (p - pu), u - pu)
                    return shape[-1][1]

                for i in range(len(names)):
                    if allocatable[i] == 0:
                        continue
                    r = f(100) if requested[i] > allocatable[i] else f(requested[i] * 100 // allocatable[i])
                    if r > 0:
                        score += r * weights[i]
                        total_weight += weights[i]
                out[name] = math.floor(score / total_weight + 0.5) if total_weight else 0
                continue
            for i in range(len(names)):
                if allocatable[i] == 0:
                    continue
                cap, req = allocatable[i], requested[i]
                if strategy.type == "LeastAllocated":
                    r = 0 if req > cap else (cap - req) * 100 // cap
                else:
                    r = min(req, cap) * 100 // cap
                score += r * weights[i]
                total_weight += weights[i]
            out[name] = score // total_weight if total_weight else 0
        return out

    def balanced(self, world: World, pod: Pod, feasible: list[str]) -> dict[str, int] | None:
        names = [r.name for r in self.args.balanced_resources]
        if all(self.pod_resource(pod, r, False) == 0 for r in names):
            return None

        def balance(values: list[int], capacity: list[int]) -> int:
            fractions = [min(v / c, 1.0) for v, c in zip(values, capacity, strict=True) if c]
            std = 0.0
            if len(fractions) == 2:
                std = abs((fractions[0] - fractions[1]) / 2)
            elif len(fractions) > 2:
                mean = sum(fractions) / len(fractions)
                std = math.sqrt(sum((x - mean) ** 2 for x in fractions) / len(fractions))
            return int((1 - std) * 100)

        out = {}
        for name in feasible:
            requested, allocated, allocatable = self.vectors(world, pod, name, names, False)
            out[name] = 50 + (50 + balance(requested, allocatable) - balance(allocated, allocatable)) // 2
        return out

    # -- ImageLocality --
    def images(self, pod: Pod, feasible: list[str]) -> dict[str, int]:
        nodes = self.ref.nodes
        out = {}
        for name in feasible:
            total = 0
            for image in pod.images:
                holders = [n for n in nodes.values() if any(image in i.names for i in n.images)]
                if not any(image in i.names for i in nodes[name].images):
                    continue
                size = next(i.size_bytes for i in holders[0].images if image in i.names)
                total += int(size * (len(holders) / len(nodes)))
            count = len(pod.images)
            if count == 0:
                out[name] = 0
                continue
            low, high = 23 * 1024 * 1024, 1000 * 1024 * 1024 * count
            clamped = min(max(total, low), high)
            out[name] = 100 * (clamped - low) // (high - low)
        return out

    # -- PodTopologySpread --
    def spread(self, world: World, pod: Pod, feasible: list[str]) -> dict[str, int] | None:
        from .reference import node_affinity_ok, sel_ok, tolerated
        if pod.topology_spread:
            constraints = [c for c in pod.topology_spread if c.when_unsatisfiable == "ScheduleAnyway"]
            selectors: list[LabelSelector | None] = []
            for c in constraints:
                s = c.label_selector
                keys = [k for k in c.match_label_keys if k in pod.labels]
                if s is not None and keys:
                    s = LabelSelector(s.match_labels, s.match_expressions + tuple(
                        LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in keys))
                selectors.append(s)
            require_all = True
        else:
            system = self.args.spread_defaulting == "System"
            if system:
                from webhook.cluster.model import TopologySpreadConstraint
                defaults = [TopologySpreadConstraint(3, "kubernetes.io/hostname", "ScheduleAnyway"),
                            TopologySpreadConstraint(5, "topology.kubernetes.io/zone", "ScheduleAnyway")]
            else:
                defaults = [c for c in self.args.spread_default_constraints
                            if c.when_unsatisfiable == "ScheduleAnyway"]
            selector = pod.controller_selector
            if not defaults or selector is None or selector.is_empty():
                return None
            constraints, selectors, require_all = defaults, [selector] * len(defaults), not system
        if not constraints or not self.ref.nodes:
            return None

        def count(name: str, s: LabelSelector | None) -> int:
            if s is None or s.is_empty():
                return 0
            return sum(1 for p in self.on_node(world, name)
                       if not p.deleting and p.namespace == pod.namespace and sel_ok(s, p.labels))

        def has_all(node: Node) -> bool:
            return all(c.topology_key in node.labels for c in constraints)

        ignored = {n for n in feasible if require_all and not has_all(self.ref.nodes[n])}
        values: list[dict[str, int]] = [{} for _ in constraints]
        for name in feasible:
            if name in ignored:
                continue
            for i, c in enumerate(constraints):
                if c.topology_key != "kubernetes.io/hostname":
                    values[i].setdefault(self.ref.nodes[name].labels.get(c.topology_key, ""), 0)
        weights = [math.log((len(feasible) - len(ignored) if c.topology_key == "kubernetes.io/hostname"
                             else len(values[i])) + 2) for i, c in enumerate(constraints)]
        for name, node in self.ref.nodes.items():
            if require_all and not has_all(node):
                continue
            for i, c in enumerate(constraints):
                if c.node_affinity_policy == "Honor" and not node_affinity_ok(pod, node):
                    continue
                if c.node_taints_policy == "Honor" and any(
                        t.effect in ("NoSchedule", "NoExecute") and not tolerated(pod, t.key, t.value, t.effect)
                        for t in node.taints):
                    continue
                value = node.labels.get(c.topology_key, "")
                if c.topology_key == "kubernetes.io/hostname" or value not in values[i]:
                    continue
                values[i][value] += count(name, selectors[i])
        raw = {}
        for name in feasible:
            if name in ignored:
                raw[name] = 0
                continue
            labels = self.ref.nodes[name].labels
            total = 0.0
            for i, c in enumerate(constraints):
                if c.topology_key not in labels:
                    continue
                n = count(name, selectors[i]) if c.topology_key == "kubernetes.io/hostname" else values[i][
                    labels[c.topology_key]]
                total += n * weights[i] + (c.max_skew - 1)
            raw[name] = go_round(total)
        valid = [raw[n] for n in feasible if n not in ignored]
        low, high = (min(valid), max(max(valid), 0)) if valid else (0, 0)
        return {n: 0 if n in ignored else (MAX if high == 0 else go_div(MAX * (high + low - raw[n]), high))
                for n in feasible}

    # -- InterPodAffinity --
    def inter_pod(self, world: World, pod: Pod, feasible: list[str]) -> dict[str, int] | None:
        from .reference import sel_ok, term_ok
        args = self.args
        has_constraints = bool(pod.preferred_pod_affinity or pod.preferred_pod_anti_affinity)
        if args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return None
        ns_objects = self.ref.ns_labels
        topology: dict[tuple[str, str], int] = {}
        hit = False

        def add(key: str, node: Node, weight: int) -> None:
            nonlocal hit
            if key in node.labels:
                hit = True
                topology[(key, node.labels[key])] = topology.get((key, node.labels[key]), 0) + weight

        def incoming_matches(t: PodAffinityTerm, other: Pod) -> bool:
            # the incoming pod's term with its namespaceSelector merged into namespaces
            namespaces = set(t.namespaces) or ({pod.namespace} if t.namespace_selector is None else set())
            selector = t.namespace_selector
            if selector is not None:
                if selector.is_empty():
                    return sel_ok(t.label_selector, other.labels)
                namespaces |= {ns for ns, labels in ns_objects.items() if sel_ok(selector, labels)}
            return other.namespace in namespaces and sel_ok(t.label_selector, other.labels)

        for other, name in world.values():
            node = self.ref.nodes[name]
            if not node.labels:
                continue
            if has_constraints:
                for w in pod.preferred_pod_affinity:
                    if incoming_matches(w.term, other):
                        add(w.term.topology_key, node, w.weight)
                for w in pod.preferred_pod_anti_affinity:
                    if incoming_matches(w.term, other):
                        add(w.term.topology_key, node, -w.weight)
            own = self.ref.nsl(pod.namespace)
            if args.hard_pod_affinity_weight > 0:
                for t in other.pod_affinity:
                    if term_ok(t, other.namespace, pod, own):
                        add(t.topology_key, node, args.hard_pod_affinity_weight)
            for w in other.preferred_pod_affinity:
                if term_ok(w.term, other.namespace, pod, own):
                    add(w.term.topology_key, node, w.weight)
            for w in other.preferred_pod_anti_affinity:
                if term_ok(w.term, other.namespace, pod, own):
                    add(w.term.topology_key, node, -w.weight)
        if not hit:
            return None
        raw = {n: sum(v for (k, value), v in topology.items() if self.ref.nodes[n].labels.get(k) == value)
               for n in feasible}
        low, high = min(raw.values()), max(raw.values())
        return {n: int(100 * ((v - low) / (high - low))) if high > low else 0 for n, v in raw.items()}

    # -- the whole Score step --
    def totals(self, world: World, pod: Pod, feasible: list[str]) -> dict[str, int]:
        weights = dict(self.args.weights)
        per_plugin = {
            "TaintToleration": lambda: self.taint(pod, feasible),
            "NodeAffinity": lambda: self.node_affinity(pod, feasible),
            "NodeResourcesFit": lambda: self.fit(world, pod, feasible),
            "PodTopologySpread": lambda: self.spread(world, pod, feasible),
            "InterPodAffinity": lambda: self.inter_pod(world, pod, feasible),
            "NodeResourcesBalancedAllocation": lambda: self.balanced(world, pod, feasible),
            "ImageLocality": lambda: self.images(pod, feasible),
        }
        totals = dict.fromkeys(feasible, 0)
        for plugin, score in per_plugin.items():
            if plugin not in weights:
                continue
            scores = score()
            if scores is None:
                continue
            for name in feasible:
                totals[name] += scores[name] * weights[plugin]
        return totals

    def has_plugins(self) -> bool:
        return any(name in dict(self.args.weights) for name in (
            "TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
            "NodeResourcesBalancedAllocation", "ImageLocality"))


def ns_labels_of(ref: Reference, ns: str) -> Mapping[str, str]:
    return ref.ns_labels.get(ns, {})
