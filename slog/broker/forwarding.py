"""Forwarding controller-only requests to the controller (KIP-590's Envelope).

Any broker accepts an admin write; only the controller can apply it. A
broker that is not the controller wraps the client's whole request frame
(header and body), the client's principal and its address in an Envelope
(api key 58) and sends it to the controller over a :class:`ControllerChannel`.
The controller checks the Envelope came from a broker, serves the inner
request as the forwarded principal (so ACLs are checked at the controller,
against the client) and returns the encoded inner response, which the
forwarding broker relays to the client unchanged: one answer, Kafka's codes.

When the controller cannot be reached, or has just stopped being the
controller, the client gets the API's NOT_CONTROLLER answer and retries.

Who may send an Envelope: when principals matter (SASL or an authorizer is
on), only a broker. A broker proves it in one of two ways: its connection
logged in as the inter-broker principal (``User:__broker``), or the Envelope's
principal carries a signature, an HMAC over the principal, the client's
address and the whole inner request, keyed by the cluster's inter-broker
secret (``inter-broker.secret`` in the shared data dir, which only brokers can
read). Kafka leaves the principal's serialization to a pluggable serde; slog's
is ``Type:name``, then, when signed, a NUL and the 32-byte HMAC. The signature
is what lets a cluster with ACLs but without SASL forward: there, a broker's
connection is as anonymous as a client's, and the claimed principal and host
would otherwise be claims anyone could make. Without SASL and without an
authorizer principals decide nothing, and any Envelope is served.

Envelope is not advertised in ApiVersions: Kafka only offers it on the
controller listener, never to clients, and every slog broker knows its peers
speak it (they run the same code).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import logging
import struct
from dataclasses import dataclass
from typing import Any, Final

from slog.broker.controller_channel import ControllerChannel
from slog.broker.security import ANONYMOUS, BROKER_PRINCIPAL, Security, Session
from slog.protocol.apis import ApiKey, response_class
from slog.protocol.codec import encode_response
from slog.protocol.error_responses import error_response
from slog.protocol.errors import ErrorCode, KafkaApiError, ProtocolError
from slog.protocol.headers import RequestHeader, parse_request_header
from slog.protocol.shapes import shape

log = logging.getLogger("slog.broker.forwarding")

ENVELOPE_VERSION: Final = 0
# The requests that change metadata: only the controller applies them, other
# brokers forward them. (AlterPartition is broker-to-controller already.)
CONTROLLER_APIS: Final = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
    ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
    ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
})
FORWARD_TIMEOUT_S = 10.0  # below clients' usual 30 s request timeout
_INT32 = struct.Struct(">i")
_CHANNEL_ERRORS = (OSError, TimeoutError, asyncio.IncompleteReadError, ProtocolError)


class EnvelopeError(KafkaApiError):
    """An Envelope the controller will not serve; ``code`` goes in its response."""


# -- what an Envelope carries ---------------------------------------------------------
_SIGNATURE_BYTES: Final = 32


def _signature(key: bytes, principal: bytes, host: bytes, request_data: bytes) -> bytes:
    message = b"".join((struct.pack(">HH", len(principal), len(host)), principal, host,
                        request_data))
    return hmac.new(key, message, hashlib.sha256).digest()


def encode_principal(principal: str, host: bytes, request_data: bytes,
                     key: bytes | None) -> bytes:
    """slog's principal serde: Kafka's "Type:name" string, UTF-8, signed when ``key``
    is given (module docstring)."""
    raw = principal.encode()
    if key is None:
        return raw
    return raw + b"\0" + _signature(key, raw, host, request_data)


def decode_principal(raw: bytes | None) -> tuple[str, bytes | None]:
    """(principal, signature or None)."""
    data = bytes(raw) if raw is not None else b""
    name_part, nul, signature = data.partition(b"\0")
    try:
        principal = name_part.decode()
    except UnicodeDecodeError:
        principal = ""
    kind, colon, name = principal.partition(":")
    if not (kind and colon and name) or (nul and len(signature) != _SIGNATURE_BYTES):
        raise EnvelopeError(ErrorCode.invalid_request,
                            f"the forwarded principal {principal!r} is not Type:name")
    return principal, signature if nul else None


def encode_host(host: str) -> bytes:
    """The client's address as raw IP bytes (4 or 16), as Kafka sends it; b"" if unknown."""
    try:
        return ipaddress.ip_address(host.strip("[]")).packed
    except ValueError:
        return b""


def decode_host(raw: bytes) -> str:
    if not raw:
        return "*"
    if len(raw) not in (4, 16):
        raise EnvelopeError(ErrorCode.invalid_request,
                            f"a client address of {len(raw)} bytes is not an IP address")
    return str(ipaddress.ip_address(bytes(raw)))


def principals_matter(security: Security) -> bool:
    return security.sasl_enabled or security.authorizer_enabled


def envelopes_trusted(security: Security) -> bool:
    """Whether this cluster can tell a broker's Envelope from a client's (module docstring)."""
    return not principals_matter(security) or security.envelope_key is not None


# -- the controller's side ----------------------------------------------------------------
@dataclass(frozen=True)
class Unwrapped:
    header: RequestHeader
    frame: bytes  # the client's request: header and body, no size prefix
    body_offset: int
    session: Session  # the client's principal and address, as the forwarding broker saw them


def _from_a_broker(security: Security, sender: Session | None, envelope: Any,
                   signature: bytes | None) -> bool:
    if not principals_matter(security):
        return True
    if sender is not None and sender.authenticated and sender.principal == BROKER_PRINCIPAL:
        return True
    key = security.envelope_key
    if key is None or signature is None:
        return False
    principal = bytes(envelope.request_principal)[:-(_SIGNATURE_BYTES + 1)]
    expected = _signature(key, principal, bytes(envelope.client_host_address),
                          bytes(envelope.request_data))
    return hmac.compare_digest(expected, signature)


def unwrap(envelope: Any, security: Security, sender: Session | None) -> Unwrapped:
    """The request inside ``envelope``, or EnvelopeError if it cannot be served
    (CLUSTER_AUTHORIZATION_FAILED unless a broker sent it)."""
    principal, signature = decode_principal(envelope.request_principal)
    if not _from_a_broker(security, sender, envelope, signature):
        raise EnvelopeError(ErrorCode.cluster_authorization_failed,
                            "only brokers may forward requests")
    host = decode_host(envelope.client_host_address)
    frame = bytes(envelope.request_data)
    try:
        header, body_offset = parse_request_header(frame)
    except ProtocolError as exc:
        raise EnvelopeError(ErrorCode.invalid_request, f"the forwarded request: {exc}") from None
    if header.api_key not in CONTROLLER_APIS:
        raise EnvelopeError(ErrorCode.invalid_request,
                            f"api {header.api_key} is not a controller request")
    return Unwrapped(header, frame, body_offset,
                     Session(principal=principal, host=host, authenticated=True))


def envelope_response(header: RequestHeader, error: ErrorCode,
                      inner: bytes | None = None) -> bytes:
    body = shape(response_class(ApiKey.ENVELOPE, ENVELOPE_VERSION),
                 {"response_data": inner, "error_code": error})
    return encode_response(header, body)


# -- the forwarding broker's side ---------------------------------------------------------
class Forwarder:
    """Sends controller requests on to the controller and relays the answers."""

    def __init__(self, channel: ControllerChannel, security: Security):
        self._channel = channel
        self._security = security

    @property
    def enabled(self) -> bool:
        return envelopes_trusted(self._security)

    async def forward(self, header: RequestHeader, request: Any, frame: bytes | memoryview,
                      session: Session | None) -> bytes | None:
        """The encoded response (size prefix included) for the client, or None if no
        answer can be built (the connection is then closed)."""
        client = session or Session()
        data, host = bytes(frame), encode_host(client.host)
        try:
            answer = await self._channel.request(ApiKey.ENVELOPE, ENVELOPE_VERSION, {
                "request_data": data,
                "request_principal": encode_principal(client.principal or ANONYMOUS, host, data,
                                                      self._security.envelope_key),
                "client_host_address": host})
        except _CHANNEL_ERRORS as exc:
            log.info("forwarding api %d to the controller failed: %s", header.api_key, exc)
            return _error_answer(header, request, ErrorCode.not_controller)
        error = ErrorCode(answer.error_code)
        inner = answer.response_data
        if error == ErrorCode.none and inner is not None and len(inner) >= 4 \
                and _INT32.unpack_from(inner)[0] == header.correlation_id:
            return _INT32.pack(len(inner)) + bytes(inner)
        if error != ErrorCode.not_controller:
            log.warning("the controller refused a forwarded api %d: %s", header.api_key,
                        error.name if error else "an answer for another request")
            error = ErrorCode.unknown_server_error
        return _error_answer(header, request, error)


def _error_answer(header: RequestHeader, request: Any, error: ErrorCode) -> bytes | None:
    body = error_response(header, request, error)
    return None if body is None else encode_response(header, body)
