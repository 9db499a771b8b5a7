"""The configuration in force: loaded at start-up, re-read when its file changes (a mounted ConfigMap too).

A change that fails to load keeps the previous configuration; it is logged by ``ConfigReloader`` and
counted in ``preemptguard_config_reload_failures_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from webhook.config import DEFAULT_CONFIG, Config, ConfigReloader, ReloadOutcome, load_config
from webhook.server.metrics import WebhookMetrics

log = logging.getLogger(__name__)


class LiveConfig:
    """``current`` is the configuration for the next request; ``watch()`` re-reads the file periodically."""

    def __init__(self, config: Config, path: Path | None = None, *, interval_seconds: float = 2.0,
                 metrics: WebhookMetrics | None = None) -> None:
        self.interval_seconds = interval_seconds
        self.metrics = metrics
        self._fixed = config
        self.reloader = ConfigReloader(path, initial=config) if path is not None else None

    @classmethod
    def from_path(cls, path: Path | None, *, interval_seconds: float = 2.0,
                  metrics: WebhookMetrics | None = None) -> LiveConfig:
        """Load ``path`` now (``ConfigError`` on any problem); the defaults when there is no file."""
        config = load_config(path) if path is not None else DEFAULT_CONFIG
        return cls(config, path, interval_seconds=interval_seconds, metrics=metrics)

    @property
    def current(self) -> Config:
        return self.reloader.current if self.reloader is not None else self._fixed

    def check(self) -> ReloadOutcome:
        """Re-read the file if it changed; count the result."""
        if self.reloader is None:
            return ReloadOutcome.UNCHANGED
        outcome = self.reloader.check()
        if self.metrics is not None:
            if outcome is ReloadOutcome.RELOADED:
                self.metrics.config_reloads.inc()
            elif outcome is ReloadOutcome.FAILED:
                self.metrics.config_reload_failures.inc()
        return outcome

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval_seconds)
            try:
                self.check()
            except Exception:  # never let the watcher die: the next change gets another chance
                log.exception("configuration reload check failed")

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Run ``watch()`` in the background while the block runs (nothing to do without a file)."""
        if self.reloader is None:
            yield
            return
        task = asyncio.create_task(self.watch(), name="preemptguard-config-reload")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
