"""Every kustomization builds with the real kubectl, and every object validates offline against its schema."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from cert_manager_schema import SCHEMAS as CERT_MANAGER_SCHEMAS
from manifest_build import COMPONENTS, KUSTOMIZATIONS, MANIFESTS, build, find, kubectl_path, with_components
from monitoring_schema import SCHEMAS as MONITORING_SCHEMAS

# The oldest Kubernetes the manifests support (ValidatingAdmissionPolicy and matchConditions are GA in
# admissionregistration.k8s.io/v1 from 1.30) and the newest schema the package ships.
SCHEMA_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
CUSTOM_SCHEMAS = {**CERT_MANAGER_SCHEMAS, **MONITORING_SCHEMAS}


def validate(obj: dict[str, Any], version: str) -> None:
    key = (obj["apiVersion"], obj["kind"])
    if key in CUSTOM_SCHEMAS:
        jsonschema.validate(obj, CUSTOM_SCHEMAS[key])
        return
    kubernetes_validate.validate(obj, version, strict=True)


def validate_all(objects: list[dict[str, Any]], version: str, what: str) -> None:
    assert objects, f"{what} built nothing"
    for obj in objects:
        try:
            validate(obj, version)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
            pytest.fail(f"{what}: {obj['kind']}/{obj['metadata']['name']} invalid for Kubernetes {version}: {exc}")
        except kubernetes_validate.SchemaNotFoundError:
            pytest.fail(f"{what}: no schema for {obj['apiVersion']} {obj['kind']}")


def test_kubectl_is_the_real_binary() -> None:
    result = subprocess.run([kubectl_path(), "version", "--client", "-o", "yaml"], capture_output=True, text=True,
                            timeout=60, check=True)
    assert "kustomizeVersion" in result.stdout


def test_every_kustomization_is_tested() -> None:
    found = {str(path.parent.relative_to(MANIFESTS)) for path in MANIFESTS.rglob("kustomization.yaml")}
    # transformers/ holds transformer configurations that the kustomizations list, nothing to apply
    assert found == set(KUSTOMIZATIONS) | set(COMPONENTS) | {"transformers/cluster-scoped"}


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_object_validates(kustomization: str, version: str) -> None:
    validate_all(build(kustomization), version, kustomization)


@pytest.mark.parametrize("overlay", ["overlays/self-signed", "overlays/cert-manager"])
@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_component_validates_on_each_certificate_overlay(overlay: str, version: str) -> None:
    validate_all(with_components(overlay, *COMPONENTS), version, f"{overlay} + {', '.join(COMPONENTS)}")


def test_objects_per_kustomization() -> None:
    kinds = {k: sorted(f"{o['kind']}/{o['metadata']['name']}" for o in build(k)) for k in KUSTOMIZATIONS}
    base = set(kinds["base"])
    assert set(kinds["overlays/self-signed"]) - base == {
        "ServiceAccount/preemptguard-certs", "Role/preemptguard-certs", "RoleBinding/preemptguard-certs",
        "ClusterRole/preemptguard-certs", "ClusterRoleBinding/preemptguard-certs", "Job/preemptguard-certs",
        "CronJob/preemptguard-certs-renew"}
    assert set(kinds["overlays/cert-manager"]) - base == {
        "Issuer/preemptguard-selfsigned", "Certificate/preemptguard-ca", "Issuer/preemptguard-ca",
        "Certificate/preemptguard-tls"}
    assert set(kinds["overlays/client-ca"]) == set(kinds["overlays/self-signed"])  # it patches, adds nothing
    assert base == {
        "Namespace/preemptguard", "ServiceAccount/preemptguard", "ClusterRole/preemptguard",
        "ClusterRoleBinding/preemptguard", "Role/preemptguard-leader-election",
        "RoleBinding/preemptguard-leader-election", "PriorityClass/preemptguard-critical",
        "ConfigMap/preemptguard-config",
        "Deployment/preemptguard", "PodDisruptionBudget/preemptguard", "Service/preemptguard",
        "MutatingWebhookConfiguration/preemptguard.io", "ValidatingWebhookConfiguration/preemptguard.io",
        "NetworkPolicy/preemptguard", "ValidatingAdmissionPolicy/preemptguard-namespace-labels",
        "ValidatingAdmissionPolicyBinding/preemptguard-namespace-labels",
        "ValidatingAdmissionPolicy/preemptguard-tenant-label",
        "ValidatingAdmissionPolicyBinding/preemptguard-tenant-label"}
    monitored = {f"{o['kind']}/{o['metadata']['name']}" for o in with_components("overlays/self-signed",
                                                                                   "components/monitoring")}
    assert monitored - set(kinds["overlays/self-signed"]) == {
        "ServiceMonitor/preemptguard", "PrometheusRule/preemptguard", "ConfigMap/preemptguard-dashboard"}
    reports = {f"{o['kind']}/{o['metadata']['name']}" for o in with_components("overlays/self-signed",
                                                                                 "components/exposure-reports")}
    assert reports - set(kinds["overlays/self-signed"]) == {
        "CustomResourceDefinition/policyreports.wgpolicyk8s.io", "ClusterRole/preemptguard-policyreports-view"}


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                  "CustomResourceDefinition"}


def test_namespaced_objects_live_in_preemptguard(kustomization: str) -> None:
    cluster_scoped = CLUSTER_SCOPED
    for obj in build(kustomization) + with_components("overlays/cert-manager", *COMPONENTS):
        namespace = obj["metadata"].get("namespace")
        assert namespace == (None if obj["kind"] in cluster_scoped else "preemptguard"), obj["metadata"]


def test_the_validators_reject_broken_objects() -> None:
    """Guards the test above against a validator that accepts anything."""
    deployment = copy.deepcopy(find(build("base"), "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["sheme"] = "HTTPS"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment, SCHEMA_VERSIONS[-1])
    certificate = copy.deepcopy(find(build("overlays/cert-manager"), "Certificate", "preemptguard-tls"))
    del certificate["spec"]["issuerRef"]
    with pytest.raises(jsonschema.ValidationError):
        validate(certificate, SCHEMA_VERSIONS[-1])
    issuer = copy.deepcopy(find(build("overlays/cert-manager"), "Issuer", "preemptguard-ca"))
    issuer["spec"]["selfSigned"] = {}
    with pytest.raises(jsonschema.ValidationError):
        validate(issuer, SCHEMA_VERSIONS[-1])


def test_policy_config_map_loads_with_the_server_config_loader(tmp_path: Path) -> None:
    from webhook.config import load_config

    config_map = find(build("base"), "ConfigMap", "preemptguard-config")
    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    config = load_config(path)
    assert config.guardrails.mode == "warn"
    assert "preemptguard" in config.guardrails.exempt.namespaces
