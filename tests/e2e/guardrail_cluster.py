"""A small multi-tenant cluster in which one pod must preempt three others.

``node-1`` (4 CPUs) is full: two ``team-b`` payments replicas (tenant blue, priority 5000, under a PDB that
allows no disruption) and one ``team-a2`` pod (tenant red, priority 100). A ``high`` pod asking for 4 CPUs
can only run there by evicting all three: 3 victims, 2 PDB violations, 2 victims of another tenant than
``team-a``'s (red), 2 victims with priority >= 5000.
"""

from __future__ import annotations

from typing import Any

from e2e_support import namespace, node, pdb, pod, priority_class

from webhook.routes import MODE_LABEL


def guardrail_cluster() -> list[dict[str, Any]]:
    return [
        priority_class("low", 100, global_default=True), priority_class("mid", 5000),
        priority_class("high", 1_000_000),
        namespace("team-a", tenant="red"), namespace("team-a2", tenant="red"), namespace("team-b", tenant="blue"),
        namespace("team-a-strict", tenant="red", **{MODE_LABEL: "enforce"}),
        namespace("team-a-relaxed", tenant="red", **{MODE_LABEL: "off"}),
        namespace("team-a-warn", tenant="red", **{MODE_LABEL: "warn"}),
        node("node-1", cpu="4"),
        pod("payments-1", "team-b", cpu="1500m", node_name="node-1", priority_class_name="mid", priority=5000,
            labels={"app": "payments"}, start="2024-05-01T10:00:00Z"),
        pod("payments-2", "team-b", cpu="1500m", node_name="node-1", priority_class_name="mid", priority=5000,
            labels={"app": "payments"}, start="2024-05-01T11:00:00Z"),
        pod("report-1", "team-a2", cpu="1", node_name="node-1", priority_class_name="low", priority=100),
        pdb("payments", "team-b", {"app": "payments"}, allowed=0),
    ]


def preemptor(ns: str = "team-a", name: str = "big-job") -> dict[str, Any]:
    """The pod that must evict everybody on node-1."""
    return pod(name, ns, cpu="4", memory="1Gi", priority_class_name="high")
