"""The NetworkPolicy, the ValidatingAdmissionPolicy on the namespace labels, and the client-CA overlay.

The policy's CEL and the webhooks' selectors run on a real kube-apiserver in conformance/tests.
"""

from __future__ import annotations

import re
from typing import Any

from manifest_build import REPO, build, build_overlay, find, pod_specs
from serve_args import parse_serve_args

from webhook import routes
from webhook.config.parse import TENANT_LABEL_LINE
from webhook.routes import MODE_LABEL

DEFAULT_SCRAPER_LABEL = {"preemptguard.io/metrics-scraper": "true"}


def container_ports(objects: list[dict[str, Any]]) -> dict[str, int]:
    (container,) = pod_specs(objects)["Deployment/preemptguard"]["containers"]
    return {p["name"]: p["containerPort"] for p in container["ports"]}


def ingress_by_port(policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rules = {}
    for rule in policy["spec"]["ingress"]:
        (port,) = rule["ports"]
        rules[port["port"]] = rule
    return rules


def test_network_policy_opens_admission_and_limits_metrics_to_scrapers() -> None:
    objects = build("base")
    policy = find(objects, "NetworkPolicy", "preemptguard")
    deployment = find(objects, "Deployment", "preemptguard")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= \
        deployment["spec"]["template"]["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress stays open: the API server must be reachable
    rules = ingress_by_port(policy)
    assert set(rules) == set(container_ports(objects)) == {"https", "preview", "metrics"}
    # the control plane's address is not known in general, so the admission port has no `from`; /preview's callers
    # (people, CI) may be anywhere in the cluster and bring a bearer token
    assert "from" not in rules["https"] and "from" not in rules["preview"]
    assert rules["metrics"]["from"] == [{"namespaceSelector": {"matchLabels": DEFAULT_SCRAPER_LABEL}}]
    # the metrics rule keeps its index: overlays patch /spec/ingress/1 (docs/deploy.md)
    assert policy["spec"]["ingress"][1] is rules["metrics"]


def test_label_policy_protects_exactly_the_mode_and_opt_out_labels() -> None:
    objects = build("base")
    policy = find(objects, "ValidatingAdmissionPolicy", "preemptguard-namespace-labels")
    binding = find(objects, "ValidatingAdmissionPolicyBinding", "preemptguard-namespace-labels")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert (rule["resources"], set(rule["operations"])) == (["namespaces"], {"CREATE", "UPDATE"})
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert set(re.findall(r"'([^']+)'", variables["protectedLabels"])) == {MODE_LABEL, routes.IGNORE_NAMESPACE_LABEL}
    assert re.findall(r"'([^']+)'", variables["adminGroups"]) == ["system:masters", "preemptguard:policy-admins"]
    # the webhook's opt-out label is the protected one
    (webhook,) = find(objects, "MutatingWebhookConfiguration")["webhooks"]
    keys = {e["key"] for e in webhook["namespaceSelector"]["matchExpressions"]}
    assert routes.IGNORE_NAMESPACE_LABEL in keys


def test_tenant_label_policy_reads_the_label_from_the_servers_own_configuration() -> None:
    """Issue #24: relabelling one's namespace into another tenant must be the operator's. The policy's parameter is
    the ConfigMap the server reads its --config from, so the protected label is the configured one."""
    objects = build("base")
    policy = find(objects, "ValidatingAdmissionPolicy", "preemptguard-tenant-label")
    binding = find(objects, "ValidatingAdmissionPolicyBinding", "preemptguard-tenant-label")
    config_map = find(objects, "ConfigMap", "preemptguard-config")
    assert policy["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"]["paramRef"]["name"] == config_map["metadata"]["name"]
    assert binding["spec"]["paramRef"]["namespace"] == config_map["metadata"]["namespace"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    (container,) = pod_specs(objects)["Deployment/preemptguard"]["containers"]
    assert "--config=/config/config.yaml" in container["args"]  # the file the policy reads
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    # the policy's expression and the server's check are the same regular expression
    pattern = re.search(r"findAll\('(.*?)'\)", variables["protectedLabels"])
    assert pattern is not None
    cel = pattern.group(1).replace("\\x27", "'")  # CEL escapes the quote; both read \\t as a tab
    assert cel == TENANT_LABEL_LINE.pattern
    assert variables["adminGroups"] == find(objects, "ValidatingAdmissionPolicy",
                                            "preemptguard-namespace-labels")["spec"]["variables"][0]["expression"]


def test_client_ca_overlay_turns_on_caller_authentication() -> None:
    objects = build("overlays/client-ca")
    spec = pod_specs(objects)["Deployment/preemptguard"]
    (container,) = spec["containers"]
    args, pending = parse_serve_args(container["args"])
    client_ca = pending["--client-ca"][0] if pending else args.client_ca
    client_cns = pending.get("--client-cn", []) if pending else args.client_cn
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert client_ca == f"{mounts['client-ca']['mountPath']}/ca.crt" and mounts["client-ca"]["readOnly"]
    assert "subPath" not in mounts["client-ca"]  # a rotated CA bundle must reach the pod
    assert volumes["client-ca"]["configMap"]["name"] == "preemptguard-client-ca"
    assert not volumes["client-ca"]["configMap"].get("optional")  # no CA: no start, never "no authentication"
    assert client_cns == ["kube-apiserver-admission-client"]
    # everything else is the self-signed overlay unchanged
    self_signed = build("overlays/self-signed")
    changed = [f"{o['kind']}/{o['metadata']['name']}" for o in objects if o not in self_signed]
    assert changed == ["Deployment/preemptguard"]


def documented_overlay() -> str:
    """The example overlay of docs/deploy.md, with its paths pointed at this repository's manifests/."""
    text = (REPO / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```yaml\n(# my-overlay/kustomization.yaml\n.*?)```", text, re.DOTALL)
    assert len(blocks) == 1, "docs/deploy.md must show one `# my-overlay/kustomization.yaml` example"
    return blocks[0].replace("../manifests/", "{manifests}/")


def test_documented_overlay_builds_and_changes_what_it_says() -> None:
    objects = build_overlay(documented_overlay())
    policy = find(objects, "NetworkPolicy", "preemptguard")
    assert ingress_by_port(policy)["metrics"]["from"][0]["namespaceSelector"]["matchLabels"] != DEFAULT_SCRAPER_LABEL
    label_policy = find(objects, "ValidatingAdmissionPolicy", "preemptguard-namespace-labels")
    admin_groups = next(v for v in label_policy["spec"]["variables"] if v["name"] == "adminGroups")
    assert "preemptguard:policy-admins" not in admin_groups["expression"]
    (container,) = pod_specs(objects)["Deployment/preemptguard"]["containers"]
    assert any(a.startswith("--client-ca=") for a in container["args"])
