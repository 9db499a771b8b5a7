"""A rotated certificate is picked up by the running server while clients keep sending requests, without one
failure. The files are swapped exactly the way the kubelet updates a Secret volume (``..data`` symlink)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import ssl
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509

from webhook.certs.issuance import generate_ca, issue_serving_certificate
from webhook.certs.material import merge_trust_bundle
from webhook.routes import HEALTHZ_PATH, MUTATE_PODS_PATH
from webhook.server.app import RunningServer, make_app, start_server
from webhook.server.settings import ServerSettings
from webhook.sources.source import SnapshotSource

SANS = ["localhost", "127.0.0.1"]
RUN_LIMIT_SECONDS = 20.0


class SecretVolume:
    """A directory laid out like a kubelet Secret volume: ``tls.crt -> ..data/tls.crt``, ``..data -> ..<ts>``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.generation = 0

    def publish(self, files: dict[str, bytes]) -> None:
        self.generation += 1
        payload = self.root / f"..{self.generation:04d}_{time.time_ns()}"
        payload.mkdir()
        for name, data in files.items():
            (payload / name).write_bytes(data)
        tmp_link = self.root / "..data_tmp"
        tmp_link.symlink_to(payload.name)
        os.replace(tmp_link, self.root / "..data")  # the atomic step, as in kubelet's AtomicWriter
        for name in files:
            link = self.root / name
            if not link.is_symlink():
                link.symlink_to(f"..data/{name}")

    def path(self, name: str) -> Path:
        return self.root / name


@dataclass
class Traffic:
    failures: list[str] = field(default_factory=list)
    serials: list[int] = field(default_factory=list)  # one per new connection, in order
    keepalive_requests: int = 0
    mutate_requests: int = 0


def serial_of(ssl_object: ssl.SSLObject) -> int:
    der = ssl_object.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


async def get_on_new_connection(port: int, client: ssl.SSLContext, path: str = HEALTHZ_PATH) -> tuple[int, int]:
    """One GET over a fresh TLS connection to localhost: (HTTP status, serial of the served certificate)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
    try:
        serial = serial_of(writer.get_extra_info("ssl_object"))
        writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        status_line = await reader.readline()
        await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    return int(status_line.split()[1]), serial


def pod_review() -> dict[str, object]:
    uid = str(uuid.uuid4())
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
        "namespace": "default", "name": "web", "object": pod, "userInfo": {"username": "alice"},
        "dryRun": False}}


async def new_connection_loop(port: int, client: ssl.SSLContext, traffic: Traffic, stop: asyncio.Event) -> None:
    """GET /healthz on a fresh TLS connection each time, recording which certificate answered."""
    while not stop.is_set():
        try:
            status, serial = await get_on_new_connection(port, client)
            traffic.serials.append(serial)
            if status != 200:
                traffic.failures.append(f"healthz {status}")
        except (OSError, ssl.SSLError, ValueError, IndexError) as exc:
            traffic.failures.append(f"new connection: {type(exc).__name__}: {exc}")
        await asyncio.sleep(0.01)


async def keepalive_loop(base: str, client: ssl.SSLContext, traffic: Traffic, stop: asyncio.Event) -> None:
    """Alternating GET /healthz and POST /mutate/pods over pooled connections, like the API server."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client, limit=2)) as session:
        while not stop.is_set():
            try:
                review = pod_review()
                async with session.post(base + MUTATE_PODS_PATH, json=review) as response:
                    body = await response.json()
                    if response.status != 200 or body["response"]["uid"] != review["request"]["uid"]:  # type: ignore[index]
                        traffic.failures.append(f"mutate {response.status}: {body}")
                    traffic.mutate_requests += 1
                async with session.get(base + HEALTHZ_PATH) as response:
                    if response.status != 200:
                        traffic.failures.append(f"keep-alive healthz {response.status}")
                    await response.read()
                    traffic.keepalive_requests += 1
            except (aiohttp.ClientError, OSError, ssl.SSLError) as exc:
                traffic.failures.append(f"keep-alive: {type(exc).__name__}: {exc}")
            await asyncio.sleep(0.005)


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "snapshot.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    return path


@pytest.fixture
async def volume(tmp_path: Path) -> AsyncIterator[SecretVolume]:
    root = tmp_path / "tls"
    root.mkdir()
    yield SecretVolume(root)


async def start(volume: SecretVolume, snapshot: Path) -> RunningServer:
    settings = ServerSettings(host="127.0.0.1", port=0, metrics_port=0, tls_cert=volume.path("tls.crt"),
                              tls_key=volume.path("tls.key"), tls_reload_interval=0.1)
    app = make_app(SnapshotSource(snapshot), settings)
    return await start_server(app, settings)


def client_context(ca_bundle_pem: bytes) -> ssl.SSLContext:
    """Verifies the server against ``ca_bundle_pem`` and its name, as the API server does with caBundle."""
    context = ssl.create_default_context(cadata=ca_bundle_pem.decode())
    context.check_hostname = True
    return context


@pytest.mark.parametrize("rotation", ["same-ca", "new-ca-with-merged-bundle"])
async def test_rotated_certificate_is_served_without_one_failed_request(
        volume: SecretVolume, snapshot: Path, rotation: str) -> None:
    ca_cert, ca_key = generate_ca("rotation-test-ca", 30)
    cert1, key1 = issue_serving_certificate(ca_cert, ca_key, SANS, 30)
    if rotation == "same-ca":
        trusted = ca_cert
        cert2, key2 = issue_serving_certificate(ca_cert, ca_key, SANS, 30)
    else:
        # preempt-guard certs: a new CA, caBundle = new + old CA patched in first, then the Secret swapped.
        new_ca_cert, new_ca_key = generate_ca("rotation-test-ca-2", 30)
        cert2, key2 = issue_serving_certificate(new_ca_cert, new_ca_key, SANS, 30)
        trusted = merge_trust_bundle(new_ca_cert, ca_cert, datetime.datetime.now(datetime.UTC))
    old_serial = x509.load_pem_x509_certificate(cert1).serial_number
    new_serial = x509.load_pem_x509_certificate(cert2).serial_number

    volume.publish({"tls.crt": cert1, "tls.key": key1})
    server = await start(volume, snapshot)
    traffic = Traffic()
    stop = asyncio.Event()
    client = client_context(trusted)
    base = f"https://localhost:{server.https_port}"
    loops = [asyncio.create_task(new_connection_loop(server.https_port, client, traffic, stop)),
             asyncio.create_task(keepalive_loop(base, client, traffic, stop))]
    try:
        deadline = time.monotonic() + RUN_LIMIT_SECONDS
        while len(traffic.serials) < 20 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        volume.publish({"tls.crt": cert2, "tls.key": key2})
        rotated_at = len(traffic.serials)
        while time.monotonic() < deadline and traffic.serials[-20:].count(new_serial) < 20:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*loops)
        await server.stop()

    assert traffic.failures == []
    assert traffic.serials[:rotated_at] == [old_serial] * rotated_at
    assert traffic.serials[-20:] == [new_serial] * 20, "new connections never saw the rotated certificate"
    # Once a handshake has seen the new certificate, no later handshake gets the old one back.
    first_new = traffic.serials.index(new_serial)
    assert set(traffic.serials[first_new:]) == {new_serial}
    assert traffic.mutate_requests > 10 and traffic.keepalive_requests > 10


async def test_half_written_rotation_keeps_serving_the_old_certificate(volume: SecretVolume, snapshot: Path) -> None:
    """A certificate that does not match its key (caught mid-update) is not loaded; requests keep working."""
    ca_cert, ca_key = generate_ca("rotation-test-ca", 30)
    cert1, key1 = issue_serving_certificate(ca_cert, ca_key, SANS, 30)
    cert2, key2 = issue_serving_certificate(ca_cert, ca_key, SANS, 30)
    volume.publish({"tls.crt": cert1, "tls.key": key1})
    server = await start(volume, snapshot)
    client = client_context(ca_cert)
    try:
        volume.publish({"tls.crt": cert2, "tls.key": key1})  # mismatched pair
        await asyncio.sleep(0.5)
        status, serial = await get_on_new_connection(server.https_port, client)
        assert (status, serial) == (200, x509.load_pem_x509_certificate(cert1).serial_number)
        volume.publish({"tls.crt": cert2, "tls.key": key2})
        for _ in range(50):
            await asyncio.sleep(0.1)
            status, serial = await get_on_new_connection(server.https_port, client)
            assert status == 200
            if serial == x509.load_pem_x509_certificate(cert2).serial_number:
                break
        else:
            pytest.fail("the completed rotation was never picked up")
    finally:
        await server.stop()
