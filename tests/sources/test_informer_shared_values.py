"""The slim model shares equal immutable values between objects (memory of a large informer cache)."""

from __future__ import annotations

import pytest
from fake_apiserver import pod

from webhook.cluster import sharing
from webhook.cluster.quantity import quantity_milli_value, quantity_value
from webhook.cluster.reader import pod_from_dict


def test_equal_labels_requests_and_tolerations_are_one_instance() -> None:
    first, second = pod("a", labels={"app": "web", "tier": "fe"}), pod("b", labels={"tier": "fe", "app": "web"})
    for raw in (first, second):
        raw["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                       "tolerationSeconds": 300}]
    a, b = pod_from_dict(first), pod_from_dict(second)
    assert a.labels is b.labels and a.requests is b.requests and a.tolerations is b.tolerations
    assert dict(a.labels) == {"app": "web", "tier": "fe"}
    assert a.requests.milli_cpu == 100 and a.requests.memory == 128 * 1024 * 1024
    other = pod_from_dict(pod("c", cpu="200m", labels={"app": "web"}))
    assert other.labels is not a.labels and other.requests.milli_cpu == 200


def test_shared_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharing, "SHARED_VALUES", sharing.BoundedCache(8))
    pods = [pod_from_dict(pod(f"p{i}", labels={"n": str(i)})) for i in range(50)]
    assert len(sharing.SHARED_VALUES) <= 8
    assert [p.labels["n"] for p in pods] == [str(i) for i in range(50)]


@pytest.mark.parametrize("text", ["100m", "1", "0.5", "1.5Gi", "2e3", "129e6", " 64Mi ", "1k", "7n"])
def test_cached_quantities_equal_exact_parsing(text: str) -> None:
    raw = pod("q", cpu=text, memory=text)
    requests = pod_from_dict(raw).requests
    assert requests.milli_cpu == quantity_milli_value(text.strip())
    assert requests.memory == quantity_value(text.strip())
    assert pod_from_dict(raw).requests == requests  # second read hits the cache
