"""LiveConfig: re-read on change, keep the previous configuration on error (docs/interfaces.md §6), report
each change seen to its callback, and a watcher that never dies."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import webhook.config.live
import webhook.config.parse
from webhook.config import DEFAULT_CONFIG, Config, LiveConfig, ReloadResult, load_config
from webhook.errors import ConfigError


def _write(path: Path, text: str, stamp: int) -> None:
    path.write_text(text)
    # Distinct mtimes even on coarse-grained file systems.
    os.utime(path, ns=(stamp * 1_000_000_000, stamp * 1_000_000_000))


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    _write(path, "guardrails:\n  maxVictims: 1\n", 1_000)
    return path


def test_start_up_error_raises(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("guardrails:\n  maxVictims: many\n")
    with pytest.raises(ConfigError, match=r"guardrails\.maxVictims"):
        LiveConfig.from_path(path)


def test_without_a_file_the_defaults_stay_and_nothing_is_watched() -> None:
    seen: list[ReloadResult] = []
    live = LiveConfig.from_path(None, on_reload=seen.append)
    assert live.current is DEFAULT_CONFIG
    assert live.check() is ReloadResult.UNCHANGED and seen == []


def test_unchanged_file_is_not_reread(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def loader(path: str | os.PathLike[str]) -> Config:
        calls.append(os.fspath(path))
        return load_config(path)

    # Start-up loads through parse, reloads through live: count both.
    monkeypatch.setattr(webhook.config.parse, "load_config", loader)
    monkeypatch.setattr(webhook.config.live, "load_config", loader)
    live = LiveConfig.from_path(config_file)
    assert calls == [str(config_file)]
    assert live.check() is ReloadResult.UNCHANGED
    assert calls == [str(config_file)]


def test_change_is_picked_up_and_reported(config_file: Path) -> None:
    seen: list[ReloadResult] = []
    live = LiveConfig.from_path(config_file, on_reload=seen.append)
    assert live.current.guardrails.max_victims == 1
    _write(config_file, "guardrails:\n  maxVictims: 7\n", 2_000)
    assert live.check() is ReloadResult.RELOADED
    assert live.current.guardrails.max_victims == 7
    assert seen == [ReloadResult.RELOADED] and live.generation == 1


def test_bad_reload_keeps_previous_then_recovers(config_file: Path) -> None:
    seen: list[ReloadResult] = []
    live = LiveConfig.from_path(config_file, on_reload=seen.append)
    previous = live.current
    _write(config_file, "guardrails:\n  maxVictim: 7\n", 2_000)
    assert live.check() is ReloadResult.FAILED
    assert live.current is previous
    assert live.last_error is not None and "unknown key guardrails.maxVictim" in str(live.last_error)
    # The same broken file is not re-reported on every check.
    assert live.check() is ReloadResult.UNCHANGED
    _write(config_file, "guardrails:\n  maxVictims: 3\n", 3_000)
    assert live.check() is ReloadResult.RELOADED
    assert live.current.guardrails.max_victims == 3 and live.last_error is None
    assert seen == [ReloadResult.FAILED, ReloadResult.RELOADED]


def test_deleted_file_keeps_previous(config_file: Path) -> None:
    live = LiveConfig.from_path(config_file)
    config_file.unlink()
    assert live.check() is ReloadResult.FAILED
    assert live.current.guardrails.max_victims == 1
    assert "cannot read configuration" in str(live.last_error)


def test_symlink_swap_like_a_configmap_volume(tmp_path: Path) -> None:
    first = tmp_path / "v1.yaml"
    second = tmp_path / "v2.yaml"
    _write(first, "guardrails:\n  mode: warn\n", 5_000)
    _write(second, "guardrails:\n  mode: enforce\n", 5_000)
    link = tmp_path / "config.yaml"
    link.symlink_to(first)
    live = LiveConfig.from_path(link)
    assert live.current.guardrails.mode == "warn"
    link.unlink()
    link.symlink_to(second)
    assert live.check() is ReloadResult.RELOADED
    assert live.current.guardrails.mode == "enforce"


async def _eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_the_watcher_applies_changes_and_survives_a_failing_callback(config_file: Path) -> None:
    seen: list[ReloadResult] = []

    def observe(outcome: ReloadResult) -> None:
        seen.append(outcome)
        if len(seen) == 1:
            raise RuntimeError("observer broke")

    live = LiveConfig.from_path(config_file, interval_seconds=0.01, on_reload=observe)
    async with live.watching():
        _write(config_file, "guardrails:\n  maxVictims: 7\n", 2_000)
        await _eventually(lambda: seen == [ReloadResult.RELOADED])
        assert live.current.guardrails.max_victims == 7
        # The first callback raised; the watcher logged it and keeps watching.
        _write(config_file, "guardrails:\n  maxVictims: 9\n", 3_000)
        await _eventually(lambda: len(seen) == 2)
        assert seen == [ReloadResult.RELOADED, ReloadResult.RELOADED]
        assert live.current.guardrails.max_victims == 9
