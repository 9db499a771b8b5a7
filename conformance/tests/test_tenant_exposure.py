"""What a tenant can read, on the real control plane (docs/interfaces.md §7): two `preempt-guard serve` replicas
elect a leader on a real Lease; the real kube-scheduler preempts pods (no kubelet: pods bind but never run, which
is all preemption needs); each victim gets exactly one Event in its namespace, naming the preemptor only when it
is of the victim's tenant. Each namespace's PolicyReport (the upstream CRD installed on the real API server)
lists the classes that can preempt its pods, follows a PriorityClass, a quota configuration and a pod change
within 30 s, and is readable exactly by those whom real RBAC lets list policyreports in that namespace."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import REPO, ControlPlane, ControlPlaneError, User, free_port, kube_bin_dir, log_tail, stop_process
from test_registered_webhook import wait_until, webhook_configurations

from webhook.certs.issuance import generate_ca, issue_serving_certificate
from webhook.routes import PREDICTION_ID_ANNOTATION

CRD = REPO / "manifests" / "components" / "exposure-reports" / "policyreport-crd.yaml"
REPORTS = "/apis/wgpolicyk8s.io/v1alpha2/namespaces/{ns}/policyreports"
REPORT = REPORTS + "/preemptguard-exposure"
READER = User("alice", "alice-token")
STRANGER = User("bob", "bob-token")
LEASE_NAMESPACE = "preemptguard"
# Tenants by the namespace label "tenant": team-a is red, team-b and team-b2 are blue.
CONFIG = "guardrails:\n  mode: warn\n  tenantLabel: tenant\n"
RESTRICTED = CONFIG + "quota:\n  classes:\n    - match:\n        names: [vip]\n      allowedNamespaces: [team-b2]\n"
UPDATE_SECONDS = 30.0


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    log: Path
    metrics_url: str

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(f"{self.metrics_url}/metrics", timeout=5) as response:
            text = response.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and not line.startswith("#"))


@dataclass
class Cluster:
    plane: ControlPlane
    replicas: list[Replica]
    config: Path
    work: Path

    def leader(self) -> Replica:
        leaders = [r for r in self.replicas if r.metric("preemptguard_leader ") == 1]
        assert len(leaders) == 1, "exactly one replica leads"
        return leaders[0]

    def ours(self, namespace: str) -> list[dict[str, Any]]:
        """The Events PreemptGuard wrote in ``namespace``."""
        status, listed = self.plane.request("GET", f"/api/v1/namespaces/{namespace}/events")
        assert status == 200, listed
        return [e for e in listed["items"] if e.get("reportingComponent") == "preemptguard.io/webhook"]

    def report(self, namespace: str, user: str = "admin") -> tuple[int, Any]:
        return self.plane.request("GET", REPORT.format(ns=namespace), user=user)

    def band(self, namespace: str, priority: int) -> dict[str, str] | None:
        status, report = self.report(namespace)
        if status != 200:
            return None
        for result in report.get("results") or ():
            if result["rule"] == "preemptible-pods" and result["properties"]["priority"] == str(priority):
                return dict(result["properties"])
        return None


def node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "2", "memory": "8Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": allocatable, "capacity": allocatable,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "ready", "lastHeartbeatTime": "2025-06-02T09:00:00Z",
                                       "lastTransitionTime": "2025-06-02T09:00:00Z"}]}}


def pod(name: str, namespace: str, class_name: str, cpu: str, node_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"priorityClassName": class_name, "terminationGracePeriodSeconds": 30,
                            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node_name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def create(plane: ControlPlane, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    status, body = plane.request("POST", path, obj)
    assert status in (200, 201), body
    return dict(body)


def bound(plane: ControlPlane, namespace: str, name: str) -> bool:
    status, body = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return status == 200 and bool(body["spec"].get("nodeName"))


def start_replica(plane: ControlPlane, work: Path, name: str, config: Path) -> tuple[Replica, int]:
    port, metrics_port = free_port(), free_port()
    log = work / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--kubeconfig", str(plane.kubeconfig()),
             "--tls-cert", str(work / "tls.crt"), "--tls-key", str(work / "tls.key"), "--host", "127.0.0.1",
             "--port", str(port), "--metrics-port", str(metrics_port), "--config", str(config),
             "--shutdown-grace", "0", "--log-format", "json", "--exposure-reports",
             "--leader-elect-namespace", LEASE_NAMESPACE],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    return Replica(process, log, f"http://127.0.0.1:{metrics_port}"), port


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("tenants")
    # No ServiceAccount admission: no controller makes the namespaces' default ServiceAccounts.
    plane = ControlPlane(work / "plane", kube_bin_dir(), users=[READER, STRANGER],
                         extra_apiserver_args=["--disable-admission-plugins=ServiceAccount"])
    replicas: list[Replica] = []
    try:
        plane.start()
        for name, tenant in (("team-a", "red"), ("team-b", "blue"), ("team-b2", "blue"), (LEASE_NAMESPACE, "")):
            labels = {"tenant": tenant} if tenant else {}
            create(plane, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": name, "labels": labels}})
        for name in ("n1", "n2", "n3"):  # n3 for the pods nobody preempts
            plane.add_node(node(name))
        for name, value in (("low", 10), ("high", 1000)):
            create(plane, "/apis/scheduling.k8s.io/v1/priorityclasses", {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "preemptionPolicy": "PreemptLowerPriority"})
        crd = next(d for d in yaml.safe_load_all(CRD.read_text()) if d)
        create(plane, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        wait_until(lambda: plane.request("GET", "/apis/wgpolicyk8s.io/v1alpha2/policyreports")[0] == 200, 60,
                   "the PolicyReport CRD is not served")
    except ControlPlaneError as exc:
        plane.stop()
        pytest.fail(str(exc), pytrace=False)
    ca_cert, ca_key = generate_ca("conformance-ca", 1)
    cert, key = issue_serving_certificate(ca_cert, ca_key, ["127.0.0.1", "localhost"], 1)
    for name, pem in (("ca.crt", ca_cert), ("tls.crt", cert), ("tls.key", key)):
        (work / name).write_bytes(pem)
    config = work / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    try:
        ports = []
        for name in ("replica-a", "replica-b"):
            replica, port = start_replica(plane, work, name, config)
            replicas.append(replica)
            ports.append(port)
        running = Cluster(plane, replicas, config, work)

        def ready() -> bool:
            for replica in replicas:
                if replica.process.poll() is not None:
                    raise ControlPlaneError(f"preempt-guard serve exited:\n{log_tail(replica.log)}")
            try:
                return sum(r.metric("preemptguard_leader ") for r in replicas) == 1
            except OSError:
                return False
        wait_until(ready, 90, "no replica leads", replicas[0].log)
        # The pod webhook is replica a's: its predictions are on the pods, whichever replica leads.
        for configuration in webhook_configurations(f"https://127.0.0.1:{ports[0]}", ca_cert):
            kind = configuration["kind"].lower() + "s"
            create(plane, f"/apis/admissionregistration.k8s.io/v1/{kind}", configuration)
        probe = pod("probe", "team-a", "high", "10m")

        def predicted() -> bool:
            status, body = plane.request("POST", "/api/v1/namespaces/team-a/pods?dryRun=All", probe)
            return status == 201 and "preemptguard.io/prediction" in (body["metadata"].get("annotations") or {})
        wait_until(predicted, 30, "the API server does not call the webhook", replicas[0].log)
        yield running
    finally:
        for replica in replicas:
            stop_process(replica.process)
        plane.stop()


@pytest.mark.timeout(600)
def test_a_preemption_by_another_tenant_is_one_event_naming_no_other_tenant(cluster: Cluster) -> None:
    plane = cluster.plane
    create(plane, "/api/v1/namespaces/team-b/pods", pod("batch-a", "team-b", "low", "1500m", "n1"))
    wait_until(lambda: bound(plane, "team-b", "batch-a"), 60, "the victim is not bound")
    web = create(plane, "/api/v1/namespaces/team-a/pods", pod("web", "team-a", "high", "1", "n1"))
    prediction_id = web["metadata"]["annotations"][PREDICTION_ID_ANNOTATION]
    wait_until(lambda: bool(cluster.ours("team-b")), 60, "no Event in team-b", cluster.leader().log)
    time.sleep(5)  # both replicas saw it: nothing more arrives
    (event,) = cluster.ours("team-b")
    assert event["reason"] == "PreemptedByScheduler" and event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "batch-a" and event["involvedObject"]["namespace"] == "team-b"
    message = event["message"]
    print(f"\nthe Event in team-b (preempted by another tenant's pod): {message}")
    assert "a pod of another tenant (PriorityClass high, priority 1000)" in message
    assert "team-a" not in message and "web" not in message and not event.get("related")
    assert f"prediction {prediction_id}" in message and "predicted this preemption" in message
    assert sum(r.metric('preemptguard_preemptions_total{pod_namespace="team-b"') for r in cluster.replicas) == 1
    assert cluster.ours("team-a") == []


@pytest.mark.timeout(600)
def test_a_preemption_within_one_tenant_names_the_preemptor(cluster: Cluster) -> None:
    plane = cluster.plane
    create(plane, "/api/v1/namespaces/team-b/pods", pod("batch-b", "team-b", "low", "1500m", "n2"))
    wait_until(lambda: bound(plane, "team-b", "batch-b"), 60, "the victim is not bound")
    create(plane, "/api/v1/namespaces/team-b2/pods", pod("job", "team-b2", "high", "1", "n2"))
    wait_until(lambda: any(e["involvedObject"]["name"] == "batch-b" for e in cluster.ours("team-b")), 60,
               "no Event for batch-b", cluster.leader().log)
    (event,) = [e for e in cluster.ours("team-b") if e["involvedObject"]["name"] == "batch-b"]
    print(f"the Event in team-b (preempted within its tenant): {event['message']}")
    assert "pod team-b2/job (PriorityClass high, priority 1000) of your tenant" in event["message"]
    assert event["related"]["name"] == "job" and event["related"]["namespace"] == "team-b2"


def _within(what: str, condition: Any, cluster: Cluster) -> float:
    started = time.monotonic()
    wait_until(condition, UPDATE_SECONDS, f"the report did not follow {what}", cluster.leader().log)
    return time.monotonic() - started


@pytest.mark.timeout(600)
def test_the_policy_report_lists_the_preempting_classes_and_follows_changes_within_30s(cluster: Cluster) -> None:
    plane = cluster.plane
    create(plane, "/api/v1/namespaces/team-b2/pods", pod("idle", "team-b2", "low", "10m", "n3"))
    wait_until(lambda: (cluster.band("team-b2", 10) or {}).get("runningPods") == "1", 60, "no report for team-b2",
               cluster.leader().log)
    band = cluster.band("team-b2", 10)
    # The API server's own system classes (2000000000 and above) can preempt everything too.
    system = "system-node-critical,system-cluster-critical"
    assert band is not None and band["preemptingClasses"] == f"{system},high"
    timings = {}
    create(plane, "/apis/scheduling.k8s.io/v1/priorityclasses", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "vip"}, "value": 5000,
        "preemptionPolicy": "PreemptLowerPriority"})
    timings["PriorityClass"] = _within("a new PriorityClass", lambda: (cluster.band("team-b2", 10) or {}).get(
        "preemptingClasses") == f"{system},vip,high", cluster)
    unrestricted = (cluster.band("team-b2", 10) or {})["class.vip"]
    assert "restrictedBy=none" in unrestricted and "otherTenants=0" not in unrestricted
    cluster.config.write_text(RESTRICTED, encoding="utf-8")
    timings["quota configuration"] = _within("quota.classes", lambda: (cluster.band("team-b2", 10) or {}).get(
        "class.vip", "").startswith("value=5000 otherTenants=0 ownTenant=true restrictedBy=quota.classes[0]"), cluster)
    create(plane, "/api/v1/namespaces/team-b2/pods", pod("idle-2", "team-b2", "low", "10m", "n3"))
    timings["pod"] = _within("a new pod", lambda: (cluster.band("team-b2", 10) or {}).get("runningPods") == "2",
                             cluster)
    print(f"\nPolicyReport updated after: {', '.join(f'{k} {v:.1f}s' for k, v in timings.items())}")


@pytest.mark.timeout(300)
def test_who_may_list_policyreports_in_the_namespace_reads_it_and_nobody_else(cluster: Cluster) -> None:
    plane = cluster.plane
    wait_until(lambda: cluster.report("team-b")[0] == 200, 60, "no report for team-b")
    create(plane, "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reports"},
        "rules": [{"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports"], "verbs": ["list"]}]})
    create(plane, "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "reports"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reports"},
        "subjects": [{"kind": "User", "name": READER.name, "apiGroup": "rbac.authorization.k8s.io"}]})

    def listed(user: str, namespace: str) -> tuple[int, Any]:
        return plane.request("GET", REPORTS.format(ns=namespace), user=user)

    wait_until(lambda: listed(READER.name, "team-b")[0] == 200, 30, "RBAC does not let the reader list")
    _, reports = listed(READER.name, "team-b")
    (report,) = reports["items"]
    assert report["metadata"]["name"] == "preemptguard-exposure" and report["scope"]["name"] == "team-b"
    text = str(report)
    assert "team-a" not in text and "'red'" not in text  # other tenants are counted, never named
    assert listed(READER.name, "team-a")[0] == 403  # only where the Role is
    assert listed(STRANGER.name, "team-b")[0] == 403
    assert cluster.report("team-b", user=STRANGER.name)[0] == 403
