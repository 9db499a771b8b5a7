"""Resource arithmetic (upstream component-helpers resource.PodRequests / PodLimits), written once in
webhook/cluster/resources.py: quantities for ResourceQuota, the same sums converted for Pod.requests."""

from __future__ import annotations

from typing import Any

from webhook.cluster.model import NO_RESOURCES, PodResourceSpec
from webhook.cluster.quantity import format_quantity, int_value, milli_value, parse_quantity
from webhook.cluster.reader import pod_from_dict
from webhook.cluster.reader_resources import pod_resource_spec
from webhook.cluster.resources import (
    add_quantities,
    is_pod_level_resources_set,
    pod_limits,
    pod_requests,
    requests_as_resources,
)

Gi = 2**30
Mi = 2**20


def ctr(name: str, cpu: str | None = None, memory: str | None = None, *, limits: dict[str, Any] | None = None,
        sidecar: bool = False) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    container: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def spec_of(spec: dict[str, Any]) -> PodResourceSpec:
    return pod_resource_spec(spec)


def pod_request_units(spec: dict[str, Any]) -> dict[str, int]:
    """``PodRequests`` in the scheduler's units: millicores for cpu, ``Value()`` for the rest."""
    return {name: milli_value(qty) if name == "cpu" else int_value(qty)
            for name, qty in pod_requests(spec_of(spec)).items()}


def printed(quantities: dict[str, Any]) -> dict[str, str]:
    return {name: format_quantity(qty) for name, qty in quantities.items()}


# ---- effective requests (upstream resource.PodRequests) ---------------------------------------------------

def test_requests_sum_regular_containers() -> None:
    units = pod_request_units({"containers": [ctr("a", "100m", "1Gi"), ctr("b", "1.5", "512Mi")]})
    assert units == {"cpu": 1600, "memory": Gi + 512 * Mi}


def test_init_containers_count_as_a_peak_not_a_sum() -> None:
    spec = {"containers": [ctr("a", "500m", "1Gi")],
            "initContainers": [ctr("migrate", "2", "256Mi"), ctr("warm", "1", "3Gi")]}
    # max(sum of containers, biggest init container) per resource
    assert pod_request_units(spec) == {"cpu": 2000, "memory": 3 * Gi}


def test_sidecar_init_containers_add_to_the_sum_and_to_later_init_peaks() -> None:
    spec = {
        "initContainers": [
            ctr("setup", "1", "100Mi"),                 # before the sidecar: peak 1000m
            ctr("proxy", "200m", "128Mi", sidecar=True),  # sidecar: counts for the whole pod life
            ctr("late-init", "2", "64Mi"),              # after the sidecar: 2000m + 200m
        ],
        "containers": [ctr("app", "300m", "1Gi")],
    }
    units = pod_request_units(spec)
    assert units["cpu"] == 2200
    assert units["memory"] == Gi + 128 * Mi  # sum (app + sidecar) beats every init peak


def test_overhead_is_added_after_the_max() -> None:
    spec = {"containers": [ctr("a", "1", "1Gi")], "initContainers": [ctr("i", "3")],
            "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert pod_request_units(spec) == {"cpu": 3250, "memory": Gi + 120 * Mi}


def test_pod_level_resources_replace_container_aggregate_for_cpu_and_memory() -> None:
    spec = {"containers": [ctr("a", "1", "1Gi", limits={"example.com/fpga": "2"})],
            "resources": {"requests": {"cpu": "4", "memory": "8Gi"}},
            "overhead": {"cpu": "100m"}}
    units = pod_request_units(spec)
    assert units["cpu"] == 4100
    assert units["memory"] == 8 * Gi
    assert units["example.com/fpga"] == 2


def test_limits_default_missing_requests() -> None:
    spec = {"containers": [ctr("a", "250m", limits={"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": 1})]}
    # an explicit request wins over the limit; absent requests take the limit (API defaulting)
    assert pod_request_units(spec) == {"cpu": 250, "memory": 2 * Gi, "nvidia.com/gpu": 1}


def test_quantities_with_json_whitespace_are_accepted() -> None:
    assert pod_request_units({"containers": [ctr("a", " 500m ", "1Gi ")]}) == {"cpu": 500, "memory": Gi}


# ---- upstream examples: sidecars, init peak, overhead, pod-level resources ------------------------------

def test_sidecars_run_beside_every_later_init_container() -> None:
    # KEP-753's example: the app and both sidecars run together (2.8 cores); during init2 only sidecar1
    # runs beside it (1.7): the pod requests the larger.
    spec = {
        "initContainers": [ctr("init1", "1"), ctr("sidecar1", "500m", sidecar=True), ctr("init2", "1200m"),
                           ctr("sidecar2", "300m", sidecar=True)],
        "containers": [ctr("app", "2")],
    }
    assert printed(pod_requests(spec_of(spec))) == {"cpu": "2800m"}
    spec["initContainers"][2] = ctr("init2", "3")
    assert printed(pod_requests(spec_of(spec))) == {"cpu": "3500m"}  # 3 + sidecar1's 500m


def test_a_sidecar_after_the_peak_does_not_raise_it() -> None:
    spec = {"initContainers": [ctr("big", "4", "1Gi"), ctr("proxy", "100m", "64Mi", sidecar=True)],
            "containers": [ctr("app", "1", "128Mi")]}
    assert printed(pod_requests(spec_of(spec))) == {"cpu": "4", "memory": "1Gi"}


def test_overhead_is_added_to_requests_and_only_to_set_limits() -> None:
    spec = {"containers": [ctr("a", "1", limits={"cpu": "2"})], "overhead": {"cpu": "100m", "memory": "10Mi"}}
    resource_spec = spec_of(spec)
    assert printed(pod_requests(resource_spec)) == {"cpu": "1100m", "memory": "10Mi"}
    assert printed(pod_limits(resource_spec)) == {"cpu": "2100m"}


def test_pod_level_resources_replace_cpu_memory_and_hugepages_only() -> None:
    spec = {"containers": [ctr("a", "1", "1Gi", limits={"example.com/fpga": "2", "cpu": "2"})],
            "resources": {"requests": {"cpu": "4", "hugepages-2Mi": "4Mi"}, "limits": {"memory": "8Gi"}}}
    resource_spec = spec_of(spec)
    assert is_pod_level_resources_set(resource_spec)
    assert printed(pod_requests(resource_spec)) == {"cpu": "4", "memory": "1Gi", "example.com/fpga": "2",
                                                    "hugepages-2Mi": "4Mi"}
    # Pod-level limits are set (memory), so they replace the containers' memory limit; cpu stays aggregated.
    assert printed(pod_limits(resource_spec)) == {"example.com/fpga": "2", "cpu": "2", "memory": "8Gi"}
    unsupported = spec_of({"containers": [ctr("a", "1")], "resources": {"requests": {"example.com/fpga": "1"}}})
    assert not is_pod_level_resources_set(unsupported)
    assert printed(pod_requests(unsupported)) == {"cpu": "1"}


def test_sums_keep_the_first_format_and_max_keeps_the_winner() -> None:
    spec = {"containers": [ctr("a", "500m", "1Gi"), ctr("b", "1", "512Mi")],
            "initContainers": [ctr("i", "1", "2000M")]}
    assert printed(pod_requests(spec_of(spec))) == {"cpu": "1500m", "memory": "2G"}
    assert format_quantity(add_quantities(parse_quantity("0"), parse_quantity("1Gi"))) == "1Gi"


# ---- sum, then convert (as kube-scheduler converts PodRequests) ----------------------------------------

def test_requests_are_summed_before_they_are_rounded() -> None:
    # Each container's 0.5m would round up to 1m on its own; the pod requests 1m, not 2m.
    raw = {"kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [ctr("a", "0.5m", "0.5"), ctr("b", "0.5m", "0.5")]}}
    requests = pod_from_dict(raw).requests
    assert (requests.milli_cpu, requests.memory) == (1, 1)
    raw["spec"]["containers"].append(ctr("c", "0.1m", "0.1"))
    requests = pod_from_dict(raw).requests
    assert (requests.milli_cpu, requests.memory) == (2, 2)  # 1.1m and 1.1 bytes round up


def test_requests_as_resources_leaves_out_pods_and_zero_extended_resources() -> None:
    quantities = {name: parse_quantity(text) for name, text in
                  (("cpu", "250m"), ("memory", "1Ki"), ("pods", "3"), ("example.com/a", "0"), ("example.com/b", "2"))}
    resources = requests_as_resources(quantities)
    assert (resources.milli_cpu, resources.memory, resources.pods) == (250, 1024, 0)
    assert dict(resources.scalar) == {"example.com/b": 2}
    assert requests_as_resources(dict(quantities)) is resources  # equal requests are one instance
    assert requests_as_resources({"cpu": parse_quantity("0")}) is NO_RESOURCES
