"""The Helm chart with the real helm (built by conformance/build): lint, the checks every rendering must pass,
the values schema, the same objects as the kustomize manifests, and a server-side dry run on a real API server."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from checks import check_all
from controlplane import ControlPlane
from helm_tool import CHART, NAMESPACE, RELEASE, bin_dir, helm, pinned_version, template
from manifest_build import build, with_components

from webhook.certs.issuance import generate_ca
from webhook.config import Config, load_config
from webhook.config.parse import tenant_labels_in

CA_PEM = generate_ca("admission-client-ca", 1)[0].decode()
MONITORING = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
              "grafanaDashboard": {"enabled": True}}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "selfSigned": {"certificates": {"mode": "selfSigned"}},
    "certManager": {"certificates": {"mode": "certManager"}},
    "certManager-own-issuer": {"certificates": {"mode": "certManager", "certManager": {
        "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}}}},
    "everything-on": {"clientAuth": {"enabled": True, "caBundle": CA_PEM}, "observe": {"events": True},
                      "image": {"digest": "sha256:" + "0" * 64}, "extraArgs": ["--log-level=debug"], **MONITORING},
}


def test_helm_is_the_pinned_release(tmp_path: Path) -> None:
    run = helm("version", "--template", "{{ .Version }}", tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == pinned_version()


@pytest.mark.parametrize("name", VALUE_SETS)
def test_helm_lint(name: str, tmp_path: Path) -> None:
    run = helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, values=VALUE_SETS[name], tmp=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 chart(s) failed" in run.stdout


@pytest.mark.parametrize("name", VALUE_SETS)
def test_rendered_objects_pass_the_manifest_checks(name: str, tmp_path: Path) -> None:
    check_all(template(tmp_path, VALUE_SETS[name]), f"helm template ({name})")


@pytest.mark.parametrize(("values", "message"), [
    ({"replicaCount": "three"}, "at '/replicaCount': got string, want integer"),
    ({"replicas": 3}, "additional properties 'replicas' not allowed"),
    ({"certificates": {"mode": "vault"}}, "at '/certificates/mode': value must be one of 'selfSigned', 'certManager'"),
])
def test_schema_refuses_bad_values_with_a_clear_message(values: dict[str, Any], message: str, tmp_path: Path) -> None:
    run = helm("template", RELEASE, str(CHART), values=values, tmp=tmp_path)
    assert run.returncode != 0
    assert "values don't meet the specifications of the schema" in run.stderr and message in run.stderr, run.stderr


def test_client_auth_without_a_ca_is_refused(tmp_path: Path) -> None:
    run = helm("template", RELEASE, str(CHART), values={"clientAuth": {"enabled": True}}, tmp=tmp_path)
    assert run.returncode != 0 and "clientAuth.caBundle" in run.stderr


def test_the_chart_protects_the_configured_tenant_label(tmp_path: Path) -> None:
    """The tenant-label policy's parameter is the chart's own config ConfigMap, whose config.yaml the server reads
    and in which the policy finds config.guardrails.tenantLabel (as the server checks at load)."""
    objects = template(tmp_path, {"config": {"guardrails": {"tenantLabel": "example.com/tenant"}}})
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    binding = next(o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
                   and o["metadata"]["name"].endswith("-tenant-label"))
    ref = binding["spec"]["paramRef"]
    config_map = by_kind[("ConfigMap", ref["name"])]
    assert config_map["metadata"]["namespace"] == ref["namespace"] == NAMESPACE
    assert tenant_labels_in(config_map["data"]["config.yaml"]) == ["example.com/tenant"]
    assert load_config_text(config_map["data"]["config.yaml"], tmp_path).guardrails.tenant_label == "example.com/tenant"


def load_config_text(text: str, tmp: Path) -> Config:
    path = tmp / "config.yaml"
    path.write_text(text)
    return load_config(path)


HELM_ONLY_LABELS = {"app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by",
                    "helm.sh/chart"}


def _strip(node: Any, in_template: bool = False) -> Any:
    """Drop what only Helm adds (its standard labels, the instance in selectors)."""
    if isinstance(node, list):
        return [_strip(item, in_template) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in HELM_ONLY_LABELS:
            continue
        if key == "labels" and in_template and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "app.kubernetes.io/part-of"}
        out[key] = _strip(value, in_template or key == "template")
    return out


def normalize(obj: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    obj = copy.deepcopy(obj)
    name = obj["metadata"]["name"]
    if obj["kind"] == "Job":
        name = re.sub(r"-[0-9]+$", "", name)  # the chart makes one Job per release revision
        obj["metadata"]["name"] = name
    if obj["kind"] == "ConfigMap":  # compare documents, not their formatting
        obj["data"] = {k: json.loads(v) if k.endswith(".json") else yaml.safe_load(v) for k, v in obj["data"].items()}
    return f"{obj['kind']}/{name}", _strip(obj)


PAIRS = {
    "self-signed": (lambda: build("overlays/self-signed"), {}),
    "cert-manager": (lambda: build("overlays/cert-manager"), {"certificates": {"mode": "certManager"}}),
    "client-ca": (lambda: build("overlays/client-ca"),
                  {"clientAuth": {"enabled": True, "existingConfigMap": "preemptguard-client-ca"}}),
    "monitoring": (lambda: with_components("overlays/self-signed", "components/monitoring"), MONITORING),
    "events": (lambda: with_components("overlays/self-signed", "components/events"), {"observe": {"events": True}}),
}


@pytest.mark.parametrize("pair", PAIRS)
def test_helm_renders_what_kustomize_renders(pair: str, tmp_path: Path) -> None:
    kustomized, values = PAIRS[pair]
    # the Namespace is the one object only kustomize makes: Helm installs into `--namespace --create-namespace`
    expected = dict(normalize(o) for o in kustomized() if o["kind"] != "Namespace")
    rendered = dict(normalize(o) for o in template(tmp_path, values))
    assert sorted(rendered) == sorted(expected)
    for key in expected:
        assert rendered[key] == expected[key], key


def kubectl(plane: ControlPlane, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir() / "kubectl"), "--kubeconfig", str(plane.kubeconfig()), *args],
                          input=stdin, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("name", ["defaults", "clientAuth"])
def test_real_api_server_accepts_helm_template_dry_run(name: str, control_plane: ControlPlane, tmp_path: Path) -> None:
    values = {"clientAuth": {"enabled": True, "caBundle": CA_PEM}} if name == "clientAuth" else {}
    kubectl(control_plane, "create", "namespace", NAMESPACE)  # what `helm install --create-namespace` does
    run = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, values=values, tmp=tmp_path)
    assert run.returncode == 0, run.stderr
    applied = kubectl(control_plane, "apply", "--dry-run=server", "-f", "-", stdin=run.stdout)
    assert applied.returncode == 0, applied.stderr
    objects = [d for d in yaml.safe_load_all(run.stdout) if d]
    for obj in objects:
        assert f"{obj['kind'].lower()}" in applied.stdout.lower(), applied.stdout
    assert applied.stdout.count("(server dry run)") == len(objects), applied.stdout
