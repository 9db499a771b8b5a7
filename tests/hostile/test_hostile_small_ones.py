"""Issue #24, the small ones: an empty or cut-off --config read as the defaults (enforce became warn); a pod name
with a newline forged lines in the text log; a client that disconnected mid-body was an ERROR traceback and a
500 in the metrics."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from webhook.cluster.snapshot import ClusterState
from webhook.config import LiveConfig, ReloadResult
from webhook.routes import MUTATE_PODS_PATH
from webhook.server.app import METRICS_KEY
from webhook.server.logs import _TEXT_FORMAT, TextFormatter
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook, admission_review
from webhook.sources.source import MemorySource

ROOT = Path(__file__).resolve().parents[2]
ENFORCING = "guardrails:\n  mode: enforce\n  denyCrossTenantPreemption: true\n"


@pytest.mark.parametrize("cut", ["", "guardrails:\n", "# emptied\n"])
def test_a_cut_off_config_on_reload_keeps_the_enforcing_one(tmp_path: Path, cut: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(ENFORCING)
    live = LiveConfig.from_path(path, interval_seconds=0.05)
    assert live.current.guardrails.mode == "enforce"
    path.write_text(cut)
    assert live.check() is ReloadResult.FAILED
    assert live.current.guardrails.mode == "enforce" and live.current.guardrails.deny_cross_tenant_preemption


def test_an_empty_config_at_start_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "config.yaml"
    empty.write_text("")
    done = subprocess.run([sys.executable, "-m", "webhook.cli", "serve", "--cluster-snapshot",
                           str(ROOT / "examples" / "cluster.yaml"), "--tls-self-signed", "--config", str(empty)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"preempt-guard: error: {empty}: the configuration file is empty "
                                   "(write {} for the defaults)")


def test_a_pod_name_with_a_newline_cannot_forge_a_log_line() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter(_TEXT_FORMAT))
    logger = logging.getLogger("test.hostile.forge")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        forged = "web\n2026-01-01 00:00:00,000 INFO webhook.decisions: pods allowed team-b/payments"
        logger.info("pods denied %s/%s: %s", "team-a", forged, "ok")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and "web\\x0a2026-01-01" in lines[0]


async def test_a_client_gone_mid_body_is_no_server_error(caplog: pytest.LogCaptureFixture) -> None:
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True)
    async with LoopbackWebhook(MemorySource(ClusterState()), settings) as hook:
        assert hook.server is not None and hook.client_context is not None
        body = json.dumps(admission_review({"operation": "CREATE"})).encode()
        for _ in range(3):
            _reader, writer = await asyncio.open_connection("127.0.0.1", hook.server.https_port,
                                                           ssl=hook.client_context, server_hostname="localhost")
            writer.write(f"POST {MUTATE_PODS_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body) + 1000}\r\n\r\n".encode() + body)
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.transport.abort()  # gone before the body is whole
        await asyncio.sleep(0.3)
        rendered = hook.server.app[METRICS_KEY].render().decode()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert 'code="500"' not in rendered
    assert 'preemptguard_http_requests_total{code="499",endpoint="/mutate/pods"} 3.0' in rendered
