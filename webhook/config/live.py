"""The configuration in force: loaded at start-up, re-read when its file changes (a mounted ConfigMap too).

A change that fails to load (bad key, bad YAML, missing file) keeps the previous configuration
(docs/interfaces.md §6): the error is logged and kept in ``last_error``. Every change seen is reported to the
``on_reload`` callback, through which the server counts ``preemptguard_config_reloads_total`` and
``preemptguard_config_reload_failures_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from enum import Enum

from webhook.config.model import Config
from webhook.config.parse import load_config, load_config_or_defaults
from webhook.errors import ConfigError
from webhook.tasks import running_in_background

log = logging.getLogger(__name__)


class ReloadResult(Enum):
    UNCHANGED = "unchanged"
    RELOADED = "reloaded"
    FAILED = "failed"


# Called with RELOADED or FAILED after a check that saw the file change (never with UNCHANGED).
ReloadListener = Callable[[ReloadResult], None]


def _file_signature(path: str) -> tuple[int, int, int] | None:
    # A ConfigMap volume swaps a symlink, so the inode changes even when the mtime granularity hides it.
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino, st.st_size)


class LiveConfig:
    """``current`` is the configuration for the next request; ``watching()`` re-reads the file in the background.

    Without a file the configuration is fixed and there is nothing to watch.
    """

    def __init__(self, config: Config, path: str | os.PathLike[str] | None = None, *,
                 interval_seconds: float = 2.0, on_reload: ReloadListener | None = None) -> None:
        self.current = config
        self.path = os.fspath(path) if path is not None else None
        self.interval_seconds = interval_seconds
        self.last_error: ConfigError | None = None
        self.generation = 0
        self._on_reload = on_reload
        self._signature = _file_signature(self.path) if self.path is not None else None

    @classmethod
    def from_path(cls, path: str | os.PathLike[str] | None, *, interval_seconds: float = 2.0,
                  on_reload: ReloadListener | None = None) -> LiveConfig:
        """Load ``path`` now (``ConfigError`` on any problem); the defaults when there is no file."""
        return cls(load_config_or_defaults(path), path, interval_seconds=interval_seconds, on_reload=on_reload)

    def check(self) -> ReloadResult:
        """Re-read the file if it changed, and report what happened to ``on_reload``."""
        if self.path is None:
            return ReloadResult.UNCHANGED
        result = self._reload_if_changed(self.path)
        if result is not ReloadResult.UNCHANGED and self._on_reload is not None:
            self._on_reload(result)
        return result

    def _reload_if_changed(self, path: str) -> ReloadResult:
        signature = _file_signature(path)
        if signature == self._signature:
            return ReloadResult.UNCHANGED
        # Remembered before loading, so a broken file is reported once, not on every check.
        self._signature = signature
        try:
            config = load_config(path)
        except ConfigError as exc:
            self.last_error = exc
            log.error("configuration reload rejected, keeping the previous configuration: %s", exc)
            return ReloadResult.FAILED
        self.current = config
        self.last_error = None
        self.generation += 1
        log.info("configuration reloaded from %s", path)
        return ReloadResult.RELOADED

    async def watch(self) -> None:
        """Check the file every ``interval_seconds``, forever."""
        while True:
            await asyncio.sleep(self.interval_seconds)
            try:
                self.check()
            except Exception:  # never let the watcher die: the next change gets another chance
                log.exception("configuration reload check failed")

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Run ``watch()`` in the background while the block runs (nothing to do without a file)."""
        if self.path is None:
            yield
            return
        async with running_in_background(self.watch(), name="preemptguard-config-reload"):
            yield
