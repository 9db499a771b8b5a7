"""``--snapshot FILE``: the preview predicted offline, by the same entry point as ``/preview``, with no cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubectl_plugin.inputs import JsonObject
from kubectl_plugin.render import Progress
from kubectl_plugin.sources.document import PreviewAnswer
from webhook.cluster.loader import load_snapshot
from webhook.errors import InvalidInput
from webhook.preemption.preview import preview_objects


@dataclass(slots=True)
class SnapshotPreviewSource:
    path: str

    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer:
        if not Path(self.path).is_file():
            raise InvalidInput(f"--snapshot {self.path}: file not found")
        async with progress.running(f"predicting against {self.path}"):
            preview = await asyncio.to_thread(self._predict, objects, namespace, replicas)
        return PreviewAnswer(preview)

    def _predict(self, objects: Sequence[JsonObject], namespace: str | None, replicas: int | None) -> JsonObject:
        state = load_snapshot(self.path, require_cluster=True)
        return preview_objects(state, objects, namespace=namespace, replicas=replicas)
