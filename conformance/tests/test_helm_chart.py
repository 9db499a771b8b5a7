"""The Helm chart with the real helm (built by conformance/build): lint, the checks every rendering must pass,
the values schema, the same objects as the kustomize manifests, a server-side dry run on a real API server of
every documented values file (charts/preemptguard/README.md) with its hooks, the PodDisruptionBudget against
the real eviction API, and the critical-class switch."""

from __future__ import annotations

import copy
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from checks import check_all
from controlplane import REPO, ControlPlane
from helm_tool import CHART, NAMESPACE, RELEASE, bin_dir, helm, is_hook, pinned_version, template
from manifest_build import build, with_components

from webhook.certs.issuance import generate_ca, issue_serving_certificate
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
                      "exposure": {"reports": True},
                      "image": {"digest": "sha256:" + "0" * 64}, "extraArgs": ["--log-level=debug"], **MONITORING},
}


def documented_value_sets() -> dict[str, dict[str, Any]]:
    """The values files of the chart README's "Adapting the chart": ```yaml blocks opening with ``# values: NAME``."""
    readme = (CHART / "README.md").read_text()
    found = {name: yaml.safe_load(body) for name, body in re.findall(r"```yaml\n# values: (\S+)\n(.*?)```", readme,
                                                                     re.DOTALL)}
    assert len(found) >= 8, sorted(found)
    return found


DOCUMENTED = documented_value_sets()
# These change on purpose what the default checks insist on (ports, hostNetwork, the fixed UID).
NOT_DEFAULTS = {"gke-private-cluster", "host-network", "openshift"}
VALUE_SETS.update(DOCUMENTED)


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
    check_all(template(tmp_path, VALUE_SETS[name]), f"helm template ({name})", defaults=name not in NOT_DEFAULTS)


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
    "exposure-reports": (lambda: with_components("overlays/self-signed", "components/exposure-reports"),
                         {"exposure": {"reports": True}}),
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


def dry_run(plane: ControlPlane, objects: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    return kubectl(plane, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(objects))


# The kinds of cert-manager and the Prometheus Operator the chart renders, registered as the operators' CRDs
# would register them (their schemas are checked offline: tests/manifests/*_schema.py).
OPERATOR_KINDS = {"cert-manager.io": ["Certificate", "Issuer"],
                  "monitoring.coreos.com": ["ServiceMonitor", "PrometheusRule"]}


@pytest.fixture(scope="module")
def operator_crds(control_plane: ControlPlane) -> None:
    crds = []
    for group, kinds in OPERATOR_KINDS.items():
        for kind in kinds:
            plural = kind.lower() + "s"
            crds.append({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"name": f"{plural}.{group}"},
                         "spec": {"group": group, "scope": "Namespaced",
                                  "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                                            "listKind": f"{kind}List"},
                                  "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                                      "openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}})
    created = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump_all(crds))
    assert created.returncode == 0, created.stderr
    waited = kubectl(control_plane, "wait", "--for=condition=Established", "--timeout=60s",
                     *(f"crd/{c['metadata']['name']}" for c in crds))
    assert waited.returncode == 0, waited.stderr


@pytest.mark.usefixtures("operator_crds")
@pytest.mark.parametrize("name", VALUE_SETS)
def test_real_api_server_accepts_helm_template_dry_run(name: str, control_plane: ControlPlane, tmp_path: Path) -> None:
    """The release's objects, then its hooks (`helm test`'s pod and the pre-delete Job, whose ServiceAccounts helm
    creates first), each accepted by the real API server's validation and admission."""
    kubectl(control_plane, "create", "namespace", NAMESPACE)  # what `helm install --create-namespace` does
    objects = template(tmp_path, VALUE_SETS[name])
    applied = dry_run(control_plane, objects)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.count("(server dry run)") == len(objects), applied.stdout
    hooks = template(tmp_path, VALUE_SETS[name], hooks=True)
    for account in [o for o in hooks if o["kind"] == "ServiceAccount"]:
        kubectl(control_plane, "create", "serviceaccount", account["metadata"]["name"], "-n", NAMESPACE)
    hooked = dry_run(control_plane, hooks)
    assert hooked.returncode == 0, hooked.stderr
    assert hooked.stdout.count("(server dry run)") == len(hooks), hooked.stdout


def test_helm_test_and_the_cleanup_hook(tmp_path: Path) -> None:
    hooks = {f"{o['kind']}/{o['metadata']['name']}": o for o in template(tmp_path, hooks=True)}
    test_pod = hooks["Pod/preemptguard-test"]
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = test_pod["spec"]["containers"][0]["args"][0]
    assert "https://preemptguard.preemptguard.svc:8444/readyz" in script and "kubectl-preempt_preview" in script
    # The test may only create (dry-run) pods in helmTest.namespace.
    role = hooks["Role/preemptguard-test"]
    assert role["metadata"]["namespace"] == "default"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
    cleanup = hooks["Job/preemptguard-cleanup"]
    assert cleanup["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    assert cleanup["spec"]["template"]["spec"]["containers"][0]["args"][1] == "preemptguard.io"
    assert hooks["ClusterRole/preemptguard-cleanup"]["rules"] == [{
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        "resourceNames": ["preemptguard.io"], "verbs": ["delete"]}]
    off = template(tmp_path, {"helmTest": {"enabled": False}, "cleanupOnUninstall": {"enabled": False}}, hooks=True)
    assert off == []


@pytest.mark.parametrize(("values", "budget"), [
    ({}, {"maxUnavailable": 1}),
    ({"replicaCount": 2}, {"maxUnavailable": 1}),
    ({"replicaCount": 1}, None),
    ({"podDisruptionBudget": {"enabled": False}}, None),
    ({"podDisruptionBudget": {"maxUnavailable": "50%"}}, {"maxUnavailable": "50%"}),
])
def test_the_budget_follows_the_replicas(values: dict[str, Any], budget: dict[str, Any] | None,
                                         tmp_path: Path) -> None:
    pdbs = [o for o in template(tmp_path, values) if o["kind"] == "PodDisruptionBudget"]
    assert [{k: v for k, v in p["spec"].items() if k in ("maxUnavailable", "minAvailable")} for p in pdbs] == (
        [budget] if budget else [])


@pytest.mark.parametrize("replicas", [1, 3])
def test_a_drain_evicts_a_lone_replica(replicas: int, control_plane: ControlPlane, tmp_path: Path) -> None:
    """kubectl drain evicts through the eviction API, which refuses while a budget covering a running, ready pod
    allows no disruption. With one replica there is no budget, so the eviction goes through; with three the budget
    covers the replica (no disruption controller runs here to allow one, so it refuses: the budget selects it)."""
    namespace = f"drain-{replicas}"
    kubectl(control_plane, "create", "namespace", namespace)
    kubectl(control_plane, "create", "serviceaccount", "default", "-n", namespace)  # no controller manager here
    objects = template(tmp_path, {"replicaCount": replicas})
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    for pdb in (o for o in objects if o["kind"] == "PodDisruptionBudget"):
        pdb["metadata"]["namespace"] = namespace
        created = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(pdb))
        assert created.returncode == 0, created.stderr
    replica = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "replica-0", "namespace": namespace, "labels": deployment["spec"]["template"]["metadata"]["labels"]},
        "spec": {"containers": [{"name": "webhook", "image": "preemptguard"}]}}
    created = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(replica))
    assert created.returncode == 0, created.stderr
    # Running and ready, as its kubelet would report it: a pending or unready pod is evicted whatever the budget.
    status, body = control_plane.request(
        "PATCH", f"/api/v1/namespaces/{namespace}/pods/replica-0/status",
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type="application/merge-patch+json")
    assert status == 200, body
    status, body = control_plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/pods/replica-0/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "replica-0", "namespace": namespace}})
    if replicas == 1:
        assert status == 201, body
    else:
        assert status == 429 and "disruption budget" in str(body), body


def test_the_critical_class_quota_is_one_switch(tmp_path: Path) -> None:
    def quota(values: dict[str, Any]) -> dict[str, Any]:
        (config_map,) = [o for o in template(tmp_path, values)
                         if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "preemptguard-config"]
        return dict(yaml.safe_load(config_map["data"]["config.yaml"])["quota"])

    assert quota({}) == {"limitedResources": [], "classes": []}
    assert quota({"criticalClassQuota": {"enabled": True}})["limitedResources"] == [{
        "resource": "pods", "matchScopes": [{"scopeName": "PriorityClass", "operator": "In",
                                             "values": ["system-node-critical", "system-cluster-critical"]}]}]
    # The same document as kustomize's component.
    component = yaml.safe_load((CHART.parents[1] / "manifests" / "components" / "critical-class-quota" /
                                "config.yaml").read_text())
    assert quota({"criticalClassQuota": {"enabled": True}}) == component["quota"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _readiness_check(script: str) -> tuple[str, str]:
    """The Python readiness check of `helm test`'s script, and the URL it checks."""
    found = re.search(r"python3 -c '\n(.*?)\n\s*' \"(https://[^\"]+)\"", script, re.DOTALL)
    assert found is not None, script
    return textwrap.dedent(found.group(1)), found.group(2)


@pytest.mark.parametrize("client_auth", [False, True], ids=["clientAuth-off", "clientAuth-on"])
def test_helm_tests_readiness_check_passes_with_client_auth_on_and_off(client_auth: bool, tmp_path: Path) -> None:
    """`helm test`'s /readyz over TLS, run as rendered against the Deployment as rendered (its serve flags, on
    loopback): under clientAuth.enabled the Service's 443 requires the API server's client certificate at the
    handshake, so the check goes to the Service's preview port, which asks for none, in both modes. The same check
    pointed at the admission port fails under clientAuth (what `helm test` did before)."""
    ca_pem, ca_key = generate_ca("helm-test-ca", 1)
    client_ca_pem = generate_ca("admission-client-ca", 1)[0]
    values = {"clientAuth": {"enabled": True, "caBundle": client_ca_pem.decode()}} if client_auth else {}
    objects = template(tmp_path, values)
    hooks = {f"{o['kind']}/{o['metadata']['name']}": o for o in template(tmp_path, values, hooks=True)}
    check, url = _readiness_check(hooks["Pod/preemptguard-test"]["spec"]["containers"][0]["args"][0])
    target = urlsplit(url)
    service = next(o for o in objects if o["kind"] == "Service")
    assert target.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    (container,) = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    by_service_port = {p["port"]: container_ports[p["targetPort"]] for p in service["spec"]["ports"]}
    # The Deployment's flags, with files and ports of this machine and the example cluster for --in-cluster.
    files = tmp_path / "files"
    (files / "tls").mkdir(parents=True)
    (files / "config").mkdir()
    (files / "client-ca").mkdir()
    serving = issue_serving_certificate(ca_pem, ca_key, [target.hostname, "127.0.0.1"], 1)
    (files / "tls" / "tls.crt").write_bytes(serving.cert_pem)
    (files / "tls" / "tls.key").write_bytes(serving.key_pem)
    (files / "tls" / "ca.crt").write_bytes(ca_pem)
    (files / "client-ca" / "ca.crt").write_bytes(client_ca_pem)
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {}))
    (files / "config" / "config.yaml").write_text(config_map["data"]["config.yaml"])
    local = {port: _free_port() for port in container_ports.values()}
    args = []
    for arg in container["args"]:
        flag, _, value = arg.partition("=")
        if arg == "--in-cluster":
            args += ["--cluster-snapshot", str(REPO / "examples" / "cluster.yaml")]
        elif flag in ("--port", "--metrics-port", "--preview-port"):
            args.append(f"{flag}={local[int(value)]}")
        elif value.startswith("/"):
            args.append(f"{flag}={files}{value}")
        else:
            args.append(arg)
    assert "--preview-port" in {a.partition("=")[0] for a in args}
    assert ("--client-ca" in {a.partition("=")[0] for a in args}) is client_auth
    server = subprocess.Popen([sys.executable, "-m", "webhook.cli", *args, "--host", "127.0.0.1"], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)

    def run_check(service_port: int) -> subprocess.CompletedProcess[str]:
        here = f"https://127.0.0.1:{local[by_service_port[service_port]]}{target.path}"
        return subprocess.run([sys.executable, "-c", check.replace("/tls/ca.crt", str(files / "tls" / "ca.crt")),
                               here], capture_output=True, text=True, timeout=30, check=False)

    try:
        deadline = time.monotonic() + 60
        while (checked := run_check(target.port or 443)).returncode != 0:
            assert server.poll() is None, server.communicate()[0].decode()[-2000:]
            assert time.monotonic() < deadline, checked.stderr
            time.sleep(0.2)
        assert checked.stdout.strip().endswith(" 200")
        admission = run_check(443)
        if client_auth:
            # (under TLS 1.3 the server refuses the certificate-less client after the client's side of the
            # handshake: the check sees the connection closed, or an SSL alert)
            assert admission.returncode != 0, admission.stdout
        else:
            assert admission.returncode == 0, admission.stderr
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_hooks_are_told_apart(tmp_path: Path) -> None:
    assert all(not is_hook(o) for o in template(tmp_path))


def test_the_rendered_chart_passes_the_plugins_ci_gate(tmp_path: Path) -> None:
    """`helm template charts/preemptguard | kubectl preempt-preview --snapshot examples/cluster.yaml -f -`: the
    objects that are not workloads are skipped with a note, the chart's own PriorityClass is used, every pod fits."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shim = plugins / "kubectl-preempt_preview"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{CHART.parents[1]}" exec "{sys.executable}" -m kubectl_plugin.cli "$@"\n')
    shim.chmod(0o755)
    rendered = helm("template", str(CHART), tmp=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    env = {**os.environ, "PATH": f"{plugins}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    gate = subprocess.run([str(bin_dir() / "kubectl"), "preempt-preview", "--snapshot",
                           str(CHART.parents[1] / "examples" / "cluster.yaml"), "-f", "-"], input=rendered.stdout,
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    notes = [line for line in gate.stderr.splitlines() if line.startswith("Note: ")]
    assert notes[0] == "Note: using PriorityClass release-name-preemptguard-critical from the manifests"
    assert notes[1].startswith("Note: skipped ") and "ServiceAccount" in notes[1] and "ConfigMap" in notes[1]
    rows = [line.split()[:3] for line in gate.stdout.splitlines()[1:] if line.startswith("default/")]
    assert ["default/release-name-preemptguard-0", "release-name-preemptguard-critical", "Fits"] in rows
    assert gate.stdout.splitlines()[-1].startswith(f"{len(rows)} pods: {len(rows)} fit, 0 preempt")
