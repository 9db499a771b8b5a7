"""--config: loaded at start-up (a bad file refuses to start with one line), re-read when it changes, and a
bad change keeps the previous configuration (logged and counted)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from e2e_support import admit, create_review, settings, state_of
from guardrail_cluster import guardrail_cluster, preemptor

from webhook.cli import main
from webhook.server.app import METRICS_KEY
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import MemorySource


def write_config(path: Path, text: str) -> None:
    # Each version below has a distinct size, so the change is seen even within one mtime tick.
    path.write_text(text, encoding="utf-8")


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_config_changes_apply_and_bad_changes_keep_the_previous_one(tmp_path: Path) -> None:
    path = tmp_path / "preemptguard.yaml"
    write_config(path, "guardrails:\n  mode: warn\n  maxVictims: 2\n")
    source = MemorySource(state_of(guardrail_cluster()))
    async with LoopbackWebhook(source, settings(config_path=path, config_reload_interval=0.05)) as hook:
        assert hook.server is not None
        metrics = hook.server.app[METRICS_KEY]
        first = await admit(hook, create_review(preemptor()))
        assert first["allowed"] is True and first["warnings"][0].startswith("maxVictims: ")

        write_config(path, "guardrails:\n  mode: enforce\n  maxVictims: 2\n  tenantLabel: tenant\n")

        async def denied() -> bool:
            return (await admit(hook, create_review(preemptor())))["allowed"] is False
        await eventually(denied)
        assert "preemptguard_config_reloads_total 1.0" in metrics.render().decode()

        write_config(path, "guardrails:\n  mode: enforce\n  maxVictim: 2\n")  # unknown key

        async def failure_counted() -> bool:
            return "preemptguard_config_reload_failures_total 1.0" in metrics.render().decode()
        await eventually(failure_counted)
        kept = await admit(hook, create_review(preemptor()))
        assert kept["allowed"] is False and "maxVictims: " in kept["status"]["message"]


def test_a_bad_config_file_refuses_to_start_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}), encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("guardrails:\n  mode: sometimes\n", encoding="utf-8")
    code = main(["serve", "--cluster-snapshot", str(snapshot), "--tls-self-signed", "--port", "0",
                 "--metrics-port", "0", "--config", str(bad)])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("preempt-guard: error: ")
    assert "guardrails.mode" in lines[0] and str(bad) in lines[0]
    missing = main(["serve", "--cluster-snapshot", str(snapshot), "--tls-self-signed", "--config",
                    str(tmp_path / "absent.yaml")])
    assert missing == 2
    assert "cannot read configuration" in capsys.readouterr().err
