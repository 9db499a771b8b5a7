"""The admission chain PreemptGuard runs on its prediction paths (webhook.priority.chain) held against a real
kube-apiserver: every case of tests/vectors/admission_chain.yaml and every LimitRanger case of
tests/vectors/limitranger.yaml is created (a server-side dry run) in a namespace of its own, and the API server's
answer must be PreemptGuard's: the same refusal with the same code and message, or the same stored pod (each
container's requests and limits, the overhead, the nodeSelector, the tolerations).

The ServiceAccount plugin is off (no controller manager creates the default ServiceAccount); every other plugin is
kube-apiserver's default set, in its own order.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, ControlPlaneError, kube_bin_dir, set_quota_status

from webhook.cluster.quantity import parse_quantity
from webhook.cluster.reader import object_from_dict, pod_from_dict
from webhook.cluster.snapshot import ClusterState
from webhook.priority.chain import Admitted, Refused, admit_pods

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors"
CHAIN = yaml.safe_load((VECTORS / "admission_chain.yaml").read_text())
LIMIT_RANGER = [c for c in yaml.safe_load((VECTORS / "limitranger.yaml").read_text()) if "pod" in c and "allowed"
                in c["expect"]]
CHECKED: dict[str, int] = {"admission_chain.yaml": 0, "limitranger.yaml": 0}
DIFFERS_FROM_UNIT_TEST: list[str] = []


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        started = ControlPlane(tmp_path_factory.mktemp("chain"), kube_bin_dir(),
                               extra_apiserver_args=["--disable-admission-plugins=ServiceAccount"]).start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield started
    started.stop()


def renamed(value: Any, names: dict[str, str]) -> Any:
    """The case with its namespaces renamed (each case gets fresh ones: LimitRanger keeps a namespace's lookup
    for 30 s when its informer holds none, so a namespace reused by the next case could be judged by the last)."""
    text = json.dumps(value)
    for old, new in names.items():
        text = text.replace(f'"{old}"', f'"{new}"').replace(f'\\"{old}\\"', f'\\"{new}\\"')
    return json.loads(text)


def reset_runtime_classes(plane: ControlPlane) -> None:
    _, listed = plane.request("GET", "/apis/node.k8s.io/v1/runtimeclasses")
    for item in listed["items"]:
        plane.request("DELETE", f"/apis/node.k8s.io/v1/runtimeclasses/{item['metadata']['name']}")


def create(plane: ControlPlane, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        body = copy.deepcopy(obj)
        status = body.pop("status", None)
        plane.apply(body)
        if status and body["kind"] == "ResourceQuota":
            set_quota_status(plane, body, status)


def real_answer(plane: ControlPlane, objects: list[dict[str, Any]], pod: dict[str, Any]) -> tuple[int, Any]:
    reset_runtime_classes(plane)
    create(plane, objects)
    namespace = pod["metadata"]["namespace"]
    return plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod, query={"dryRun": "All"})


def ours(objects: list[dict[str, Any]], pod: dict[str, Any]) -> Admitted | Refused:
    state = ClusterState()
    for raw in objects:
        obj = object_from_dict(raw)
        assert obj is not None
        state.upsert(obj)
    [entry] = admit_pods(state, [pod_from_dict(pod)])
    return entry


def canonical(quantities: dict[str, Any] | None) -> dict[str, str]:
    return {name: str(parse_quantity(value)) for name, value in (quantities or {}).items()}


def fields_of_real(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    return {
        "containers": [{"requests": canonical((c.get("resources") or {}).get("requests")),
                        "limits": canonical((c.get("resources") or {}).get("limits"))} for c in spec["containers"]],
        "overhead": canonical(spec.get("overhead")),
        "nodeSelector": spec.get("nodeSelector") or {},
        "tolerations": [{k: v for k, v in t.items() if k != "tolerationSeconds"}
                        for t in spec.get("tolerations") or []],
    }


def fields_of_ours(entry: Admitted) -> dict[str, Any]:
    pod = entry.pod
    resources = pod.quota.resources
    return {
        "containers": [{"requests": {k: str(v) for k, v in c.requests.items()},
                        "limits": {k: str(v) for k, v in c.limits.items()}} for c in resources.containers],
        "overhead": {k: str(v) for k, v in resources.overhead.items()},
        "nodeSelector": dict(pod.node_selector),
        "tolerations": [{k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                           ("effect", t.effect)) if v} for t in pod.tolerations],
    }


def assert_same(real: tuple[int, Any], entry: Admitted | Refused, names: dict[str, str]) -> bool:
    """The real answer and PreemptGuard's agree; returns whether the pod was allowed."""
    status, body = real
    if status in (200, 201):
        assert isinstance(entry, Admitted), (entry, body)
        assert fields_of_ours(entry) == fields_of_real(body), body["spec"]
        return True
    assert isinstance(entry, Refused), (status, body)
    assert body["code"] == status
    assert renamed(entry.message, names) == body["message"], (entry.message, body["message"])
    return False


@pytest.mark.parametrize("case", CHAIN, ids=[c["name"] for c in CHAIN])
def test_admission_chain_case(case: dict[str, Any], plane: ControlPlane) -> None:
    index = CHAIN.index(case)
    names = {"team-a": f"chain-{index}", "nowhere": f"nowhere-{index}"}
    objects, pod = renamed(case["objects"], names), renamed(case["pod"], names)
    real = real_answer(plane, objects, pod)
    expect = case["expect"]
    allowed = assert_same(real, ours(case["objects"], case["pod"]), names)
    assert allowed == expect["allowed"]
    if not allowed:
        assert (real[0], real[1]["message"]) == (expect["code"], renamed(expect["message"], names))
    CHECKED["admission_chain.yaml"] += 1


@pytest.mark.parametrize("case", LIMIT_RANGER, ids=[c["name"] for c in LIMIT_RANGER])
def test_limit_ranger_case(case: dict[str, Any], plane: ControlPlane) -> None:
    """Upstream's unit test builds objects the API server would store otherwise (a LimitRange's defaults from its
    max, a request from a limit), so the real answer may differ from its expectation: PreemptGuard's chain must
    give the real one."""
    index = LIMIT_RANGER.index(case)
    # Upstream's testPod is no valid name for a real server (upper case): the same pod, named in lower case.
    names = {"test": f"limitranger-{index}", "testPod": "testpod"}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "test"}}
    limit_range = {"apiVersion": "v1", "kind": "LimitRange", **case["limit_range"]}
    pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(case["pod"])}
    for i, init in enumerate(pod["spec"].get("initContainers") or []):
        init["name"] = f"init-{i}"  # upstream's validPodInit reuses the app containers' names, which validation refuses
    objects = [namespace, limit_range]
    real = real_answer(plane, renamed(objects, names), renamed(pod, names))
    allowed = assert_same(real, ours(objects, pod), names)
    if allowed != case["expect"]["allowed"]:
        DIFFERS_FROM_UNIT_TEST.append(case["name"])
    CHECKED["limitranger.yaml"] += 1


def test_report_the_counts(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\nadmission chain identical to the real kube-apiserver: {CHECKED['admission_chain.yaml']}/{len(CHAIN)}"
              f" chain cases, {CHECKED['limitranger.yaml']}/{len(LIMIT_RANGER)} LimitRanger cases"
              f" ({len(DIFFERS_FROM_UNIT_TEST)} decided otherwise than upstream's unit test, which builds objects"
              f" the API server stores defaulted: {', '.join(DIFFERS_FROM_UNIT_TEST) or 'none'})")
    assert {"admission_chain.yaml": len(CHAIN), "limitranger.yaml": len(LIMIT_RANGER)} == CHECKED
