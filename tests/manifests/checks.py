"""Checks every rendering of PreemptGuard must pass, whoever renders it: ``kubectl kustomize`` (tests/manifests)
or ``helm template`` (conformance/tests/test_helm_chart.py). Each takes the rendered objects."""

from __future__ import annotations

from typing import Any

import pytest
from manifest_build import containers
from serve_args import parse_serve_args
from test_manifests_rbac import declared, granted
from test_manifests_schema import SCHEMA_VERSIONS, validate_all
from test_manifests_webhooks import metrics_listener_routes, preview_listener_routes, server_routes, webhook_entries

from webhook import routes
from webhook.rbac import (
    CERTS_CLUSTER_PERMISSIONS,
    CERTS_NAMESPACED_PERMISSIONS,
    EVENTS_PERMISSIONS,
    EXPOSURE_REPORTS_PERMISSIONS,
    LEADER_ELECTION_PERMISSIONS,
    REQUIRED_PERMISSIONS,
)
from webhook.routes import LEADER_ELECTION_LEASE


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in of_kind(objects, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_specs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    specs = {}
    for obj in objects:
        key = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] in ("Deployment", "Job"):
            specs[key] = obj["spec"]["template"]["spec"]
        elif obj["kind"] == "CronJob":
            specs[key] = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return specs


def check_objects_validate(objects: list[dict[str, Any]], what: str) -> None:
    """Offline schema validation for the oldest supported and the newest Kubernetes."""
    for version in SCHEMA_VERSIONS:
        validate_all(objects, version, what)


def check_webhooks_reach_server_routes(objects: list[dict[str, Any]]) -> None:
    """Webhook paths are routes of the server; Service port -> container port -> the server's --port; the Service's
    preview port -> the --preview-port listener, which serves POST /preview; probes."""
    entries = webhook_entries(objects)
    assert set(entries) == {routes.PODS_WEBHOOK, routes.PRIORITYCLASSES_WEBHOOK}
    expected = {
        routes.PODS_WEBHOOK: ("MutatingWebhookConfiguration", routes.MUTATE_PODS_PATH),
        routes.PRIORITYCLASSES_WEBHOOK: ("ValidatingWebhookConfiguration", routes.VALIDATE_PRIORITYCLASSES_PATH),
    }
    served = server_routes()
    deployment = one(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args, _ = parse_serve_args(container["args"])
    assert args.command == "serve" and args.in_cluster
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container_ports == {"https": args.port, "preview": args.preview_port, "metrics": args.metrics_port}
    service = one(objects, "Service")
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]}["preview"] == "preview"
    assert ("POST", routes.PREVIEW_PATH) in preview_listener_routes()
    for name, (kind, webhook) in entries.items():
        assert (kind, webhook["clientConfig"]["service"]["path"]) == expected[name]
        assert ("POST", expected[name][1]) in served
        ref = webhook["clientConfig"]["service"]
        service = one(objects, "Service", ref["name"])
        assert service["metadata"]["namespace"] == ref["namespace"] == deployment["metadata"]["namespace"]
        assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
        target = {p["port"]: p["targetPort"] for p in service["spec"]["ports"]}[ref["port"]]
        assert container_ports[target] == args.port
    for probe, path in (("readinessProbe", routes.READYZ_PATH), ("livenessProbe", routes.HEALTHZ_PATH)):
        get = container[probe]["httpGet"]
        assert (get["path"], get["port"], get["scheme"]) == (path, "metrics", "HTTP")
        assert ("GET", path) in metrics_listener_routes()


def _role_of(objects: list[dict[str, Any]], account: str, binding_kind: str) -> dict[str, Any]:
    bindings = [b for b in of_kind(objects, binding_kind)
                if any(s["kind"] == "ServiceAccount" and s["name"] == account for s in b["subjects"])]
    assert len(bindings) == 1, f"{account}: expected one {binding_kind}, found {len(bindings)}"
    ref = bindings[0]["roleRef"]
    return one(objects, ref["kind"], ref["name"])


def check_rbac_is_declared(objects: list[dict[str, Any]]) -> None:
    """The server's ClusterRole (with the PolicyReport writes exactly when it runs with ``--exposure-reports``),
    its leader-election Role and (when there is one) the certificate job's roles grant exactly the declared calls;
    no wildcard anywhere; caBundle may be patched only on PreemptGuard's own configurations."""
    specs = pod_specs(objects)
    server = specs[f"Deployment/{one(objects, 'Deployment')['metadata']['name']}"]
    args = server["containers"][0].get("args", [])
    expected = REQUIRED_PERMISSIONS + (EVENTS_PERMISSIONS if "--events" in args else ()) + (
        EXPOSURE_REPORTS_PERMISSIONS if "--exposure-reports" in args else ())
    assert granted(_role_of(objects, server["serviceAccountName"], "ClusterRoleBinding")) == declared(expected)
    # The Lease's name is the one the server is told (the chart's is its release's fullname).
    lease = next((a.split("=", 1)[1] for a in args if a.startswith("--leader-elect-lease=")), LEADER_ELECTION_LEASE)
    assert granted(_role_of(objects, server["serviceAccountName"], "RoleBinding")) == declared(tuple(
        p._replace(resource_names=frozenset({lease})) if p.resource_names else p for p in LEADER_ELECTION_PERMISSIONS))
    certs_accounts = {spec["serviceAccountName"] for key, spec in specs.items() if not key.startswith("Deployment/")}
    for account in certs_accounts:
        assert granted(_role_of(objects, account, "RoleBinding")) == declared(CERTS_NAMESPACED_PERMISSIONS)
        cluster_role = _role_of(objects, account, "ClusterRoleBinding")
        names = {one(objects, kind)["metadata"]["name"]
                 for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")}
        expected = {(g, r, v, n) for g, r, v, _ in declared(CERTS_CLUSTER_PERMISSIONS) for n in names}
        assert granted(cluster_role) == expected
    for role in of_kind(objects, "Role") + of_kind(objects, "ClusterRole"):
        assert all("*" not in grant for grant in granted(role)), role["metadata"]["name"]


def check_pods_locked_down(objects: list[dict[str, Any]]) -> None:
    """Pod Security "restricted" plus a read-only root filesystem and resources, for every workload."""
    specs = pod_specs(objects)
    if not specs:
        pytest.fail("no workloads rendered")
    for key, spec in specs.items():
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == 65532, key
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, key
        assert not spec.get("hostNetwork") and not spec.get("hostPID"), key
        for container in containers(spec):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, key
            assert security["readOnlyRootFilesystem"] is True, key
            assert security["capabilities"] == {"drop": ["ALL"]}, key
            assert not security.get("privileged"), key
            resources = container["resources"]
            assert {"cpu", "memory"} <= resources["requests"].keys() and "memory" in resources["limits"], key



def check_default_ports(objects: list[dict[str, Any]]) -> None:
    (container,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    args, _ = parse_serve_args(container["args"])
    assert (args.port, args.metrics_port) == (routes.DEFAULT_PORT, routes.DEFAULT_METRICS_PORT)
    assert args.preview_port == routes.DEFAULT_PREVIEW_PORT


def check_all(objects: list[dict[str, Any]], what: str, *, defaults: bool = True) -> None:
    """Every check; ``defaults=False`` (a Helm values set that changes ports, hostNetwork or the security
    settings on purpose) leaves out the default ports and the locked-down pod settings."""
    check_objects_validate(objects, what)
    check_webhooks_reach_server_routes(objects)
    check_rbac_is_declared(objects)
    if defaults:
        check_default_ports(objects)
        check_pods_locked_down(objects)
