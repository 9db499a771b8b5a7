"""Background asyncio tasks that end with the block or the object that started them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has ended; its cancellation is not an error of the caller's."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@contextlib.asynccontextmanager
async def running_in_background(work: Coroutine[Any, Any, Any], *, name: str) -> AsyncIterator[asyncio.Task[Any]]:
    """Run ``work`` as a task while the block runs; cancelled and awaited when the block ends."""
    task = asyncio.create_task(work, name=name)
    try:
        yield task
    finally:
        await cancel_and_wait(task)
