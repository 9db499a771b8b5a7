"""Byte-code for the checkout's packages, written once when a test session starts.

Many tests run PreemptGuard as a program: kubectl runs the plugin, and the server, ``certs`` and ``verify``
commands run in their own processes. Where ``PYTHONDONTWRITEBYTECODE`` is set (as on this project's machines)
no run leaves byte-code behind, so every one of those processes would compile the packages from source again.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def pytest_sessionstart(session: pytest.Session) -> None:
    for package in ("webhook", "kubectl_plugin"):
        compileall.compile_dir(ROOT / package, quiet=1)
