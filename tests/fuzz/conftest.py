"""The fuzz harness's server: the real app over TLS on a small in-memory cluster."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))

from fuzz_inputs import small_cluster_state

from webhook.config import parse_config
from webhook.server.settings import ServerSettings
from webhook.server.testing import LoopbackWebhook
from webhook.sources.source import MemorySource


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hook() -> AsyncIterator[LoopbackWebhook]:
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_self_signed=True)
    # Every fuzzed preview must reach the predictor: no per-caller preview rate (tests/hostile covers the 429).
    config = parse_config({"prediction": {"previewsPerMinute": 0}}, "fuzz")
    async with LoopbackWebhook(MemorySource(small_cluster_state()), settings, config=config) as running:
        yield running
