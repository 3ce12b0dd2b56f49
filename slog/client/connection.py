"""A blocking connection to one Kafka broker (slog or Apache Kafka).

It negotiates versions with ApiVersions once (falling back to v0 per KIP-511)
and then sends requests built from plain dicts, shaped into the highest
version both sides support.

Requests can be pipelined: :meth:`BrokerConnection.send` writes a request and
returns at once, :meth:`BrokerConnection.receive` reads the oldest
outstanding response. Kafka brokers answer each connection's requests in
order, so responses are matched to requests by position and checked by
correlation id. :meth:`BrokerConnection.request` is send + receive.

TLS (an SSL or SASL_SSL listener) wraps the socket once it is connected; the
context comes from :func:`tls_context` (``security_protocol``/``ssl_cafile``
style settings) or, by default, from ``SLOG_TLS``/``SLOG_TLS_CA``/
``SLOG_TLS_CERT``/``SLOG_TLS_KEY``, as the CLI's ``--tls --ca`` set them. A TLS
socket may hold a decrypted response select() cannot see: callers that
select() ask :meth:`BrokerConnection.buffered` first.

A connection is not thread-safe: one thread owns it. Any transport failure
closes it and raises :class:`ConnectionClosedError` (or
:class:`BrokerUnavailableError` when connecting), so the owner can drop it
and reconnect.
"""

from __future__ import annotations

import functools
import itertools
import os
import socket
from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple

from slog.client.errors import (
    BrokerUnavailableError,
    ConnectionClosedError,
    InvalidArgumentError,
    KafkaError,
)
from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import decode_response, encode_request
from slog.protocol.errors import ErrorCode, ProtocolError
from slog.protocol.framing import recv_frame
from slog.protocol.shapes import shape

if TYPE_CHECKING:  # SASL code (hashlib, hmac) loads only for a login: CLI start-up time
    import ssl  # likewise TLS (OpenSSL) only for an SSL listener

    from slog.core.scram import SaslLogin

__all__ = [
    "CLIENT_MAX_VERSIONS",
    "BrokerConnection",
    "BrokerUnavailableError",
    "ConnectionClosedError",
    "UnsupportedApiError",
    "api_name",
]

MAX_RESPONSE_BYTES = 256 * 1024 * 1024
SOCKET_BUFFER_BYTES = 4 * 1024 * 1024
CLIENT_MAX_VERSIONS: dict[int, int] = {
    ApiKey.API_VERSIONS: 3,
    ApiKey.METADATA: 12,
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 6,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.DESCRIBE_CLUSTER: 1,
    ApiKey.ELECT_LEADERS: 2,  # v1+: election type (unclean)
    ApiKey.DESCRIBE_ACLS: 3,
    ApiKey.CREATE_ACLS: 3,
    ApiKey.DELETE_ACLS: 3,
    # v1 adds the key type (1: a transactional id's coordinator); Kafka 4 has no v0.
    ApiKey.FIND_COORDINATOR: 3,
    # Transactions' admin side (KIP-664; slog.client.transaction_admin).
    ApiKey.LIST_TRANSACTIONS: 1,  # v1: the duration filter
    ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.DESCRIBE_PRODUCERS: 0,
    ApiKey.WRITE_TXN_MARKERS: 1,
}


def sasl_login_from_env() -> SaslLogin | None:
    """The login named by ``SLOG_SASL_MECHANISM``, ``SLOG_SASL_USERNAME`` and
    ``SLOG_SASL_PASSWORD`` (None when no mechanism is set), so every command of
    the CLI can talk to a secured cluster."""
    mechanism = os.environ.get("SLOG_SASL_MECHANISM", "").strip().upper()
    if not mechanism:
        return None
    from slog.core.scram import SaslLogin

    username = os.environ.get("SLOG_SASL_USERNAME", "")
    if not username:
        raise InvalidArgumentError("SLOG_SASL_MECHANISM is set but SLOG_SASL_USERNAME is not")
    return SaslLogin(mechanism, username, os.environ.get("SLOG_SASL_PASSWORD", ""))


TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_FROM_ENV: Any = object()  # BrokerConnection(tls=...) default: the environment decides


def tls_context(security_protocol: str | None = None, ssl_cafile: str | None = None,
                ssl_certfile: str | None = None, ssl_keyfile: str | None = None,
                ssl_password: str | None = None, ssl_check_hostname: bool = True
                ) -> ssl.SSLContext | None:
    """A client TLS context from kafka-python-style settings; None for a plaintext
    protocol. ``ssl_cafile`` is the CA bundle brokers are checked against (default:
    the system's); ``ssl_certfile``/``ssl_keyfile`` answer ``ssl.client.auth``."""
    protocol = (security_protocol or "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SASL_PLAINTEXT", *TLS_PROTOCOLS):
        raise InvalidArgumentError(f"security_protocol {security_protocol!r} is not "
                                   "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    if protocol not in TLS_PROTOCOLS:
        return None
    from slog.protocol.tls import client_context

    return client_context(ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password,
                          ssl_check_hostname)


def tls_context_from_env() -> ssl.SSLContext | None:
    """The context named by ``SLOG_TLS`` (1/true) and ``SLOG_TLS_CA``/``_CERT``/``_KEY``."""
    enabled = os.environ.get("SLOG_TLS", "").strip().lower() in ("1", "true", "yes", "on")
    settings = tuple(os.environ.get(f"SLOG_TLS_{name}") or None
                     for name in ("CA", "CERT", "KEY"))
    return _cached_context(enabled, *settings) if enabled else None


@functools.lru_cache(maxsize=4)
def _cached_context(enabled: bool, ca: str | None, cert: str | None, key: str | None
                    ) -> ssl.SSLContext | None:
    # One context per process and settings: loading a CA bundle costs milliseconds.
    return tls_context("SSL" if enabled else None, ca, cert, key)


def api_name(api_key: int) -> str:
    """Kafka's name of an API (``ListGroups``), or ``API <n>`` for one slog does not know."""
    try:
        return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"API {api_key}"


class UnsupportedApiError(ConnectionError):
    """The broker does not speak this API in any version slog speaks.

    Raised before anything is sent, so the connection stays usable. The message
    names the API, which is what a user of another Kafka-protocol cluster (one
    without, say, ListGroups) needs to know.
    """

    def __init__(self, api_key: int, address: str, offered: tuple[int, int] = (0, -1),
                 ours: tuple[int, int] = (0, 0)):
        self.api_key = api_key
        self.api = api_name(api_key)
        low, high = offered
        if high < low:
            detail = f"broker {address} does not offer it"
        else:
            detail = (f"broker {address} offers versions {low}-{high}, "
                      f"slog speaks {ours[0]}-{ours[1]}")
        super().__init__(f"this cluster does not support {self.api} ({detail})")


class _Pending(NamedTuple):
    correlation_id: int
    api_key: int
    version: int


class BrokerConnection:
    def __init__(self, host: str, port: int, *, client_id: str = "slog", timeout_s: float = 10.0,
                 node_id: int = -1, sasl: SaslLogin | None = None,
                 tls: ssl.SSLContext | None = _FROM_ENV):
        self.host = host
        # TLS context (None: plaintext); by default from SLOG_TLS and SLOG_TLS_CA/_CERT/_KEY.
        self.tls = tls if tls is not _FROM_ENV else tls_context_from_env()
        # SASL login; by default from SLOG_SASL_MECHANISM/_USERNAME/_PASSWORD.
        self._sasl = sasl if sasl is not None else sasl_login_from_env()
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self._timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._correlation = itertools.count(1)
        self._pending: deque[_Pending] = deque()
        self.versions: dict[int, tuple[int, int]] = {}

    def __repr__(self) -> str:
        state = "connected" if self._sock is not None else "closed"
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {state}>"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses have not been received yet."""
        return len(self._pending)

    def fileno(self) -> int:
        """The socket's descriptor, for select(); -1 when closed."""
        return self._sock.fileno() if self._sock is not None else -1

    def connect(self) -> BrokerConnection:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self._timeout_s)
        except OSError as exc:
            raise BrokerUnavailableError(
                f"no broker at {self.host}:{self.port} ({exc.strerror or exc})"
            ) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER_BYTES)
        if self.tls is not None:
            sock = self._wrap(sock, self.tls)
        self._sock = sock
        self._pending.clear()
        try:
            self._negotiate()
        except ConnectionError as exc:
            self.close()
            maybe_tls = "" if self.tls is not None else \
                "; if it is an SSL listener, connect with TLS (--tls)"
            raise BrokerUnavailableError(
                f"broker at {self.host}:{self.port} did not answer ApiVersions ({exc})"
                f"{maybe_tls}") from exc
        if self._sasl is not None:
            try:
                self._authenticate(self._sasl)
            except BaseException:
                self.close()
                raise
        return self

    def _wrap(self, sock: socket.socket, context: ssl.SSLContext) -> ssl.SSLSocket:
        import ssl

        try:
            return context.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise BrokerUnavailableError(
                f"broker at {self.host}:{self.port}: its TLS certificate is not trusted "
                f"({exc.verify_message}); pass the CA that signed it (--ca)") from exc
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            reason = getattr(exc, "reason", None) or exc
            raise BrokerUnavailableError(
                f"TLS handshake with {self.host}:{self.port} failed ({reason}); is it an "
                "SSL listener?") from exc

    def buffered(self) -> bool:
        """Whether a TLS socket holds decrypted bytes select() cannot see."""
        sock = self._sock
        # With self.tls, sock is an ssl.SSLSocket (ssl is imported only for TLS).
        return self.tls is not None and sock is not None and sock.pending() > 0  # type: ignore[attr-defined]

    def _authenticate(self, login: SaslLogin) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds (KIP-152)."""
        from slog.core.scram import SaslError, client_exchange

        handshake = self._request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": login.mechanism})
        if handshake.error_code:
            raise KafkaError.for_code(handshake.error_code, (
                f"the broker offers {', '.join(handshake.mechanisms) or 'no SASL'}, "
                f"not {login.mechanism}"))
        version = min(self.versions.get(ApiKey.SASL_AUTHENTICATE, (0, 0))[1], 2)
        conversation = client_exchange(login)
        token = next(conversation)
        while True:
            answer = self._request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})
            if answer.error_code:
                raise KafkaError.for_code(answer.error_code, answer.error_message)
            try:
                token = conversation.send(bytes(answer.auth_bytes))
            except StopIteration:
                return
            except SaslError as exc:
                raise KafkaError.for_code(ErrorCode.sasl_authentication_failed,
                                          str(exc)) from None

    def _negotiate(self) -> None:
        response = self._request(ApiKey.API_VERSIONS, 3, {"client_software_name": "slog",
                                                           "client_software_version": "0.1"})
        if response.error_code == ErrorCode.unsupported_version:
            response = self._request(ApiKey.API_VERSIONS, 0, {})
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def supports(self, api_key: int) -> bool:
        try:
            self.version_for(api_key)
        except UnsupportedApiError:
            return False
        return True

    def version_for(self, api_key: int) -> int:
        ours = CLIENT_MAX_VERSIONS.get(api_key, 0)
        offered = self.versions.get(api_key, (0, -1))
        chosen = min(ours, offered[1])
        if chosen < offered[0]:
            raise UnsupportedApiError(api_key, self.address, offered, (0, ours))
        return chosen

    # -- requests --------------------------------------------------------------------
    def request(self, api_key: int, body: dict[str, Any], version: int | None = None) -> Any:
        """Send one request and wait for its response (nothing else may be in flight)."""
        return self._request(api_key, self.version_for(api_key) if version is None else version,
                             body)

    def send(self, api_key: int, body: dict[str, Any], version: int | None = None) -> int:
        """Write a request without waiting; its response comes from a later :meth:`receive`."""
        version = self.version_for(api_key) if version is None else version
        correlation_id = self._write(api_key, version, body)
        self._pending.append(_Pending(correlation_id, api_key, version))
        return correlation_id

    def send_no_response(self, api_key: int, body: dict[str, Any]) -> None:
        """For acks=0 produce: the broker sends nothing back."""
        self._write(api_key, self.version_for(api_key), body)

    def receive(self) -> tuple[int, Any]:
        """Read the oldest outstanding response: ``(correlation_id, response)``.

        Blocks up to the connection timeout; on timeout or any transport
        error the connection is closed and ConnectionClosedError raised.
        """
        if not self._pending:
            raise RuntimeError("receive() with no request in flight")
        pending = self._pending[0]
        frame = self._read_frame()
        self._pending.popleft()
        try:
            got, response = decode_response(pending.api_key, pending.version, frame)
        except ProtocolError as exc:
            self.close()
            raise ConnectionClosedError(f"bad response from {self.address}: {exc}") from exc
        if got != pending.correlation_id:
            self.close()
            raise ConnectionClosedError(
                f"correlation id mismatch from {self.address}: "
                f"expected {pending.correlation_id}, got {got}"
            )
        return got, response

    def _request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        if self._pending:
            raise RuntimeError("request() while pipelined requests are in flight")
        self._pending.append(_Pending(self._write(api_key, version, body), api_key, version))
        return self.receive()[1]

    def _write(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        if self._sock is None:
            raise ConnectionClosedError(f"connection to {self.address} is closed")
        correlation_id = next(self._correlation)
        entity = shape(request_class(api_key, version), body)
        data = encode_request(entity, correlation_id=correlation_id, client_id=self.client_id)
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self.close()
            raise ConnectionClosedError(f"sending to {self.address} failed: {exc}") from exc
        return correlation_id

    def _read_frame(self) -> bytes:
        if self._sock is None:
            raise ConnectionClosedError(f"connection to {self.address} is closed")
        try:
            frame = recv_frame(self._sock, MAX_RESPONSE_BYTES)
        except (OSError, ProtocolError) as exc:
            self.close()
            kind = "timed out" if isinstance(exc, TimeoutError) else f"failed: {exc}"
            raise ConnectionClosedError(f"reading from {self.address} {kind}") from exc
        if frame is None:
            self.close()
            raise ConnectionClosedError(f"broker {self.address} closed the connection")
        return frame

    def close(self) -> None:
        self._pending.clear()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> BrokerConnection:
        return self.connect() if self._sock is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()
