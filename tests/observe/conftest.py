"""The observer's tests: the pure tracker and report, and the live observer against the fake API server
(tests/sources/fake_apiserver.py) playing kube-scheduler's part. Helpers live in ``observe_support``."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for folder in (_TESTS / "observe", _TESTS / "sources"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
