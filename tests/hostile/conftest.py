"""The hostile-tenant suite (issue #24): each attack as a test against the real server, under ``enforce``.

Attack payloads, the server process harness and its measurements (peak RSS, exit time) are shared with
``bench/hostile.py``, which prints each attack's effect side by side with the same run without it. Files are
named by attack; each test fails on the code before its fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.hostile import ENFORCE, Served, served, write_snapshot


@pytest.fixture(scope="session")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example cluster (as JSON, quick to load) plus a namespace the guardrails leave alone."""
    return write_snapshot(tmp_path_factory.mktemp("hostile") / "cluster.json")


@pytest.fixture(scope="module")
def enforcing(snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``preempt-guard serve`` on the example cluster under ``enforce`` with ``denyCrossTenantPreemption``."""
    with served(snapshot, ENFORCE, tmp_path_factory.mktemp("serve")) as target:
        yield target
