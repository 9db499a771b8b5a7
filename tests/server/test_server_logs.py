"""Logs (--log-format json, --log-denials): JSON lines that parse one by one, a denial logged with its fields,
and no token or certificate material in any line."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from webhook.certs.issuance import generate_ca, issue_serving_certificate
from webhook.server.logs import FIELDS, JsonFormatter
from webhook.server.testing import admission_review

REPO = Path(__file__).resolve().parents[2]
SECRET_TOKEN = "s3cr3t-bearer-token-that-must-never-be-logged"
SNAPSHOT = """apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}
- apiVersion: v1
  kind: Node
  metadata: {name: node-1}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
"""


def test_a_json_line_carries_time_level_logger_message_and_fields() -> None:
    record = logging.LogRecord("webhook.decisions", logging.INFO, __file__, 1, "pods %s", ("denied",), None)
    setattr(record, FIELDS, {"uid": "u-1", "namespace": "team-a", "pod": "web", "verdict": "denied",
                             "duration_ms": 1.5})
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "info" and line["logger"] == "webhook.decisions" and line["message"] == "pods denied"
    assert line["time"].endswith("+00:00")
    assert {k: line[k] for k in ("uid", "namespace", "pod", "verdict", "duration_ms")} == {
        "uid": "u-1", "namespace": "team-a", "pod": "web", "verdict": "denied", "duration_ms": 1.5}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(url: str, body: object, context: ssl.SSLContext) -> int:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {SECRET_TOKEN}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serve_logs_json_lines_with_the_denial_and_never_a_token_or_key(tmp_path: Path) -> None:
    ca = generate_ca("logs-ca", 1)
    serving = issue_serving_certificate(ca.cert_pem, ca.key_pem, ["localhost", "127.0.0.1"], 1)
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    (tmp_path / "cluster.yaml").write_text(SNAPSHOT)
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook.cli", "serve", "--cluster-snapshot", str(tmp_path / "cluster.yaml"),
         "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"), "--host", "127.0.0.1",
         "--port", str(port), "--metrics-port", "0", "--shutdown-grace", "0", "--log-format", "json",
         "--log-level", "debug"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    denied = admission_review({
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1",
                                                                           "resource": "pods"},
        "name": "vip-api", "namespace": "team-a", "operation": "CREATE",
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vip-api", "namespace": "team-a"},
                   "spec": {"priorityClassName": "gold", "containers": [{"name": "c"}]}}}, uid="review-42")
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=2):
                    break
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        assert _post(f"https://127.0.0.1:{port}/mutate/pods", denied, context) == 200
        assert _post(f"https://127.0.0.1:{port}/preview", {"pod": denied["request"]["object"]}, context) == 200
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    (denial,) = [line for line in lines if line.get("verdict") == "denied"]
    assert denial["level"] == "info" and denial["uid"] == "review-42"
    assert (denial["namespace"], denial["pod"], denial["rules"]) == ("team-a", "vip-api", ["priority"])
    assert "no PriorityClass with name gold was found" in denial["message"] and denial["duration_ms"] >= 0
    assert SECRET_TOKEN not in stderr
    assert "BEGIN" not in stderr and serving.key_pem.decode().splitlines()[1] not in stderr
