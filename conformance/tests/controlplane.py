"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and kube-scheduler built by conformance/build.

No kubelet and no controller manager: nodes are plain API objects, and whoever needs PDB status sets it.
Everything runs in one temporary directory and is stopped by PID; a component that does not come up fails
with the tail of its log.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

REPO = Path(__file__).resolve().parents[2]
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler")
ADMIN = "admin"


class ControlPlaneError(RuntimeError):
    """A component is missing or did not come up (the message carries its log tail)."""


def kube_bin_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$PREEMPTGUARD_KUBE_BIN``, then ``conformance/bin``; missing binaries fail naming conformance/build."""
    directory = Path(environ.get("PREEMPTGUARD_KUBE_BIN") or REPO / "conformance" / "bin")
    missing = [name for name in BINARIES if not os.access(directory / name, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{', '.join(missing)} not found in {directory}: run conformance/build "
                                "(it builds them from the Go module proxy) or set PREEMPTGUARD_KUBE_BIN")
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_process(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout``."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self, timeout: float = 10) -> None:
        stop_process(self.process, timeout)


@dataclass
class User:
    name: str
    token: str
    groups: tuple[str, ...] = ()


@dataclass
class ControlPlane:
    """``start()`` brings the components up; ``request()`` talks to the API server as a user."""

    workdir: Path
    bin_dir: Path
    users: Sequence[User] = ()
    extra_apiserver_args: Sequence[str] = ()
    components: list[Component] = field(default_factory=list)
    etcd_port: int = 0
    apiserver_port: int = 0
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    def kubeconfig(self, user: str = ADMIN) -> Path:
        return self.workdir / f"{user}.kubeconfig"

    # ---- start and stop -------------------------------------------------------------------------------
    def start(self, timeout: float = 90) -> ControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._start_scheduler(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()
        self.components.clear()

    def _spawn(self, name: str, args: Sequence[str]) -> Component:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen([str(self.bin_dir / name), *args], stdout=out, stderr=subprocess.STDOUT,
                                       cwd=self.workdir, start_new_session=True)
        component = Component(name, process, log)
        self.components.append(component)
        return component

    def _wait(self, component: Component, ready: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if component.process.poll() is not None:
                raise ControlPlaneError(f"{component.name} exited with {component.process.returncode}:\n"
                                        f"{log_tail(component.log)}")
            if ready():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"{component.name} not ready after {timeout:g}s:\n{log_tail(component.log)}")

    def _start_etcd(self, timeout: float) -> None:
        self.etcd_port, peer = free_port(), free_port()
        etcd = self._spawn("etcd", [
            "--name", "conformance", "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"conformance=http://127.0.0.1:{peer}",
            "--log-level", "warn",
        ])
        self._wait(etcd, lambda: _http_ok(f"http://127.0.0.1:{self.etcd_port}/health"), timeout)

    def _start_apiserver(self, timeout: float) -> None:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.workdir / "sa.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        (self.workdir / "sa.pub").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        everyone = [User(ADMIN, secrets.token_hex(16), ("system:masters",)), *self.users]
        self.tokens = {u.name: u.token for u in everyone}
        (self.workdir / "tokens.csv").write_text("".join(
            f'{u.token},{u.name},{u.name},"{",".join(u.groups)}"\n' for u in everyone), encoding="utf-8")
        self.apiserver_port = free_port()
        apiserver = self._spawn("kube-apiserver", [
            "--etcd-servers", f"http://127.0.0.1:{self.etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.apiserver_port), "--cert-dir", str(self.workdir / "certs"),
            "--authorization-mode", "RBAC", "--token-auth-file", str(self.workdir / "tokens.csv"),
            "--service-account-key-file", str(self.workdir / "sa.pub"),
            "--service-account-signing-key-file", str(self.workdir / "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range", "10.0.0.0/24", "--endpoint-reconciler-type", "none",
            *self.extra_apiserver_args,
        ])
        self._wait(apiserver, lambda: self._readyz(), timeout)
        for user in everyone:
            self._write_kubeconfig(user)

    def _start_scheduler(self, timeout: float) -> None:
        scheduler = self._spawn("kube-scheduler", [
            "--kubeconfig", str(self.kubeconfig()), "--leader-elect=false", "--secure-port", "0", "-v", "2",
        ])
        # No health port (secure-port 0): ready once its informers have listed, which its log says.
        self._wait(scheduler, lambda: "Caches populated" in log_tail(scheduler.log, 400)
                   or "Starting Kubernetes Scheduler" in log_tail(scheduler.log, 400), timeout)

    def _readyz(self) -> bool:
        try:
            status, _ = self.request("GET", "/readyz")
        except (OSError, ControlPlaneError):
            return False
        return status == 200

    def _write_kubeconfig(self, user: User) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "conformance",
            "clusters": [{"name": "conformance", "cluster": {"server": self.server,
                                                             "insecure-skip-tls-verify": True}}],
            "users": [{"name": user.name, "user": {"token": user.token}}],
            "contexts": [{"name": "conformance", "context": {"cluster": "conformance", "user": user.name}}],
        }
        self.kubeconfig(user.name).write_text(json.dumps(config), encoding="utf-8")

    # ---- API calls ------------------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: object = None, *, user: str = ADMIN,
                content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.tokens.get(user, '')}", "Content-Type": content_type,
            "Accept": "application/json"})
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(req, context=context, timeout=30) as response:
                payload = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            payload, status = exc.read(), exc.code
        try:
            return status, json.loads(payload) if payload else None
        except ValueError:
            return status, payload.decode(errors="replace")

    def add_node(self, node: Mapping[str, Any]) -> None:
        """Create a node as the snapshot has it: the TaintNodesByCondition admission plugin adds a
        not-ready taint on create (a kubelet would clear it), so the spec's own taints and the status are
        written back afterwards."""
        name = node["metadata"]["name"]
        self.apply(node)
        spec_taints = (node.get("spec") or {}).get("taints") or None
        status, body = self.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": spec_taints}},
                                    content_type="application/merge-patch+json")
        if status != 200:
            raise ControlPlaneError(f"patch node {name}: {status} {body}")
        self.set_status(node, node.get("status") or {})

    def set_status(self, obj: Mapping[str, Any], status: Mapping[str, Any]) -> Any:
        """Write ``status`` through the status subresource, standing in for the controller (or kubelet) that
        would: PDB ``disruptionsAllowed``, quota usage, node conditions."""
        name = obj["metadata"]["name"]
        code, body = self.request("PATCH", f"{collection_path(obj)}/{name}/status", {"status": dict(status)},
                                  content_type="application/merge-patch+json")
        if code != 200:
            raise ControlPlaneError(f"status of {obj.get('kind')} {name}: {code} {body}")
        return body

    def apply(self, obj: Mapping[str, Any]) -> Any:
        """Create ``obj`` (cluster-scoped or namespaced, core or scheduling/policy); raise on failure."""
        path = collection_path(obj)
        status, body = self.request("POST", path, obj)
        if status not in (200, 201):
            raise ControlPlaneError(f"create {obj.get('kind')} {obj.get('metadata', {}).get('name')}: {status} {body}")
        return body


API_PATHS = {"Namespace": "/api/v1/namespaces", "Node": "/api/v1/nodes",
             "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses"}
NAMESPACED = {
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ResourceQuota": "/api/v1/namespaces/{ns}/resourcequotas",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
}


def collection_path(obj: Mapping[str, Any]) -> str:
    kind = obj["kind"]
    if kind in API_PATHS:
        return API_PATHS[kind]
    namespace = (obj.get("metadata") or {}).get("namespace") or "default"
    return NAMESPACED[kind].format(ns=namespace)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def binary_version(bin_dir: Path, name: str) -> str:
    out = subprocess.run([str(bin_dir / name), "--version"], capture_output=True, text=True, timeout=30)
    return (out.stdout or out.stderr).strip()
