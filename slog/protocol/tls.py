"""TLS for the SSL and SASL_SSL listeners, the inter-broker channel and the client.

Contexts are built from Kafka's setting names (PEM files only). A bad or
missing file is a :class:`TlsConfigError` whose message names the file, so a
broker refuses to start with one clear line.

:class:`TlsPipe` is TLS without a socket: an ``ssl.SSLObject`` over two
memory BIOs. The owner moves the bytes: what arrives from the network goes in
with :meth:`TlsPipe.feed`, plaintext comes out of :meth:`TlsPipe.read_into`,
and :meth:`TlsPipe.encrypt` turns a list of response chunks (memoryviews of
segment maps included) into ciphertext the owner sends with one ``send``. So
the server and the broker channel keep their non-blocking, buffer-at-a-time
design, and nothing waits on a handshake.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping

from slog.core.errors import SlogError

Chunk = bytes | bytearray | memoryview
# Plaintext encrypted per step: TLS records are 16 KiB; this bounds the ciphertext
# a connection holds at once, however large the response.
ENCRYPT_BATCH = 256 * 1024
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(SlogError, ValueError):
    """A TLS setting names a missing or unusable file, or is inconsistent."""


# -- contexts ------------------------------------------------------------------------------
def server_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The broker's listener context: its key and certificate, client auth as configured."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(context, settings)
    _load_keystore(context, settings, required=True)
    client_auth = settings.get("ssl.client.auth", "none")
    truststore = settings.get("ssl.truststore.location", "")
    if client_auth != "none":
        if not truststore:
            raise TlsConfigError(f"ssl.client.auth={client_auth} needs "
                                 "ssl.truststore.location (the CA bundle client "
                                 "certificates are checked against)")
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" \
            else ssl.CERT_OPTIONAL
    if truststore:
        _load_truststore(context, truststore, "ssl.truststore.location")
    return context


def broker_client_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """How a broker connects to another broker's SSL listener: the peer's certificate is
    checked against the truststore (and its host name, unless
    ``ssl.endpoint.identification.algorithm`` is empty); our own certificate is shown
    for ``ssl.client.auth``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_versions(context, settings)
    truststore = settings.get("ssl.truststore.location", "")
    if not truststore:
        raise TlsConfigError("the inter-broker listener uses TLS: set "
                             "ssl.truststore.location to the CA bundle that signed the "
                             "brokers' certificates")
    _load_truststore(context, truststore, "ssl.truststore.location")
    context.check_hostname = settings.get("ssl.endpoint.identification.algorithm",
                                          "https") == "https"
    _load_keystore(context, settings, required=False)
    return context


def client_context(cafile: str | None = None, certfile: str | None = None,
                   keyfile: str | None = None, password: str | None = None,
                   check_hostname: bool = True) -> ssl.SSLContext:
    """A client's context: the broker is verified against ``cafile`` (else the system's
    CAs); ``certfile``/``keyfile`` are shown when the broker asks for a certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cafile:
        _load_truststore(context, cafile, "the CA file")
    else:
        context.load_default_certs()
    context.check_hostname = check_hostname
    if certfile:
        _load_cert_chain(context, certfile, keyfile or None, password, "the certificate")
    elif keyfile:
        raise TlsConfigError("a client key needs its certificate too")
    return context


def _set_versions(context: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    enabled = [v.strip() for v in settings.get("ssl.enabled.protocols",
                                              "TLSv1.2,TLSv1.3").split(",") if v.strip()]
    unknown = [v for v in enabled if v not in _VERSIONS]
    if unknown or not enabled:
        raise TlsConfigError(f"ssl.enabled.protocols: {', '.join(unknown) or 'empty'}; "
                             "slog speaks TLSv1.2 and TLSv1.3")
    versions = sorted(_VERSIONS[v] for v in enabled)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _load_keystore(context: ssl.SSLContext, settings: Mapping[str, str],
                   required: bool) -> None:
    location = settings.get("ssl.keystore.location", "")
    chain = settings.get("ssl.keystore.certificate.chain", "")
    key = settings.get("ssl.keystore.key", "")
    password = settings.get("ssl.key.password", "") or None
    if location:
        _load_cert_chain(context, location, None, password, "ssl.keystore.location")
    elif chain or key:
        if not (chain and key):
            raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go "
                                 "together")
        with _as_file(chain) as chain_path, _as_file(key) as key_path:
            _load_cert_chain(context, chain_path, key_path, password,
                             "ssl.keystore.certificate.chain/ssl.keystore.key")
    elif required:
        raise TlsConfigError("a TLS listener needs a certificate: set ssl.keystore.location "
                             "(a PEM file with the private key and certificate chain) or "
                             "ssl.keystore.certificate.chain and ssl.keystore.key")


@contextlib.contextmanager
def _as_file(value: str) -> Iterator[str]:
    """A PEM setting is a file name, or (as in Kafka) the PEM text itself."""
    if not value.lstrip().startswith("-----BEGIN"):
        yield value
        return
    fd, path = tempfile.mkstemp(suffix=".pem")  # 0600: it may be a private key
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(value)
        yield path
    finally:
        os.unlink(path)


def _load_cert_chain(context: ssl.SSLContext, certfile: str, keyfile: str | None,
                     password: str | None, setting: str) -> None:
    for path in filter(None, (certfile, keyfile)):
        _check_readable(path, setting)
    try:
        context.load_cert_chain(certfile, keyfile, password=password)
    except ssl.SSLError as exc:
        files = " and ".join(filter(None, (certfile, keyfile)))
        raise TlsConfigError(f"{setting}: cannot load a private key and certificate from "
                             f"{files} ({exc.reason or exc}; a wrong ssl.key.password, a "
                             "key that does not match the certificate, or not PEM)") from None


def _load_truststore(context: ssl.SSLContext, path: str, setting: str) -> None:
    _check_readable(path, setting)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"{setting}: {path} holds no usable PEM certificate "
                             f"({exc.reason or exc})") from None


def _check_readable(path: str, setting: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise TlsConfigError(f"{setting}: cannot read {path} "
                             f"({exc.strerror or exc})") from None


# -- the byte pump -------------------------------------------------------------------------
class TlsPipe:
    """One TLS connection's state, driven by its owner's non-blocking socket."""

    def __init__(self, context: ssl.SSLContext, server_side: bool,
                 server_hostname: str | None = None):
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing,
                                     server_side=server_side, server_hostname=server_hostname)
        self.handshaken = False

    def feed(self, data: Chunk) -> None:
        """Ciphertext received from the peer."""
        self._incoming.write(data)

    def feed_eof(self) -> None:
        self._incoming.write_eof()

    def handshake(self) -> bool:
        """Advance the handshake; True once done. Raises ``ssl.SSLError`` on a bad peer."""
        if self.handshaken:
            return True
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            return False
        self.handshaken = True
        return True

    def read_into(self, view: memoryview) -> int:
        """Plaintext into ``view``: the count, 0 at the peer's close_notify, or -1 when
        more ciphertext is needed first."""
        try:
            # typeshed says read() returns bytes; into a buffer it returns the count.
            return self._tls.read(len(view), view)  # type: ignore[return-value]
        except ssl.SSLWantReadError:
            return -1
        except ssl.SSLZeroReturnError:
            return 0

    def buffered(self) -> bool:
        """Whether decrypted or undecrypted bytes wait here (select cannot see them)."""
        return self._tls.pending() > 0 or self._incoming.pending > 0

    def encrypt(self, chunks: list[Chunk], limit: int = ENCRYPT_BATCH) -> list[Chunk]:
        """Encrypt from the front of ``chunks`` up to about ``limit`` plaintext bytes;
        returns the chunks not encrypted yet (views, no copies)."""
        done = 0
        while chunks and done < limit:
            chunk = chunks[0]
            size = chunk.nbytes if type(chunk) is memoryview else len(chunk)
            if size > limit - done:
                head = memoryview(chunk)[:limit - done]
                self._write_all(head)
                chunks = [memoryview(chunk)[limit - done:], *chunks[1:]]
                break
            self._write_all(chunk)
            done += size
            chunks = chunks[1:]
        return chunks

    def _write_all(self, data: Chunk) -> None:
        view = memoryview(data)
        while view.nbytes:
            written = self._tls.write(view)
            view = view[written:]

    def output(self) -> bytes:
        """Ciphertext to send to the peer (handshake messages, records, alerts)."""
        return self._outgoing.read()

    def peer_certificate(self) -> Mapping[str, object] | None:
        return self._tls.getpeercert() or None
