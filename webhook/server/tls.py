"""TLS serving for the webhook: SSL contexts and where their certificate comes from.

Serving certificates come either from files, re-read when they change so a rotated Secret takes effect
without a restart, or from a self-signed certificate generated at start-up (``webhook.certs.issuance``).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from webhook.certs.issuance import self_signed_serving_certificate
from webhook.errors import ConfigError
from webhook.tasks import cancel_and_wait

log = logging.getLogger(__name__)

DEFAULT_SANS: tuple[str, ...] = ("localhost", "127.0.0.1")
# TLS 1.2 suites with forward secrecy and AEAD only; TLS 1.3 suites are OpenSSL's (all modern).
MODERN_TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


def serving_sans(extra: Sequence[str] = ()) -> list[str]:
    """localhost, 127.0.0.1 and every ``--tls-san``, without duplicates."""
    out: list[str] = []
    for san in (*DEFAULT_SANS, *extra):
        if san and san not in out:
            out.append(san)
    return out


# ---- serving contexts ---------------------------------------------------------------------------
def server_context(cert_file: str | Path, key_file: str | Path, client_ca: str | Path | None = None) -> ssl.SSLContext:
    """A server context with TLS 1.2 minimum and modern ciphers, loaded from PEM files.

    With ``client_ca`` every client must present a certificate chaining to a CA of that bundle, or the
    handshake fails (``CERT_REQUIRED``): a connection without one never reaches HTTP, so it holds no connection
    slot. Kubelet probes, which carry none, use the metrics listener (``--metrics-port``); ``/preview`` callers, who
    carry a bearer token instead, use the ``--preview-port`` listener, served without ``client_ca``.

    Sessions are never resumed: a resumed session skips the certificate check, so after a client CA rotation a
    client of the old CA could come back without being checked against the new bundle. No session tickets are
    issued (TLS 1.2 or 1.3), and with ``client_ca`` TLS 1.3 is the minimum: TLS 1.2 also resumes by session ID
    from OpenSSL's server cache, which Python cannot turn off (the kube-apiserver's Go client speaks TLS 1.3).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(MODERN_TLS12_CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_NO_TICKET
    context.num_tickets = 0
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(str(cert_file), str(key_file))
    if client_ca is not None:
        context.load_verify_locations(cafile=str(client_ca))
        context.verify_mode = ssl.CERT_REQUIRED
        context.minimum_version = ssl.TLSVersion.TLSv1_3
    return context


FileIdentity = tuple[int, int, int, int]


def _file_identity(path: Path) -> FileIdentity:
    # stat() follows symlinks, so a Kubernetes Secret volume's atomic ..data swap is seen as a change.
    st = path.stat()
    return (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_size)


def certificate_expiry(cert_file: str | Path) -> datetime.datetime:
    """When the first certificate of a PEM file expires (for the expiry gauge and its alert)."""
    return x509.load_pem_x509_certificate(Path(cert_file).read_bytes()).not_valid_after_utc


# Same horizon as the PreemptGuardCertificateExpiring alert.
EXPIRY_WARNING = datetime.timedelta(days=14)


def warn_if_expiring(cert_file: str | Path, not_after: datetime.datetime,
                     now: datetime.datetime | None = None) -> None:
    """A warning when the serving certificate just loaded has expired or expires within 14 days: the API server
    refuses an expired one, and with failurePolicy Ignore every pod is then admitted unchecked."""
    now = now or datetime.datetime.now(datetime.UTC)
    when = not_after.isoformat(timespec="seconds")
    if not_after <= now:
        log.warning("the serving certificate %s expired at %s: the API server will refuse it", cert_file, when)
    elif not_after - now <= EXPIRY_WARNING:
        log.warning("the serving certificate %s expires at %s, in %d days", cert_file, when,
                    (not_after - now).days)


@dataclass(frozen=True, slots=True)
class _Loaded:
    context: ssl.SSLContext
    # The same certificate, asking no client certificate (the /preview listener); ``context`` itself without
    # --client-ca.
    anonymous: ssl.SSLContext
    # The certificate, the key and (with --client-ca) the client CA bundle, as last loaded.
    identity: tuple[FileIdentity, ...]
    not_after: datetime.datetime


class ReloadingTLS:
    """A serving context whose certificate follows ``cert_file``/``key_file``.

    ``context`` is what the listening socket uses. New handshakes are switched (in the SNI callback,
    which OpenSSL calls for every ClientHello, with or without a server name) to the most recently
    loaded context, so rotation needs no restart and never touches connections in flight. A file pair
    that does not load (e.g. caught mid-rotation) is logged and the previous certificate stays.
    ``anonymous_context`` serves the same certificate and never asks for a client certificate (the ``/preview``
    listener, whose callers authenticate by bearer token); it follows the files the same way.
    """

    def __init__(self, cert_file: str | Path, key_file: str | Path, *, interval: float = 1.0,
                 client_ca: str | Path | None = None) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.client_ca = client_ca
        self.interval = interval
        self._current = self._load()
        self.context = self._current.context
        self.context.sni_callback = self._select_context
        self.anonymous_context = self._current.anonymous
        if self.anonymous_context is not self.context:
            self.anonymous_context.sni_callback = self._select_anonymous_context
        self._task: asyncio.Task[None] | None = None

    def _identity(self) -> tuple[FileIdentity, ...]:
        files = (self.cert_file, self.key_file, *((Path(self.client_ca),) if self.client_ca is not None else ()))
        return tuple(_file_identity(path) for path in files)

    def _load(self) -> _Loaded:
        identity = self._identity()
        context = server_context(self.cert_file, self.key_file, self.client_ca)
        anonymous = context if self.client_ca is None else server_context(self.cert_file, self.key_file)
        not_after = certificate_expiry(self.cert_file)
        warn_if_expiring(self.cert_file, not_after)
        return _Loaded(context, anonymous, identity, not_after)

    @property
    def not_after(self) -> datetime.datetime:
        """When the certificate served now expires."""
        return self._current.not_after

    def _select_context(self, ssl_object: ssl.SSLObject, server_name: str | None, base: ssl.SSLContext) -> None:
        current = self._current.context
        if ssl_object.context is not current:
            ssl_object.context = current

    def _select_anonymous_context(self, ssl_object: ssl.SSLObject, server_name: str | None,
                                  base: ssl.SSLContext) -> None:
        current = self._current.anonymous
        if ssl_object.context is not current:
            ssl_object.context = current

    def reload_if_changed(self) -> bool:
        """Load the files again when either changed; True when a new certificate is now served."""
        try:
            identity = self._identity()
        except OSError as exc:
            log.warning("TLS files not readable, keeping the current certificate: %s", exc)
            return False
        if identity == self._current.identity:
            return False
        try:
            loaded = self._load()
        except (OSError, ssl.SSLError, ValueError) as exc:
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
        task, self._task = self._task, None
        await cancel_and_wait(task)


class SelfSignedTLS:
    """A serving context with a certificate generated at start-up (files kept in a private temp dir);
    ``anonymous_context`` serves it without asking for a client certificate (see ``ReloadingTLS``)."""

    def __init__(self, sans: Sequence[str], *, days: int = 365, client_ca: str | Path | None = None) -> None:
        self.sans = serving_sans(sans)
        issued = self_signed_serving_certificate(self.sans, days)
        self.cert_pem = issued.cert_pem
        self._dir = tempfile.TemporaryDirectory(prefix="preempt-guard-tls-")
        self.cert_file = Path(self._dir.name) / "tls.crt"
        self.key_file = Path(self._dir.name) / "tls.key"
        self.cert_file.write_bytes(self.cert_pem)
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(issued.key_pem)
        self.context = server_context(self.cert_file, self.key_file, client_ca)
        self.anonymous_context = self.context if client_ca is None else server_context(self.cert_file, self.key_file)
        self.not_after = certificate_expiry(self.cert_file)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        self._dir.cleanup()


ServingTLS = ReloadingTLS | SelfSignedTLS


def check_client_ca(client_ca: str | Path) -> None:
    """``ConfigError`` naming ``--client-ca`` when the bundle holds no readable CA certificate."""
    try:
        ssl.create_default_context(cafile=str(client_ca))
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"--client-ca {client_ca}: cannot load a CA bundle: {exc}") from exc


def serving_tls(
    *, cert_file: str | Path | None, key_file: str | Path | None, self_signed: bool, sans: Sequence[str] = (),
    reload_interval: float = 1.0, client_ca: str | Path | None = None,
) -> ServingTLS:
    """The TLS setup the flags ask for; exactly one of a cert/key pair or ``self_signed``."""
    if client_ca is not None:
        check_client_ca(client_ca)
    if self_signed:
        if cert_file or key_file:
            raise ConfigError("--tls-self-signed cannot be combined with --tls-cert/--tls-key")
        return SelfSignedTLS(sans, client_ca=client_ca)
    if not cert_file or not key_file:
        raise ConfigError("TLS needs both --tls-cert and --tls-key, or --tls-self-signed")
    try:
        return ReloadingTLS(cert_file, key_file, interval=reload_interval, client_ca=client_ca)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"cannot load TLS certificate {cert_file} / key {key_file}: {exc}") from exc
