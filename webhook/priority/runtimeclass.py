"""The RuntimeClass admission plugin on a pod CREATE: the class's overhead becomes the pod's, its scheduling
constraints are merged into the pod's, and a class that does not exist refuses the pod.

Upstream: plugin/pkg/admission/runtimeclass/admission.go (``Admit``: ``prepareObjects``, ``setOverhead``,
``setScheduling``; ``Validate``: ``validateOverhead``) and pkg/util/tolerations/tolerations.go
(``MergeTolerations``). Every message here is the inner text of ``admission.NewForbidden`` (403).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook.cluster.model import EMPTY_QUANTITIES, FrozenMap, RuntimeClass, Toleration
from webhook.cluster.quantity import Quantity

OVERHEAD_MISMATCH = "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
OVERHEAD_WITHOUT_CLASS = "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"


def runtime_class_not_found(name: str) -> str:
    """``prepareObjects``: neither the informer nor a live GET found the class."""
    return f'pod rejected: RuntimeClass "{name}" not found'


def same_overhead(a: Mapping[str, Quantity] | None, b: Mapping[str, Quantity] | None) -> bool:
    """``apiequality.Semantic.DeepEqual`` of two overheads: quantities by value, nil equal to empty."""
    a, b = a or EMPTY_QUANTITIES, b or EMPTY_QUANTITIES
    return a.keys() == b.keys() and all(a[name].value == b[name].value for name in a)


def set_overhead(pod_overhead: Mapping[str, Quantity], runtime_class: RuntimeClass,
                 ) -> tuple[Mapping[str, Quantity], str | None]:
    """``setOverhead``: the pod's overhead becomes the class's; a pod that set another one is refused."""
    if runtime_class.overhead is None:
        return pod_overhead, None
    if pod_overhead and not same_overhead(runtime_class.overhead, pod_overhead):
        return pod_overhead, OVERHEAD_MISMATCH
    return runtime_class.overhead, None


def validate_overhead(pod_overhead: Mapping[str, Quantity], runtime_class: RuntimeClass | None) -> str | None:
    """``validateOverhead``: the pod's overhead is the class's, or none without a class that defines one."""
    if runtime_class is not None and runtime_class.overhead is not None:
        return None if same_overhead(runtime_class.overhead, pod_overhead) else OVERHEAD_MISMATCH
    return OVERHEAD_WITHOUT_CLASS if pod_overhead else None


def _is_superset(ss: Toleration, t: Toleration) -> bool:
    """``isSuperset``: ``ss`` tolerates every taint ``t`` does (tolerationSeconds are not modelled: the scheduler's
    filters ignore them, so a set merged without them tolerates the same taints)."""
    if ss == t:
        return True
    if t.key != ss.key and (ss.key != "" or ss.operator != "Exists"):
        return False
    if t.effect != ss.effect and ss.effect != "":
        return False
    if ss.operator in ("Equal", ""):
        return t.operator in ("Equal", "") and t.value == ss.value
    return ss.operator == "Exists"


def merge_tolerations(first: Sequence[Toleration], second: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """``MergeTolerations``: both sets, a toleration another one covers left out (of equal ones, the first)."""
    every = (*first, *second)
    merged: list[Toleration] = []
    for i, t in enumerate(every):
        if any(_is_superset(kept, t) for kept in merged):
            continue
        if any(later != t and _is_superset(later, t) for later in every[i + 1:]):
            continue
        merged.append(t)
    return tuple(merged)


def set_scheduling(node_selector: Mapping[str, str], tolerations: tuple[Toleration, ...],
                   runtime_class: RuntimeClass) -> tuple[Mapping[str, str], tuple[Toleration, ...], str | None]:
    """``setScheduling``: the class's nodeSelector merged into the pod's (a key the pod sets to another value refuses
    it; keys in order of name where upstream's Go map order is random), its tolerations merged."""
    if not runtime_class.has_scheduling:
        return node_selector, tolerations, None
    merged = dict(node_selector)
    for key in sorted(runtime_class.node_selector):
        value = runtime_class.node_selector[key]
        if key in merged and merged[key] != value:
            return node_selector, tolerations, (f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value};"
                                                f" pod.spec.nodeSelector[{key}] = {merged[key]}")
        merged[key] = value
    return FrozenMap(merged), merge_tolerations(tolerations, runtime_class.tolerations), None
