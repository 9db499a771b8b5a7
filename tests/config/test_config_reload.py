"""ConfigReloader: re-read on change, keep the previous configuration on error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from webhook.config import Config, ConfigReloader, ReloadOutcome
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
        ConfigReloader(path)


def test_unchanged_file_is_not_reread(config_file: Path) -> None:
    calls: list[str] = []

    def loader(path: str) -> Config:
        calls.append(path)
        return Config(source=path)

    reloader = ConfigReloader(config_file, loader=loader)
    assert calls == [str(config_file)]
    assert reloader.check() is ReloadOutcome.UNCHANGED
    assert calls == [str(config_file)]


def test_change_is_picked_up_and_reported(config_file: Path) -> None:
    seen: list[Config] = []
    reloader = ConfigReloader(config_file, on_reload=seen.append)
    assert reloader.current.guardrails.max_victims == 1
    _write(config_file, "guardrails:\n  maxVictims: 7\n", 2_000)
    assert reloader.check() is ReloadOutcome.RELOADED
    assert reloader.current.guardrails.max_victims == 7
    assert seen == [reloader.current] and reloader.generation == 1


def test_bad_reload_keeps_previous_then_recovers(config_file: Path) -> None:
    reloader = ConfigReloader(config_file)
    previous = reloader.current
    _write(config_file, "guardrails:\n  maxVictim: 7\n", 2_000)
    assert reloader.check() is ReloadOutcome.FAILED
    assert reloader.current is previous
    assert reloader.last_error is not None and "unknown key guardrails.maxVictim" in str(reloader.last_error)
    # The same broken file is not re-reported on every check.
    assert reloader.check() is ReloadOutcome.UNCHANGED
    _write(config_file, "guardrails:\n  maxVictims: 3\n", 3_000)
    assert reloader.check() is ReloadOutcome.RELOADED
    assert reloader.current.guardrails.max_victims == 3 and reloader.last_error is None


def test_deleted_file_keeps_previous(config_file: Path) -> None:
    reloader = ConfigReloader(config_file)
    config_file.unlink()
    assert reloader.check() is ReloadOutcome.FAILED
    assert reloader.current.guardrails.max_victims == 1
    assert "cannot read configuration" in str(reloader.last_error)


def test_symlink_swap_like_a_configmap_volume(tmp_path: Path) -> None:
    first = tmp_path / "v1.yaml"
    second = tmp_path / "v2.yaml"
    _write(first, "guardrails:\n  mode: warn\n", 5_000)
    _write(second, "guardrails:\n  mode: enforce\n", 5_000)
    link = tmp_path / "config.yaml"
    link.symlink_to(first)
    reloader = ConfigReloader(link)
    assert reloader.current.guardrails.mode == "warn"
    link.unlink()
    link.symlink_to(second)
    assert reloader.check() is ReloadOutcome.RELOADED
    assert reloader.current.guardrails.mode == "enforce"
