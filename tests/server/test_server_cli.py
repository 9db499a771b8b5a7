"""``preempt-guard serve`` as a process: start-up refusal on a bad snapshot, and a real serve/stop cycle."""

from __future__ import annotations

import gc
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest

from webhook.certs.issuance import generate_ca, issue_serving_certificate
from webhook.cli import build_parser, main
from webhook.server.settings import settings_from_args

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "webhook.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


def test_unparsable_snapshot_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    snapshot = tmp_path / "broken.yaml"
    snapshot.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n"
                        "apiVersion: v1\nkind: Pod\nmetadata: [not, a, map]\n")
    result = run_cli("serve", "--cluster-snapshot", str(snapshot), "--tls-self-signed", "--port", "0",
                     "--metrics-port", "0")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(snapshot) in lines[0] and "document 1" in lines[0]
    assert "Traceback" not in result.stderr


def test_missing_tls_flags_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    assert main(["serve", "--cluster-snapshot", str(snapshot)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["preempt-guard: error: TLS needs both --tls-cert and --tls-key, or --tls-self-signed"]


def test_flags_become_settings() -> None:
    args = build_parser().parse_args(["serve", "--kubeconfig", "/k", "--context", "prod", "--tls-self-signed",
                                      "--tls-san", "a.svc", "--tls-san", "10.0.0.1", "--port", "9443",
                                      "--metrics-port", "0", "--config", "/etc/pg.yaml", "--log-level", "debug"])
    settings = settings_from_args(args, environ={})
    assert (settings.kubeconfig, settings.context, settings.cluster_snapshot) == (Path("/k"), "prod", None)
    assert settings.tls_sans == ("a.svc", "10.0.0.1") and settings.tls_self_signed
    assert (settings.host, settings.port, settings.metrics_port) == ("0.0.0.0", 9443, 0)
    assert settings.config_path == Path("/etc/pg.yaml") and settings.log_level == "debug"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--cluster-snapshot", "f", "--in-cluster"])


def test_observe_flags_become_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    defaults = settings_from_args(build_parser().parse_args(["serve", "--tls-self-signed"]), environ={})
    assert (defaults.observe_window_seconds, defaults.observe_max_predictions, defaults.events) == (600, 100_000, False)
    args = build_parser().parse_args(["serve", "--tls-self-signed", "--observe-window", "120", "--observe-max", "500",
                                      "--events"])
    settings = settings_from_args(args, environ={})
    assert (settings.observe_window_seconds, settings.observe_max_predictions, settings.events) == (120, 500, True)
    off = settings_from_args(build_parser().parse_args(["serve", "--observe-window", "0"]), environ={})
    assert off.observe_window_seconds == 0
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    for flag, value, message in (("--observe-window", "-1", "--observe-window must not be negative, got -1"),
                                 ("--observe-max", "0", "--observe-max must be at least 1, got 0")):
        assert main(["serve", "--cluster-snapshot", str(snapshot), "--tls-self-signed", flag, value]) == 2
        assert capsys.readouterr().err.strip() == f"preempt-guard: error: {message}"


def test_preview_port_defaults_to_8444_under_client_ca_and_to_none_otherwise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Under --client-ca the admission port asks every caller for a certificate, so /preview gets a listener of its
    own by default; without it /preview stays on --port as before (docs/interfaces.md §2)."""
    def preview_port(*flags: str) -> int | None:
        return settings_from_args(build_parser().parse_args(["serve", "--tls-self-signed", *flags]),
                                  environ={}).preview_port

    assert preview_port() is None
    assert preview_port("--client-ca", "/ca.crt") == 8444
    assert preview_port("--client-ca", "/ca.crt", "--preview-port", "9444") == 9444
    assert preview_port("--preview-port", "9444") == 9444
    assert preview_port("--client-ca", "/ca.crt", "--preview-port", "0") is None  # as --metrics-port 0: off
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    for flags, message in (
            (["--preview-port", "8443"], "--preview-port 8443 is also --port: give /preview a port of its own (or 0 "
                                         "to serve it on --port only)"),
            (["--preview-port", "9090"], "--preview-port 9090 is also --metrics-port: give /preview a port of its own "
                                         "(or 0 to serve it on --port only)"),
            (["--preview-port", "70000"], "--preview-port must be between 0 and 65535, got 70000")):
        assert main(["serve", "--cluster-snapshot", str(snapshot), "--tls-self-signed", *flags]) == 2
        assert capsys.readouterr().err.strip() == f"preempt-guard: error: {message}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_answers_over_tls_and_stops_on_sigterm(tmp_path: Path) -> None:
    ca_pem, ca_key = generate_ca("cli-ca", 1)
    cert, key = issue_serving_certificate(ca_pem, ca_key, ["localhost", "127.0.0.1"], 1)
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    port, metrics_port = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook.cli", "serve", "--cluster-snapshot", str(snapshot),
         "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"), "--host", "127.0.0.1",
         "--port", str(port), "--metrics-port", str(metrics_port), "--shutdown-grace", "0"],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    context = ssl.create_default_context(cadata=ca_pem.decode())
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=2) as r:
                    assert r.status == 200 and r.read() == b"ok"
                    break
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as r:
            assert b"preemptguard_http_requests_total" in r.read()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"preempt-guard {metadata.version('preemptguard')}"


def test_a_pod_manifest_given_as_the_snapshot_is_refused_in_one_line() -> None:
    result = run_cli("serve", "--cluster-snapshot", str(REPO / "examples/pods/14-deployment-high.yaml"),
                     "--tls-self-signed", "--port", "0", "--metrics-port", "0")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "not a cluster snapshot" in line and "Deployment" in line and "kubectl get priorityclasses" in line


@pytest.mark.parametrize("flag", ["--port", "--metrics-port", "--preview-port"])
def test_a_taken_port_is_an_error_that_names_its_flag(flag: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--port": "0", "--metrics-port": "0", flag: str(port)}
        result = run_cli("serve", "--cluster-snapshot", str(REPO / "examples/cluster.yaml"), "--tls-self-signed",
                         "--host", "127.0.0.1", *[x for item in ports.items() for x in item])
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == [f"preempt-guard: error: {flag} {port}: cannot listen on 127.0.0.1:{port}: address already in use"]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("freeze", [True, False])
def test_a_snapshot_source_is_frozen_out_of_the_collector_as_it_loads_when_serve_freezes(freeze: bool) -> None:
    # serve freezes its synced cache (freeze_gc_after_sync); a snapshot is synced once loaded, so it is frozen
    # then, before the first collections after the load would walk all of it.
    from webhook.server.command import make_source
    from webhook.server.settings import ServerSettings

    snapshot = Path(__file__).resolve().parents[2] / "examples" / "cluster.yaml"
    gc.unfreeze()
    try:
        source = make_source(ServerSettings(cluster_snapshot=snapshot, freeze_gc_after_sync=freeze))
        frozen = gc.get_freeze_count()
        assert gc.isenabled()
        pods = list(source.state.pods.values())
        assert pods
        assert (frozen > 0) is freeze
    finally:
        gc.unfreeze()
