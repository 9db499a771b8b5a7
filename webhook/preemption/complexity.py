"""Limits on what one pod asks the predictor to evaluate: terms, constraints, selectors, ports, containers.

A prediction's cost grows with the pod's scheduling constraints times the cluster's size: every required
(anti-)affinity term is matched against every pod of its namespaces, every spread constraint counts pods per
domain over every node, every node selector term is tried on every node. The API server bounds none of these
(only the 3 MiB request body: about 6,000 anti-affinity terms), so a tenant could choose how long its own
prediction takes, and under ``enforce`` a prediction over its budget used to let the pod through (issue #24).

The reader normalises constraints once (``webhook.cluster.reader_constraints.distinct``: repeats count once).
A pod still beyond one of ``POD_LIMITS`` is refused with the field and the limit named (``PodTooComplex``,
HTTP 400 for /preview; under ``enforce`` admission denies it as unpredictable, docs/interfaces.md §6). The
limits are far above what real workloads use (a few terms and constraints, a dozen tolerations) and are
documented in docs/interfaces.md ("What PreemptGuard adds", §3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from webhook.cluster.model import LabelSelector, LabelSelectorRequirement, NodeSelectorTerm, Pod
from webhook.errors import PodTooComplex

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class PodLimit:
    """At most ``maximum`` ``unit`` in ``where`` (counted after repeats are dropped)."""

    where: str
    unit: str
    maximum: int
    count: Callable[[Pod], int]


def _selectors(pod: Pod) -> Iterator[LabelSelector]:
    for term in (*pod.pod_affinity, *pod.pod_anti_affinity):
        if term.label_selector is not None:
            yield term.label_selector
        if term.namespace_selector is not None:
            yield term.namespace_selector
    for constraint in pod.topology_spread:
        if constraint.label_selector is not None:
            yield constraint.label_selector


def _node_terms(pod: Pod) -> tuple[NodeSelectorTerm, ...]:
    return pod.required_node_affinity or ()


def _requirements(pod: Pod) -> Iterator[LabelSelectorRequirement]:
    for selector in _selectors(pod):
        yield from selector.match_expressions
    for term in _node_terms(pod):
        yield from term.match_expressions
        yield from term.match_fields


def selector_requirements(pod: Pod) -> int:
    """Label and node selector requirements in the pod's required terms, spread constraints and nodeSelector."""
    labels = sum(len(s.match_labels) for s in _selectors(pod)) + len(pod.node_selector)
    return labels + sum(1 for _ in _requirements(pod))


def selector_values(pod: Pod) -> int:
    """Values of those requirements, plus the namespaces the required affinity terms name."""
    values = sum(len(r.values) for r in _requirements(pod))
    return values + sum(len(t.namespaces) for t in (*pod.pod_affinity, *pod.pod_anti_affinity))


def containers(pod: Pod) -> int:
    resources = pod.quota.resources
    return len(resources.containers) + len(resources.init_containers)


POD_LIMITS: tuple[PodLimit, ...] = (
    PodLimit(f"spec.affinity.podAffinity.{_REQUIRED}", "terms", 32, lambda p: len(p.pod_affinity)),
    PodLimit(f"spec.affinity.podAntiAffinity.{_REQUIRED}", "terms", 32, lambda p: len(p.pod_anti_affinity)),
    PodLimit(f"spec.affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms", "terms", 32,
             lambda p: len(_node_terms(p))),
    PodLimit("spec.topologySpreadConstraints", "constraints", 32, lambda p: len(p.topology_spread)),
    PodLimit("spec.tolerations", "tolerations", 128, lambda p: len(p.tolerations)),
    PodLimit("spec.containers[*].ports[*].hostPort", "host ports", 256, lambda p: len(p.host_ports)),
    PodLimit("spec.containers and spec.initContainers", "containers", 128, containers),
    PodLimit("the label and node selectors of the required terms, spread constraints and spec.nodeSelector",
             "requirements", 256, selector_requirements),
    PodLimit("the values and namespaces of those requirements and terms", "values", 4096, selector_values),
)


def too_complex(pod: Pod) -> str | None:
    """Why the pod is beyond a limit (the first one it breaks), or None."""
    for limit in POD_LIMITS:
        found = limit.count(pod)
        if found > limit.maximum:
            return (f"{limit.where}: {found:,} distinct {limit.unit}, more than the {limit.maximum:,} PreemptGuard "
                    f"predicts for one pod")
    return None


def check_pod_complexity(pod: Pod) -> None:
    """Raise ``PodTooComplex`` (HTTP 400) naming the field and the limit when the pod is beyond one."""
    reason = too_complex(pod)
    if reason is not None:
        raise PodTooComplex(f"pod {pod.key} is too complex to predict: {reason}")
