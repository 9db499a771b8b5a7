"""Synthetic clusters as raw Kubernetes API dicts, for benchmarks (deterministic for a given seed).

``generate_cluster(nodes, pods_per_node)`` returns PriorityClasses, Namespaces (with tenant labels),
Nodes (zones, pools, a tainted GPU pool, allocatable), Pods bound to nodes (mixed priorities,
requests, start times and labels; nodes about 90% requested) and PodDisruptionBudgets covering about
``pdb_fraction`` of the pods, with ``status.disruptionsAllowed`` set.
"""

from __future__ import annotations

import random
from typing import Any

PRIORITY_CLASSES = (
    # name, value, weight of pods using it, globalDefault
    ("batch-low", 100, 35, False),
    ("standard", 1000, 45, True),
    ("high", 100_000, 15, False),
    ("critical", 1_000_000, 5, False),
)
NAMESPACES = 20
TENANTS = 5
ZONES = ("zone-a", "zone-b", "zone-c")
NODE_CPU_MILLI = 16_000
NODE_MEMORY_MI = 64 * 1024
NODE_PODS = 110
POD_CPU_MILLI = (100, 250, 500, 750, 1000)
POD_MEMORY_MI = (128, 256, 512, 1024, 2048)
APP_SIZE = 10
EPOCH = 1_700_000_000  # seconds; start times spread over the 30 days after it


def namespace_name(i: int) -> str:
    return f"team-{i:02d}"


def node_name(i: int) -> str:
    return f"node-{i:05d}"


def _rfc3339(seconds: int) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _priority_classes() -> list[dict[str, Any]]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "globalDefault": default, "preemptionPolicy": "PreemptLowerPriority"}
            for name, value, _, default in PRIORITY_CLASSES]


def _namespaces() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": namespace_name(i), "labels": {"tenant": f"tenant-{i % TENANTS}"}}}
            for i in range(NAMESPACES)]


def _node(i: int, rng: random.Random) -> dict[str, Any]:
    gpu = rng.random() < 0.05
    labels = {"kubernetes.io/hostname": node_name(i), "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
              "pool": "gpu" if gpu else rng.choice(("general", "general", "highmem"))}
    allocatable = {"cpu": f"{NODE_CPU_MILLI}m", "memory": f"{NODE_MEMORY_MI}Mi", "pods": str(NODE_PODS),
                   "ephemeral-storage": "100Gi"}
    spec: dict[str, Any] = {}
    if gpu:
        allocatable["nvidia.com/gpu"] = "4"
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name(i), "labels": labels},
            "spec": spec, "status": {"allocatable": allocatable, "capacity": allocatable}}


def _pod(name: str, namespace: str, app: str, node: str, rng: random.Random, cpu: int, memory: int) -> dict[str, Any]:
    classes = [c for c in PRIORITY_CLASSES]
    cls = rng.choices(classes, weights=[c[2] for c in classes])[0]
    spec: dict[str, Any] = {
        "nodeName": node, "priorityClassName": cls[0], "priority": cls[1],
        "preemptionPolicy": "PreemptLowerPriority",
        "containers": [{"name": "main", "image": "registry.example/app:1",
                        "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}}}],
    }
    if rng.random() < 0.3:
        spec["terminationGracePeriodSeconds"] = rng.choice((10, 60, 120))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "labels": {"app": app, "tier": cls[0]}},
            "spec": spec,
            "status": {"phase": "Running", "startTime": _rfc3339(EPOCH + rng.randrange(30 * 86400))}}


def generate_cluster(nodes: int, pods_per_node: int = 30, *, seed: int = 0,
                     pdb_fraction: float = 0.1) -> list[dict[str, Any]]:
    """A whole cluster as API dicts: classes, namespaces, nodes, bound pods, PDBs (in that order)."""
    rng = random.Random(seed)
    objects = _priority_classes() + _namespaces()
    node_objects = [_node(i, rng) for i in range(nodes)]
    objects += node_objects
    total_pods = nodes * pods_per_node
    apps_per_namespace = max(1, total_pods // (NAMESPACES * APP_SIZE))
    for n in range(nodes):
        # Each node is requested to between 88% and 99% of its CPU and 50-90% of its memory.
        cpus = [rng.choice(POD_CPU_MILLI) for _ in range(pods_per_node)]
        mems = [rng.choice(POD_MEMORY_MI) for _ in range(pods_per_node)]
        cpu_scale = NODE_CPU_MILLI * rng.uniform(0.88, 0.99) / max(1, sum(cpus))
        mem_scale = NODE_MEMORY_MI * rng.uniform(0.5, 0.9) / max(1, sum(mems))
        for k in range(pods_per_node):
            ns = rng.randrange(NAMESPACES)
            app = f"app-{rng.randrange(apps_per_namespace)}"
            objects.append(_pod(f"p-{n:05d}-{k:03d}", namespace_name(ns), app, node_name(n), rng,
                                max(1, int(cpus[k] * cpu_scale)), max(1, int(mems[k] * mem_scale))))
    pdb_apps = max(1, round(NAMESPACES * apps_per_namespace * pdb_fraction))
    chosen = rng.sample([(ns, a) for ns in range(NAMESPACES) for a in range(apps_per_namespace)],
                        min(pdb_apps, NAMESPACES * apps_per_namespace))
    for ns, a in chosen:
        objects.append({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": f"pdb-app-{a}", "namespace": namespace_name(ns)},
            "spec": {"selector": {"matchLabels": {"app": f"app-{a}"}}, "maxUnavailable": 1},
            "status": {"disruptionsAllowed": rng.choice((0, 0, 1, 2)), "currentHealthy": APP_SIZE,
                       "desiredHealthy": APP_SIZE - 1, "expectedPods": APP_SIZE},
        })
    return objects
