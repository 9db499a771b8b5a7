"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and kube-scheduler of one release.

No kubelet and no controller manager: nodes are plain API objects, and whoever needs a status (PDBs, quotas,
nodes) writes it through the status subresource. Everything runs in one directory and is stopped by PID; a
component that does not come up fails with the tail of its log. ``preempt-guard verify`` and the conformance
tier (``conformance/tests``) both use this harness.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from webhook.errors import PreemptGuardError
from webhook.verify.storage import Etcd

REPO = Path(__file__).resolve().parents[2]
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler")
ADMIN = "admin"
KUBE_BIN_ENV = "PREEMPTGUARD_KUBE_BIN"
SCHEDULER_CONFIG_API = "kubescheduler.config.k8s.io/v1"


class ControlPlaneError(PreemptGuardError):
    """A component is missing or did not come up (the message carries its log tail); exit status 2."""

    exit_code = 2


class MissingBinaries(ControlPlaneError):
    """The release's executables are not where they were looked for."""


def default_kube_bin(environ: Mapping[str, str] = os.environ) -> Path:
    """``$PREEMPTGUARD_KUBE_BIN``, then ``conformance/bin`` of this checkout."""
    return Path(environ.get(KUBE_BIN_ENV) or REPO / "conformance" / "bin")


def kube_bin_dir(directory: str | os.PathLike[str] | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """``directory``, else ``$PREEMPTGUARD_KUBE_BIN``, else ``conformance/bin``; missing executables raise
    ``MissingBinaries`` with one line that names conformance/build."""
    # Absolute: the components run with a temporary directory as their working directory.
    where = (Path(directory) if directory is not None else default_kube_bin(environ)).resolve()
    missing = [name for name in BINARIES if not os.access(where / name, os.X_OK)]
    if missing:
        raise MissingBinaries(f"{', '.join(missing)} not found in {where}: run conformance/build [--out DIR] "
                              f"(it builds them from the Go module proxy), or pass --kube-bin DIR / set {KUBE_BIN_ENV} "
                              "to a directory holding etcd, kube-apiserver and kube-scheduler of one release")
    return where


class PlaneApi(Protocol):
    """What verify's readers and controller stand-ins ask of a control plane: API calls as the admin
    (``ControlPlane.request``; tests hand them recording fakes)."""

    def request(self, method: str, path: str, body: Any = None, *, content_type: str = ...,
                query: Mapping[str, str] | None = ...) -> tuple[int, Any]: ...


class SchedulingPlane(PlaneApi, Protocol):
    """A ``PlaneApi`` whose kube-scheduler writes a log (what ``observe_pod`` reads beside the API)."""

    @property
    def scheduler_log(self) -> Path: ...


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


def binary_version(bin_dir: Path, name: str) -> str:
    """What ``NAME --version`` prints, e.g. ``Kubernetes v1.37.2``."""
    out = subprocess.run([str(bin_dir / name), "--version"], capture_output=True, text=True, timeout=30)
    return (out.stdout or out.stderr).strip()


def kubernetes_version(bin_dir: Path) -> str:
    """The release of the scheduler, e.g. ``v1.37.2`` (``unknown`` when it does not say)."""
    try:
        words = binary_version(bin_dir, "kube-scheduler").split()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return next((w for w in words if w.startswith("v") and w[1:2].isdigit()), "unknown")


def scheduler_configuration(kubeconfig: Path, *, preemption: bool = True, min_candidate_nodes_percentage: int = 10,
                            min_candidate_nodes_absolute: int = 100, percentage_of_nodes_to_score: int = 0,
                            score_weights: Sequence[tuple[str, int]] = (),
                            scoring_strategy: Mapping[str, Any] | None = None,
                            inter_pod_affinity: Mapping[str, Any] | None = None,
                            scheduler_names: Sequence[str] = ("default-scheduler",)) -> dict[str, Any]:
    """A KubeSchedulerConfiguration: one profile per scheduler name (``scheduler.schedulerNames``), each the
    default profile with these DefaultPreemptionArgs (or without the DefaultPreemption PostFilter when
    ``preemption`` is off), its scoring (``percentageOfNodesToScore`` when not the adaptive 0, Score plugin weights
    re-configured or, at 0, disabled, NodeResourcesFitArgs.scoringStrategy when given), no leader election."""
    profiles: list[dict[str, Any]] = []
    for name in scheduler_names:
        profile: dict[str, Any] = {
            "schedulerName": name,
            "pluginConfig": [{"name": "DefaultPreemption", "args": {
                "apiVersion": SCHEDULER_CONFIG_API, "kind": "DefaultPreemptionArgs",
                "minCandidateNodesPercentage": min_candidate_nodes_percentage,
                "minCandidateNodesAbsolute": min_candidate_nodes_absolute}}],
        }
        if percentage_of_nodes_to_score:
            profile["percentageOfNodesToScore"] = percentage_of_nodes_to_score
        plugins: dict[str, Any] = {}
        if not preemption:
            plugins["postFilter"] = {"disabled": [{"name": "DefaultPreemption"}]}
        enabled = [{"name": plugin, "weight": weight} for plugin, weight in score_weights if weight > 0]
        disabled = [{"name": plugin} for plugin, weight in score_weights if weight == 0]
        if enabled or disabled:
            plugins["score"] = {k: v for k, v in (("enabled", enabled), ("disabled", disabled)) if v}
        if plugins:
            profile["plugins"] = plugins
        if scoring_strategy is not None:
            profile["pluginConfig"].append({"name": "NodeResourcesFit", "args": {
                "apiVersion": SCHEDULER_CONFIG_API, "kind": "NodeResourcesFitArgs",
                "scoringStrategy": scoring_strategy}})
        if inter_pod_affinity is not None:
            profile["pluginConfig"].append({"name": "InterPodAffinity", "args": {
                "apiVersion": SCHEDULER_CONFIG_API, "kind": "InterPodAffinityArgs", **inter_pod_affinity}})
        profiles.append(profile)
    return {"apiVersion": SCHEDULER_CONFIG_API, "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)}, "leaderElection": {"leaderElect": False},
            "profiles": profiles}


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
    """``start()`` brings the components up; ``request()`` talks to the API server as a user.
    ``with_scheduler`` False leaves kube-scheduler out; ``extra_etcd_args`` go to etcd (e.g. a larger
    ``--quota-backend-bytes``).

    ``scheduler_config``: keyword arguments of ``scheduler_configuration`` (DefaultPreemptionArgs); the
    scheduler always runs from a KubeSchedulerConfiguration file written in ``workdir``.
    """

    workdir: Path
    bin_dir: Path
    users: Sequence[User] = ()
    extra_apiserver_args: Sequence[str] = ()
    scheduler_config: Mapping[str, Any] = field(default_factory=dict)
    # False: etcd and kube-apiserver only (bench/scale.py measures the API server holding a cluster, nothing binds).
    with_scheduler: bool = True
    extra_etcd_args: Sequence[str] = ()
    # Extra environment per component name (e.g. a Go runtime knob such as GOMEMLIMIT for kube-apiserver).
    component_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    components: list[Component] = field(default_factory=list)
    etcd_port: int = 0
    apiserver_port: int = 0
    tokens: dict[str, str] = field(default_factory=dict)
    _connections: dict[tuple[str, int], http.client.HTTPSConnection] = field(default_factory=dict, repr=False)
    _etcd: Etcd | None = field(default=None, repr=False)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    def kubeconfig(self, user: str = ADMIN) -> Path:
        return self.workdir / f"{user}.kubeconfig"

    @property
    def etcd(self) -> Etcd:
        """etcd's JSON gateway (webhook.verify.storage), for what must be restored as stored."""
        if self._etcd is None or self._etcd.port != self.etcd_port:
            self._etcd = Etcd(self.etcd_port)
        return self._etcd

    @property
    def scheduler_log(self) -> Path:
        return self.workdir / "kube-scheduler.log"

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # ---- start and stop -------------------------------------------------------------------------------
    def start(self, timeout: float = 90) -> ControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._on_free_ports(self._start_etcd, timeout)
            self._on_free_ports(self._start_apiserver, timeout)
            if self.with_scheduler:
                self._start_scheduler(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._etcd is not None:
            self._etcd.close()
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
        for component in reversed(self.components):
            component.stop()
        self.components.clear()

    def _on_free_ports(self, start: Callable[[float], None], timeout: float, attempts: int = 3) -> None:
        """``start`` again on new ports when its process lost a port to another process between ``free_port``
        choosing it and the bind (other control planes starting at the same time on this machine)."""
        for attempt in range(1, attempts + 1):
            try:
                start(timeout)
                return
            except ControlPlaneError as exc:
                if attempt == attempts or "address already in use" not in str(exc):
                    raise
                self.components.pop().stop()

    def _spawn(self, name: str, args: Sequence[str]) -> Component:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen([str(self.bin_dir / name), *args], stdout=out, stderr=subprocess.STDOUT,
                                       cwd=self.workdir, start_new_session=True,
                                       env={**os.environ, **self.component_env.get(name, {})})
        component = Component(name, process, log)
        self.components.append(component)
        return component

    def _wait(self, component: Component, ready: Callable[[], bool], timeout: float) -> None:
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
        shutil.rmtree(self.workdir / "etcd", ignore_errors=True)  # a reused workdir starts from an empty cluster
        self.etcd_port, peer = free_port(), free_port()
        etcd = self._spawn("etcd", [
            "--name", "conformance", "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"conformance=http://127.0.0.1:{peer}",
            "--log-level", "warn",
            "--unsafe-no-fsync",  # a throwaway cluster: durability buys nothing, and fsync is most of a write
            *self.extra_etcd_args,
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
        config = self.workdir / "kube-scheduler.yaml"
        config.write_text(json.dumps(scheduler_configuration(self.kubeconfig(), **self.scheduler_config)),
                          encoding="utf-8")
        scheduler = self._spawn("kube-scheduler", ["--config", str(config), "--secure-port", "0", "-v", "2"])
        # No health port (secure-port 0): ready once its informers have listed, which its log says.
        self._wait(scheduler, lambda: "Caches populated" in log_tail(scheduler.log, 400)
                   or "Starting Kubernetes Scheduler" in log_tail(scheduler.log, 400), timeout)

    def _readyz(self) -> bool:
        try:
            status, _ = self.request("GET", "/readyz", timeout=5)
        except (OSError, http.client.HTTPException):
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
                content_type: str = "application/json", query: Mapping[str, str] | None = None,
                timeout: float = 30) -> tuple[int, Any]:
        """One API call over a kept-alive connection per user and thread (reopened once if the server closed it)."""
        data = None if body is None else json.dumps(body).encode()
        target = path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = {"Authorization": f"Bearer {self.tokens.get(user, '')}", "Content-Type": content_type,
                   "Accept": "application/json"}
        for attempt in (1, 2):
            connection = self._connection(user, timeout)
            try:
                connection.request(method, target, body=data, headers=headers)
                response = connection.getresponse()
                payload, status = response.read(), response.status
                break
            except (http.client.HTTPException, ConnectionError, ssl.SSLError):
                self._connections.pop((user, threading.get_ident()), None)
                connection.close()
                if attempt == 2:
                    raise
        try:
            return status, json.loads(payload) if payload else None
        except ValueError:
            return status, payload.decode(errors="replace")

    def _connection(self, user: str, timeout: float) -> http.client.HTTPSConnection:
        key = (user, threading.get_ident())
        connection = self._connections.get(key)
        if connection is None:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            connection = http.client.HTTPSConnection("127.0.0.1", self.apiserver_port, context=context)
            self._connections[key] = connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

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
             "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
             "RuntimeClass": "/apis/node.k8s.io/v1/runtimeclasses"}
NAMESPACED = {
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ResourceQuota": "/api/v1/namespaces/{ns}/resourcequotas",
    "LimitRange": "/api/v1/namespaces/{ns}/limitranges",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
}


def collection_path(obj: Mapping[str, Any]) -> str:
    kind = obj["kind"]
    if kind in API_PATHS:
        return API_PATHS[kind]
    namespace = (obj.get("metadata") or {}).get("namespace") or "default"
    return NAMESPACED[kind].format(ns=namespace)


def object_path(obj: Mapping[str, Any]) -> str:
    return f"{collection_path(obj)}/{obj['metadata']['name']}"


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
