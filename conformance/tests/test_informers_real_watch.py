"""PreemptGuard's informers against the real watch: cut off from kube-apiserver while a pod is deleted and
etcd compacts past their resourceVersion, they come back, get the real "too old resource version" (410),
relist, and no longer count the deleted pod.

kube-apiserver runs without its watch cache (so a resumed watch is served by etcd, which has compacted) and
compacts every 2 seconds. A TCP relay between PreemptGuard and the API server is the cable to cut.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import REPO, ControlPlane, ControlPlaneError, free_port, kube_bin_dir, log_tail, stop_process
from test_admission_parity import ensure_namespace

from webhook.certs.issuance import generate_ca, issue_serving_certificate
from webhook.cluster.snapshot import ClusterState
from webhook.kubeapi import KubeClient
from webhook.sources.informer import PODS, Informer, InformerSettings


class Relay:
    """127.0.0.1:port → target, with every connection cut by ``cut()`` and accepted again by ``restore()``."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.target_port = target_port
        self.listener: socket.socket | None = None
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self.lock:
            if self.listener is not None:
                # close() alone does not wake a thread blocked in accept(); shutdown() does (EINVAL)
                with contextlib.suppress(OSError):
                    self.listener.shutdown(socket.SHUT_RDWR)
                self.listener.close()
                self.listener = None
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self.sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self.lock:
                if self.listener is not listener:  # cut meanwhile: this connection must not get through
                    client.close()
                    return
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture(scope="module")
def cut_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Relay, str, Path, Path]]:
    work = tmp_path_factory.mktemp("watch")
    plane = ControlPlane(work / "plane", kube_bin_dir(),
                         extra_apiserver_args=["--watch-cache=false", "--etcd-compaction-interval=2s"])
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    relay = Relay(plane.apiserver_port)
    relay.restore()
    config = json.loads(plane.kubeconfig().read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    kubeconfig = work / "relayed.kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    ca_cert, ca_key = generate_ca("watch-ca", 1)
    cert, key = issue_serving_certificate(ca_cert, ca_key, ["127.0.0.1"], 1)
    for name, pem in (("ca.crt", ca_cert), ("tls.crt", cert), ("tls.key", key)):
        (work / name).write_bytes(pem)
    port, log = free_port(), work / "preempt-guard.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--kubeconfig", str(kubeconfig),
             "--tls-cert", str(work / "tls.crt"), "--tls-key", str(work / "tls.key"), "--host", "127.0.0.1",
             "--port", str(port), "--metrics-port", "0", "--shutdown-grace", "0"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        yield plane, relay, f"https://127.0.0.1:{port}", work / "ca.crt", log
    finally:
        stop_process(server)
        relay.cut()
        plane.stop()


def outcome_of(url: str, ca: Path, token: str, pod: dict[str, Any]) -> str | None:
    request = urllib.request.Request(f"{url}/preview", data=json.dumps({"pod": pod}).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(ca)), timeout=10) as r:
            result = json.loads(r.read())["results"][0]
    except (OSError, urllib.error.HTTPError, KeyError, ValueError):
        return None
    outcome: str = result["outcome"]
    if outcome == "Unschedulable" and "Insufficient cpu" in result["message"]:
        return "Unschedulable: Insufficient cpu"
    return outcome


def wait_for(get: Any, want: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = get()
        if got == want:
            return
        time.sleep(0.5)
    raise AssertionError(f"wanted {want}, still {got} after {timeout:g}s:\n{log_tail(log, 40)}")


def test_a_pod_deleted_while_disconnected_is_gone_after_the_relist(
        cut_off: tuple[ControlPlane, Relay, str, Path, Path]) -> None:
    plane, relay, url, ca, log = cut_off
    ensure_namespace(plane, "watch")
    plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                  {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "watch-hi"},
                   "value": 1000})
    plane.add_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "watch-node", "labels": {"watch": "yes"}},
                    "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                               "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"}}})
    plane.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog", "namespace": "watch"},
                 "spec": {"nodeName": "watch-node", "priorityClassName": "watch-hi", "containers": [
                     {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "2"}}}]}})
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "watch"},
             "spec": {"nodeSelector": {"watch": "yes"}, "containers": [
                 {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}]}}
    token = plane.tokens["admin"]
    # Unschedulable for lack of cpu: PreemptGuard sees the node and the hog (not merely no node at all)
    wait_for(lambda: outcome_of(url, ca, token, probe), "Unschedulable: Insufficient cpu", 60, log)

    relay.cut()
    status, body = plane.request("DELETE", "/api/v1/namespaces/watch/pods/hog?gracePeriodSeconds=0")
    assert status == 200, body
    for i in range(8):  # newer revisions, over several 2 s compaction rounds, to compact PreemptGuard's away
        plane.request("POST", "/api/v1/namespaces/watch/configmaps",
                      {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"tick-{i}"}})
        time.sleep(1)
    time.sleep(2)
    assert "Pod watch expired" not in log.read_text()  # nothing got through the cut
    relay.restore()

    wait_for(lambda: outcome_of(url, ca, token, probe), "Fits", 90, log)
    assert "Pod watch expired" in log.read_text(), log_tail(log, 40)  # the real 410, answered by a relist


def real_bookmark(plane: ControlPlane, timeout: float = 30) -> dict[str, Any]:
    """The first BOOKMARK event of a real pod watch (a watch-list watch ends its initial events with one)."""
    path = ("/api/v1/pods?watch=true&allowWatchBookmarks=true&sendInitialEvents=true"
            "&resourceVersionMatch=NotOlderThan&resourceVersion=&timeoutSeconds=20")
    request = urllib.request.Request(plane.server + path, headers={"Authorization": f"Bearer {plane.tokens['admin']}"})
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + timeout
    with urllib.request.urlopen(request, context=context, timeout=timeout) as stream:
        for line in stream:
            event: dict[str, Any] = json.loads(line)
            if event["type"] == "BOOKMARK":
                return event
            if time.monotonic() > deadline:
                break
    raise AssertionError("the real API server sent no BOOKMARK")


def test_the_informer_takes_a_real_bookmark_as_progress(
        cut_off: tuple[ControlPlane, Relay, str, Path, Path]) -> None:
    """A bookmark carries only a resourceVersion: the informer resumes from it and changes no object."""
    plane = cut_off[0]
    bookmark = real_bookmark(plane)
    state = ClusterState()
    informer = Informer(KubeClient(), PODS, state, InformerSettings())
    informer.resource_version = "1"
    before = dict(state.pods)
    informer.apply_event(bookmark)
    assert informer.resource_version == bookmark["object"]["metadata"]["resourceVersion"] != "1"
    assert dict(state.pods) == before
