"""The plugin as users run it: the machine's real ``kubectl`` finding ``kubectl-preempt_preview`` on PATH.

A missing kubectl fails these tests; it never skips them. ``preemptguard`` starts the real server once per
session (``preempt-guard serve --cluster-snapshot examples/cluster.yaml --tls-self-signed --port 0``).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.certs.issuance import generate_ca, issue_client_certificate
from webhook.cluster.snapshot import ClusterState
from webhook.sources.loader import load_snapshot

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CLUSTER = EXAMPLES / "cluster.yaml"
POD_FILES = sorted((EXAMPLES / "pods").glob("*.yaml"))
PLUGIN = "kubectl-preempt_preview"
COMPLETER = "kubectl_complete-preempt_preview"  # what kubectl >= 1.26 runs to complete a plugin's arguments
EXPECT_RE = re.compile(r"^# expect: (\S+)$", re.MULTILINE)
RESULT_RE = re.compile(r"^# expect-result: (\S+) (\S+) node=(\S+) victims=(\S+)$", re.MULTILINE)


def expected_outcome(path: Path) -> str:
    match = EXPECT_RE.search(path.read_text(encoding="utf-8"))
    assert match, f"{path} has no '# expect:' line"
    return match.group(1)


# (pod, outcome, node, victims): what each example's `# expect-result:` lines say, worked out from the spec
# (and held to tests/preemption/reference.py), never from the production predictor.
ExpectedResult = tuple[str, str, str | None, tuple[str, ...]]


def expected_results(path: Path) -> list[ExpectedResult]:
    results: list[ExpectedResult] = []
    for pod, outcome, node, victims in RESULT_RE.findall(path.read_text(encoding="utf-8")):
        results.append((pod, outcome, None if node == "-" else node,
                        () if victims == "-" else tuple(victims.split(","))))
    assert results, f"{path} has no '# expect-result:' lines"
    return results


def results_of(preview: Mapping[str, Any]) -> list[ExpectedResult]:
    """A PreemptionPreview reduced to what the examples' `# expect-result:` lines state."""
    return [(r["pod"], r["outcome"], r["node"], tuple(f"{v['namespace']}/{v['name']}" for v in r["victims"]))
            for r in preview["results"]]


@pytest.fixture(scope="session")
def snapshot_state() -> ClusterState:
    """examples/cluster.yaml, loaded once (predictions never mutate it)."""
    return load_snapshot(CLUSTER)


@pytest.fixture(scope="session")
def snapshot_items() -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    items: list[dict[str, Any]] = yaml.load(CLUSTER.read_text(encoding="utf-8"), Loader=loader)["items"]
    return items


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Kubectl:
    """Runs the real kubectl with the plugin directory first on PATH and no kubeconfig unless given."""

    binary: Path
    plugin_dir: Path
    home: Path

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR", "PYTHONPATH")}
        # An activated venv puts the installed plugin on PATH too: kubectl would warn that the shim overshadows it.
        rest = [d for d in os.environ.get("PATH", "").split(os.pathsep)
                if d and not (Path(d) / PLUGIN).exists() and not (Path(d) / COMPLETER).exists()]
        env.update(PATH=os.pathsep.join([str(self.plugin_dir), *rest]), HOME=str(self.home))
        env.update(extra or {})
        return env

    def run(self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 60) -> Run:
        done = subprocess.run([str(self.binary), *args], input=stdin, capture_output=True, text=True,
                              env=self.env(env), cwd=ROOT, timeout=timeout, check=False)
        return Run(done.returncode, done.stdout, done.stderr)

    async def arun(self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None,
                   timeout: float = 60) -> Run:
        """Like ``run``, while the event loop keeps serving (the fake API server runs in it)."""
        process = await asyncio.create_subprocess_exec(
            str(self.binary), *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env(env), cwd=ROOT)
        out, err = await asyncio.wait_for(process.communicate(stdin.encode() if stdin else None), timeout)
        assert process.returncode is not None
        return Run(process.returncode, out.decode(), err.decode())


def write_shim(directory: Path, name: str = PLUGIN, module: str = "kubectl_plugin.cli") -> Path:
    """``kubectl-preempt_preview``: runs ``python -m kubectl_plugin.cli`` of this checkout (what
    ``pipx install .`` puts on PATH as a console script); likewise ``kubectl_complete-preempt_preview``."""
    shim = directory / name
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m {module} "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return shim


@pytest.fixture(scope="session")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is not on PATH: the plugin tests drive the real kubectl (install it; CI's .ci/run "
                    "requires it too)", pytrace=False)
    plugin_dir = tmp_path_factory.mktemp("plugins")
    write_shim(plugin_dir)
    write_shim(plugin_dir, COMPLETER, "kubectl_plugin.completion")
    return Kubectl(Path(found), plugin_dir, tmp_path_factory.mktemp("home"))


# ---- the real PreemptGuard server ---------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class PreemptGuard:
    url: str
    ca_pem: bytes
    ca_file: Path
    # With --client-ca: the client certificate and key the API server presents.
    client_certificate: tuple[Path, Path] | None = None
    # http://127.0.0.1:PORT of its metrics listener, when it has one.
    metrics_url: str | None = None


class _ServerProcess:
    def __init__(self, args: Sequence[str]) -> None:
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                match = pattern.search(line)
                if match:
                    return match
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("preempt-guard serve did not start:\n" + "".join(self.lines))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# The plugin's tests send many previews and dry runs in one session: no per-caller preview rate.
PLUGIN_SERVER_CONFIG = "prediction: {previewsPerMinute: 0}\n"


@pytest.fixture(scope="session")
def preemptguard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PreemptGuard]:
    yield from _preemptguard(tmp_path_factory, client_ca=False)


@pytest.fixture
def preemptguard_rate_limited(tmp_path_factory: pytest.TempPathFactory,
                              request: pytest.FixtureRequest) -> Iterator[PreemptGuard]:
    """A server of its own answering at most ``request.param`` previews a minute per caller
    (``prediction.previewsPerMinute``): beyond, 429 with ``Retry-After``."""
    yield from _preemptguard(tmp_path_factory, client_ca=False, metrics=True,
                             config_text=f"prediction: {{previewsPerMinute: {request.param}}}\n")


@pytest.fixture(scope="session")
def preemptguard_client_ca(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PreemptGuard]:
    """The server under --client-ca, as a cluster whose API server presents a client certificate runs it: the
    requester's own tenant is named."""
    yield from _preemptguard(tmp_path_factory, client_ca=True)


def _preemptguard(tmp_path_factory: pytest.TempPathFactory, *, client_ca: bool, metrics: bool = False,
                  config_text: str = PLUGIN_SERVER_CONFIG) -> Iterator[PreemptGuard]:
    config = tmp_path_factory.mktemp("preemptguard-config") / "config.yaml"
    config.write_text(config_text, encoding="utf-8")
    args = [sys.executable, "-m", "webhook.cli", "serve", "--cluster-snapshot", str(CLUSTER),
            "--tls-self-signed", "--host", "127.0.0.1", "--port", "0", "--config", str(config)]
    metrics_port = _free_port() if metrics else 0
    args += ["--metrics-port", str(metrics_port)]
    client: tuple[Path, Path] | None = None
    if client_ca:
        folder = tmp_path_factory.mktemp("client-ca")
        ca = generate_ca("plugin-tests-client-ca", 1)
        issued = issue_client_certificate(ca.cert_pem, ca.key_pem, "kube-apiserver", 1)
        (folder / "ca.crt").write_bytes(ca.cert_pem)
        client = (folder / "client.crt", folder / "client.key")
        client[0].write_bytes(issued.cert_pem)
        client[1].write_bytes(issued.key_pem)
        # (no /preview listener of its own: these tests send reviews as the API server, never /preview)
        args += ["--client-ca", str(folder / "ca.crt"), "--preview-port", "0"]
    server = _ServerProcess(args)
    try:
        match = server.wait_for(re.compile(r"serving admission on (https://127\.0\.0\.1:\d+)"), timeout=30)
        url = match.group(1)
        port = int(url.rsplit(":", 1)[1])
        # The self-signed certificate is its own CA, as a webhook configuration's caBundle would hold it.
        ca_pem = ssl.get_server_certificate(("127.0.0.1", port)).encode()
        ca_file = tmp_path_factory.mktemp("preemptguard") / "ca.crt"
        ca_file.write_bytes(ca_pem)
        yield PreemptGuard(url, ca_pem, ca_file, client,
                           f"http://127.0.0.1:{metrics_port}" if metrics_port else None)
    finally:
        server.stop()
