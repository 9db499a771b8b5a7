"""Typed objects from the admission-chain vectors (tests/vectors/limitranger.yaml, runtimeclass.yaml), built as the
upstream unit tests build them: no API defaulting (a LimitRange's defaults from its max, a request from a limit),
which the API server applies before admission and PreemptGuard's reader applies with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from webhook.cluster.model import (
    EMPTY_QUANTITIES,
    ContainerResources,
    FrozenMap,
    LimitRange,
    LimitRangeItem,
    PodResourceSpec,
)
from webhook.cluster.reader_resources import quantity_map

VECTORS_DIR = Path(__file__).parents[1] / "vectors"


def load(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = yaml.safe_load((VECTORS_DIR / name).read_text())
    return cases


def quantities(raw: dict[str, Any] | None) -> FrozenMap:
    return FrozenMap(quantity_map(raw or {}, "vector"))


def undefaulted_limit_range(raw: dict[str, Any]) -> LimitRange:
    items = tuple(LimitRangeItem(type=item["type"], max=quantities(item.get("max")), min=quantities(item.get("min")),
                                 default=quantities(item.get("default")),
                                 default_request=quantities(item.get("defaultRequest")),
                                 max_limit_request_ratio=quantities(item.get("maxLimitRequestRatio")))
                  for item in raw["spec"]["limits"])
    return LimitRange(raw["metadata"]["name"], raw["metadata"]["namespace"], items)


def _container(raw: dict[str, Any]) -> ContainerResources:
    resources = raw.get("resources") or {}
    return ContainerResources(raw["name"], quantities(resources.get("requests")), quantities(resources.get("limits")),
                              raw.get("restartPolicy") == "Always")


def undefaulted_resources(pod: dict[str, Any]) -> PodResourceSpec:
    spec = pod["spec"]
    pod_level = spec.get("resources") or {}
    return PodResourceSpec(
        containers=tuple(_container(c) for c in spec.get("containers") or []),
        init_containers=tuple(_container(c) for c in spec.get("initContainers") or []),
        pod_requests=quantities(pod_level.get("requests")),
        pod_limits=quantities(pod_level.get("limits")),
        overhead=quantities(spec["overhead"]) if spec.get("overhead") else EMPTY_QUANTITIES,
    )
