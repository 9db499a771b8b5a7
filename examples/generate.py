"""Generate examples/cluster.yaml: a realistic multi-tenant cluster snapshot, deterministically.

Run from the repository root:  .venv/bin/python examples/generate.py [--check]

The output is exactly what ``kubectl get priorityclasses,nodes,pods,poddisruptionbudgets,resourcequotas,namespaces,
runtimeclasses,limitranges -A -o yaml`` prints for a cluster without RuntimeClasses or LimitRanges (a ``v1 List``,
keys sorted). The same seed always gives the same file; ``--check`` fails when the committed file differs. The
script also prints per-node free capacity and asserts the design invariants that the ``# expect:`` lines of
examples/pods/*.yaml rely on (see examples/README.md).
"""

from __future__ import annotations

import argparse
import random
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

OUTPUT = Path(__file__).resolve().parent / "cluster.yaml"
SEED = 20250602
NOW = datetime(2025, 6, 2, 9, 30, 0, tzinfo=UTC)
GiB = 1024**3
MiB = 1024**2

SYSTEM_NODE_CRITICAL = ("system-node-critical", 2000001000)
SYSTEM_CLUSTER_CRITICAL = ("system-cluster-critical", 2000000000)
# name -> (value, globalDefault, preemptionPolicy, description)
USER_CLASSES: dict[str, tuple[int, bool, str, str]] = {
    "platform": (100000000, False, "PreemptLowerPriority", "Cluster add-ons run by the platform team."),
    "high": (1000000, False, "PreemptLowerPriority", "Latency-critical tenant services."),
    "high-nonpreempting": (1000000, False, "Never",
                           "Important work that waits for capacity instead of preempting anyone."),
    "standard": (1000, True, "PreemptLowerPriority", "Default for pods that do not name a class."),
    "batch": (100, False, "PreemptLowerPriority", "Batch jobs: first to go when capacity is short."),
    "scavenger": (-100, False, "PreemptLowerPriority", "Opportunistic work that uses idle capacity."),
}
CLASS_VALUES = {**{n: v[0] for n, v in USER_CLASSES.items()},
                SYSTEM_NODE_CRITICAL[0]: SYSTEM_NODE_CRITICAL[1],
                SYSTEM_CLUSTER_CRITICAL[0]: SYSTEM_CLUSTER_CRITICAL[1]}
CLASS_POLICY = {n: v[2] for n, v in USER_CLASSES.items()}

# namespace -> tenant label (None: no tenant label). team-c and batch belong to one tenant.
NAMESPACES: dict[str, str | None] = {
    "default": None, "kube-node-lease": None, "kube-public": None, "kube-system": None,
    "monitoring": "platform", "team-a": "storefront", "team-b": "payments", "team-c": "analytics",
    "batch": "analytics",
}
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"
NOMINATED_NODE = "pool-batch-02"
CORDONED_NODE = "pool-general-12"
PDB_NODE = "pool-general-04"
# Target free millicores per schedulable node after filling with batch pods (actual free = target + < 500m).
FREE_TARGET = {
    "pool-general-01": 2500, "pool-general-02": 1200, "pool-general-03": 3000, "pool-general-05": 800,
    "pool-general-06": 2000, "pool-general-07": 1500, "pool-general-08": 3200, "pool-general-09": 900,
    "pool-general-10": 2800, "pool-general-11": 1800,
    "pool-batch-01": 3000, "pool-batch-02": 1000, "pool-batch-03": 2200, "pool-batch-04": 3400,
    "pool-batch-05": 700, "pool-batch-06": 2600, "pool-batch-07": 1900, "pool-batch-08": 3300,
}


@dataclass
class NodeSpec:
    name: str
    pool: str
    zone: str
    cpu: int  # capacity cores
    alloc_milli: int
    memory_kib: int
    alloc_memory_kib: int
    instance_type: str
    taints: list[dict[str, str]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    gpus: int = 0
    unschedulable: bool = False


@dataclass
class PodSpec:
    namespace: str
    name: str
    node: str | None
    priority_class: str
    containers: list[dict[str, Any]]
    labels: dict[str, str]
    owner: tuple[str, str, str] | None  # (apiVersion, kind, name)
    phase: str = "Running"
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    tolerations: list[dict[str, Any]] | None = None
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None
    annotations: dict[str, str] | None = None
    age: timedelta = timedelta(days=3)
    deleting: bool = False
    nominated: str | None = None
    grace: int = 30
    service_account: str = "default"
    generate_name: str | None = None

    @property
    def cpu_milli(self) -> int:
        return pod_requests(self)[0]

    @property
    def memory(self) -> int:
        return pod_requests(self)[1]


def container(name: str, image: str, cpu: str | None = None, memory: str | None = None,
              memory_limit: bool = True, extra: dict[str, str] | None = None,
              ports: list[int] | None = None, restart_always: bool = False) -> dict[str, Any]:
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
        if memory_limit:
            limits["memory"] = memory
    for key, val in (extra or {}).items():
        requests[key] = val
        limits[key] = val
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    ctr: dict[str, Any] = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": resources}
    if ports:
        ctr["ports"] = [{"containerPort": p, "protocol": "TCP"} for p in ports]
    if restart_always:
        ctr["restartPolicy"] = "Always"
    return ctr


def _milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _bytes(q: str) -> int:
    for suffix, mult in (("Gi", GiB), ("Mi", MiB), ("Ki", 1024)):
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * mult)
    return int(q)


def pod_requests(pod: PodSpec) -> tuple[int, int, int]:
    """(milli cpu, memory bytes, gpus) like upstream resource.PodRequests (sidecars included)."""
    def req(ctr: dict[str, Any]) -> tuple[int, int, int]:
        r = ctr["resources"].get("requests", {})
        return (_milli(r["cpu"]) if "cpu" in r else 0, _bytes(r["memory"]) if "memory" in r else 0,
                int(r.get("nvidia.com/gpu", 0)))
    total = [sum(req(c)[i] for c in pod.containers) for i in range(3)]
    sidecar = [0, 0, 0]
    peak = [0, 0, 0]
    for ctr in pod.init_containers:
        r = req(ctr)
        if ctr.get("restartPolicy") == "Always":
            sidecar = [a + b for a, b in zip(sidecar, r, strict=True)]
            total = [a + b for a, b in zip(total, r, strict=True)]
            peak = [max(a, b) for a, b in zip(peak, sidecar, strict=True)]
        else:
            peak = [max(a, b + c) for a, b, c in zip(peak, sidecar, r, strict=True)]
    return tuple(max(a, b) for a, b in zip(total, peak, strict=True))  # type: ignore[return-value]


class Generator:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.rv = 41000
        self.nodes: list[NodeSpec] = []
        self.pods: list[PodSpec] = []
        self.used_names: set[str] = set()

    # ---- small helpers --------------------------------------------------------------------------
    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def resource_version(self) -> str:
        self.rv += self.rng.randint(3, 400)
        return str(self.rv)

    def suffix(self, n: int) -> str:
        return "".join(self.rng.choice(SUFFIX_CHARS) for _ in range(n))

    def unique(self, prefix: str, n: int = 5) -> str:
        while True:
            name = f"{prefix}{self.suffix(n)}"
            if name not in self.used_names:
                self.used_names.add(name)
                return name

    @staticmethod
    def ts(when: datetime) -> str:
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")

    def add(self, pod: PodSpec) -> PodSpec:
        self.pods.append(pod)
        return pod

    # ---- nodes ----------------------------------------------------------------------------------
    def build_nodes(self) -> None:
        for i in range(1, 4):
            self.nodes.append(NodeSpec(
                f"cp-{i}", "control-plane", ZONES[i - 1], 4, 3860, 16393740, 15242764, "m6i.xlarge",
                taints=[{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}],
                labels={"node-role.kubernetes.io/control-plane": "",
                        "node.kubernetes.io/exclude-from-external-load-balancers": ""}))
        for i in range(1, 13):
            node = NodeSpec(f"pool-general-{i:02d}", "general", ZONES[(i - 1) % 3], 16, 15890, 65842028,
                            62594924, "m6i.4xlarge", labels={"node-role.kubernetes.io/worker": ""})
            if node.name == CORDONED_NODE:
                node.unschedulable = True
                node.taints = [{"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable",
                                "timeAdded": self.ts(NOW - timedelta(hours=2))}]
            self.nodes.append(node)
        for i in range(1, 9):
            self.nodes.append(NodeSpec(f"pool-batch-{i:02d}", "batch", ZONES[(i - 1) % 3], 32, 31850, 131773408,
                                       127379160, "m6i.8xlarge", labels={"node-role.kubernetes.io/worker": ""}))
        for i in range(1, 4):
            self.nodes.append(NodeSpec(
                f"pool-gpu-{i:02d}", "gpu", ZONES[(i - 1) % 3], 48, 47810, 197617432, 190940160, "g5.12xlarge",
                taints=[{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}],
                labels={"node-role.kubernetes.io/worker": "", "accelerator": "nvidia-a10g",
                        "nvidia.com/gpu.product": "NVIDIA-A10G"}, gpus=4))

    def node_object(self, node: NodeSpec) -> dict[str, Any]:
        labels = {
            "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": node.instance_type, "pool": node.pool,
            "topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": node.zone,
            **node.labels,
        }
        storage_kib = 203070420
        capacity = {"cpu": str(node.cpu), "ephemeral-storage": f"{storage_kib}Ki",
                    "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": f"{node.memory_kib}Ki", "pods": "110"}
        allocatable = {"cpu": f"{node.alloc_milli}m", "ephemeral-storage": "187149391190",
                       "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": f"{node.alloc_memory_kib}Ki",
                       "pods": "110"}
        if node.gpus:
            capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(node.gpus)
        created = NOW - timedelta(days=self.rng.randint(20, 120), minutes=self.rng.randint(0, 1440))
        spec: dict[str, Any] = {"podCIDR": f"10.244.{self.nodes.index(node)}.0/24",
                                "providerID": f"aws:///{node.zone}/i-0{self.rng.getrandbits(60):015x}"}
        if node.taints:
            spec["taints"] = node.taints
        if node.unschedulable:
            spec["unschedulable"] = True
        self.used_names.add(node.name)
        ready_since = self.ts(created + timedelta(minutes=2))
        conditions = [
            {"lastHeartbeatTime": self.ts(NOW - timedelta(seconds=40)), "lastTransitionTime": ready_since,
             "message": msg, "reason": reason, "status": status, "type": ctype}
            for ctype, status, reason, msg in (
                ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            )
        ]
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
                "creationTimestamp": self.ts(created), "labels": labels, "name": node.name,
                "resourceVersion": self.resource_version(), "uid": self.uid(),
            },
            "spec": spec,
            "status": {
                "addresses": [{"address": f"10.0.{ZONES.index(node.zone)}.{self.nodes.index(node) + 10}",
                               "type": "InternalIP"}, {"address": node.name, "type": "Hostname"}],
                "allocatable": allocatable, "capacity": capacity, "conditions": conditions,
                "nodeInfo": {"architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.27",
                             "kernelVersion": "6.1.134-152.225.amzn2023.x86_64", "kubeProxyVersion": "",
                             "kubeletVersion": "v1.32.5", "operatingSystem": "linux",
                             "osImage": "Amazon Linux 2023.7.20250512"},
            },
        }

    # ---- pods -----------------------------------------------------------------------------------
    def build_pods(self) -> None:
        self.daemonsets()
        self.control_plane()
        self.services()
        self.gpu_workloads()
        self.fill_with_batch()
        self.finished_and_pending_batch()

    def node_names(self, pool: str) -> list[str]:
        return [n.name for n in self.nodes if n.pool == pool]

    def daemonsets(self) -> None:
        tolerate_all = [{"operator": "Exists"}]
        for node in self.nodes:
            pin = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}]}}}
            for ns, ds, cls, ctrs, sa in (
                ("kube-system", "kube-proxy", "system-node-critical",
                 [container("kube-proxy", "registry.k8s.io/kube-proxy:v1.32.5", "100m")], "kube-proxy"),
                ("kube-system", "calico-node", "system-node-critical",
                 [container("calico-node", "docker.io/calico/node:v3.29.3", "250m", "256Mi")], "calico-node"),
                ("monitoring", "node-exporter", "platform",
                 [container("node-exporter", "quay.io/prometheus/node-exporter:v1.9.1", "102m", "180Mi",
                            ports=[9100])], "node-exporter"),
            ):
                self.add(PodSpec(ns, self.unique(f"{ds}-"), node.name, cls, ctrs,
                                 {"app.kubernetes.io/name": ds, "controller-revision-hash": "6b9c7f8d5",
                                  "pod-template-generation": "3"},
                                 ("apps/v1", "DaemonSet", ds), tolerations=tolerate_all, affinity=pin,
                                 age=timedelta(days=12), service_account=sa))
            if node.gpus:
                self.add(PodSpec("kube-system", self.unique("nvidia-device-plugin-daemonset-"), node.name,
                                 "system-node-critical",
                                 [container("nvidia-device-plugin-ctr", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1")],
                                 {"name": "nvidia-device-plugin-ds"}, ("apps/v1", "DaemonSet",
                                                                       "nvidia-device-plugin-daemonset"),
                                 tolerations=tolerate_all, affinity=pin, age=timedelta(days=12)))

    def control_plane(self) -> None:
        for node in self.node_names("control-plane"):
            for comp, cpu, mem in (("etcd", "100m", "100Mi"), ("kube-apiserver", "250m", None),
                                   ("kube-controller-manager", "200m", None), ("kube-scheduler", "100m", None)):
                image = ("registry.k8s.io/etcd:3.5.16-0" if comp == "etcd"
                         else f"registry.k8s.io/{comp}:v1.32.5")
                self.add(PodSpec("kube-system", f"{comp}-{node}", node, "system-node-critical",
                                 [container(comp, image, cpu, mem, memory_limit=False)],
                                 {"component": comp, "tier": "control-plane"}, ("v1", "Node", node),
                                 tolerations=[{"effect": "NoExecute", "operator": "Exists"}],
                                 annotations={"kubernetes.io/config.source": "file",
                                              "kubernetes.io/config.hash": f"{self.rng.getrandbits(128):032x}"},
                                 age=timedelta(days=30)))
        cp_toleration = [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}]
        rs = f"coredns-{self.suffix(10)}"
        for node in ("cp-1", "cp-2"):
            self.add(PodSpec("kube-system", self.unique(f"{rs}-"), node, "system-cluster-critical",
                             [container("coredns", "registry.k8s.io/coredns/coredns:v1.11.3", "100m", "70Mi",
                                        ports=[53, 9153])],
                             {"k8s-app": "kube-dns", "pod-template-hash": rs.split("-")[-1]},
                             ("apps/v1", "ReplicaSet", rs), tolerations=cp_toleration, service_account="coredns"))

    def deployment(self, ns: str, name: str, replicas: int, cls: str, nodes: list[str],
                   ctrs: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
                   labels: dict[str, str] | None = None) -> None:
        rs_hash = self.suffix(10)
        for i in range(replicas):
            self.add(PodSpec(ns, self.unique(f"{name}-{rs_hash}-"), nodes[i % len(nodes)], cls, ctrs,
                             {"app.kubernetes.io/name": name, "pod-template-hash": rs_hash, **(labels or {})},
                             ("apps/v1", "ReplicaSet", f"{name}-{rs_hash}"), init_containers=init or [],
                             age=timedelta(days=self.rng.randint(1, 20), hours=self.rng.randint(0, 23)),
                             service_account=name))

    def statefulset(self, ns: str, name: str, replicas: int, cls: str, nodes: list[str],
                    ctrs: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> None:
        for i in range(replicas):
            self.add(PodSpec(ns, f"{name}-{i}", nodes[i % len(nodes)], cls, ctrs,
                             {"app.kubernetes.io/name": name, "apps.kubernetes.io/pod-index": str(i),
                              "controller-revision-hash": f"{name}-5d9c8b7f6d",
                              "statefulset.kubernetes.io/pod-name": f"{name}-{i}"},
                             ("apps/v1", "StatefulSet", name), init_containers=init or [],
                             age=timedelta(days=self.rng.randint(5, 40)), grace=60))

    def services(self) -> None:
        general = [n for n in self.node_names("general") if n not in (CORDONED_NODE, PDB_NODE)]
        spread = general[:]
        self.rng.shuffle(spread)

        def nodes(k: int) -> list[str]:
            picked = spread[:k]
            spread[:] = spread[k:] + spread[:k]
            return picked

        log_sidecar = container("log-shipper", "cr.fluentbit.io/fluent/fluent-bit:3.2.10", "100m", "256Mi",
                                restart_always=True)
        # team-a (tenant storefront)
        self.deployment("team-a", "web", 8, "high", nodes(8),
                        [container("web", "ghcr.io/example/storefront-web:2.14.3", "900m", "1792Mi", ports=[8080])],
                        init=[log_sidecar])
        self.deployment("team-a", "api", 6, "high", nodes(6),
                        [container("api", "ghcr.io/example/storefront-api:5.2.0", "1500m", "3Gi", ports=[8443])])
        self.deployment("team-a", "cart", 4, "standard", nodes(4),
                        [container("cart", "ghcr.io/example/cart:1.9.7", "500m", "1Gi", ports=[8080])])
        self.statefulset("team-a", "redis", 3, "high", nodes(3),
                         [container("redis", "docker.io/library/redis:7.4.3", "500m", "2Gi", ports=[6379])],
                         init=[container("init-config", "docker.io/library/busybox:1.37", "50m", "64Mi")])
        # team-b (tenant payments): five of six payments replicas share one node, guarded by a zero-budget PDB.
        self.deployment("team-b", "payments", 6, "standard", [PDB_NODE] * 5 + nodes(1),
                        [container("payments", "ghcr.io/example/payments:3.30.1", "2800m", "4Gi", ports=[9000])],
                        labels={"app.kubernetes.io/part-of": "payments"})
        self.deployment("team-b", "ledger", 3, "high", nodes(3),
                        [container("ledger", "ghcr.io/example/ledger:1.4.2", "1", "2Gi", ports=[9443])],
                        labels={"app.kubernetes.io/part-of": "payments"})
        self.deployment("team-b", "checkout", 4, "standard", nodes(4),
                        [container("checkout", "ghcr.io/example/checkout:8.0.4", "500m", "1Gi", ports=[8080])])
        # team-c (tenant analytics)
        self.statefulset("team-c", "jupyter", 3, "standard", nodes(3),
                         [container("notebook", "quay.io/jupyter/scipy-notebook:2025-05-26", "2", "8Gi",
                                    ports=[8888])])
        self.deployment("team-c", "dashboards", 2, "standard", nodes(2),
                        [container("superset", "docker.io/apache/superset:4.1.2", "250m", "512Mi", ports=[8088])])
        # monitoring (tenant platform)
        self.statefulset("monitoring", "prometheus-k8s", 2, "platform", nodes(2),
                         [container("prometheus", "quay.io/prometheus/prometheus:v3.4.0", "1900m", "7936Mi",
                                    ports=[9090]),
                          container("config-reloader", "quay.io/prometheus-operator/prometheus-config-reloader:"
                                    "v0.83.0", "100m", "256Mi")])
        self.statefulset("monitoring", "alertmanager-main", 3, "platform", nodes(3),
                         [container("alertmanager", "quay.io/prometheus/alertmanager:v0.28.1", "100m", "256Mi",
                                    ports=[9093])])
        self.deployment("monitoring", "grafana", 1, "platform", nodes(1),
                        [container("grafana", "docker.io/grafana/grafana:12.0.1", "250m", "512Mi", ports=[3000])])
        self.deployment("monitoring", "kube-state-metrics", 1, "platform", nodes(1),
                        [container("kube-state-metrics", "registry.k8s.io/kube-state-metrics/kube-state-metrics:"
                                   "v2.15.0", "100m", "190Mi", ports=[8080])])
        self.deployment("kube-system", "metrics-server", 1, "system-cluster-critical", nodes(1),
                        [container("metrics-server", "registry.k8s.io/metrics-server/metrics-server:v0.7.2",
                                   "100m", "200Mi", ports=[10250])])
        # The pending high-priority pod already nominated to a batch node, waiting for its victim to terminate.
        rs_hash = self.suffix(10)
        self.add(PodSpec("team-a", self.unique(f"search-indexer-{rs_hash}-"), None, "high",
                         [container("indexer", "ghcr.io/example/search-indexer:0.18.0", "8", "16Gi")],
                         {"app.kubernetes.io/name": "search-indexer", "pod-template-hash": rs_hash},
                         ("apps/v1", "ReplicaSet", f"search-indexer-{rs_hash}"), phase="Pending",
                         nominated=NOMINATED_NODE, age=timedelta(seconds=25)))

    def gpu_workloads(self) -> None:
        gpu_nodes = self.node_names("gpu")
        gpu_toleration = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]
        placements = [gpu_nodes[0], gpu_nodes[0], gpu_nodes[1], gpu_nodes[2]]
        for i, node in enumerate(placements):
            job = f"train-llm-{i}"
            pod = PodSpec("team-c", self.unique(f"{job}-"), node, "standard",
                          [container("trainer", "nvcr.io/nvidia/pytorch:25.04-py3", "16", "64Gi",
                                     extra={"nvidia.com/gpu": "2"})],
                          {"batch.kubernetes.io/job-name": job, "job-name": job},
                          ("batch/v1", "Job", job), tolerations=gpu_toleration,
                          node_selector={"accelerator": "nvidia-a10g"}, age=timedelta(hours=5 + i))
            self.add(pod)
        self.add(PodSpec("team-c", "gpu-notebook-0", gpu_nodes[1], "standard",
                         [container("notebook", "quay.io/jupyter/pytorch-notebook:cuda12-2025-05-26", "4", "16Gi",
                                    extra={"nvidia.com/gpu": "1"})],
                         {"app.kubernetes.io/name": "gpu-notebook"}, ("apps/v1", "StatefulSet", "gpu-notebook"),
                         tolerations=gpu_toleration, node_selector={"accelerator": "nvidia-a10g"}))

    def free_milli(self, node: NodeSpec) -> int:
        used = sum(p.cpu_milli for p in self.pods if p.node == node.name and p.phase not in ("Succeeded", "Failed"))
        return node.alloc_milli - used

    def fill_with_batch(self) -> None:
        jobs = ["etl-orders", "feature-backfill", "risk-sim", "video-transcode", "log-compaction", "report-daily"]
        for node in self.nodes:
            if node.name not in FREE_TARGET:
                continue
            room = self.free_milli(node) - FREE_TARGET[node.name]
            sizes = (8000, 4000, 2000, 1000, 500) if node.pool == "batch" else (4000, 2000, 1000, 500)
            first = True
            while room >= 500:
                size = next(s for s in sizes if s <= room)
                if node.name == NOMINATED_NODE and first:
                    size = 8000  # the victim that is terminating right now
                cls = "scavenger" if size == 500 else "batch"
                job = self.rng.choice(jobs)
                run = f"{job}-{29148000 + self.rng.randint(0, 999)}"
                pod = PodSpec("batch", self.unique(f"{run}-"), node.name, cls,
                              [container("worker", f"ghcr.io/example/{job}:2025.05", f"{size}m",
                                         f"{size * 2 // 1000}Gi" if size >= 1000 else "1Gi")],
                              {"batch.kubernetes.io/job-name": run, "job-name": run},
                              ("batch/v1", "Job", run),
                              age=timedelta(minutes=self.rng.randint(5, 600), seconds=self.rng.randint(0, 59)),
                              grace=self.rng.choice((30, 30, 60, 120)))
                if node.name == NOMINATED_NODE and first:
                    pod.deleting = True
                    pod.age = timedelta(hours=3)
                self.add(pod)
                room -= size
                first = False

    def finished_and_pending_batch(self) -> None:
        nodes = [n for n in self.node_names("batch")]
        for i in range(14):
            phase = "Failed" if i % 5 == 4 else "Succeeded"
            run = f"report-daily-{29146560 + i * 60}"
            self.add(PodSpec("batch", self.unique(f"{run}-"), nodes[i % len(nodes)], "batch",
                             [container("worker", "ghcr.io/example/report-daily:2025.05", "2", "4Gi")],
                             {"batch.kubernetes.io/job-name": run, "job-name": run}, ("batch/v1", "Job", run),
                             phase=phase, age=timedelta(hours=20 - i)))
        run = "scratch-explore-29148321"
        self.add(PodSpec("batch", self.unique(f"{run}-"), None, "scavenger",
                         [container("worker", "ghcr.io/example/scratch:latest", "12", "24Gi")],
                         {"batch.kubernetes.io/job-name": run, "job-name": run}, ("batch/v1", "Job", run),
                         phase="Pending", age=timedelta(minutes=42)))

    def pod_object(self, pod: PodSpec) -> dict[str, Any]:
        created = NOW - pod.age - timedelta(seconds=self.rng.randint(0, 3599) if pod.age > timedelta(hours=1) else 0)
        node = next((n for n in self.nodes if n.name == pod.node), None)
        meta: dict[str, Any] = {"creationTimestamp": self.ts(created), "labels": pod.labels, "name": pod.name,
                                "namespace": pod.namespace, "resourceVersion": self.resource_version(),
                                "uid": self.uid()}
        if pod.annotations:
            meta["annotations"] = pod.annotations
        if pod.owner and pod.owner[1] in ("ReplicaSet", "DaemonSet", "Job"):
            meta["generateName"] = pod.name[: pod.name.rfind("-") + 1]
        if pod.owner:
            api, kind, name = pod.owner
            ref: dict[str, Any] = {"apiVersion": api, "kind": kind, "name": name, "uid": self.uid()}
            if kind != "Node":
                ref["blockOwnerDeletion"] = True
            ref["controller"] = True
            meta["ownerReferences"] = [ref]
        if pod.owner and pod.owner[1] == "Job":
            meta["finalizers"] = ["batch.kubernetes.io/job-tracking"]
        if pod.deleting:
            meta["deletionGracePeriodSeconds"] = pod.grace
            meta["deletionTimestamp"] = self.ts(NOW + timedelta(seconds=pod.grace - 19))
        tolerations = list(pod.tolerations or [])
        if not any(t.get("operator") == "Exists" and "key" not in t for t in tolerations):
            # Added by the DefaultTolerationSeconds admission plugin.
            tolerations += [{"effect": "NoExecute", "key": key, "operator": "Exists", "tolerationSeconds": 300}
                            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
        is_job = bool(pod.owner and pod.owner[1] == "Job")
        spec: dict[str, Any] = {
            "containers": pod.containers, "dnsPolicy": "ClusterFirst",
            "preemptionPolicy": CLASS_POLICY.get(pod.priority_class, "PreemptLowerPriority"),
            "priority": CLASS_VALUES[pod.priority_class], "priorityClassName": pod.priority_class,
            "restartPolicy": "Never" if is_job else "Always", "schedulerName": "default-scheduler",
            "serviceAccountName": pod.service_account, "terminationGracePeriodSeconds": pod.grace,
            "tolerations": tolerations,
        }
        if pod.init_containers:
            spec["initContainers"] = pod.init_containers
        if pod.node:
            spec["nodeName"] = pod.node
        if pod.node_selector:
            spec["nodeSelector"] = pod.node_selector
        if pod.affinity:
            spec["affinity"] = pod.affinity
        if pod.owner and pod.owner[1] == "StatefulSet":
            spec["hostname"] = pod.name
            spec["subdomain"] = pod.owner[2]
        status: dict[str, Any] = {"phase": pod.phase, "qosClass": qos_class(pod)}
        started = created + timedelta(seconds=2)
        if pod.node and node is not None:
            host_ip = f"10.0.{ZONES.index(node.zone)}.{self.nodes.index(node) + 10}"
            status["hostIP"] = host_ip
            pod_ip = (host_ip if pod.owner and pod.owner[1] in ("DaemonSet", "Node")
                      else f"10.244.{self.nodes.index(node)}.{self.rng.randint(2, 250)}")
            status["podIP"] = pod_ip
            status["startTime"] = self.ts(started)
            ready = "True" if pod.phase == "Running" and not pod.deleting else "False"
            conditions = [
                {"lastTransitionTime": self.ts(started + timedelta(seconds=6)), "status": ready, "type": "Ready"},
                {"lastTransitionTime": self.ts(created), "status": "True", "type": "PodScheduled"},
            ]
            if pod.deleting:
                conditions[0]["reason"] = "ContainersNotReady"
                conditions.insert(0, {
                    "lastTransitionTime": self.ts(NOW - timedelta(seconds=19)),
                    "message": "default-scheduler: preempting to accommodate a higher priority pod",
                    "reason": "PreemptionByScheduler", "status": "True", "type": "DisruptionTarget"})
            if pod.phase in ("Succeeded", "Failed"):
                conditions[0]["reason"] = "PodCompleted" if pod.phase == "Succeeded" else "PodFailed"
            status["conditions"] = conditions
        else:
            status["conditions"] = [{
                "lastTransitionTime": self.ts(created), "status": "False",
                "type": "PodScheduled", "reason": "Unschedulable",
                "message": "0/26 nodes are available: 1 node(s) were unschedulable, 3 node(s) had untolerated "
                           "taint {node-role.kubernetes.io/control-plane: }, 3 node(s) had untolerated taint "
                           "{nvidia.com/gpu: present}, 19 Insufficient cpu. preemption: 0/26 nodes are available: "
                           "7 Preemption is not helpful for scheduling, 19 No preemption victims found for "
                           "incoming pod."
                if pod.priority_class == "scavenger" else
                "0/26 nodes are available: 1 node(s) were unschedulable, 3 node(s) had untolerated taint "
                "{node-role.kubernetes.io/control-plane: }, 3 node(s) had untolerated taint "
                "{nvidia.com/gpu: present}, 19 Insufficient cpu. preemption: not eligible due to a terminating "
                "pod on the nominated node."}]
            if pod.nominated:
                status["nominatedNodeName"] = pod.nominated
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}

    # ---- other kinds ----------------------------------------------------------------------------
    def priority_class_objects(self) -> Iterator[dict[str, Any]]:
        system = {
            SYSTEM_CLUSTER_CRITICAL[0]: (SYSTEM_CLUSTER_CRITICAL[1], "Used for system critical pods that must run "
                                         "in the cluster, but can be moved to another node if necessary."),
            SYSTEM_NODE_CRITICAL[0]: (SYSTEM_NODE_CRITICAL[1],
                                      "Used for system critical pods that must not be moved from their current node."),
        }
        classes: dict[str, dict[str, Any]] = {}
        for name, (value, description) in system.items():
            classes[name] = {"apiVersion": "scheduling.k8s.io/v1", "description": description, "kind": "PriorityClass",
                             "metadata": {"creationTimestamp": self.ts(NOW - timedelta(days=140)), "generation": 1,
                                          "name": name, "resourceVersion": str(70 + len(classes)),
                                          "uid": self.uid()},
                             "preemptionPolicy": "PreemptLowerPriority", "value": value}
        for name, (value, default, policy, description) in USER_CLASSES.items():
            obj: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "description": description,
                                   "kind": "PriorityClass",
                                   "metadata": {"creationTimestamp": self.ts(NOW - timedelta(days=130)),
                                                "generation": 1, "labels": {"app.kubernetes.io/managed-by": "argocd"},
                                                "name": name, "resourceVersion": self.resource_version(),
                                                "uid": self.uid()},
                                   "preemptionPolicy": policy, "value": value}
            if default:
                obj["globalDefault"] = True
            classes[name] = obj
        for name in sorted(classes):
            yield classes[name]

    def namespace_objects(self) -> Iterator[dict[str, Any]]:
        for name in sorted(NAMESPACES):
            labels = {"kubernetes.io/metadata.name": name}
            tenant = NAMESPACES[name]
            if tenant:
                labels["tenant"] = tenant
            yield {"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"creationTimestamp": self.ts(NOW - timedelta(days=140 if tenant is None else 100)),
                                "labels": labels, "name": name, "resourceVersion": self.resource_version(),
                                "uid": self.uid()},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

    def pdb_objects(self) -> Iterator[dict[str, Any]]:
        # (namespace, name, selector labels, minAvailable, maxUnavailable)
        budgets = [
            ("team-a", "web", {"app.kubernetes.io/name": "web"}, 6, None),
            ("team-a", "redis", {"app.kubernetes.io/name": "redis"}, None, 1),
            ("team-b", "payments", {"app.kubernetes.io/name": "payments"}, None, 0),
            ("team-b", "checkout", {"app.kubernetes.io/name": "checkout"}, 3, None),
            ("monitoring", "prometheus-k8s", {"app.kubernetes.io/name": "prometheus-k8s"}, 1, None),
            ("monitoring", "alertmanager-main", {"app.kubernetes.io/name": "alertmanager-main"}, None, 1),
            ("kube-system", "coredns", {"k8s-app": "kube-dns"}, None, 1),
        ]
        for ns, name, selector, min_available, max_unavailable in budgets:
            matched = [p for p in self.pods if p.namespace == ns and p.phase == "Running" and p.node
                       and all(p.labels.get(k) == v for k, v in selector.items())]
            healthy = sum(1 for p in matched if not p.deleting)
            expected = len(matched)
            desired = min_available if min_available is not None else expected - (max_unavailable or 0)
            spec: dict[str, Any] = {"selector": {"matchLabels": selector}}
            if min_available is not None:
                spec["minAvailable"] = min_available
            else:
                spec["maxUnavailable"] = max_unavailable
            yield {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"creationTimestamp": self.ts(NOW - timedelta(days=60)), "generation": 1,
                                "name": name, "namespace": ns, "resourceVersion": self.resource_version(),
                                "uid": self.uid()},
                   "spec": spec,
                   "status": {"conditions": [{"lastTransitionTime": self.ts(NOW - timedelta(days=2)),
                                              "message": "", "observedGeneration": 1,
                                              "reason": "SufficientPods" if healthy - desired > 0
                                              else "InsufficientPods",
                                              "status": "True" if healthy - desired > 0 else "False",
                                              "type": "DisruptionAllowed"}],
                              "currentHealthy": healthy, "desiredHealthy": desired,
                              "disruptionsAllowed": max(0, healthy - desired), "expectedPods": expected,
                              "observedGeneration": 1}}

    def quota_objects(self) -> Iterator[dict[str, Any]]:
        def usage(ns: str, classes: set[str] | None) -> tuple[int, int, int]:
            pods = [p for p in self.pods if p.namespace == ns and p.phase not in ("Succeeded", "Failed")
                    and (classes is None or p.priority_class in classes)]
            return len(pods), sum(p.cpu_milli for p in pods), sum(p.memory for p in pods)

        def cpu(milli: int) -> str:
            return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"

        def mem(n: int) -> str:
            return f"{n // GiB}Gi" if n % GiB == 0 else f"{n // MiB}Mi" if n % MiB == 0 else str(n)

        critical = ["system-node-critical", "system-cluster-critical"]
        quotas = [
            # (namespace, name, scope classes, hard)
            ("kube-system", "critical-pods", critical, {"pods": "1k"}),
            ("team-a", "high-priority", ["high"],
             {"pods": "40", "requests.cpu": "64", "requests.memory": "160Gi"}),
            ("team-b", "compute-resources", None,
             {"pods": "60", "requests.cpu": "48", "requests.memory": "96Gi"}),
            ("batch", "batch-jobs", ["batch", "scavenger"],
             {"pods": "400", "requests.cpu": "400", "requests.memory": "800Gi"}),
        ]
        for ns, name, classes, hard in quotas:
            count, milli, memory = usage(ns, set(classes) if classes else None)
            used = {"pods": str(count)}
            if "requests.cpu" in hard:
                used["requests.cpu"] = cpu(milli)
                used["requests.memory"] = mem(memory)
            spec: dict[str, Any] = {"hard": hard}
            if classes:
                spec["scopeSelector"] = {"matchExpressions": [
                    {"operator": "In", "scopeName": "PriorityClass", "values": classes}]}
            yield {"apiVersion": "v1", "kind": "ResourceQuota",
                   "metadata": {"creationTimestamp": self.ts(NOW - timedelta(days=90)), "name": name,
                                "namespace": ns, "resourceVersion": self.resource_version(), "uid": self.uid()},
                   "spec": spec, "status": {"hard": hard, "used": used}}

    # ---- output ---------------------------------------------------------------------------------
    def build(self) -> dict[str, Any]:
        self.build_nodes()
        self.build_pods()
        items: list[dict[str, Any]] = list(self.priority_class_objects())
        items += [self.node_object(n) for n in sorted(self.nodes, key=lambda n: n.name)]
        items += [self.pod_object(p) for p in sorted(self.pods, key=lambda p: (p.namespace, p.name))]
        items += list(self.pdb_objects())
        items += list(self.quota_objects())
        items += list(self.namespace_objects())
        return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


class KubectlDumper(yaml.SafeDumper):
    """Quotes strings the way kubectl (go-yaml) does: double quotes, only when a plain scalar would not be a string."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    plain_tag = dumper.resolve(yaml.ScalarNode, value, (True, False))
    style = '"' if not value or plain_tag != "tag:yaml.org,2002:str" else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


KubectlDumper.add_representer(str, _represent_str)


def qos_class(pod: PodSpec) -> str:
    ctrs = [*pod.containers, *pod.init_containers]
    if not any(c["resources"] for c in ctrs):
        return "BestEffort"
    return "Burstable"


def summary(gen: Generator) -> list[str]:
    """Per-node free capacity, and the invariants examples/pods/*.yaml depend on."""
    lines = [f"{'node':18} {'pool':13} {'alloc cpu':>9} {'free cpu':>8} {'free mem Gi':>11} {'pods':>4} "
             f"{'free gpu':>8} notes"]
    free_general: dict[str, int] = {}
    for node in gen.nodes:
        bound = [p for p in gen.pods if p.node == node.name and p.phase not in ("Succeeded", "Failed")]
        cpu = node.alloc_milli - sum(p.cpu_milli for p in bound)
        memory = node.alloc_memory_kib * 1024 - sum(p.memory for p in bound)
        gpu = node.gpus - sum(pod_requests(p)[2] for p in bound)
        notes = []
        if node.taints:
            notes.append("tainted " + ",".join(t["key"] for t in node.taints))
        if node.unschedulable:
            notes.append("cordoned")
        nominated = [p for p in gen.pods if p.nominated == node.name]
        if nominated:
            notes.append("nominated: " + ",".join(f"{p.name} ({p.cpu_milli}m)" for p in nominated))
        if any(p.deleting for p in bound):
            notes.append("has a terminating victim")
        if not node.taints and not node.unschedulable:
            free_general[node.name] = cpu
        lines.append(f"{node.name:18} {node.pool:13} {node.alloc_milli:>9} {cpu:>8} {memory / GiB:>11.1f} "
                     f"{len(bound):>4} {gpu:>8} {'; '.join(notes)}")
    max_free = max(free_general.values())
    lines.append(f"max free cpu on schedulable untainted nodes: {max_free}m; "
                 f"nodes with >= 500m free: {sum(1 for v in free_general.values() if v >= 500)}")
    # Invariants the examples rely on.
    assert max_free < 4000, "a 4-cpu pod must not fit without preemption"
    assert min(free_general.values()) >= 0, "over-committed node"
    assert sum(1 for v in free_general.values() if v >= 1000) >= 3, "small pods must fit somewhere"
    assert free_general[PDB_NODE] < 3000, "the PDB example needs preemption on its node"
    assert max(n.alloc_milli for n in gen.nodes) < 64000, "the 64-cpu example must exceed every node"
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if examples/cluster.yaml is out of date")
    parser.add_argument("--quiet", action="store_true", help="do not print the capacity summary")
    args = parser.parse_args()
    gen = Generator()
    document = gen.build()
    text = yaml.dump(document, Dumper=KubectlDumper, sort_keys=True, default_flow_style=False, width=10_000)
    report = summary(gen)
    if not args.quiet:
        print("\n".join(report), file=sys.stderr)
        print(f"{len(document['items'])} objects, {len(text) // 1024} KiB", file=sys.stderr)
    if args.check:
        if OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT} is out of date: run examples/generate.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
