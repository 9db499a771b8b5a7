"""``--snapshot FILE``: the preview predicted offline, by the same entry point as ``/preview``, with no cluster.

The snapshot is loaded on a worker thread (webhook/sources/loader.py streams it), with its progress in MB read on
stderr when it takes long; ``--snapshot-cache`` starts from the cache next to the file when it is valid and writes
it after the prediction otherwise (webhook/sources/snapshot_cache.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubectl_plugin.inputs import JsonObject
from kubectl_plugin.render import Progress
from kubectl_plugin.sources.document import PreviewAnswer
from webhook.cluster.reader import priority_class_from_dict
from webhook.cluster.release import DEFAULT_RELEASE, KubernetesRelease
from webhook.cluster.snapshot import ClusterState
from webhook.errors import InvalidInput
from webhook.preemption.preview import preview_objects
from webhook.preemption.results import PreemptionArgs
from webhook.sources.loader import collections_paused, load_snapshot
from webhook.sources.snapshot_cache import SnapshotCache
from webhook.version import package_version


@contextlib.contextmanager
def manifest_priority_classes(state: ClusterState, classes: Sequence[JsonObject]) -> Iterator[None]:
    """``classes`` added to the loaded cluster for the prediction, and the snapshot's own put back after it (the
    snapshot cache keeps the snapshot, never the manifests)."""
    added = [priority_class_from_dict(dict(raw)) for raw in classes]
    replaced = {pc.name: state.priority_classes.get(pc.name) for pc in added}
    for pc in added:
        state.upsert(pc)
    try:
        yield
    finally:
        for name, original in replaced.items():
            if original is None:
                state.delete("PriorityClass", name)
            else:
                state.upsert(original)


@dataclass(slots=True)
class SnapshotPreviewSource:
    path: str
    cache: bool = False  # --snapshot-cache
    # PriorityClasses that come with the manifests (a chart's own class): they would be created with the
    # workloads, so the prediction sees them, on top of (or instead of) the snapshot's of the same name.
    priority_classes: Sequence[JsonObject] = ()
    # --kube-version: the release whose preemption the prediction follows.
    release: KubernetesRelease = DEFAULT_RELEASE

    async def preview(self, objects: Sequence[JsonObject], *, namespace: str | None, replicas: int | None,
                      progress: Progress) -> PreviewAnswer:
        if not Path(self.path).is_file():
            raise InvalidInput(f"--snapshot {self.path}: file not found")
        async with progress.running(f"loading {self.path} (MB read)"):
            return await asyncio.to_thread(self._predict, objects, namespace, replicas, progress)

    def _predict(self, objects: Sequence[JsonObject], namespace: str | None, replicas: int | None,
                 progress: Progress) -> PreviewAnswer:
        def loaded(done: int, total: int) -> None:  # drawn by the ticker of ``progress.running``
            progress.done, progress.total = done >> 20, max(1, total >> 20)

        cache = SnapshotCache(self.path, version=package_version()) if self.cache else None
        # Collections would walk the whole fresh cluster again and again while it is built.
        with collections_paused():
            if cache is not None:
                state = cache.load(require_cluster=True, progress=loaded)
            else:
                state = load_snapshot(self.path, require_cluster=True, progress=loaded)
            progress.label, progress.total = f"predicting against {self.path}", 0
            with manifest_priority_classes(state, self.priority_classes):
                preview = preview_objects(state, objects, namespace=namespace, replicas=replicas,
                                          args=PreemptionArgs.for_release(self.release))
            # After the prediction: the capacity orderings it built are kept too.
            written = cache is None or cache.save()
            # The cluster stays until the process ends: frozen, it is never walked by the full collection that the
            # first allocation after this block would otherwise start (0.3 s at 5,000 nodes).
            gc.freeze()
        # A cache that cannot be written costs the next run its speed, not this run its answer.
        if cache is not None and not written and cache.write_error:
            return PreviewAnswer(preview, warnings=[cache.write_error])
        return PreviewAnswer(preview)
