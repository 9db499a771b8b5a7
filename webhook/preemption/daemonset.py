"""A DaemonSet's pods: one per node the DaemonSet controller would run it on, pinned there as it pins them.

Upstream pkg/controller/daemon: ``NodeShouldRunDaemonPod`` runs a pod on a node when the template's
``nodeName`` (if any) names it, its nodeSelector and required node affinity match the node, and it tolerates
every NoSchedule/NoExecute taint of the node, counting the tolerations every daemon pod gets
(``util.AddOrUpdateDaemonPodTolerations``). The pod it creates carries those tolerations and a required node
affinity replaced by ``matchFields metadata.name In [node]`` (``util.ReplaceDaemonSetPodNodeNameNodeAffinity``);
the scheduler then places it on that node, preempting there if it must.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.cluster.model import Node, Pod
from webhook.preemption.plugins.helper import first_untolerated_taint, required_node_affinity_matches

# util.AddOrUpdateDaemonPodTolerations, in its order.
DAEMON_POD_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
# Only for hostNetwork pods.
NETWORK_UNAVAILABLE_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                                  "effect": "NoSchedule"}
_TOLERATION_FIELDS = ("key", "operator", "value", "effect")


def daemon_pod_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The template's pod spec with the daemon tolerations, each added unless an equal one is there
    (``v1helper.AddOrUpdateTolerationInPodSpec`` replaces an equal one with itself)."""
    result = copy.deepcopy(dict(spec))
    tolerations: list[Any] = list(result.get("tolerations") or [])
    wanted = DAEMON_POD_TOLERATIONS + ((NETWORK_UNAVAILABLE_TOLERATION,) if result.get("hostNetwork") else ())
    for toleration in wanted:
        if not any(_same_toleration(toleration, existing) for existing in tolerations):
            tolerations.append(dict(toleration))
    result["tolerations"] = tolerations
    return result


def _same_toleration(a: Mapping[str, Any], b: object) -> bool:
    return isinstance(b, Mapping) and all((a.get(f) or "") == (b.get(f) or "") for f in _TOLERATION_FIELDS)


def node_should_run_daemon_pod(pod: Pod, node: Node) -> bool:
    """``NodeShouldRunDaemonPod`` for ``pod`` built from ``daemon_pod_spec`` (its tolerations included)."""
    if pod.node_name and pod.node_name != node.name:
        return False
    return required_node_affinity_matches(pod, node) and first_untolerated_taint(node.taints, pod.tolerations) is None


def pinned_to_node(spec: Mapping[str, Any], node_name: str) -> dict[str, Any]:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: the required node affinity becomes the one term
    ``matchFields: metadata.name In [node]``; preferred terms and pod (anti-)affinity stay."""
    result = copy.deepcopy(dict(spec))
    affinity = dict(result.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    required["nodeSelectorTerms"] = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    result["affinity"] = affinity
    return result


def daemon_nodes(eligibility_pod: Pod, nodes: Iterable[Node]) -> list[Node]:
    """The nodes the DaemonSet runs on, by name (the controller's order does not matter: one pod each)."""
    return sorted((node for node in nodes if node_should_run_daemon_pod(eligibility_pod, node)),
                  key=lambda node: node.name)


def daemon_pod_name(daemonset: str, node: str) -> str:
    """Upstream generates ``<daemonset>-<random>``; the preview names each pod after its node instead."""
    return f"{daemonset}-{node}"
