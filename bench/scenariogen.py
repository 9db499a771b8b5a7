"""Random small clusters and incoming pods across the predictor's features, as ``verify`` scenarios.

``generate_scenario(seed, index)`` returns ``(snapshot objects, pod object)``: raw Kubernetes API dicts,
deterministic for a seed and an index. ``write_scenarios(directory, n, seed)`` writes ``<name>/snapshot.yaml``
and ``<name>/pod.yaml`` for ``preempt-guard verify --scenarios``.

Features drawn per scenario: cpu/memory/pod-count and an extended resource (``example.com/gpu``); taints and
tolerations; node selectors and required node affinity; cordoned nodes; PDBs with 0 or 1 disruptions allowed;
several priorities, equal priorities with different start times, ``preemptionPolicy: Never``; a pending pod
nominated to a node; terminating pods (some already preempted); host ports; Deployments of 2-3 replicas;
required pod affinity and anti-affinity; topology spread. Start times are distinct on purpose: upstream sorts
victims with an unstable sort, so two equal pods (priority and start time) have no defined order there.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import yaml

ZONES = ("zone-a", "zone-b", "zone-c")
POOLS = ("general", "batch")
NAMESPACES = ("team-a", "team-b", "batch")
APPS = ("web", "api", "cache", "etl", "report")
GPU = "example.com/gpu"
# name, value, preemptionPolicy
CLASSES = (("low", 100, "PreemptLowerPriority"), ("mid", 1000, "PreemptLowerPriority"),
           ("high", 100_000, "PreemptLowerPriority"), ("polite", 50_000, "Never"),
           ("top", 1_000_000, "PreemptLowerPriority"))
VALUE = {name: value for name, value, _ in CLASSES}
POLICY = {name: policy for name, _, policy in CLASSES}
EPOCH = 1_750_000_000
IMAGE = "registry.k8s.io/pause:3.10"


def _time(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _weighted(rng: random.Random, table: tuple[tuple[Any, int], ...]) -> Any:
    return rng.choices([item for item, _ in table], weights=[weight for _, weight in table])[0]


def _node(rng: random.Random, i: int) -> dict[str, Any]:
    name = f"node-{i}"
    gpu = rng.random() < 0.25
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "topology.kubernetes.io/zone": ZONES[i % len(ZONES)] if rng.random() < 0.7 else rng.choice(ZONES),
              "pool": "gpu" if gpu else rng.choice(POOLS)}
    allocatable = {"cpu": rng.choice(["2", "4", "4", "8"]), "memory": f"{rng.choice([4, 8, 16])}Gi",
                   "pods": str(rng.choice([110, 110, 110, 5, 8])), "ephemeral-storage": "100Gi"}
    if gpu:
        allocatable[GPU] = str(rng.choice([1, 2, 4]))
    spec: dict[str, Any] = {}
    if gpu and rng.random() < 0.7:
        spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    elif rng.random() < 0.12:
        spec["taints"] = [{"key": "dedicated", "value": "batch", "effect": rng.choice(["NoSchedule", "NoExecute"])}]
    if rng.random() < 0.1:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"allocatable": allocatable, "capacity": dict(allocatable),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _milli(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def _container(cpu: str, memory: str, extra: dict[str, str] | None = None,
               host_port: int | None = None) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    container: dict[str, Any] = {"name": "main", "image": IMAGE, "resources": {"requests": requests}}
    if extra:
        container["resources"]["limits"] = dict(extra)  # extended resources need limit == request
    if host_port:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    return container


def _pod_priority(pc: str | None) -> dict[str, Any]:
    if pc is None:
        return {}
    return {"priorityClassName": pc, "priority": VALUE[pc], "preemptionPolicy": POLICY[pc]}


def _existing_pods(rng: random.Random, nodes: list[dict[str, Any]], starts: set[int]) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = []
    for node in nodes:
        alloc = node["status"]["allocatable"]
        budget = _milli(alloc["cpu"]) * rng.uniform(0.55, 1.0)
        slots = int(alloc["pods"])
        gpus = int(alloc.get(GPU, "0"))
        used = 0
        tolerations = [{"key": "dedicated", "operator": "Exists"}]
        while len([p for p in pods if p["spec"]["nodeName"] == node["metadata"]["name"]]) < slots:
            cpu = rng.choice(["250m", "500m", "500m", "1", "1500m"])
            if used + _milli(cpu) > budget:
                break
            used += _milli(cpu)
            pc = _weighted(rng, (("low", 40), ("mid", 30), ("high", 18), ("top", 6), ("polite", 6)))
            app = rng.choice(APPS)
            start = EPOCH + rng.randrange(0, 2_000_000)
            while start in starts:
                start += 1
            starts.add(start)
            extra = {GPU: "1"} if gpus and rng.random() < 0.5 else None
            gpus -= 1 if extra else 0
            port = 8080 if rng.random() < 0.08 else None
            name = f"{app}-{len(pods)}"
            spec: dict[str, Any] = {"nodeName": node["metadata"]["name"], **_pod_priority(pc),
                                    "containers": [_container(cpu, rng.choice(["256Mi", "512Mi", "1Gi"]), extra, port)],
                                    "tolerations": tolerations, "terminationGracePeriodSeconds": rng.choice([30, 60])}
            if rng.random() < 0.08:
                spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}
            status: dict[str, Any] = {"phase": "Running", "startTime": _time(start),
                                      "conditions": [{"type": "PodScheduled", "status": "True"}]}
            meta: dict[str, Any] = {"name": name, "namespace": rng.choice(NAMESPACES),
                                    "labels": {"app": app, "tier": rng.choice(["frontend", "backend"])}}
            roll = rng.random()
            if roll < 0.03:
                status["phase"] = "Succeeded"
            elif roll < 0.08:
                meta["deletionTimestamp"] = _time(EPOCH + 3_000_000)
                meta["deletionGracePeriodSeconds"] = 30
                if rng.random() < 0.5:
                    status["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                                 "reason": "PreemptionByScheduler",
                                                 "message": "default-scheduler: preempting to accommodate a higher"
                                                            " priority pod"})
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status})
    return pods


def _pdbs(rng: random.Random, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pdbs = []
    for i in range(rng.choice([0, 1, 1, 2, 3])):
        namespace, app = rng.choice(NAMESPACES), rng.choice(APPS)
        matching = [p for p in pods
                    if p["metadata"]["namespace"] == namespace and p["metadata"]["labels"]["app"] == app]
        allowed = rng.choice([0, 0, 1, 2])
        selector: dict[str, Any] = ({"matchLabels": {"app": app}} if rng.random() < 0.8 else
                                    {"matchExpressions": [{"key": "app", "operator": "In", "values": [app]}]})
        pdbs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": f"pdb-{i}", "namespace": namespace},
                     "spec": {"selector": selector, "maxUnavailable": allowed},
                     "status": {"disruptionsAllowed": allowed, "currentHealthy": len(matching),
                                "desiredHealthy": max(0, len(matching) - allowed), "expectedPods": len(matching),
                                "observedGeneration": 1}})
    return pdbs


def _nominated(rng: random.Random, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if rng.random() > 0.12:
        return []
    node = rng.choice(nodes)["metadata"]["name"]
    pc = rng.choice(["high", "top", "mid"])
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waiting-0", "namespace": "team-b",
                                                             "labels": {"app": "api"}},
             "spec": {**_pod_priority(pc), "containers": [_container(rng.choice(["500m", "1", "2"]), "512Mi")]},
             "status": {"phase": "Pending", "nominatedNodeName": node,
                        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}]


def _incoming_spec(rng: random.Random, app: str) -> dict[str, Any]:
    pc = _weighted(rng, (("high", 40), ("top", 15), ("mid", 15), ("polite", 10), ("low", 5), (None, 10),
                         ("gold", 2)))
    cpu = _weighted(rng, (("500m", 15), ("1", 20), ("1500m", 15), ("2", 20), ("3", 12), ("4", 10), ("12", 3)))
    extra = {GPU: rng.choice(["1", "2"])} if rng.random() < 0.15 else None
    port = 8080 if rng.random() < 0.06 else None
    spec: dict[str, Any] = {"containers": [_container(cpu, rng.choice(["512Mi", "1Gi", "2Gi"]), extra, port)]}
    if pc is not None:
        spec["priorityClassName"] = pc
    if extra or rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "gpu" if extra else
                                rng.choice(["gpu", "batch"]), "effect": "NoSchedule"}]
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"pool": "gpu" if extra else rng.choice(POOLS)}
    affinity: dict[str, Any] = {}
    if rng.random() < 0.2:
        zones = rng.sample(ZONES, rng.choice([1, 2]))
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones}]}]}}
    if rng.random() < 0.2:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": rng.choice([app, app, *APPS])}},
             "topologyKey": rng.choice(["kubernetes.io/hostname", "kubernetes.io/hostname",
                                        "topology.kubernetes.io/zone"])}]}
    if rng.random() < 0.1:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": rng.choice(APPS)}}, "topologyKey": "topology.kubernetes.io/zone",
             "namespaces": list(NAMESPACES)}]}
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.15:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule",
                                              "topologyKey": rng.choice(["topology.kubernetes.io/zone",
                                                                         "kubernetes.io/hostname"]),
                                              "labelSelector": {"matchLabels": {"app": app}}}]
    return spec


def _incoming(rng: random.Random) -> dict[str, Any]:
    app = rng.choice(APPS)
    namespace = rng.choice(NAMESPACES)
    labels = {"app": app, "tier": "incoming"}
    spec = _incoming_spec(rng, app)
    if rng.random() < 0.3:
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": f"new-{app}", "namespace": namespace},
                "spec": {"replicas": rng.choice([2, 3]), "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": spec}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"new-{app}", "namespace": namespace,
                                                            "labels": labels}, "spec": spec}


def generate_scenario(seed: int, index: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The snapshot's objects and the incoming Pod or Deployment of scenario ``index`` of ``seed``."""
    rng = random.Random(f"{seed}-{index}")
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "preemptionPolicy": policy} for name, value, policy in CLASSES]
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": ns}}}
                  for ns in NAMESPACES]
    nodes = [_node(rng, i) for i in range(rng.randint(2, 7))]
    starts: set[int] = set()
    pods = _existing_pods(rng, nodes, starts) + _nominated(rng, nodes)
    objects = [*classes, *namespaces, *nodes, *pods, *_pdbs(rng, pods)]
    return objects, _incoming(rng)


def scenario_name(seed: int, index: int) -> str:
    return f"s{seed}-{index:03d}"


def write_scenario(directory: Path, objects: list[dict[str, Any]], pod: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    snapshot = {"apiVersion": "v1", "kind": "List", "items": objects}
    (directory / "snapshot.yaml").write_text(yaml.safe_dump(snapshot, sort_keys=False), encoding="utf-8")
    (directory / "pod.yaml").write_text(yaml.safe_dump(pod, sort_keys=False), encoding="utf-8")


def write_scenarios(directory: Path, n: int, seed: int, start: int = 0) -> list[Path]:
    """Scenarios ``start`` .. ``start + n - 1`` of ``seed`` under ``directory``."""
    written = []
    for index in range(start, start + n):
        objects, pod = generate_scenario(seed, index)
        target = directory / scenario_name(seed, index)
        write_scenario(target, objects, pod)
        written.append(target)
    return written
