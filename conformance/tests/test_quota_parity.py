"""Every quota vector through a real kube-apiserver whose ResourceQuota plugin has the vector's
`limitedResources` (an AdmissionConfiguration, as GKE ships one), next to PreemptGuard's /mutate/pods with
the same `quota.limitedResources`: the same decision, and the same message.

One control plane per distinct configuration; quotas get the status the vector gives them through the
status subresource (no quota controller runs), and pods are server-side dry runs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from admission_vectors import load_vectors
from controlplane import ControlPlane, ControlPlaneError, kube_bin_dir, set_quota_status
from test_admission_parity import ensure_namespace, preemptguard_answer, review_request, stage

from webhook.config import parse_config

CASES = load_vectors("quota.yaml")
CONFIGS = sorted({json.dumps(c.get("resource_quota_configuration") or []) for c in CASES})
CHECKED: list[str] = []


def admission_configuration(limited: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
            "plugins": [{"name": "ResourceQuota", "configuration": {
                "apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
                "limitedResources": limited}}]}


@pytest.fixture(scope="module")
def planes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ControlPlane]]:
    """A control plane per configuration, started on first use."""
    started: dict[str, ControlPlane] = {}
    work = tmp_path_factory.mktemp("quota")
    bin_dir = kube_bin_dir()

    class Lazy(dict[str, ControlPlane]):
        def __missing__(self, key: str) -> ControlPlane:
            for plane in started.values():  # one at a time: the machine has two cores
                plane.stop()
            started.clear()
            directory = work / f"plane{len(CHECKED)}-{abs(hash(key))}"
            directory.mkdir()
            config_file = directory / "admission.yaml"
            config_file.write_text(yaml.safe_dump(admission_configuration(json.loads(key))), encoding="utf-8")
            plane = ControlPlane(directory, bin_dir,
                                 extra_apiserver_args=["--admission-control-config-file", str(config_file)])
            try:
                plane.start()
            except ControlPlaneError as exc:
                pytest.fail(str(exc), pytrace=False)
            started[key] = plane
            return plane

        def __getitem__(self, key: str) -> ControlPlane:
            return started[key] if key in started else self.__missing__(key)

    yield Lazy()
    for plane in started.values():
        plane.stop()


def stage_quotas(plane: ControlPlane, namespace: str, quotas: list[dict[str, Any]]) -> None:
    _, listed = plane.request("GET", f"/api/v1/namespaces/{namespace}/resourcequotas")
    for item in listed["items"]:
        plane.request("DELETE", f"/api/v1/namespaces/{namespace}/resourcequotas/{item['metadata']['name']}")
    for quota in quotas:
        body = copy.deepcopy(quota)
        body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
        status_part = body.pop("status", None)
        plane.apply(body)
        if status_part:
            set_quota_status(plane, body, status_part)


def update_existing_pod(plane: ControlPlane, case: dict[str, Any]) -> tuple[int, Any]:
    """Store the old pod (under temporary quotas that cover every limited scope, so the gate lets it in),
    then send the UPDATE as a dry run."""
    namespace = case["namespace"]
    covers = [{"apiVersion": "v1", "kind": "ResourceQuota",
               "metadata": {"name": f"staging-cover-{i}", "namespace": namespace},
               "spec": {"scopeSelector": {"matchExpressions": entry["matchScopes"]}}}
              for i, entry in enumerate(case.get("resource_quota_configuration") or []) if entry.get("matchScopes")]
    stage_quotas(plane, namespace, covers)
    old = copy.deepcopy(case["old_object"])
    old["metadata"] = {k: v for k, v in old["metadata"].items() if k != "resourceVersion"}
    plane.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{old['metadata']['name']}?gracePeriodSeconds=0")
    plane.apply(old)
    stage_quotas(plane, namespace, case.get("existing_resource_quotas") or [])
    path = f"/api/v1/namespaces/{namespace}/pods/{old['metadata']['name']}"
    for _ in range(10):  # the scheduler writes the pending pod's status meanwhile: retry on a stale version
        _, stored = plane.request("GET", path)
        # The stored pod carries the API server's defaults; the vector changes only metadata.
        assert case["object"]["spec"] == case["old_object"]["spec"]
        new = copy.deepcopy(stored)
        new["metadata"]["labels"] = case["object"]["metadata"].get("labels") or {}
        status, body = plane.request("PUT", f"{path}?dryRun=All", new)
        if status != 409:
            break
    return status, body


def preemptguard_decision(case: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    objects = [*case["existing_priority_classes"], *(case.get("existing_resource_quotas") or [])]
    config = parse_config({"quota": {"limitedResources": case.get("resource_quota_configuration") or []}}, "vector")
    request = review_request(case["operation"], copy.deepcopy(case["object"]), copy.deepcopy(case["old_object"]),
                             case["namespace"])
    return preemptguard_answer(request, objects, tmp_path, config)


def in_own_namespace(case: dict[str, Any]) -> dict[str, Any]:
    """The case moved to a namespace of its own on the real server. The ResourceQuota plugin falls back to a live
    lookup while its informer has no quota of the namespace, and keeps that answer for 30 s (resource_access.go,
    liveTTL): in a namespace shared with the previous case, a quota just created could be judged by that case's."""
    moved = copy.deepcopy(case)
    namespace = f"{case['namespace']}-{case['name'].split(' ')[0]}"
    moved["namespace"] = namespace
    for part in (moved.get("object"), moved.get("old_object"), *(moved.get("existing_resource_quotas") or [])):
        if part:
            part.setdefault("metadata", {})["namespace"] = namespace
    return moved


@pytest.mark.parametrize("case", CASES, ids=[c["name"].split(" ")[0] for c in CASES])
def test_quota_vector_matches_the_real_resource_quota_plugin(case: dict[str, Any], planes: dict[str, ControlPlane],
                                                             tmp_path: Path) -> None:
    plane = planes[json.dumps(case.get("resource_quota_configuration") or [])]
    assert stage(plane, case), f"{case['name']}: its classes cannot be stored"
    staged = in_own_namespace(case)
    namespace = staged["namespace"]
    ensure_namespace(plane, namespace)
    stage_quotas(plane, namespace, staged.get("existing_resource_quotas") or [])
    if case["operation"] == "UPDATE":
        status, real = update_existing_pod(plane, staged)
    else:
        status, real = plane.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", staged["object"])
    ours = preemptguard_decision(case, tmp_path)
    real_allowed = status in (200, 201)
    assert real_allowed is case["expect"]["allowed"], (status, real.get("message") if isinstance(real, dict) else real)
    assert ours["allowed"] is real_allowed, (status, real, ours)
    if not real_allowed:
        assert ours["status"]["code"] == real["code"], (real, ours)
        # A plain (non-status) error reaches the client wrapped by the API server; the reason is the plugin's.
        assert ours["status"]["message"] in real["message"], (real, ours)
    CHECKED.append(case["name"])


def test_report_the_counts(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\nquota vectors identical to the real ResourceQuota plugin: {len(CHECKED)}/{len(CASES)} "
              f"({len(CONFIGS)} limitedResources configurations)")
    assert len(CHECKED) == len(CASES)
