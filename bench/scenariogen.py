"""Random small clusters and incoming pods across the predictor's features, as ``verify`` scenarios.

``generate_scenario(seed, index)`` returns ``(snapshot objects, pod object)``: raw Kubernetes API dicts,
deterministic for a seed and an index. ``write_scenarios(directory, n, seed)`` writes ``<name>/snapshot.yaml``
and ``<name>/pod.yaml`` for ``preempt-guard verify --scenarios``.

Features drawn per scenario: cpu/memory/pod-count and an extended resource (``example.com/gpu``); taints and
tolerations; node selectors and required node affinity; cordoned nodes; PDBs with 0 or 1 disruptions allowed;
several priorities, equal priorities with different start times, ``preemptionPolicy: Never``; identical nodes
running identical pods (full ties, which upstream breaks at random); a pending pod
nominated to a node; terminating pods (some already preempted); host ports; Deployments of 2-3 replicas;
required pod affinity and anti-affinity; topology spread. Start times are distinct on one node on purpose:
upstream sorts a node's victims with an unstable sort, so two equal pods (priority and start time) on one node
have no defined order there.

On top of that, what a cluster that has lived for a while stores (``_lived_in``, its own random stream so the
base draw stays as it was): RuntimeClass pods with their overhead and scheduling (the class in the snapshot or
not, and some pods with the overhead of an earlier version of it); stale priorities (pods from before today's
``globalDefault`` class, with ``priority: 0``, or of a class recreated with another value); two ``globalDefault``
classes; LimitRanges, with the defaulted requests stored in their namespaces' pods; a DaemonSet's pod on every
node; a terminating namespace with pods in it; pods of another scheduler, bound and pending; a nominated pod that
still has a scheduling gate (its nomination reserves room from v1.37 only, so the bench predicts for the release
it runs against). The incoming pod
sometimes runs under a RuntimeClass (written with the class's overhead and scheduling, as a pod exported from a
cluster is: RuntimeClass admission then changes nothing), or is created in a terminating or a missing namespace.

``families`` (``bench/real_scheduler.py --features``) adds more, each from its own random stream: ``admission-chain``
(the incoming pod's containers defaulted by its namespace's LimitRange, some refused by its maximum; a RuntimeClass
named only, for admission to add its overhead and scheduling; a RuntimeClass that does not exist; a missing
namespace; scheduling gates; another scheduler's name) and ``resize`` (running pods whose status' allocated and
actuated requests differ from the spec, some resizes Infeasible), ``volumes`` and ``dra`` (storage and devices,
issue #27: ``bench/scenariogen_storage.py``).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import yaml

from bench import scenariogen_storage as storage

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
        budget = _milli(alloc["cpu"]) * rng.uniform(0.7, 1.0)
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
            if rng.random() < 0.05:  # a sidecar: its requests count for the whole life of the pod
                sidecar = _container("250m", "128Mi")
                sidecar.update(name="sidecar", restartPolicy="Always")
                spec["initContainers"] = [sidecar]
            if rng.random() < 0.12:  # an existing pod that keeps others of an app (maybe the incoming one's) away
                spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": rng.choice([app, *APPS])}},
                     "topologyKey": "kubernetes.io/hostname"}]}}
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


def _twins(rng: random.Random, count: int, starts: set[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Identical nodes running identical pods (the same start times too): preemption ties on every upstream
    criterion, and upstream picks among the tied nodes at random."""
    first = _node(rng, 0)
    first["spec"].pop("unschedulable", None)
    pods = _existing_pods(rng, [first], starts)
    nodes, clones = [first], []
    for i in range(1, count):
        node = copy.deepcopy(first)
        name = f"node-{i}"
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        nodes.append(node)
        for pod in pods:
            clone = copy.deepcopy(pod)
            clone["metadata"]["name"] = f"{pod['metadata']['name']}-{i}"
            clone["spec"]["nodeName"] = name
            clones.append(clone)
    return nodes, pods + clones


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


def _incoming_containers(rng: random.Random, spec: dict[str, Any]) -> dict[str, str] | None:
    """Containers (sometimes with init containers and a sidecar, limits only, or pod-level requests)."""
    cpu = _weighted(rng, (("500m", 10), ("1", 25), ("1500m", 20), ("2", 25), ("3", 10), ("4", 7), ("12", 3)))
    memory = rng.choice(["512Mi", "1Gi", "2Gi"])
    extra = {GPU: rng.choice(["1", "2"])} if rng.random() < 0.15 else None
    main = _container(cpu, memory, extra, 8080 if rng.random() < 0.06 else None)
    roll = rng.random()
    if roll < 0.1:  # limits only: API defaulting makes them the requests
        main["resources"] = {"limits": {**main["resources"]["requests"]}}
    elif roll < 0.15:  # pod-level requests (PodLevelResources) instead of the container's
        spec["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
        main["resources"].pop("requests")
        if not main["resources"]:
            main.pop("resources")
    spec["containers"] = [main]
    if rng.random() < 0.15 and "resources" not in spec:  # pod-level requests must cover the init containers too
        init = _container(rng.choice(["1", "2", "3"]), "256Mi")
        init["name"] = "init"
        sidecar = _container(rng.choice(["250m", "500m"]), "128Mi")
        sidecar.update(name="sidecar", restartPolicy="Always")
        spec["initContainers"] = rng.sample([init, sidecar], 2) if rng.random() < 0.5 else [init]
    return extra


def _incoming_tolerations(rng: random.Random, gpu: bool) -> list[dict[str, Any]]:
    tolerations: list[dict[str, Any]] = []
    if gpu or rng.random() < 0.3:
        tolerations.append({"key": "dedicated", "operator": "Equal", "effect": "NoSchedule",
                            "value": "gpu" if gpu else rng.choice(["gpu", "batch"])})
    if rng.random() < 0.05:
        tolerations.append({"operator": "Exists"})  # tolerates every taint
    if rng.random() < 0.05:
        tolerations.append({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"})
    return tolerations


def _node_affinity(rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.6:
        requirement = {"key": "topology.kubernetes.io/zone", "operator": "In",
                       "values": rng.sample(ZONES, rng.choice([1, 2]))}
    elif roll < 0.75:
        requirement = {"key": "pool", "operator": rng.choice(["NotIn", "DoesNotExist"]), "values": ["batch"]}
        if requirement["operator"] == "DoesNotExist":
            requirement.pop("values")
    else:  # a node field selector takes exactly one value: several nodes are several (ORed) terms
        terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"node-{i}"]}]}
                 for i in rng.sample(range(7), 3)]
        return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    terms = [{"matchExpressions": [requirement]}]
    if rng.random() < 0.2:  # terms are ORed
        terms.append({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]})
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


def _pod_term(rng: random.Random, app: str, topology: str) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": rng.choice([app, app, *APPS])}},
                            "topologyKey": topology}
    roll = rng.random()
    if roll < 0.1:  # the API server merges these into the selector on create (MatchLabelKeysInPodAffinity, GA)
        term["labelSelector"] = {"matchLabels": {"tier": rng.choice(["frontend", "backend", "incoming"])}}
        term["matchLabelKeys" if rng.random() < 0.6 else "mismatchLabelKeys"] = ["app"]
    elif roll < 0.2:
        term["namespaceSelector"] = {"matchLabels": {"team": rng.choice(NAMESPACES)}}
    elif roll < 0.3:
        term["namespaces"] = rng.sample(NAMESPACES, 2)
    return term


def _spread(rng: random.Random, app: str) -> dict[str, Any]:
    constraint: dict[str, Any] = {"maxSkew": rng.choice([1, 1, 2]), "whenUnsatisfiable": "DoNotSchedule",
                                  "topologyKey": rng.choice(["topology.kubernetes.io/zone", "kubernetes.io/hostname"]),
                                  "labelSelector": {"matchLabels": {"app": app}}}
    if rng.random() < 0.15:
        constraint["minDomains"] = rng.choice([2, 3, 4])
    if rng.random() < 0.15:
        constraint["nodeAffinityPolicy"] = "Ignore"
    if rng.random() < 0.15:
        constraint["nodeTaintsPolicy"] = "Honor"
    if rng.random() < 0.15:
        constraint["labelSelector"] = {"matchLabels": {"tier": "incoming"}}
        constraint["matchLabelKeys"] = ["app"]
    return constraint


def _incoming_spec(rng: random.Random, app: str) -> dict[str, Any]:
    pc = _weighted(rng, (("high", 45), ("top", 20), ("mid", 10), ("polite", 8), ("low", 4), (None, 8),
                         ("gold", 2)))
    spec: dict[str, Any] = {}
    gpu = _incoming_containers(rng, spec) is not None
    if pc is not None:
        spec["priorityClassName"] = pc
    tolerations = _incoming_tolerations(rng, gpu)
    if tolerations:
        spec["tolerations"] = tolerations
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"pool": "gpu" if gpu else rng.choice(POOLS)}
    affinity: dict[str, Any] = {}
    if rng.random() < 0.2:
        affinity["nodeAffinity"] = _node_affinity(rng)
    if rng.random() < 0.25:
        topology = rng.choice(["kubernetes.io/hostname", "kubernetes.io/hostname", "topology.kubernetes.io/zone"])
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _pod_term(rng, app, topology)]}
    if rng.random() < 0.12:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            _pod_term(rng, rng.choice(APPS), rng.choice(["topology.kubernetes.io/zone", "kubernetes.io/hostname"]))]}
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.2:
        spec["topologySpreadConstraints"] = [_spread(rng, app)]
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


SANDBOX_LABEL = "sandbox.gke.io/runtime"
SANDBOX_TOLERATION = {"key": SANDBOX_LABEL, "operator": "Equal", "value": "gvisor", "effect": "NoSchedule"}
# name -> (overhead now, overhead of an earlier version of the class, scheduling)
RUNTIME_CLASSES: dict[str, tuple[dict[str, str], dict[str, str], dict[str, Any]]] = {
    "gvisor": ({"cpu": "250m", "memory": "256Mi"}, {"cpu": "100m", "memory": "128Mi"},
               {"nodeSelector": {SANDBOX_LABEL: "gvisor"}, "tolerations": [SANDBOX_TOLERATION]}),
    "kata": ({"cpu": "500m", "memory": "512Mi"}, {"cpu": "250m", "memory": "256Mi"}, {}),
}
NODE_CRITICAL = ("system-node-critical", 2_000_001_000)
OTHER_SCHEDULER = "batch-scheduler"
RETIRED = "retired"  # a namespace being deleted, its pods still there
MISSING = "team-x"  # a namespace the cluster does not hold
LIMIT_DEFAULTS = {"cpu": "100m", "memory": "128Mi"}


def _runtime_class(name: str) -> dict[str, Any]:
    overhead, _, scheduling = RUNTIME_CLASSES[name]
    rc: dict[str, Any] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                          "handler": "runsc" if name == "gvisor" else name, "overhead": {"podFixed": dict(overhead)}}
    if scheduling:
        rc["scheduling"] = copy.deepcopy(scheduling)
    return rc


def _with_runtime_class(spec: dict[str, Any], name: str, overhead: dict[str, str]) -> None:
    """What RuntimeClass admission stores in a pod: the class's overhead, its node selector and tolerations merged."""
    _, _, scheduling = RUNTIME_CLASSES[name]
    spec["runtimeClassName"] = name
    spec["overhead"] = dict(overhead)
    if scheduling:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **scheduling["nodeSelector"]}
        spec["tolerations"] = [*(spec.get("tolerations") or []),
                               *[t for t in scheduling["tolerations"] if t not in (spec.get("tolerations") or [])]]


def _bound_pod(name: str, namespace: str, node: str, start: int, cpu: str, memory: str, *,
               priority: tuple[str | None, int], labels: dict[str, str] | None = None) -> dict[str, Any]:
    class_name, value = priority
    spec: dict[str, Any] = {"nodeName": node, "priority": value, "preemptionPolicy": "PreemptLowerPriority",
                            "containers": [_container(cpu, memory)], "terminationGracePeriodSeconds": 30}
    if class_name:
        spec["priorityClassName"] = class_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": "web", "tier": "backend"}},
            "spec": spec, "status": {"phase": "Running", "startTime": _time(start),
                                     "conditions": [{"type": "PodScheduled", "status": "True"}]}}


def _fresh_start(rng: random.Random, starts: set[int]) -> int:
    start = EPOCH + rng.randrange(0, 2_000_000)
    while start in starts:
        start += 1
    starts.add(start)
    return start


def _lived_in(rng: random.Random, objects: list[dict[str, Any]], starts: set[int]) -> dict[str, Any]:
    """Add what lived-in clusters store to ``objects`` (in place); return what the incoming pod may use of it."""
    nodes = [o for o in objects if o["kind"] == "Node"]
    pods = [o for o in objects if o["kind"] == "Pod"]
    classes = [o for o in objects if o["kind"] == "PriorityClass"]
    extra: list[dict[str, Any]] = []
    offer: dict[str, Any] = {}
    if rng.random() < 0.4:  # a DaemonSet's pod on every node, at system-node-critical priority
        for node in nodes:
            name = node["metadata"]["name"]
            agent = _bound_pod(f"node-agent-{name}", "kube-system", name, _fresh_start(rng, starts), "100m", "128Mi",
                               priority=NODE_CRITICAL, labels={"app": "node-agent"})
            agent["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-agent",
                                                     "uid": "5b0c1d4e-0000-4000-8000-000000000001", "controller": True}]
            agent["spec"]["tolerations"] = [{"operator": "Exists"}]
            term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
            agent["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term]}}}
            extra.append(agent)
    if rng.random() < 0.35:  # RuntimeClass pods: gVisor on a sandbox node (labelled and tainted), Kata anywhere
        name = rng.choice(sorted(RUNTIME_CLASSES))
        overhead, earlier, scheduling = RUNTIME_CLASSES[name]
        present = rng.random() < 0.5
        hosts = nodes
        if scheduling:
            hosts = rng.sample(nodes, min(len(nodes), rng.choice([1, 1, 2])))
            for node in hosts:
                node["metadata"]["labels"][SANDBOX_LABEL] = "gvisor"
                node["spec"]["taints"] = [*(node["spec"].get("taints") or []),
                                          {"key": SANDBOX_LABEL, "value": "gvisor", "effect": "NoSchedule"}]
        for i in range(rng.choice([1, 2, 3])):
            node = rng.choice(hosts)["metadata"]["name"]
            sandboxed = _bound_pod(f"sandboxed-{i}", rng.choice(NAMESPACES), node, _fresh_start(rng, starts),
                                   rng.choice(["250m", "500m"]), "256Mi",
                                   priority=("low", VALUE["low"]), labels={"app": "report", "tier": "backend"})
            # A class present in the snapshot may have changed since: some pods carry its earlier overhead.
            _with_runtime_class(sandboxed["spec"], name, earlier if present and rng.random() < 0.3 else overhead)
            extra.append(sandboxed)
        if present:
            objects.append(_runtime_class(name))
        offer["runtimeClass"] = name
    if rng.random() < 0.35:  # stale priorities
        for victim in rng.sample(pods, min(len(pods), rng.choice([1, 2, 3]))):
            spec = victim["spec"]
            if rng.random() < 0.5:  # created before any globalDefault class existed
                spec.pop("priorityClassName", None)
                spec["priority"] = 0
            elif spec.get("priorityClassName"):  # its class was deleted and created again with another value
                spec["priority"] = VALUE[spec["priorityClassName"]] - rng.choice([1, 50, 99])
        if not any(c.get("globalDefault") for c in classes):
            next(c for c in classes if c["metadata"]["name"] == "low")["globalDefault"] = True
    if rng.random() < 0.25:  # two globalDefault classes: the API server refuses the second, a cluster can hold both
        for c in classes:
            if c["metadata"]["name"] in ("low", "mid") and not any(
                    o.get("globalDefault") for o in classes if o is not c):
                c["globalDefault"] = True
        objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": "default-priority"}, "value": rng.choice([50, 500]),
                        "preemptionPolicy": "PreemptLowerPriority", "globalDefault": True})
    if rng.random() < 0.35:  # LimitRanges: default requests, stored in the namespace's pods that wrote none
        for namespace in rng.sample(NAMESPACES, rng.choice([1, 2])):
            objects.append({"apiVersion": "v1", "kind": "LimitRange",
                            "metadata": {"name": "defaults", "namespace": namespace},
                            "spec": {"limits": [{"type": "Container", "defaultRequest": dict(LIMIT_DEFAULTS),
                                                 "max": {"cpu": "16", "memory": "32Gi"}}]}})
            node = rng.choice(nodes)["metadata"]["name"]
            extra.append(_bound_pod(f"defaulted-{namespace}", namespace, node, _fresh_start(rng, starts),
                                    LIMIT_DEFAULTS["cpu"], LIMIT_DEFAULTS["memory"],
                                    priority=("low", VALUE["low"]), labels={"app": "cache", "tier": "frontend"}))
    if rng.random() < 0.15:  # a namespace being deleted: its pods are still there, nothing new gets in
        objects.append({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": RETIRED, "labels": {"team": RETIRED},
                                     "deletionTimestamp": _time(EPOCH + 2_500_000)},
                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Terminating"}})
        for i in range(rng.choice([1, 2])):
            node = rng.choice(nodes)["metadata"]["name"]
            extra.append(_bound_pod(f"leftover-{i}", RETIRED, node, _fresh_start(rng, starts), "500m", "256Mi",
                                    priority=("low", VALUE["low"]), labels={"app": "etl", "tier": "backend"}))
        offer["retired"] = True
    pending = [p for p in pods if p["status"].get("nominatedNodeName")]
    if pending and rng.random() < 0.4:  # a nomination another component set on a gated pod: v1.37 counts it only
        pending[0]["spec"]["schedulingGates"] = [{"name": "example.com/admission-check"}]
    if rng.random() < 0.3:  # another scheduler's pods: bound ones take room (and can be victims), pending ones wait
        node = rng.choice(nodes)["metadata"]["name"]
        bound = _bound_pod("batch-runner-0", "batch", node, _fresh_start(rng, starts), "500m", "512Mi",
                           priority=("low", VALUE["low"]), labels={"app": "etl", "tier": "backend"})
        bound["spec"]["schedulerName"] = OTHER_SCHEDULER
        waiting = copy.deepcopy(bound)
        waiting["metadata"]["name"] = "batch-runner-1"
        waiting["spec"].pop("nodeName")
        waiting["status"] = {"phase": "Pending"}
        extra += [bound, waiting]
    objects.extend(extra)
    return offer


def _lived_in_incoming(rng: random.Random, pod: dict[str, Any], offer: dict[str, Any]) -> None:
    """The incoming pod under a RuntimeClass of the cluster, or in a namespace that takes no new pods."""
    spec = _spec_of(pod)
    if offer.get("runtimeClass") and rng.random() < 0.3:
        name = offer["runtimeClass"]
        _with_runtime_class(spec, name, RUNTIME_CLASSES[name][0])
    roll = rng.random()
    if offer.get("retired") and roll < 0.2:
        pod["metadata"]["namespace"] = RETIRED
    elif roll < 0.03:
        pod["metadata"]["namespace"] = MISSING


# ImageLocality: below 23 MB an image scores nothing, 1,000 MB per container is the top (image_locality.go).
SCORING_IMAGES = {"example.com/app:1": 60 * 1024 * 1024, "example.com/model:2": 700 * 1024 * 1024,
                  "example.com/tool:3": 10 * 1024 * 1024}


def _scoring(rng: random.Random, objects: list[dict[str, Any]], incoming: dict[str, Any]) -> None:
    """What the Score plugins read, on top of a scenario (``--scoring``; its own random stream): images on the
    nodes (``status.images``) and in the incoming containers (ImageLocality); PreferNoSchedule taints
    (TaintToleration); preferred node affinity (NodeAffinity); preferred pod affinity and anti-affinity, also on
    existing pods (InterPodAffinity); ScheduleAnyway spread (PodTopologySpread). The nodes' sizes and pods
    already make the utilisation uneven (NodeResourcesFit, NodeResourcesBalancedAllocation)."""
    nodes = [o for o in objects if o["kind"] == "Node"]
    for node in nodes:
        held = rng.sample(sorted(SCORING_IMAGES), rng.randint(0, 3))
        if held:
            node["status"]["images"] = [{"names": [image], "sizeBytes": SCORING_IMAGES[image]} for image in held]
        if rng.random() < 0.2:
            node["spec"].setdefault("taints", []).append(
                {"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
    for pod in (o for o in objects if o["kind"] == "Pod"):
        if rng.random() < 0.15:
            app = rng.choice(APPS)
            pod["spec"].setdefault("affinity", {})["podAntiAffinity" if rng.random() < 0.5 else "podAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": rng.choice([10, 50, 100]),
                 "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}},
                                     "topologyKey": "kubernetes.io/hostname"}}]}
    spec = _spec_of(incoming)
    app = (incoming["metadata"].get("labels") or incoming["spec"].get("template", {}).get("metadata", {})
           .get("labels") or {}).get("app", APPS[0])
    if rng.random() < 0.6:
        for container in spec["containers"]:
            container["image"] = rng.choice(sorted(SCORING_IMAGES))
    if rng.random() < 0.3:
        spec.setdefault("tolerations", []).append({"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"})
    affinity = spec.setdefault("affinity", {})
    if rng.random() < 0.35:
        node_affinity = affinity.setdefault("nodeAffinity", {})
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice([1, 20, 100]), "preference": {"matchExpressions": [
                {"key": key, "operator": "In", "values": [value]}]}}
            for key, value in rng.sample([("pool", "batch"), ("pool", "general"),
                                          ("topology.kubernetes.io/zone", rng.choice(ZONES))], rng.randint(1, 2))]
    if rng.random() < 0.3:
        kind = rng.choice(["podAffinity", "podAntiAffinity"])
        affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.choice([5, 50, 100]), "podAffinityTerm": _pod_term(
                rng, rng.choice([app, *APPS]), rng.choice(["kubernetes.io/hostname", "topology.kubernetes.io/zone"]))}]
    if not affinity:
        del spec["affinity"]
    if rng.random() < 0.3 and "topologySpreadConstraints" not in spec:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": rng.choice([1, 2]), "whenUnsatisfiable": "ScheduleAnyway",
            "topologyKey": rng.choice(["topology.kubernetes.io/zone", "kubernetes.io/hostname"]),
            "labelSelector": {"matchLabels": {"app": app}}}]




# Feature families drawn on top, each from its own random stream (``--features``): without them a seed gives
# the scenarios it always gave.
FAMILIES = ("admission-chain", "resize", "volumes", "dra")
SANDBOX_CLASSES_MISSING = "wasm"  # a RuntimeClass no cluster here holds


def _admission_chain(rng: random.Random, objects: list[dict[str, Any]], pod: dict[str, Any]) -> None:
    """What the API server's admission chain changes or refuses in the incoming pod (issue #26): a LimitRange's
    defaults for containers that write no requests (maxima that refuse some), a RuntimeClass named only (its
    overhead and scheduling for admission to add), a RuntimeClass that does not exist, a missing namespace, and
    the pods kube-scheduler does not try: scheduling gates, another scheduler's name."""
    spec = _spec_of(pod)
    namespace = pod["metadata"]["namespace"]
    if rng.random() < 0.45 and namespace in NAMESPACES:
        request = rng.choice(["500m", "1", "1500m", "2"])
        item: dict[str, Any] = {"type": "Container", "defaultRequest": {"cpu": request, "memory": "256Mi"},
                                "default": {"cpu": "4", "memory": "1Gi"}}
        if rng.random() < 0.25:
            item["max"] = {"cpu": rng.choice(["1", "4", "4"]), "memory": "2Gi"}
        objects[:] = [o for o in objects if not (o["kind"] == "LimitRange" and o["metadata"]["namespace"] == namespace)]
        objects.append({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults",
                                                                               "namespace": namespace},
                        "spec": {"limits": [item]}})
        for container in spec["containers"]:
            resources = container.get("resources") or {}
            if not resources.get("limits"):  # extended resources keep their requests (limit == request)
                container.pop("resources", None)
    roll = rng.random()
    classes = {o["metadata"]["name"] for o in objects if o["kind"] == "RuntimeClass"}
    if roll < 0.3:
        name = rng.choice(sorted(RUNTIME_CLASSES))
        if name not in classes:
            objects.append(_runtime_class(name))
        spec.pop("overhead", None)  # RuntimeClass admission sets it from the class
        spec["runtimeClassName"] = name
    elif roll < 0.38:
        if not classes:  # the snapshot must hold RuntimeClasses for a missing one to be known missing
            objects.append(_runtime_class("kata"))
        spec.pop("overhead", None)
        spec["runtimeClassName"] = SANDBOX_CLASSES_MISSING
    roll = rng.random()
    if roll < 0.03:
        pod["metadata"]["namespace"] = MISSING
    elif roll < 0.13:
        spec["schedulingGates"] = [{"name": "example.com/admission-check"}]
    elif roll < 0.23:
        spec["schedulerName"] = OTHER_SCHEDULER


def _resized(rng: random.Random, objects: list[dict[str, Any]]) -> None:
    """Running pods mid-resize (in-place resize, GA since v1.35): the status' allocated and actuated requests
    above or below the spec, some resizes Infeasible (then the spec is left out: component-helpers PodRequests)."""
    for pod in objects:
        spec = pod["spec"] if pod["kind"] == "Pod" else None
        if spec is None or not spec.get("nodeName") or pod["metadata"].get("deletionTimestamp") \
                or rng.random() >= 0.35:
            continue
        container = spec["containers"][0]
        cpu = _milli(container["resources"]["requests"]["cpu"])
        other = max(100, cpu + rng.choice([-500, -250, 250, 500, 1000]))
        allocated, actuated = (other, other) if rng.random() < 0.5 else (other, cpu)
        status = pod.setdefault("status", {})
        status["containerStatuses"] = [{"name": container["name"], "ready": True, "restartCount": 0,
                                        "image": IMAGE, "imageID": "", "started": True,
                                        "allocatedResources": {"cpu": f"{allocated}m"},
                                        "resources": {"requests": {"cpu": f"{actuated}m"}}}]
        if other < cpu and rng.random() < 0.4:  # the spec asks for more than the node can give
            status["conditions"] = [*(status.get("conditions") or []),
                                    {"type": "PodResizePending", "status": "True", "reason": "Infeasible",
                                     "message": "Node didn't have enough capacity"}]


def generate_scenario(seed: int, index: int, families: frozenset[str] = frozenset(), scoring: bool = False,
                      ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The snapshot's objects and the incoming Pod or Deployment of scenario ``index`` of ``seed``, with the
    feature ``families`` (``FAMILIES``) drawn on top (``scoring``: also what the Score plugins read, ``_scoring``)."""
    rng = random.Random(f"{seed}-{index}")
    default = rng.choice([None, None, "mid", "low"])  # a pod without a class gets the global default's value
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "preemptionPolicy": policy, "globalDefault": name == default}
               for name, value, policy in CLASSES]
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": ns}}}
                  for ns in NAMESPACES]
    starts: set[int] = set()
    if rng.random() < 0.2:
        nodes, pods = _twins(rng, rng.randint(2, 5), starts)
    else:
        nodes = [_node(rng, i) for i in range(rng.randint(2, 7))]
        pods = _existing_pods(rng, nodes, starts)
    pods += _nominated(rng, nodes)
    objects = [*classes, *namespaces, *nodes, *pods, *_pdbs(rng, pods)]
    incoming = _incoming(rng)
    lived = random.Random(f"{seed}-{index}-lived")
    offer = _lived_in(lived, objects, starts)
    _lived_in_incoming(lived, incoming, offer)
    if scoring:
        _scoring(random.Random(f"{seed}-{index}-scoring"), objects, incoming)
    if "admission-chain" in families:
        _admission_chain(random.Random(f"{seed}-{index}-chain"), objects, incoming)
    if "resize" in families:
        _resized(random.Random(f"{seed}-{index}-resize"), objects)
    if "volumes" in families:
        storage.volumes(random.Random(f"{seed}-{index}-volumes"), objects, incoming)
    if "dra" in families:
        storage.devices(random.Random(f"{seed}-{index}-dra"), objects, incoming)
    return objects, incoming


def _spec_of(pod: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = pod["spec"]["template"]["spec"] if pod["kind"] == "Deployment" else pod["spec"]
    return spec


def features(objects: list[dict[str, Any]], pod: dict[str, Any]) -> set[str]:
    """The predictor features one scenario exercises (for the bench's coverage table)."""
    spec = _spec_of(pod)
    text = json.dumps(spec)
    nodes = [o for o in objects if o["kind"] == "Node"]
    existing = [o for o in objects if o["kind"] == "Pod"]
    checks = {
        "extended resources": GPU in text,
        "pod count limit": any(int(n["status"]["allocatable"]["pods"]) < 110 for n in nodes),
        "init containers/sidecars": "initContainers" in text,
        "limits only or pod-level requests": "resources" in spec or any(
            "requests" not in c.get("resources", {}) for c in spec["containers"]),
        "taints and tolerations": "tolerations" in spec and any(n["spec"].get("taints") for n in nodes),
        "node selector": "nodeSelector" in spec,
        "required node affinity": "nodeAffinity" in text,
        "unschedulable nodes": any(n["spec"].get("unschedulable") for n in nodes),
        "PDBs": any(o["kind"] == "PodDisruptionBudget" for o in objects),
        "preemptionPolicy Never": spec.get("priorityClassName") == "polite",
        "no or unknown PriorityClass": spec.get("priorityClassName") in (None, "gold"),
        "a global default class": any(o.get("globalDefault") for o in objects),
        "multi-replica workload": pod["kind"] == "Deployment",
        "pod anti-affinity": "podAntiAffinity" in text,
        "pod affinity": '"podAffinity"' in text,
        "existing pods' anti-affinity": any("podAntiAffinity" in json.dumps(p["spec"]) for p in existing),
        "matchLabelKeys/mismatchLabelKeys": "LabelKeys" in text,
        "topology spread": "topologySpreadConstraints" in spec,
        "node images (ImageLocality)": any(n["status"].get("images") for n in nodes),
        "PreferNoSchedule taints": any(t.get("effect") == "PreferNoSchedule" for n in nodes
                                       for t in n["spec"].get("taints", [])),
        "preferred node affinity": '"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": ' in text
                                   and '"preference"' in text,
        "preferred pod (anti-)affinity": '"podAffinityTerm"' in text or any(
            '"podAffinityTerm"' in json.dumps(p["spec"]) for p in existing),
        "soft topology spread (ScheduleAnyway)": "ScheduleAnyway" in text,
        "host ports": "hostPort" in text,
        "nominated pods": any(p.get("status", {}).get("nominatedNodeName") for p in existing),
        "terminating pods": any(p["metadata"].get("deletionTimestamp") for p in existing),
        "identical nodes (full ties)": len({json.dumps(n["status"]) for n in nodes}) == 1 and len(nodes) > 1,
        "RuntimeClass pods with overhead": any("overhead" in p["spec"] for p in existing),
        "RuntimeClass absent (stand-in)": any(p["spec"].get("runtimeClassName") not in
                                              (None, *[o["metadata"]["name"] for o in objects
                                                       if o["kind"] == "RuntimeClass"]) for p in existing),
        "incoming RuntimeClass pod": "runtimeClassName" in spec,
        "stale priorities": any(_stale(p) for p in existing),
        "two default classes": sum(bool(o.get("globalDefault")) for o in objects) > 1,
        "LimitRanges": any(o["kind"] == "LimitRange" for o in objects),
        "DaemonSet pods on every node": any(p["metadata"].get("ownerReferences") for p in existing),
        "pods of another scheduler": any(p["spec"].get("schedulerName") for p in existing),
        "terminating namespace": any(o["kind"] == "Namespace" and o.get("status", {}).get("phase") == "Terminating"
                                     for o in objects),
        "incoming pod in a terminating or missing namespace": pod["metadata"]["namespace"] in (RETIRED, MISSING),
        "gated nominated pod (v1.37 only reserves)": any(p["spec"].get("schedulingGates") for p in existing),
        "incoming pod defaulted by a LimitRange": any(
            o["kind"] == "LimitRange" and o["metadata"]["namespace"] == pod["metadata"]["namespace"]
            for o in objects) and any("resources" not in c for c in spec["containers"]),
        "incoming pod of a missing RuntimeClass": spec.get("runtimeClassName") == SANDBOX_CLASSES_MISSING,
        "incoming gated pod": "schedulingGates" in spec,
        "incoming pod of another scheduler": spec.get("schedulerName") == OTHER_SCHEDULER,
        "resized pods (status resources)": any("allocatedResources" in json.dumps(p.get("status") or {})
                                               for p in existing),
        "infeasible resize": any("Infeasible" in json.dumps(p.get("status") or {}) for p in existing),
        **storage.features(objects, spec),
    }
    return {name for name, present in checks.items() if present}


def _stale(pod: dict[str, Any]) -> bool:
    """A stored priority today's classes would not give (the generator's classes; system pods excepted)."""
    spec = pod["spec"]
    name = spec.get("priorityClassName")
    if name is None:
        return spec.get("priority") == 0
    return name in VALUE and spec.get("priority") != VALUE[name]


def scenario_name(seed: int, index: int) -> str:
    return f"s{seed}-{index:03d}"


def write_scenario(directory: Path, objects: list[dict[str, Any]], pod: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    snapshot = {"apiVersion": "v1", "kind": "List", "items": objects}
    (directory / "snapshot.yaml").write_text(yaml.safe_dump(snapshot, sort_keys=False), encoding="utf-8")
    (directory / "pod.yaml").write_text(yaml.safe_dump(pod, sort_keys=False), encoding="utf-8")


def write_scenarios(directory: Path, n: int, seed: int, start: int = 0,
                    families: frozenset[str] = frozenset(), scoring: bool = False) -> list[Path]:
    """Scenarios ``start`` .. ``start + n - 1`` of ``seed`` (with ``families``, ``scoring``) under ``directory``."""
    written = []
    for index in range(start, start + n):
        objects, pod = generate_scenario(seed, index, families, scoring)
        target = directory / scenario_name(seed, index)
        write_scenario(target, objects, pod)
        written.append(target)
    return written
