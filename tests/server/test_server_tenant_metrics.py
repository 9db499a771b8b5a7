"""The tenant metrics (webhook.server.tenant_metrics): bounded label values, an overflowed namespace's exposure
added into one shared series and taken back out, everything cleared when a replica stops leading."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from webhook.exposure import NamespaceExposure, PreemptingClass, PriorityBand
from webhook.observe.attribution import Preemption, Preemptor
from webhook.server.tenant_metrics import OVERFLOW, TenantMetrics


def exposure(namespace: str, pods: int) -> NamespaceExposure:
    band = PriorityBand(10, ("low",), pods, 0, (PreemptingClass("high", 1000, 1, True),))
    return NamespaceExposure(namespace, (band,), ())


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels.values()): s.value for m in registry.collect() if m.name == name for s in m.samples
            if not s.name.endswith("_created")}


def test_namespaces_and_classes_beyond_the_bound_share_one_series() -> None:
    registry = CollectorRegistry()
    metrics = TenantMetrics(registry, max_namespaces=2, max_classes=1)
    for namespace, preemptor_class in (("a", "high"), ("b", "vip"), ("c", "high"), ("a", "high")):
        preemptor = Preemptor("x", "web", "u2", 1000, preemptor_class)
        for _ in range(2):
            metrics.record_preemption(Preemption(namespace, "p", "u", "n1", 10, "low", preemptor))
    counted = samples(registry, "preemptguard_preemptions")
    assert counted == {("a", "high"): 4.0, ("b", OVERFLOW): 2.0, (OVERFLOW, "high"): 2.0}
    for namespace, pods in (("a", 1), ("b", 2), ("c", 3), ("d", 4)):
        metrics.set_exposure(exposure(namespace, pods))
    assert samples(registry, "preemptguard_exposure_running_pods") == {("a",): 1, ("b",): 2, (OVERFLOW,): 7}
    metrics.set_exposure(exposure("d", 1))  # replaces d's share
    metrics.forget_exposure("c")
    metrics.forget_exposure("a")
    assert samples(registry, "preemptguard_exposure_running_pods") == {("b",): 2, (OVERFLOW,): 1}
    metrics.clear_exposure()
    assert samples(registry, "preemptguard_exposure_running_pods") == {}
