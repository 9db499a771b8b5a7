"""ImageLocality (pkg/scheduler/framework/plugins/imagelocality/image_locality.go): favours nodes that already hold
the pod's images, by their size scaled by how many nodes hold them (an image on every node favours none), between
23 MB (score 0) and 1,000 MB per image (score 100).

The nodes holding an image come from the index (``StateIndex.image_state``), so only those nodes are touched; every
other node scores 0 (``calculatePriority`` of a sum under the low threshold).
"""

from __future__ import annotations

from webhook.cluster.model import Pod
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.types import MAX_NODE_SCORE, ScoringNodes

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def calculate_priority(sum_scores: int, image_count: int) -> int:
    """``calculatePriority``: the summed scores clamped to [23 MB, 1,000 MB x images], scaled to 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * image_count
    sum_scores = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def scaled_image_score(size: int, num_nodes: int, total_num_nodes: int) -> int:
    """``scaledImageScore``: the image's size times the share of nodes that hold it."""
    return int(size * (num_nodes / total_num_nodes))


class ImageLocality:
    name = NAME

    def score(self, cycle: CycleState, pod: Pod, nodes: ScoringNodes) -> list[int]:
        count = len(nodes.names)
        images = pod.images
        if not images:
            return [0] * count
        index = nodes.view.index
        total = nodes.num_all_nodes
        position = nodes.position()
        sums: dict[int, int] = {}
        for image in images:  # a repeated image counts again, as upstream sums per container
            size, holders = index.image_state(image)
            if not holders:
                continue
            scaled = scaled_image_score(size, len(holders), total)
            for name in holders:
                i = position.get(name)
                if i is not None:
                    sums[i] = sums.get(i, 0) + scaled
        scores = [0] * count
        for i, total_score in sums.items():
            scores[i] = calculate_priority(total_score, len(images))
        return scores
