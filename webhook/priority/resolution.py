"""Priority resolution, exactly as the upstream Priority admission plugin does it on pod CREATE.

Upstream: plugin/pkg/admission/priority/admission.go (``admitPod``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from webhook.cluster.model import PREEMPT_LOWER_PRIORITY, PriorityClass
from webhook.cluster.snapshot import ClusterState

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"
DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS = 0

SYSTEM_PRIORITY_CLASSES: dict[str, PriorityClass] = {
    SYSTEM_NODE_CRITICAL: PriorityClass(
        name=SYSTEM_NODE_CRITICAL,
        value=SYSTEM_CRITICAL_PRIORITY + 1000,
        description="Used for system critical pods that must not be moved from their current node.",
    ),
    SYSTEM_CLUSTER_CRITICAL: PriorityClass(
        name=SYSTEM_CLUSTER_CRITICAL,
        value=SYSTEM_CRITICAL_PRIORITY,
        description="Used for system critical pods that must run in the cluster, "
        "but can be moved to another node if necessary.",
    ),
}


class PriorityRejection(Exception):
    """The Priority plugin refuses the pod (HTTP 403 Forbidden); ``str()`` is the inner message."""


@dataclass(frozen=True, slots=True)
class ResolvedPriority:
    priority: int
    preemption_policy: str
    # The class the pod ends up with: its own, the global default's name, or "" when neither.
    priority_class_name: str


def effective_priority_classes(stored: Mapping[str, PriorityClass]) -> dict[str, PriorityClass]:
    """The stored classes plus the bootstrapped system classes when they are absent (PreemptGuard rule)."""
    classes = dict(SYSTEM_PRIORITY_CLASSES)
    classes.update(stored)
    return classes


# The effective classes of the last states seen, by ``ClusterState.version`` (bumped on every change).
_EFFECTIVE_CLASSES: weakref.WeakKeyDictionary[ClusterState, tuple[int, Mapping[str, PriorityClass]]] = (
    weakref.WeakKeyDictionary())


def effective_classes(state: ClusterState) -> Mapping[str, PriorityClass]:
    """``effective_priority_classes(state.priority_classes)``, built once per state version (read-only)."""
    cached = _EFFECTIVE_CLASSES.get(state)
    if cached is not None and cached[0] == state.version:
        return cached[1]
    version = state.version
    classes = MappingProxyType(effective_priority_classes(state.priority_classes))
    if state.settled_version == version:  # not in the middle of a write (from another thread)
        _EFFECTIVE_CLASSES[state] = (version, classes)
    return classes


def lowest_global_default(classes: Iterable[PriorityClass]) -> PriorityClass | None:
    """The global default with the lowest value; equal values break by name for determinism."""
    defaults = [pc for pc in classes if pc.global_default]
    return min(defaults, key=lambda pc: (pc.value, pc.name)) if defaults else None


def resolve_priority_class(class_name: str, classes: Mapping[str, PriorityClass]) -> ResolvedPriority:
    """Class (or global default) to priority and preemption policy; unknown class raises."""
    if not class_name:
        default = lowest_global_default(classes.values())
        if default is None:
            return ResolvedPriority(DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS, PREEMPT_LOWER_PRIORITY, "")
        return ResolvedPriority(default.value, default.preemption_policy or PREEMPT_LOWER_PRIORITY, default.name)
    found = classes.get(class_name)
    if found is None:
        raise PriorityRejection(f"no PriorityClass with name {class_name} was found")
    return ResolvedPriority(found.value, found.preemption_policy or PREEMPT_LOWER_PRIORITY, found.name)


def resolve_pod_priority(
    class_name: str,
    given_priority: int | None,
    given_policy: str | None,
    classes: Mapping[str, PriorityClass],
) -> ResolvedPriority:
    """The whole CREATE rule: resolve, then refuse a given priority/policy that disagrees."""
    resolved = resolve_priority_class(class_name, classes)
    if given_priority is not None and given_priority != resolved.priority:
        raise PriorityRejection(
            f"the integer value of priority ({given_priority}) must not be provided in pod spec; "
            f"priority admission controller computed {resolved.priority} from the given PriorityClass name"
        )
    if given_policy is not None and given_policy != resolved.preemption_policy:
        raise PriorityRejection(
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
            f"priority admission controller computed {resolved.preemption_policy} from the given PriorityClass name"
        )
    return resolved
