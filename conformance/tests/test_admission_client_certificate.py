"""docs/deploy.md's AdmissionConfiguration and kubeconfig on a real kube-apiserver: with them the API server
presents the client certificate to a webhook that requires one; without them it cannot call that webhook.

The webhook here is a minimal TLS server that demands a client certificate (what `--client-ca` does) and
allows every review, so the test shows the API server's side of the contract on its own."""

from __future__ import annotations

import base64
import datetime
import http.server
import ipaddress
import json
import re
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import REPO, ControlPlane, ControlPlaneError, kube_bin_dir
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLIENT_CN = "kube-apiserver-admission-client"


def issue(path: Path, cn: str, *, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None,
          usage: x509.ObjectIdentifier | None = None, ip: str | None = None) -> tuple[x509.Certificate, Any]:
    """A certificate and key as PEM files ``<path>.crt``/``<path>.key``: a CA when ``issuer`` is None."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1)))
    if issuer is None:
        builder = builder.issuer_name(name).add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
        signer = key
    else:
        builder = builder.issuer_name(issuer[0].subject)
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
        signer = issuer[1]
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), False)
    if ip is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), False)
    cert = builder.sign(signer, hashes.SHA256())
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    path.with_suffix(".key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert, key


class RequireClientCertificate(http.server.BaseHTTPRequestHandler):
    """Allows every AdmissionReview; records the CN of the client certificate the caller presented."""

    seen: list[str] = []

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        peer = self.connection.getpeercert()  # type: ignore[attr-defined]
        self.seen.append(dict(x[0] for x in peer["subject"])["commonName"])
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": {"uid": review["request"]["uid"], "allowed": True}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def documented_block(first_line: str) -> str:
    text = (REPO / "docs" / "deploy.md").read_text()
    blocks = re.findall(rf"```yaml\n{re.escape(first_line)}\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1, f"docs/deploy.md must show one block starting {first_line!r}"
    return str(blocks[0])


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """The requiring webhook: (its URL, its serving CA, the directory with the client CA and certificate)."""
    work = tmp_path_factory.mktemp("client-cert")
    serving_ca = issue(work / "serving-ca", "serving-ca")
    issue(work / "serving", "127.0.0.1", issuer=serving_ca, usage=ExtendedKeyUsageOID.SERVER_AUTH, ip="127.0.0.1")
    client_ca = issue(work / "admission-client-ca", "preemptguard-admission-client-ca")
    issue(work / "admission-client", CLIENT_CN, issuer=client_ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(work / "serving.crt", work / "serving.key")
    context.load_verify_locations(work / "admission-client-ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RequireClientCertificate)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", work / "serving-ca.crt", work
    finally:
        server.shutdown()
        server.server_close()


def register(plane: ControlPlane, url: str, serving_ca: Path) -> None:
    plane.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "client-cert"}})
    plane.request("POST", "/api/v1/namespaces/client-cert/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    status, body = plane.request("POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "requires-client-certificate"},
        "webhooks": [{"name": "pods.preemptguard.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "failurePolicy": "Fail", "timeoutSeconds": 5,
                      "clientConfig": {"url": f"{url}/mutate/pods",
                                       "caBundle": base64.b64encode(serving_ca.read_bytes()).decode()},
                      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["pods"]}],
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "client-cert"}}}]})
    assert status in (201, 409), body


def dry_run_pod(plane: ControlPlane) -> tuple[int, Any]:
    return plane.request("POST", "/api/v1/namespaces/client-cert/pods?dryRun=All", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})


def eventually(plane: ControlPlane, done: Any) -> tuple[int, Any]:
    deadline = time.monotonic() + 20  # a new configuration reaches admission through an informer
    while True:
        status, body = dry_run_pod(plane)
        if done(status, body) or time.monotonic() > deadline:
            return status, body
        time.sleep(0.25)


def test_documented_admission_configuration_presents_the_client_certificate(
        webhook: tuple[str, Path, Path], tmp_path: Path) -> None:
    url, serving_ca, certs = webhook
    admission = documented_block("# /etc/kubernetes/admission/admission-config.yaml")
    kubeconfig = documented_block("# /etc/kubernetes/admission/webhook-kubeconfig.yaml")
    # The docs name the user after the Service; a URL webhook is matched by host:port (what a test can reach).
    kubeconfig = kubeconfig.replace("preemptguard.preemptguard.svc", url.removeprefix("https://"))
    assert "preemptguard.preemptguard.svc" not in kubeconfig
    for text, name in ((admission, "admission-config.yaml"), (kubeconfig, "webhook-kubeconfig.yaml")):
        (certs / name).write_text(text.replace("/etc/kubernetes/admission/", f"{certs}/"))  # stands for that dir
    plane = ControlPlane(tmp_path / "plane", kube_bin_dir(),
                         extra_apiserver_args=[f"--admission-control-config-file={certs}/admission-config.yaml"])
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        register(plane, url, serving_ca)
        RequireClientCertificate.seen.clear()
        status, body = eventually(plane, lambda s, b: s == 201)
        assert status == 201, body
        assert CLIENT_CN in RequireClientCertificate.seen
    finally:
        plane.stop()


def test_without_it_the_api_server_cannot_call_a_webhook_that_requires_one(
        webhook: tuple[str, Path, Path], control_plane: ControlPlane) -> None:
    url, serving_ca, _ = webhook
    register(control_plane, url, serving_ca)
    try:
        status, body = eventually(control_plane, lambda s, b: "failed calling webhook" in str(b))
        assert status >= 400 and 'failed calling webhook "pods.preemptguard.io"' in body["message"], body
    finally:  # the shared control plane must not keep a webhook that points at a server about to stop
        control_plane.request(
            "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/requires-client-certificate")
