"""The storage plugins against upstream's unit-test tables (tests/vectors/volumes.yaml): one plugin's PreFilter, then
its Filter on each listed node, through the plugin modules."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.preemption.deadline import Deadline
from webhook.preemption.framework.cycle_state import CycleState
from webhook.preemption.framework.status import SKIP, SUCCESS
from webhook.preemption.plugins.nodevolumelimits import NodeVolumeLimits
from webhook.preemption.plugins.volumebinding import VolumeBinding
from webhook.preemption.plugins.volumerestrictions import VolumeRestrictions
from webhook.preemption.plugins.volumezone import VolumeZone

from .storage_vectors import case_view, expand_csi_case, expected_status
from .vector_adapter import load_vectors

VECTORS = load_vectors("volumes.yaml")
PLUGINS: dict[str, Any] = {"VolumeZone": VolumeZone(), "VolumeRestrictions": VolumeRestrictions(),
                           "NodeVolumeLimits": NodeVolumeLimits(), "VolumeBinding": VolumeBinding()}


def _code(status: Any) -> Any:
    return status.code if status.code in (SKIP, SUCCESS) else status


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_storage_plugin_vector(case: dict[str, Any]) -> None:
    assert VECTORS["files"][case["plugin"]] and case["source"]["test"].startswith("Test")
    plugin = PLUGINS[case["plugin"]]
    view, pod = case_view(expand_csi_case(case, VECTORS), VECTORS.get("fixtures") or {})
    cycle = CycleState()
    pre = plugin.pre_filter(cycle, pod, view, Deadline())
    assert _code(pre) == expected_status(case["expect"]["pre_filter"])
    for node, want in (case["expect"].get("filter") or {}).items():
        assert _code(plugin.filter(cycle, pod, view.node_info(node))) == expected_status(want), node


def test_every_vector_names_its_upstream_test() -> None:
    names = [c["name"] for c in VECTORS["cases"]]
    assert len(names) == len(set(names))
    assert {c["plugin"] for c in VECTORS["cases"]} <= set(PLUGINS)
