"""PreemptGuard registered for real: kube-apiserver with its built-in Priority plugin switched off calls
`preempt-guard serve` (watching that API server) through the manifests' webhook configurations, by URL with
the serving CA as caBundle. The cluster must behave as with the built-in plugin, and the prediction and the
`/preview` auth must work through the real API server."""

from __future__ import annotations

import base64
import copy
import json
import os
import secrets
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from admission_vectors import load_vectors
from controlplane import REPO, ControlPlane, ControlPlaneError, User, free_port, kube_bin_dir, log_tail, stop_process
from cryptography.x509.oid import ExtendedKeyUsageOID
from test_admission_client_certificate import CLIENT_CN, documented_block, issue
from test_admission_parity import ensure_namespace, stage

from webhook.certs.issuance import generate_ca, issue_serving_certificate

DENIED_PREFIX = 'admission webhook "pods.preemptguard.io" denied the request: '
ALICE = User("alice", secrets.token_hex(16), ("system:authenticated",))
BOB = User("bob", secrets.token_hex(16), ("system:authenticated",))


class Registered:
    """``url``: where ``/preview`` answers (the admission port, or under --client-ca --preview-port);
    ``admission_url``: where the API server calls the webhook."""

    def __init__(self, plane: ControlPlane, url: str, ca_file: Path, server: subprocess.Popen[bytes],
                 log: Path) -> None:
        self.plane, self.url, self.ca_file, self.server, self.log = plane, url, ca_file, server, log
        self.admission_url = url

    def preview(self, body: object, token: str | None) -> tuple[int, Any]:
        request = urllib.request.Request(f"{self.url}/preview", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json",
                                                  **({"Authorization": f"Bearer {token}"} if token else {})})
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


def webhook_configurations(url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """The manifests' two configurations, pointed at ``url`` by clientConfig.url, failing closed for the test."""
    configurations = [d for d in yaml.safe_load_all((REPO / "manifests/base/webhooks.yaml").read_text()) if d]
    for configuration in configurations:
        for hook in configuration["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": base64.b64encode(ca_pem).decode()}
            hook["failurePolicy"] = "Fail"  # a broken registration must show, not be silently ignored
    return configurations


def wait_until(predicate: Any, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise ControlPlaneError(f"{what} after {timeout:g}s" + (f":\n{log_tail(log)}" if log else ""))


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registered]:
    yield from start_registered(tmp_path_factory.mktemp("registered"), client_ca=False)


@pytest.fixture(scope="module")
def registered_client_ca(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registered]:
    """The same, under ``--client-ca``: the API server presents its client certificate through docs/deploy.md's
    AdmissionConfiguration, and ``/preview`` answers on ``--preview-port``, where no certificate is asked."""
    yield from start_registered(tmp_path_factory.mktemp("registered-client-ca"), client_ca=True)


def documented_client_certificate(work: Path, webhook_port: int) -> list[str]:
    """docs/deploy.md's client CA, kube-apiserver's client certificate, AdmissionConfiguration and kubeconfig (for
    a webhook on 127.0.0.1:``webhook_port``) in ``work``; the kube-apiserver flag that reads them."""
    client_ca = issue(work / "admission-client-ca", "preemptguard-admission-client-ca")
    issue(work / "admission-client", CLIENT_CN, issuer=client_ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    admission = documented_block("# /etc/kubernetes/admission/admission-config.yaml")
    # The docs name the user after the Service; a URL webhook is matched by host:port.
    kubeconfig = documented_block("# /etc/kubernetes/admission/webhook-kubeconfig.yaml").replace(
        "preemptguard.preemptguard.svc", f"127.0.0.1:{webhook_port}")
    for text, name in ((admission, "admission-config.yaml"), (kubeconfig, "webhook-kubeconfig.yaml")):
        (work / name).write_text(text.replace("/etc/kubernetes/admission/", f"{work}/"))
    return [f"--admission-control-config-file={work}/admission-config.yaml"]


def start_registered(work: Path, *, client_ca: bool) -> Iterator[Registered]:
    port, preview_port = free_port(), free_port()
    apiserver_args = ["--disable-admission-plugins=Priority"]
    serve_args = ["--port", str(port), "--metrics-port", "0", "--shutdown-grace", "0"]
    if client_ca:
        apiserver_args += documented_client_certificate(work, port)
        serve_args += ["--client-ca", str(work / "admission-client-ca.crt"), "--client-cn", CLIENT_CN,
                       "--preview-port", str(preview_port)]
    plane = ControlPlane(work / "plane", kube_bin_dir(), users=[ALICE, BOB], extra_apiserver_args=apiserver_args)
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    ca_cert, ca_key = generate_ca("conformance-ca", 1)
    cert, key = issue_serving_certificate(ca_cert, ca_key, ["127.0.0.1", "localhost"], 1)
    for name, pem in (("ca.crt", ca_cert), ("tls.crt", cert), ("tls.key", key)):
        (work / name).write_bytes(pem)
    log = work / "preempt-guard.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--kubeconfig", str(plane.kubeconfig()),
             "--tls-cert", str(work / "tls.crt"), "--tls-key", str(work / "tls.key"), "--host", "127.0.0.1",
             *serve_args],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    url = f"https://127.0.0.1:{port}"
    # /preview's URL: its own port under --client-ca (the admission port asks for the API server's certificate)
    registered = Registered(plane, f"https://127.0.0.1:{preview_port}" if client_ca else url, work / "ca.crt",
                            server, log)
    try:
        context = ssl.create_default_context(cafile=str(work / "ca.crt"))

        def ready() -> bool:
            if server.poll() is not None:
                raise ControlPlaneError(f"preempt-guard serve exited with {server.returncode}:\n{log_tail(log)}")
            try:
                with urllib.request.urlopen(f"{registered.url}/readyz", context=context, timeout=2) as response:
                    return bool(response.status == 200)
            except OSError:
                return False
        wait_until(ready, 60, "preempt-guard serve not ready", log)
        for configuration in webhook_configurations(url, ca_cert):
            kind = configuration["kind"].lower() + "s"
            status, body = plane.request("POST", f"/apis/admissionregistration.k8s.io/v1/{kind}", configuration)
            assert status == 201, body
        ensure_namespace(plane, "probe")
        probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "probe"},
                 "spec": {"priorityClassName": "no-such-class",
                          "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
        wait_until(lambda: plane.request("POST", "/api/v1/namespaces/probe/pods?dryRun=All", probe)[0] == 403,
                   30, "the API server does not call the webhook", log)
        registered.admission_url = url
        yield registered
    finally:
        stop_process(server)
        plane.stop()


POD_CASES = [c for c in load_vectors("admission.yaml")
             if c["kind"] == "Pod" and c["operation"] == "CREATE" and not c.get("subresource")
             and c["namespace"] not in ("kube-system", "preemptguard")  # the manifests exempt those namespaces
             and not c["name"].startswith("pod-create-21")]  # two global defaults: a real server refuses to store


def settled(status: int, body: Any, expect: dict[str, Any]) -> bool:
    if (status in (200, 201)) is not expect["allowed"]:
        return False
    return not expect["allowed"] or expect.get("priority") is None or body["spec"].get("priority") == expect["priority"]


def create_until(plane: ControlPlane, namespace: str, pod: dict[str, Any], expect: dict[str, Any]) -> tuple[int, Any]:
    """The dry-run create, repeated briefly while PreemptGuard's informers catch up with the staged classes."""
    deadline = time.monotonic() + 10
    while True:
        status, body = plane.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
        if settled(status, body, expect) or time.monotonic() > deadline:
            return status, body
        time.sleep(0.25)


@pytest.mark.parametrize("case", POD_CASES, ids=[c["name"].split(" ")[0] for c in POD_CASES])
def test_preemptguard_alone_sets_priorities_as_the_built_in_plugin(case: dict[str, Any],
                                                                   registered: Registered) -> None:
    plane = registered.plane
    if not stage(plane, case):
        pytest.fail(f"{case['name']}: cannot stage its classes (see test_admission_parity)", pytrace=False)
    pod = copy.deepcopy(case["object"])
    pod.setdefault("metadata", {}).setdefault("namespace", case["namespace"])
    expect = case["expect"]
    status, body = create_until(plane, case["namespace"], pod, expect)
    assert (status in (200, 201)) is expect["allowed"], (status, body, log_tail(registered.log))
    if expect["allowed"]:
        for field in ("priority", "preemptionPolicy"):
            if expect.get(field) is not None:
                assert body["spec"].get(field) == expect[field], field
    else:
        assert body["message"].startswith(DENIED_PREFIX), body["message"]
        assert expect["message_contains"] in body["message"]


def _bound_pod(name: str, node: str, cpu: str, priority_class: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "priorityClassName": priority_class,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


@pytest.fixture(scope="module")
def small_cluster(registered: Registered) -> Registered:
    stage_small_cluster(registered.plane)
    return registered


def stage_small_cluster(plane: ControlPlane) -> None:
    """Two classes, team-a and team-b, one 2-CPU node holding team-b's 1.5-CPU low-priority pod; bob may create
    and list pods in team-a, alice may do nothing."""
    for cls in ({"metadata": {"name": "conf-low"}, "value": 10}, {"metadata": {"name": "conf-high"}, "value": 1000}):
        plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                      {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **cls})
    for namespace in ("team-a", "team-b"):
        ensure_namespace(plane, namespace)
    plane.add_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "conf-node"},
                    "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                               "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                               "conditions": [{"type": "Ready", "status": "True"}]}})
    plane.apply(_bound_pod("batch", "conf-node", "1500m", "conf-low", "team-b"))
    # bob may create (and list) pods in team-a; alice may do nothing
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "pod-creator", "namespace": "team-a"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "bob-creates-pods", "namespace": "team-a"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-creator"},
               "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]}
    for obj, path in ((role, "roles"), (binding, "rolebindings")):
        status, body = plane.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/{path}", obj)
        assert status == 201, body


def test_kubectl_dry_run_shows_the_prediction_as_warnings(small_cluster: Registered, tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not on PATH"
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": "big", "namespace": "team-b"},
                                        "spec": {"priorityClassName": "conf-high", "containers": [
                                            {"name": "c", "image": "registry.k8s.io/pause:3.10",
                                             "resources": {"requests": {"cpu": "1"}}}]}}))
    deadline = time.monotonic() + 15
    while True:  # PreemptGuard's informers must have seen the node and the bound pod
        run = subprocess.run([kubectl, "--kubeconfig", str(small_cluster.plane.kubeconfig()), "apply",
                              "--dry-run=server", "-f", str(manifest)], capture_output=True, text=True, timeout=60)
        if "would preempt" in run.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert run.returncode == 0, run.stderr
    assert "Warning: would preempt 1 pod" in run.stderr and "conf-node" in run.stderr, run.stderr
    # Without --client-ca the review's namespace is only a claim: even the requester's own victim is not named.
    assert "(names withheld)" in run.stderr and "team-b/batch" not in run.stderr, run.stderr


def test_preview_authenticates_through_the_real_token_review(small_cluster: Registered) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "team-a"},
           "spec": {"priorityClassName": "conf-high", "containers": [
               {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}]}}
    assert small_cluster.preview({"pod": pod}, None)[0] == 401
    assert small_cluster.preview({"pod": pod}, "not-a-token")[0] == 401
    assert small_cluster.preview({"pod": pod}, ALICE.token)[0] == 403  # authenticated, may not create pods
    status, preview = small_cluster.preview({"pod": pod}, BOB.token)
    assert status == 200, preview
    (result,) = preview["results"]
    assert result["outcome"] == "Preempts" and result["node"] == "conf-node"
    # the victim is in team-b, another tenant than team-a's: a count, its namespace never named
    assert result["victims"] == [] and result["otherTenantVictims"] == {"count": 1, "pdbViolations": 0}
    assert "team-b" not in json.dumps(preview)


def test_kubectl_preempt_preview_through_the_real_api_server(small_cluster: Registered, tmp_path: Path) -> None:
    """The plugin's default source: a server-side dry-run create as the user, through real RBAC."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not on PATH"
    plugin_dir = Path(sys.executable).parent  # the venv that installed kubectl-preempt_preview
    assert (plugin_dir / "kubectl-preempt_preview").exists(), "install the package: pip install -e ."
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": "web", "namespace": "team-a"},
                                        "spec": {"priorityClassName": "conf-high", "containers": [
                                            {"name": "c", "image": "registry.k8s.io/pause:3.10",
                                             "resources": {"requests": {"cpu": "1"}}}]}}))
    env = {**os.environ, "PATH": f"{plugin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def preview(user: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl, "preempt-preview", "-f", str(manifest), "-o", "json", "--kubeconfig",
                               str(small_cluster.plane.kubeconfig(user))],
                              capture_output=True, text=True, timeout=60, env=env)

    run = preview("bob")
    assert run.returncode == 1, run.stderr
    (result,) = json.loads(run.stdout)["results"]
    assert (result["outcome"], result["node"]) == ("Preempts", "conf-node")
    denied = preview("alice")
    assert denied.returncode >= 2 and "forbidden" in denied.stderr.lower(), denied.stderr


# ---- under --client-ca: the API server's certificate on the admission port, tokens on the preview port -------
@pytest.fixture(scope="module")
def small_cluster_client_ca(registered_client_ca: Registered) -> Registered:
    stage_small_cluster(registered_client_ca.plane)
    return registered_client_ca


def test_under_client_ca_the_api_server_is_answered_and_names_the_requesters_tenant(
        small_cluster_client_ca: Registered, tmp_path: Path) -> None:
    """The real kube-apiserver presents docs/deploy.md's client certificate on the admission port, which requires
    it at the handshake: the caller is authenticated, so the requester's own victim is named."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not on PATH"
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": "big", "namespace": "team-b"},
                                        "spec": {"priorityClassName": "conf-high", "containers": [
                                            {"name": "c", "image": "registry.k8s.io/pause:3.10",
                                             "resources": {"requests": {"cpu": "1"}}}]}}))
    deadline = time.monotonic() + 15
    while True:  # PreemptGuard's informers must have seen the node and the bound pod
        run = subprocess.run([kubectl, "--kubeconfig", str(small_cluster_client_ca.plane.kubeconfig()), "apply",
                              "--dry-run=server", "-f", str(manifest)], capture_output=True, text=True, timeout=60)
        if "would preempt" in run.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert run.returncode == 0, run.stderr
    assert "Warning: would preempt 1 pod" in run.stderr and "team-b/batch" in run.stderr, run.stderr


def test_under_client_ca_kubectl_preempt_preview_webhook_url_is_answered_on_the_preview_port(
        small_cluster_client_ca: Registered, tmp_path: Path) -> None:
    """`kubectl preempt-preview --webhook-url` with a real service-account-less user token: answered on
    --preview-port without a client certificate (TokenReview and SubjectAccessReview through the real API server);
    the admission port refuses the same caller at the handshake (exit 3: PreemptGuard cannot be reached there)."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not on PATH"
    plugin_dir = Path(sys.executable).parent
    assert (plugin_dir / "kubectl-preempt_preview").exists(), "install the package: pip install -e ."
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": "web", "namespace": "team-a"},
                                        "spec": {"priorityClassName": "conf-high", "containers": [
                                            {"name": "c", "image": "registry.k8s.io/pause:3.10",
                                             "resources": {"requests": {"cpu": "1"}}}]}}))
    env = {**os.environ, "PATH": f"{plugin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    cluster = small_cluster_client_ca

    def preview(url: str, token: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl, "preempt-preview", "-f", str(manifest), "-o", "json", "--webhook-url", url,
                               "--token", token, "--certificate-authority", str(cluster.ca_file),
                               "--request-timeout", "20s"], capture_output=True, text=True, timeout=60, env=env)

    deadline = time.monotonic() + 15
    while (run := preview(cluster.url, BOB.token)).returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.5)  # PreemptGuard's informers must have seen the node and the bound pod
    assert run.returncode == 1, run.stderr
    (result,) = json.loads(run.stdout)["results"]
    assert (result["outcome"], result["node"]) == ("Preempts", "conf-node")
    assert result["victims"] == [] and result["otherTenantVictims"] == {"count": 1, "pdbViolations": 0}
    denied = preview(cluster.url, ALICE.token)
    assert denied.returncode == 2 and "Forbidden" in denied.stderr, denied.stderr
    refused = preview(cluster.admission_url, BOB.token)
    assert refused.returncode == 3 and "cannot reach PreemptGuard" in refused.stderr, refused.stderr
    assert cluster.admission_url != cluster.url
