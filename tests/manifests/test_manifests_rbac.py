"""The RBAC objects grant exactly what webhook/rbac.py declares (tests/certs checks the code's calls against it)."""

from __future__ import annotations

from typing import Any

import pytest
from manifest_build import KUSTOMIZATIONS, OVERLAYS, build, find, find_all, pod_specs, with_components
from serve_args import parse_serve_args

from webhook.rbac import (
    CERTS_CLUSTER_PERMISSIONS,
    CERTS_NAMESPACED_PERMISSIONS,
    EVENTS_PERMISSIONS,
    EXPOSURE_REPORTS_PERMISSIONS,
    LEADER_ELECTION_PERMISSIONS,
    REQUIRED_PERMISSIONS,
    Permission,
)
from webhook.sources.informer import RESOURCE_KINDS

Grant = tuple[str, str, str, str]  # api group, resource, verb, resource name ("" = any)


def granted(role: dict[str, Any]) -> set[Grant]:
    grants: set[Grant] = set()
    for rule in role.get("rules") or ():
        assert not rule.get("nonResourceURLs"), role["metadata"]["name"]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        grants.add((group, resource, verb, name))
    return grants


def declared(permissions: tuple[Permission, ...]) -> set[Grant]:
    return {(p.api_group, p.resource, verb, name)
            for p in permissions for verb in p.verbs for name in (p.resource_names or {""})}


def test_server_cluster_role_grants_exactly_the_declared_permissions(kustomization: str) -> None:
    role = find(build(kustomization), "ClusterRole", "preemptguard")
    assert granted(role) == declared(REQUIRED_PERMISSIONS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_events_component_turns_on_events_whose_permission_the_base_grants(overlay: str) -> None:
    """--events needs nothing the server's ClusterRole does not grant already (the preemption Events need
    the same ``create events``)."""
    assert declared(EVENTS_PERMISSIONS) <= declared(REQUIRED_PERMISSIONS)
    with_events = with_components(overlay, "components/events")
    role = find(with_events, "ClusterRole", "preemptguard")
    assert granted(role) == declared(REQUIRED_PERMISSIONS)
    args, _ = parse_serve_args(pod_specs(with_events)["Deployment/preemptguard"]["containers"][0]["args"])
    assert args.events is True
    args, _ = parse_serve_args(pod_specs(build(overlay))["Deployment/preemptguard"]["containers"][0]["args"])
    assert args.events is False


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_lease_role_grants_exactly_leader_election_in_the_server_s_namespace(kustomization: str) -> None:
    objects = build(kustomization)
    role = find(objects, "Role", "preemptguard-leader-election")
    assert role["metadata"]["namespace"] == find(objects, "Deployment", "preemptguard")["metadata"]["namespace"]
    assert granted(role) == declared(LEADER_ELECTION_PERMISSIONS)
    binding = find(objects, "RoleBinding", "preemptguard-leader-election")
    assert binding["roleRef"]["name"] == "preemptguard-leader-election"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "preemptguard", "namespace": "preemptguard"}]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_exposure_reports_component_adds_the_crd_the_write_permissions_and_read_for_viewers(overlay: str) -> None:
    objects = with_components(overlay, "components/exposure-reports")
    assert granted(find(objects, "ClusterRole", "preemptguard")) == declared(
        REQUIRED_PERMISSIONS + EXPOSURE_REPORTS_PERMISSIONS)
    args, _ = parse_serve_args(pod_specs(objects)["Deployment/preemptguard"]["containers"][0]["args"])
    assert args.exposure_reports is True
    args, _ = parse_serve_args(pod_specs(build(overlay))["Deployment/preemptguard"]["containers"][0]["args"])
    assert args.exposure_reports is False
    crd = find(objects, "CustomResourceDefinition", "policyreports.wgpolicyk8s.io")
    assert {v["name"] for v in crd["spec"]["versions"] if v["served"]} >= {"v1alpha2"}
    view = find(objects, "ClusterRole", "preemptguard-policyreports-view")
    assert view["metadata"]["labels"] == {"rbac.authorization.k8s.io/aggregate-to-view": "true",
                                          "app.kubernetes.io/name": "preemptguard",
                                          "app.kubernetes.io/part-of": "preemptguard"}
    assert granted(view) == {("wgpolicyk8s.io", "policyreports", verb, "") for verb in ("get", "list", "watch")}


def test_declared_list_watch_is_what_the_informers_watch() -> None:
    """The informers' kinds (webhook/sources/informer.py) are exactly the declared list+watch permissions."""
    watched = set()
    for kind in RESOURCE_KINDS:
        parts = kind.list_path.strip("/").split("/")
        group = "" if parts[0] == "api" else parts[1]
        watched.add((group, parts[-1]))
    declared_watch = {(p.api_group, p.resource) for p in REQUIRED_PERMISSIONS if {"list", "watch"} <= p.verbs}
    assert watched == declared_watch


def test_certs_job_roles_grant_exactly_the_declared_permissions() -> None:
    objects = build("overlays/self-signed")
    assert granted(find(objects, "Role", "preemptguard-certs")) == declared(CERTS_NAMESPACED_PERMISSIONS)
    cluster_role = find(objects, "ClusterRole", "preemptguard-certs")
    assert granted(cluster_role) == declared(CERTS_CLUSTER_PERMISSIONS)
    # caBundle may be patched on PreemptGuard's own configurations only.
    assert all(name for _, _, _, name in granted(cluster_role))


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_no_other_roles_and_no_wildcards(kustomization: str) -> None:
    objects = build(kustomization)
    roles = {f"{o['kind']}/{o['metadata']['name']}" for o in objects if o["kind"] in ("Role", "ClusterRole")}
    expected = {"ClusterRole/preemptguard", "Role/preemptguard-leader-election"}
    if kustomization in ("overlays/self-signed", "overlays/client-ca"):  # the certificate job's roles
        expected |= {"Role/preemptguard-certs", "ClusterRole/preemptguard-certs"}
    assert roles == expected
    for obj in objects:
        if obj["kind"] in ("Role", "ClusterRole"):
            assert all("*" not in grant for grant in granted(obj)), obj["metadata"]["name"]


def test_bindings_tie_each_role_to_its_own_service_account() -> None:
    objects = build("overlays/self-signed")
    expectations = {
        ("ClusterRoleBinding", "preemptguard"): ("ClusterRole", "preemptguard", "preemptguard"),
        ("RoleBinding", "preemptguard-leader-election"): ("Role", "preemptguard-leader-election", "preemptguard"),
        ("ClusterRoleBinding", "preemptguard-certs"): ("ClusterRole", "preemptguard-certs", "preemptguard-certs"),
        ("RoleBinding", "preemptguard-certs"): ("Role", "preemptguard-certs", "preemptguard-certs"),
    }
    bindings = find_all(objects, "ClusterRoleBinding") + find_all(objects, "RoleBinding")
    assert {(b["kind"], b["metadata"]["name"]) for b in bindings} == set(expectations)
    for binding in bindings:
        role_kind, role_name, account = expectations[(binding["kind"], binding["metadata"]["name"])]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "preemptguard"}]
        find(objects, "ServiceAccount", account)


def test_workloads_run_as_the_right_service_account() -> None:
    specs = pod_specs(build("overlays/self-signed"))
    assert {key: spec["serviceAccountName"] for key, spec in specs.items()} == {
        "Deployment/preemptguard": "preemptguard",
        "Job/preemptguard-certs": "preemptguard-certs",
        "CronJob/preemptguard-certs-renew": "preemptguard-certs",
    }
