"""Observed outcomes with the real kube-scheduler (docs/interfaces.md §9): `preempt-guard serve` watches a real
control plane with its webhook registered, the example pods are created through the API server on the example
cluster, and its metric counts `agree` for each; then a scenario built to disagree (a pending higher-priority
pod created right after the prediction takes the node) gives another verdict, a JSON log line and an Event."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from controlplane import REPO, ControlPlane, ControlPlaneError, free_port, kube_bin_dir, log_tail, stop_process
from test_registered_webhook import wait_until, webhook_configurations

from webhook.certs.issuance import generate_ca, issue_serving_certificate
from webhook.preemption.results import Outcome
from webhook.routes import PREDICTION_ID_ANNOTATION
from webhook.verify.loader import force_delete_pod, load_cluster, read_objects
from webhook.verify.observe import observe_pod, settle
from webhook.verify.scenarios import read_pods

EXAMPLES = REPO / "examples"
VERDICTS = ("agree", "node_differs", "victims_differ", "outcome_differs", "unobserved")


@dataclass
class Observer:
    plane: ControlPlane
    server: subprocess.Popen[bytes]
    log: Path
    metrics_url: str

    def verdicts(self) -> dict[str, float]:
        with urllib.request.urlopen(f"{self.metrics_url}/metrics", timeout=5) as response:
            text = response.read().decode()
        counts = dict.fromkeys(VERDICTS, -1.0)
        for line in text.splitlines():
            if line.startswith("preemptguard_prediction_observed_total{"):
                verdict = line.split('verdict="', 1)[1].split('"', 1)[0]
                counts[verdict] = float(line.rsplit(" ", 1)[1])
        return counts

    def summary(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.metrics_url}/debug/predictions", timeout=5) as response:
            return dict(json.loads(response.read()))

    def settled(self, before: dict[str, float], timeout: float = 30) -> dict[str, float]:
        """The verdicts added since ``before``, once nothing is followed any more."""
        deadline = time.monotonic() + timeout
        while self.summary()["following"] and time.monotonic() < deadline:
            time.sleep(0.1)
        after = self.verdicts()
        return {v: after[v] - before[v] for v in VERDICTS if after[v] != before[v]}

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for raw in self.log.read_text(errors="replace").splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and line.get("logger") == "webhook.observe":
                lines.append(line)
        return lines


@pytest.fixture(scope="module")
def observer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observer]:
    work = tmp_path_factory.mktemp("observed")
    # No ServiceAccount admission: the snapshot carries no ServiceAccounts and no controller makes them.
    plane = ControlPlane(work / "plane", kube_bin_dir(),
                         extra_apiserver_args=["--disable-admission-plugins=ServiceAccount"])
    try:
        plane.start()
        load_cluster(plane, read_objects(EXAMPLES / "cluster.yaml"), timeout=60)
    except ControlPlaneError as exc:
        plane.stop()
        pytest.fail(str(exc), pytrace=False)
    ca_cert, ca_key = generate_ca("conformance-ca", 1)
    cert, key = issue_serving_certificate(ca_cert, ca_key, ["127.0.0.1", "localhost"], 1)
    for name, pem in (("ca.crt", ca_cert), ("tls.crt", cert), ("tls.key", key)):
        (work / name).write_bytes(pem)
    port, metrics_port = free_port(), free_port()
    log = work / "preempt-guard.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--kubeconfig", str(plane.kubeconfig()),
             "--tls-cert", str(work / "tls.crt"), "--tls-key", str(work / "tls.key"), "--host", "127.0.0.1",
             "--port", str(port), "--metrics-port", str(metrics_port), "--shutdown-grace", "0",
             "--log-format", "json", "--events", "--observe-window", "300", "--debug-predictions"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    running = Observer(plane, server, log, f"http://127.0.0.1:{metrics_port}")
    try:
        def ready() -> bool:
            if server.poll() is not None:
                raise ControlPlaneError(f"preempt-guard serve exited with {server.returncode}:\n{log_tail(log)}")
            try:
                return running.summary()["observing"] is True and bool(running.verdicts())
            except OSError:
                return False
        wait_until(ready, 90, "preempt-guard serve not ready", log)
        for configuration in webhook_configurations(f"https://127.0.0.1:{port}", ca_cert):
            kind = configuration["kind"].lower() + "s"
            status, body = plane.request("POST", f"/apis/admissionregistration.k8s.io/v1/{kind}", configuration)
            assert status == 201, body
        probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "default"},
                 "spec": {"priorityClassName": "no-such-class", "containers": [{"name": "c", "image": "pause"}]}}
        wait_until(lambda: plane.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", probe)[0] == 403,
                   30, "the API server does not call the webhook", log)
        yield running
    finally:
        stop_process(server)
        plane.stop()


@pytest.mark.timeout(900)
def test_every_example_pod_the_webhook_predicts_agrees_with_kube_scheduler(observer: Observer) -> None:
    """In order on one cluster, as `verify` runs pods in order: each pod is predicted on the cluster the
    previous ones left (its victims gone, as their kubelet would have it, and the pod bound)."""
    seen: dict[str, tuple[str, dict[str, float]]] = {}
    for path in sorted((EXAMPLES / "pods").glob("*.yaml")):
        for manifest in read_pods([path]):
            before = observer.verdicts()
            observation = observe_pod(observer.plane, manifest, timeout=30)
            observation = settle(observer.plane, observation, manifest["metadata"]["namespace"], timeout=30)
            added = observer.settled(before)
            name = f"{path.stem}/{observation.pod_name or manifest['metadata'].get('name', '?')}"
            seen[name] = (observation.outcome, added)
            time.sleep(1.0)  # PreemptGuard's informers see the victims gone and the pod bound before the next one
    print("\nexample pods, observed by the live webhook:")
    for name, (outcome, added) in seen.items():
        print(f"  {name}: {outcome} -> {added or 'not predicted (refused, or a namespace PreemptGuard skips)'}")
    print(f"  /debug/predictions: {observer.summary()['verdicts']}")
    assert all(added in ({}, {"agree": 1.0}) for _, added in seen.values()), seen
    predicted = {name: outcome for name, (outcome, added) in seen.items() if added}
    assert sum(outcome == Outcome.PREEMPTS for outcome in predicted.values()) >= 6, seen  # 09, 10, 14 x 4
    assert {Outcome.FITS, Outcome.PREEMPTS, Outcome.UNSCHEDULABLE} <= set(predicted.values()), seen
    assert not [line for line in observer.log_lines() if line.get("verdict") not in (None, "agree")]


def _pod(name: str, cpu: str, class_name: str, *, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priorityClassName": class_name, "nodeSelector": {"observe": "disagree"},
        "tolerations": [{"key": "observe", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "observe"}, "spec": spec}


@pytest.mark.timeout(300)
def test_a_higher_priority_pod_that_takes_the_node_first_is_a_disagreement(observer: Observer) -> None:
    plane = observer.plane
    plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "observe"}})
    for name, value in (("observe-low", 10), ("observe-high", 1000), ("observe-top", 2000)):
        plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                      {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                       "value": value})
    plane.add_node({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "observe-node", "labels": {"observe": "disagree"}},
                    "spec": {"taints": [{"key": "observe", "value": "disagree", "effect": "NoSchedule"}]},
                    "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                               "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                               "conditions": [{"type": "Ready", "status": "True"}]}})
    plane.apply(_pod("victim", "1500m", "observe-low", node="observe-node"))
    time.sleep(2)  # PreemptGuard's informers have the node and its pod
    before = observer.verdicts()
    # kube-scheduler paused (SIGSTOP) for a moment: the preemptor is predicted at its creation to evict the victim
    # (a scheduling gate would not do: a gated pod is predicted Gated, and observed so) ...
    scheduler = next(c.process for c in plane.components if c.name == "kube-scheduler")
    scheduler.send_signal(signal.SIGSTOP)
    try:
        status, created = plane.request("POST", "/api/v1/namespaces/observe/pods", _pod("late", "1", "observe-high"))
        assert status == 201 and created["metadata"]["annotations"][PREDICTION_ID_ANNOTATION], created
        # ... while a higher-priority pod takes the node first: bound to it directly, so no race in the scheduler's
        # queue decides which of the two it pops first once it resumes (a second pending pod lost that race now
        # and then). Preempting the victim then frees too little (1.5 + 1 CPU > 2): the preemptor stays pending.
        plane.apply(_pod("first", "1500m", "observe-top", node="observe-node"))
        time.sleep(1)  # the scheduler's informers will see the bound pod before they see the pending one again
    finally:
        scheduler.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + 30
    while observer.verdicts()["outcome_differs"] == before["outcome_differs"] and time.monotonic() < deadline:
        time.sleep(0.2)
    added = observer.settled(before)
    # The bound pod is no prediction to observe: the one new verdict is the preemptor's.
    assert added == {"outcome_differs": 1.0}, (added, log_tail(observer.log))
    (line,) = [entry for entry in observer.log_lines() if entry.get("pod") == "late"]
    assert line["verdict"] == "outcome_differs" and line["namespace"] == "observe" and line["level"] == "info"
    assert (line["predicted"]["outcome"], line["predicted"]["node"]) == ("Preempts", "observe-node")
    assert line["predicted"]["victims"] == ["observe/victim"]  # the preemptor's own tenant: named
    assert line["observed"]["outcome"] == "Unschedulable" and line["predictionId"]
    print(f"\nthe disagreement, as logged: {line['message']}")
    deadline = time.monotonic() + 15
    events: list[dict[str, Any]] = []
    while not events and time.monotonic() < deadline:
        _, listed = plane.request("GET", "/api/v1/namespaces/observe/events",
                                  query={"fieldSelector": "involvedObject.name=late"})
        events = [e for e in (listed or {}).get("items", []) if e.get("reason") == "PreemptionPredictionMismatch"]
        time.sleep(0.2)
    assert events and events[0]["type"] == "Warning" and events[0]["message"] == line["message"].split(": ", 1)[1]
    force_delete_pod(plane, "observe", "late")
