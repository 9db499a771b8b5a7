"""End-to-end tests: the real server on 127.0.0.1 over TLS, talked to like the kube-apiserver does.

Helpers live in ``e2e_support``; the fake API server comes from tests/sources and the quota vectors from
tests/priority (both importable from here)."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for folder in (_TESTS / "e2e", _TESTS / "sources", _TESTS / "priority", _TESTS / "admission"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
