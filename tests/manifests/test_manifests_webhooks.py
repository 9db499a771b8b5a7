"""Webhook configurations, Service, probes and container arguments agree with the server's routes and flags."""

from __future__ import annotations

from typing import Any

import pytest
from manifest_build import OVERLAYS, build, find, pod_specs
from serve_args import parse_serve_args

from webhook import routes
from webhook.cli import build_parser
from webhook.rbac import CERTS_CLUSTER_PERMISSIONS
from webhook.server.app import make_app, make_preview_app
from webhook.server.metrics import WebhookMetrics, make_metrics_app
from webhook.server.settings import ServerSettings, settings_from_args
from webhook.sources.source import ClusterSource

EXCLUDED_NAMESPACES = {"preemptguard", "kube-system"}


class _IdleSource:
    """Just enough of a ClusterSource to build the app and read its routes."""

    state: Any = None
    api: Any = None  # a snapshot: no live cluster

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def is_ready(self) -> bool: return True
    def readiness_reason(self) -> str: return ""
    def staleness_seconds(self) -> float: return 0.0
    async def get_priority_class(self, name: str) -> Any: return None


def server_routes() -> set[tuple[str, str]]:
    source: ClusterSource = _IdleSource()  # type: ignore[assignment]
    app = make_app(source, ServerSettings())
    return {(route.method, route.resource.canonical) for route in app.router.routes() if route.resource is not None}


def metrics_listener_routes() -> set[tuple[str, str]]:
    """The routes of the metrics listener as ``start_server`` builds it (probes included)."""
    app = make_metrics_app(WebhookMetrics(), readiness=lambda: (200, "ok"))
    return {(route.method, route.resource.canonical) for route in app.router.routes() if route.resource is not None}


def preview_listener_routes() -> set[tuple[str, str]]:
    """The routes of the --preview-port listener as ``start_server`` builds it."""
    source: ClusterSource = _IdleSource()  # type: ignore[assignment]
    app = make_preview_app(make_app(source, ServerSettings()))
    return {(route.method, route.resource.canonical) for route in app.router.routes() if route.resource is not None}


def webhook_entries(objects: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    entries = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in find(objects, kind)["webhooks"]:
            entries[webhook["name"]] = (kind, webhook)
    return entries


def test_webhook_paths_are_routes_of_the_server() -> None:
    objects = build("base")
    entries = webhook_entries(objects)
    assert set(entries) == {routes.PODS_WEBHOOK, routes.PRIORITYCLASSES_WEBHOOK}
    served = server_routes()
    expected_paths = {routes.PODS_WEBHOOK: routes.MUTATE_PODS_PATH,
                      routes.PRIORITYCLASSES_WEBHOOK: routes.VALIDATE_PRIORITYCLASSES_PATH}
    for name, (_, webhook) in entries.items():
        path = webhook["clientConfig"]["service"]["path"]
        assert path == expected_paths[name]
        assert ("POST", path) in served, f"{name} calls {path}, which the server does not serve"


def test_webhook_service_port_reaches_the_https_listener() -> None:
    objects = build("base")
    service = find(objects, "Service", "preemptguard")
    deployment = find(objects, "Deployment", "preemptguard")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    service_ports = {p["port"]: p["targetPort"] for p in service["spec"]["ports"]}
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    for _, webhook in webhook_entries(objects).values():
        ref = webhook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"]) == (service["metadata"]["name"], service["metadata"]["namespace"])
        assert container_ports[service_ports[ref["port"]]] == routes.DEFAULT_PORT
    assert container_ports == {"https": routes.DEFAULT_PORT, "preview": routes.DEFAULT_PREVIEW_PORT,
                               "metrics": routes.DEFAULT_METRICS_PORT}
    assert service_ports == {443: "https", routes.DEFAULT_PREVIEW_PORT: "preview",
                             routes.DEFAULT_METRICS_PORT: "metrics"}


def test_probes_use_the_health_routes_of_the_metrics_listener() -> None:
    """Under --client-ca the admission port requires a client certificate at the handshake, which the kubelet
    does not have: probes go to the metrics listener (plain HTTP), which serves them too."""
    container = find(build("base"), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    served = metrics_listener_routes()
    for probe, path in (("readinessProbe", routes.READYZ_PATH), ("livenessProbe", routes.HEALTHZ_PATH)):
        get = container[probe]["httpGet"]
        assert (get["path"], get["port"], get["scheme"]) == (path, "metrics", "HTTP")
        assert ("GET", path) in served
        assert ("GET", path) in server_routes()  # and still on the admission port, for callers that can


def test_container_arguments_are_the_servers_flags() -> None:
    spec = find(build("base"), "Deployment")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args, pending = parse_serve_args(container["args"])
    assert not pending
    settings = settings_from_args(args, environ={})
    assert args.command == "serve" and settings.in_cluster
    assert (settings.port, settings.metrics_port) == (routes.DEFAULT_PORT, routes.DEFAULT_METRICS_PORT)
    # /preview has its port with or without --client-ca, so its callers' URL is one in both modes
    assert settings.preview_port == routes.DEFAULT_PREVIEW_PORT
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert str(settings.tls_cert) == f"{mounts['tls']}/tls.crt" and str(settings.tls_key) == f"{mounts['tls']}/tls.key"
    assert volumes["tls"]["secret"]["secretName"] == "preemptguard-tls"
    assert str(settings.config_path) == f"{mounts['config']}/config.yaml"
    assert volumes["config"]["configMap"]["name"] == "preemptguard-config"
    # Whole-directory mounts: a subPath mount never sees a rotated Secret or an edited ConfigMap.
    assert all("subPath" not in m for m in container["volumeMounts"])


def test_mutating_webhook_settings() -> None:
    kind, webhook = webhook_entries(build("base"))[routes.PODS_WEBHOOK]
    assert kind == "MutatingWebhookConfiguration"
    assert webhook["sideEffects"] == "NoneOnDryRun"
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["matchPolicy"] == "Equivalent"
    assert webhook["reinvocationPolicy"] == "IfNeeded"
    assert webhook["failurePolicy"] == "Ignore"
    assert 1 <= webhook["timeoutSeconds"] <= 5
    assert webhook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["pods"], "scope": "Namespaced"}]
    by_name, opt_out = webhook["namespaceSelector"]["matchExpressions"]
    assert by_name["key"] == "kubernetes.io/metadata.name" and by_name["operator"] == "NotIn"
    assert set(by_name["values"]) == EXCLUDED_NAMESPACES
    assert opt_out == {"key": routes.IGNORE_NAMESPACE_LABEL, "operator": "NotIn", "values": ["true"]}
    (condition,) = webhook["matchConditions"]
    # checked against the real API server in conformance/tests/test_manifests_on_apiserver.py
    assert "request.namespace == 'preemptguard'" in condition["expression"]
    assert "['preemptguard', 'preemptguard-certs']" in condition["expression"]


def test_validating_webhook_settings() -> None:
    kind, webhook = webhook_entries(build("base"))[routes.PRIORITYCLASSES_WEBHOOK]
    assert kind == "ValidatingWebhookConfiguration"
    assert webhook["sideEffects"] == "None"
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["failurePolicy"] == "Ignore"
    assert 1 <= webhook["timeoutSeconds"] <= 5
    assert webhook["rules"] == [{"apiGroups": ["scheduling.k8s.io"], "apiVersions": ["v1"],
                                 "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["priorityclasses"],
                                 "scope": "Cluster"}]


def test_configuration_names_match_the_certs_tooling() -> None:
    objects = build("base")
    assert find(objects, "MutatingWebhookConfiguration")["metadata"]["name"] == routes.MUTATING_WEBHOOK_CONFIGURATION
    assert find(objects, "ValidatingWebhookConfiguration")["metadata"]["name"] == \
        routes.VALIDATING_WEBHOOK_CONFIGURATION
    names = {name for p in CERTS_CLUSTER_PERMISSIONS for name in p.resource_names}
    assert names == {routes.MUTATING_WEBHOOK_CONFIGURATION, routes.VALIDATING_WEBHOOK_CONFIGURATION}


def test_certs_job_arguments_target_the_service_secret_and_configurations() -> None:
    from webhook.certs.command import settings_from_args as certs_settings

    objects = build("overlays/self-signed")
    service = find(objects, "Service", "preemptguard")
    deployment_secret = pod_specs(objects)["Deployment/preemptguard"]["volumes"][0]["secret"]["secretName"]
    for key in ("Job/preemptguard-certs", "CronJob/preemptguard-certs-renew"):
        (container,) = pod_specs(objects)[key]["containers"]
        args = build_parser().parse_args(container["args"])
        assert args.command == "certs" and args.in_cluster and not args.dry_run and args.out_dir is None
        settings = certs_settings(args)
        assert settings.namespace == service["metadata"]["namespace"]
        assert settings.secret_name == deployment_secret
        assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in settings.sans
        assert settings.mutating_configuration == find(objects, "MutatingWebhookConfiguration")["metadata"]["name"]
        assert settings.validating_configuration == \
            find(objects, "ValidatingWebhookConfiguration")["metadata"]["name"]
        assert settings.renew_before.days < settings.days


def test_cert_manager_issues_the_mounted_secret_and_injects_its_ca() -> None:
    objects = build("overlays/cert-manager")
    service = find(objects, "Service", "preemptguard")
    certificate = find(objects, "Certificate", "preemptguard-tls")
    deployment_secret = pod_specs(objects)["Deployment/preemptguard"]["volumes"][0]["secret"]["secretName"]
    assert certificate["spec"]["secretName"] == deployment_secret
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert set(certificate["spec"]["dnsNames"]) >= {f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"}
    issuer = find(objects, "Issuer", certificate["spec"]["issuerRef"]["name"])
    ca_certificate = find(objects, "Certificate", "preemptguard-ca")
    assert issuer["spec"]["ca"]["secretName"] == ca_certificate["spec"]["secretName"]
    assert ca_certificate["spec"]["isCA"] is True
    assert "selfSigned" in find(objects, "Issuer", ca_certificate["spec"]["issuerRef"]["name"])["spec"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = find(objects, kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{namespace}/{certificate['metadata']['name']}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlays_keep_the_base_webhooks(overlay: str) -> None:
    base = webhook_entries(build("base"))
    built = webhook_entries(build(overlay))
    assert built == base
