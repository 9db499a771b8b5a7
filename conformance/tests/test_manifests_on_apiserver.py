"""The manifests' admission objects on a real kube-apiserver: the ValidatingAdmissionPolicy on the namespace
labels (a non-member cannot add, change or remove them; a member can), the pod webhook's opt-out label and
matchConditions (checked by where the API server does and does not call the webhook), and a server-side dry run
of the kustomize overlays."""

from __future__ import annotations

import copy
import secrets
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import ControlPlane, ControlPlaneError, User, kube_bin_dir
from helm_tool import bin_dir
from manifest_build import MANIFESTS, build, find

ALICE = User("alice", secrets.token_hex(16), ("system:authenticated",))  # may edit namespaces, not an admin
CAROL = User("carol", secrets.token_hex(16), ("system:authenticated", "preemptguard:policy-admins"))
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PROTECTED = ("preemptguard.io/mode", "preemptguard.io/ignore")
UNREACHABLE = "https://127.0.0.1:1"  # nothing listens: every call the API server makes fails, and shows


def post(plane: ControlPlane, path: str, obj: dict[str, Any]) -> None:
    status, body = plane.request("POST", path, obj)
    assert status == 201, body


def ensure_namespace(plane: ControlPlane, name: str, labels: dict[str, str] | None = None) -> None:
    """The namespace with these labels, whether an earlier test of the module created it or not."""
    status, body = plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                "metadata": {"name": name, "labels": labels or {}}})
    if status == 409:
        status, body = plane.request("PATCH", f"/api/v1/namespaces/{name}", {"metadata": {"labels": labels or {}}},
                                     content_type="application/merge-patch+json")
        assert status == 200, body
        return
    assert status == 201, body


def set_labels(plane: ControlPlane, user: str, namespace: str, labels: dict[str, str | None]) -> tuple[int, Any]:
    return plane.request("PATCH", f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": labels}}, user=user,
                         content_type="application/merge-patch+json")


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("manifests-plane"), kube_bin_dir(), users=[ALICE, CAROL])
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        objects = build("base")
        post(plane, f"{ADMISSION}/validatingadmissionpolicies",
             find(objects, "ValidatingAdmissionPolicy", "preemptguard-namespace-labels"))
        post(plane, f"{ADMISSION}/validatingadmissionpolicybindings",
             find(objects, "ValidatingAdmissionPolicyBinding", "preemptguard-namespace-labels"))
        editor = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                  "metadata": {"name": "namespace-editor"},
                  "rules": [{"apiGroups": [""], "resources": ["namespaces"],
                             "verbs": ["get", "create", "update", "patch"]}]}
        post(plane, "/apis/rbac.authorization.k8s.io/v1/clusterroles", editor)
        for user in (ALICE, CAROL):
            post(plane, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{user.name}-edits-namespaces"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "namespace-editor"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user.name}]})
        post(plane, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "probe"}})
        deadline = time.monotonic() + 30  # the policy reaches the API server's admission through an informer
        while set_labels(plane, ALICE.name, "probe", {PROTECTED[0]: "off"})[0] != 403:
            if time.monotonic() > deadline:
                pytest.fail("the ValidatingAdmissionPolicy is not enforced after 30 s", pytrace=False)
            set_labels(plane, CAROL.name, "probe", {PROTECTED[0]: None})
            time.sleep(0.5)
        yield plane
    finally:
        plane.stop()


def test_label_policy_type_checks_cleanly(plane: ControlPlane) -> None:
    status, policy = plane.request("GET", f"{ADMISSION}/validatingadmissionpolicies/preemptguard-namespace-labels")
    assert status == 200
    assert not (policy.get("status", {}).get("typeChecking") or {}).get("expressionWarnings"), policy["status"]


@pytest.mark.parametrize("label", PROTECTED)
def test_non_member_cannot_add_change_or_remove_a_protected_label(plane: ControlPlane, label: str) -> None:
    namespace = f"tenant-{label.rsplit('/', 1)[1]}"
    post(plane, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    status, body = set_labels(plane, ALICE.name, namespace, {label: "true"})
    assert status == 403, body
    assert body["reason"] == "Forbidden", body
    assert "preemptguard:policy-admins" in body["message"] and label in body["message"]
    assert set_labels(plane, CAROL.name, namespace, {label: "true"})[0] == 200  # a member adds it
    assert set_labels(plane, ALICE.name, namespace, {label: "false"})[0] == 403  # change
    assert set_labels(plane, ALICE.name, namespace, {label: None})[0] == 403  # remove
    assert set_labels(plane, "admin", namespace, {label: None})[0] == 200  # system:masters is an admin group
    # other labels stay free for whoever may edit the namespace
    assert set_labels(plane, ALICE.name, namespace, {"team": "a"})[0] == 200


def test_non_member_cannot_create_a_namespace_with_a_protected_label(plane: ControlPlane) -> None:
    for user, expected in ((ALICE.name, 403), (CAROL.name, 201)):
        status, body = plane.request("POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": f"created-by-{user}", "labels": {"preemptguard.io/ignore": "true"}}}, user=user)
        assert status == expected, body


TENANT_LABEL = "example.com/tenant"


def config_map_with(base: dict[str, Any], text: str) -> dict[str, Any]:
    config_map = copy.deepcopy(base)
    config_map["data"] = {"config.yaml": text}
    return config_map


def test_the_tenant_label_of_the_configuration_is_the_operators(plane: ControlPlane) -> None:
    """Issue #24: a tenant relabelling its own namespace into the victims' tenant turned a denial into an allowed
    pod. The policy reads guardrails.tenantLabel from PreemptGuard's own ConfigMap and follows it."""
    objects = build("base")
    config_map = find(objects, "ConfigMap", "preemptguard-config")
    namespace = config_map["metadata"]["namespace"]
    ensure_namespace(plane, namespace)
    text = config_map["data"]["config.yaml"].replace("guardrails:\n", f"guardrails:\n  tenantLabel: {TENANT_LABEL}\n",
                                                     1)
    assert TENANT_LABEL in text
    post(plane, f"/api/v1/namespaces/{namespace}/configmaps", config_map_with(config_map, text))
    post(plane, f"{ADMISSION}/validatingadmissionpolicies",
         find(objects, "ValidatingAdmissionPolicy", "preemptguard-tenant-label"))
    post(plane, f"{ADMISSION}/validatingadmissionpolicybindings",
         find(objects, "ValidatingAdmissionPolicyBinding", "preemptguard-tenant-label"))
    post(plane, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "team-x", "labels": {TENANT_LABEL: "storefront"}}})
    deadline = time.monotonic() + 30  # the policy and its parameter reach admission through informers
    while (answer := set_labels(plane, ALICE.name, "team-x", {TENANT_LABEL: "analytics"}))[0] != 403:
        if time.monotonic() > deadline:
            pytest.fail(f"the tenant label policy is not enforced after 30 s: {answer}", pytrace=False)
        set_labels(plane, CAROL.name, "team-x", {TENANT_LABEL: "storefront"})
        time.sleep(0.5)
    status, body = answer
    assert body["reason"] == "Forbidden" and TENANT_LABEL in body["message"], body
    assert set_labels(plane, ALICE.name, "team-x", {TENANT_LABEL: None})[0] == 403  # nor remove it
    assert set_labels(plane, ALICE.name, "team-x", {"team": "x"})[0] == 200  # other labels stay free
    assert set_labels(plane, CAROL.name, "team-x", {TENANT_LABEL: "analytics"})[0] == 200  # the operator may
    status, body = plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "team-y", "labels": {TENANT_LABEL: "analytics"}}}, user=ALICE.name)
    assert status == 403, body  # nor create a namespace inside another tenant
    status, policy = plane.request("GET", f"{ADMISSION}/validatingadmissionpolicies/preemptguard-tenant-label")
    assert not (policy.get("status", {}).get("typeChecking") or {}).get("expressionWarnings"), policy["status"]
    # The policy follows the file: without a tenantLabel the label is free again.
    status, _ = plane.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/preemptguard-config",
                              config_map_with(config_map, config_map["data"]["config.yaml"]))
    assert status == 200
    deadline = time.monotonic() + 30
    while set_labels(plane, ALICE.name, "team-x", {TENANT_LABEL: "storefront"})[0] != 200:
        if time.monotonic() > deadline:
            pytest.fail("the tenant label policy did not follow the ConfigMap after 30 s", pytrace=False)
        time.sleep(0.5)


def pod(namespace: str, account: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
            "spec": {"serviceAccountName": account,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def sent_to_webhook(plane: ControlPlane, namespace: str, account: str) -> bool:
    status, body = plane.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod(namespace, account))
    if status in (200, 201):
        return False
    assert 'failed calling webhook "pods.preemptguard.io"' in body["message"], body
    return True


def test_pod_webhook_skips_opted_out_namespaces_and_its_own_pods(plane: ControlPlane) -> None:
    configuration = copy.deepcopy(find(build("base"), "MutatingWebhookConfiguration"))
    (hook,) = configuration["webhooks"]
    hook["clientConfig"] = {"url": f"{UNREACHABLE}{hook['clientConfig']['service']['path']}"}
    hook["failurePolicy"] = "Fail"
    # without the namespace-name exemption, so that only the opt-out label and matchConditions can skip
    name_exemption, opt_out = hook["namespaceSelector"]["matchExpressions"]
    assert name_exemption["key"] == "kubernetes.io/metadata.name"
    hook["namespaceSelector"]["matchExpressions"] = [opt_out]
    configuration["metadata"]["name"] = "preemptguard-selectors-under-test"
    post(plane, f"{ADMISSION}/mutatingwebhookconfigurations", configuration)
    try:
        namespaces = {"preemptguard": {}, "guarded": {}, "opted-out": {"preemptguard.io/ignore": "true"}}
        for namespace, labels in namespaces.items():
            ensure_namespace(plane, namespace, labels)
            for account in ("default", "preemptguard", "preemptguard-certs"):
                post(plane, f"/api/v1/namespaces/{namespace}/serviceaccounts",
                     {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}})
        deadline = time.monotonic() + 15  # the configuration reaches admission through an informer
        while not sent_to_webhook(plane, "guarded", "default") and time.monotonic() < deadline:
            time.sleep(0.25)
        assert sent_to_webhook(plane, "guarded", "default")
        assert sent_to_webhook(plane, "guarded", "preemptguard")  # its account name alone exempts nothing
        assert sent_to_webhook(plane, "preemptguard", "default")  # nor does its namespace alone
        assert not sent_to_webhook(plane, "preemptguard", "preemptguard")  # its own server pods
        assert not sent_to_webhook(plane, "preemptguard", "preemptguard-certs")  # its certificate jobs
        assert not sent_to_webhook(plane, "opted-out", "default")
    finally:
        plane.request("DELETE", f"{ADMISSION}/mutatingwebhookconfigurations/preemptguard-selectors-under-test")


@pytest.mark.parametrize("overlay", ["overlays/self-signed", "overlays/client-ca"])
def test_real_api_server_accepts_the_overlay_dry_run(plane: ControlPlane, overlay: str) -> None:
    kubectl = str(bin_dir() / "kubectl")
    rendered = subprocess.run([kubectl, "kustomize", str(MANIFESTS / overlay)], capture_output=True, text=True,
                              timeout=120, check=True).stdout
    subprocess.run([kubectl, "--kubeconfig", str(plane.kubeconfig()), "create", "namespace", "preemptguard"],
                   capture_output=True, text=True, timeout=60, check=False)
    applied = subprocess.run([kubectl, "--kubeconfig", str(plane.kubeconfig()), "apply", "--dry-run=server", "-f", "-"],
                             input=rendered, capture_output=True, text=True, timeout=120, check=False)
    assert applied.returncode == 0, applied.stderr
    policy = "validatingadmissionpolicy.admissionregistration.k8s.io/preemptguard-namespace-labels"
    lines = applied.stdout.splitlines()
    assert any(line.startswith(f"{policy} ") for line in lines), applied.stdout  # created, or configured here
    assert lines and all(line.endswith("(server dry run)") for line in lines), applied.stdout

