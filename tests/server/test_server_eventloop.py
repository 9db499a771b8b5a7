"""The event loop choice: uvloop when installed (it is a dependency on Linux), asyncio on request."""

from __future__ import annotations

import asyncio

import pytest

from webhook.cli import build_parser
from webhook.errors import ConfigError
from webhook.server import eventloop
from webhook.server.eventloop import chosen_event_loop, run_on_event_loop
from webhook.server.settings import settings_from_args


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_auto_runs_on_uvloop_when_installed() -> None:
    assert eventloop.uvloop_available()
    assert chosen_event_loop("auto") == "uvloop"
    assert run_on_event_loop(loop_module(), "auto").startswith("uvloop")


def test_asyncio_on_request() -> None:
    assert run_on_event_loop(loop_module(), "asyncio").startswith("asyncio")


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eventloop, "uvloop_available", lambda: False)
    assert chosen_event_loop("auto") == "asyncio"
    assert run_on_event_loop(loop_module(), "auto").startswith("asyncio")


def test_uvloop_asked_for_but_absent_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eventloop, "uvloop_available", lambda: False)
    coroutine = loop_module()
    with pytest.raises(ConfigError, match="uvloop package is not installed"):
        run_on_event_loop(coroutine, "uvloop")
    assert coroutine.cr_frame is None  # closed, never left pending


def test_unknown_loop_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown event loop 'trio'"):
        chosen_event_loop("trio")


@pytest.mark.parametrize(("flags", "expected"), [([], "auto"), (["--event-loop", "asyncio"], "asyncio"),
                                                 (["--event-loop", "uvloop"], "uvloop")])
def test_serve_flag(flags: list[str], expected: str) -> None:
    args = build_parser().parse_args(["serve", "--cluster-snapshot", "x.yaml", *flags])
    assert settings_from_args(args, environ={}).event_loop == expected


def test_serve_flag_rejects_other_loops(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["serve", "--event-loop", "trio"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'trio'" in capsys.readouterr().err
