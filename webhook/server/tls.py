"""TLS for the webhook: certificate generation (also used by ``preempt-guard certs``) and serving contexts.

Serving certificates come either from files, re-read when they change so a rotated Secret takes effect
without a restart, or from a self-signed certificate generated at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_SANS: tuple[str, ...] = ("localhost", "127.0.0.1")
# TLS 1.2 suites with forward secrecy and AEAD only; TLS 1.3 suites are OpenSSL's (all modern).
MODERN_TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
# Clock skew allowance for freshly generated certificates.
_BACKDATE = datetime.timedelta(minutes=5)


# ---- certificate generation ---------------------------------------------------------------------
def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _validity(days: int) -> tuple[datetime.datetime, datetime.datetime]:
    if days <= 0:
        raise ValueError(f"certificate validity must be positive, got {days} days")
    now = datetime.datetime.now(datetime.UTC)
    return now - _BACKDATE, now + datetime.timedelta(days=days)


def subject_alternative_names(sans: Sequence[str]) -> x509.SubjectAlternativeName:
    """IP addresses as IPAddress entries, everything else as DNSName; duplicates dropped, order kept."""
    entries: list[x509.GeneralName] = []
    seen: set[str] = set()
    for san in sans:
        san = san.strip()
        if not san or san in seen:
            continue
        seen.add(san)
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(san)))
        except ValueError:
            entries.append(x509.DNSName(san))
    if not entries:
        raise ValueError("a serving certificate needs at least one subject alternative name")
    return x509.SubjectAlternativeName(entries)


def _serving_extensions(
    builder: x509.CertificateBuilder, sans: Sequence[str], key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    return (
        builder.add_extension(subject_alternative_names(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _certificate_builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, days: int,
                         *, not_after_cap: datetime.datetime | None = None) -> x509.CertificateBuilder:
    """Subject, issuer, public key, a random serial and the validity window: what every certificate here shares."""
    not_before, not_after = _validity(days)
    if not_after_cap is not None:
        not_after = min(not_after, not_after_cap)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )


def _serving_subject(sans: Sequence[str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sans[0] if sans else "preempt-guard")])


def generate_ca(common_name: str, days: int) -> tuple[bytes, bytes]:
    """A new self-signed CA: (certificate PEM, private key PEM)."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _certificate_builder(name, name, key, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_serving_certificate(
    ca_cert_pem: bytes, ca_key_pem: bytes, sans: list[str], days: int
) -> tuple[bytes, bytes]:
    """A serving certificate for ``sans`` signed by the given CA: (certificate PEM, private key PEM)."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError("the CA key must be an EC or RSA private key")
    key = _new_key()
    builder = (
        _certificate_builder(_serving_subject(sans), ca_cert.subject, key, days,
                             not_after_cap=ca_cert.not_valid_after_utc)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    cert = _serving_extensions(builder, sans, key).sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def self_signed_serving_certificate(sans: Sequence[str], days: int) -> tuple[bytes, bytes]:
    """A self-signed serving certificate (it is its own trust anchor): (certificate PEM, private key PEM)."""
    key = _new_key()
    name = _serving_subject(sans)
    builder = _certificate_builder(name, name, key, days)
    cert = _serving_extensions(builder, sans, key).sign(key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def serving_sans(extra: Sequence[str] = ()) -> list[str]:
    """localhost, 127.0.0.1 and every ``--tls-san``, without duplicates."""
    out: list[str] = []
    for san in (*DEFAULT_SANS, *extra):
        if san and san not in out:
            out.append(san)
    return out


# ---- serving contexts ---------------------------------------------------------------------------
def server_context(cert_file: str | Path, key_file: str | Path) -> ssl.SSLContext:
    """A server context with TLS 1.2 minimum and modern ciphers, loaded from PEM files."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(MODERN_TLS12_CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(str(cert_file), str(key_file))
    return context


def _file_identity(path: Path) -> tuple[int, int, int, int]:
    # stat() follows symlinks, so a Kubernetes Secret volume's atomic ..data swap is seen as a change.
    st = path.stat()
    return (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_size)


@dataclass(frozen=True, slots=True)
class _Loaded:
    context: ssl.SSLContext
    identity: tuple[tuple[int, int, int, int], tuple[int, int, int, int]]


class ReloadingTLS:
    """A serving context whose certificate follows ``cert_file``/``key_file``.

    ``context`` is what the listening socket uses. New handshakes are switched (in the SNI callback,
    which OpenSSL calls for every ClientHello, with or without a server name) to the most recently
    loaded context, so rotation needs no restart and never touches connections in flight. A file pair
    that does not load (e.g. caught mid-rotation) is logged and the previous certificate stays.
    """

    def __init__(self, cert_file: str | Path, key_file: str | Path, *, interval: float = 1.0) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.interval = interval
        self._current = self._load()
        self.context = self._current.context
        self.context.sni_callback = self._select_context
        self._task: asyncio.Task[None] | None = None

    def _load(self) -> _Loaded:
        identity = (_file_identity(self.cert_file), _file_identity(self.key_file))
        return _Loaded(server_context(self.cert_file, self.key_file), identity)

    def _select_context(self, ssl_object: ssl.SSLObject, server_name: str | None, base: ssl.SSLContext) -> None:
        current = self._current.context
        if ssl_object.context is not current:
            ssl_object.context = current

    def reload_if_changed(self) -> bool:
        """Load the files again when either changed; True when a new certificate is now served."""
        try:
            identity = (_file_identity(self.cert_file), _file_identity(self.key_file))
        except OSError as exc:
            log.warning("TLS files not readable, keeping the current certificate: %s", exc)
            return False
        if identity == self._current.identity:
            return False
        try:
            loaded = self._load()
        except (OSError, ssl.SSLError) as exc:
            log.warning("TLS certificate not reloaded (will retry): %s", exc)
            return False
        self._current = loaded
        log.info("TLS certificate reloaded from %s", self.cert_file)
        return True

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.reload_if_changed()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="tls-reload")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class SelfSignedTLS:
    """A serving context with a certificate generated at start-up (files kept in a private temp dir)."""

    def __init__(self, sans: Sequence[str], *, days: int = 365) -> None:
        self.sans = serving_sans(sans)
        self.cert_pem, key_pem = self_signed_serving_certificate(self.sans, days)
        self._dir = tempfile.TemporaryDirectory(prefix="preempt-guard-tls-")
        self.cert_file = Path(self._dir.name) / "tls.crt"
        self.key_file = Path(self._dir.name) / "tls.key"
        self.cert_file.write_bytes(self.cert_pem)
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key_pem)
        self.context = server_context(self.cert_file, self.key_file)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        self._dir.cleanup()


ServingTLS = ReloadingTLS | SelfSignedTLS


def serving_tls(
    *, cert_file: str | Path | None, key_file: str | Path | None, self_signed: bool, sans: Sequence[str] = (),
    reload_interval: float = 1.0,
) -> ServingTLS:
    """The TLS setup the flags ask for; exactly one of a cert/key pair or ``self_signed``."""
    if self_signed:
        if cert_file or key_file:
            raise ConfigError("--tls-self-signed cannot be combined with --tls-cert/--tls-key")
        return SelfSignedTLS(sans)
    if not cert_file or not key_file:
        raise ConfigError("TLS needs both --tls-cert and --tls-key, or --tls-self-signed")
    try:
        return ReloadingTLS(cert_file, key_file, interval=reload_interval)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load TLS certificate {cert_file} / key {key_file}: {exc}") from exc
