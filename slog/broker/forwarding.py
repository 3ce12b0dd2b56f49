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

Who may send an Envelope: with SASL on, only a connection authenticated as
the inter-broker principal (``User:__broker``). Without SASL nobody can prove
to be a broker; that is harmless without an authorizer (principals decide
nothing), but with an authorizer the forwarded principal and host would be
claims anyone could make, so the controller refuses Envelopes and brokers
answer NOT_CONTROLLER instead of forwarding, as before KIP-590.

Envelope is not advertised in ApiVersions: Kafka only offers it on the
controller listener, never to clients, and every slog broker knows its peers
speak it (they run the same code).
"""

from __future__ import annotations

import asyncio
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
from slog.protocol.errors import ErrorCode, ProtocolError
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
})
FORWARD_TIMEOUT_S = 10.0  # below clients' usual 30 s request timeout
_INT32 = struct.Struct(">i")
_CHANNEL_ERRORS = (OSError, TimeoutError, asyncio.IncompleteReadError, ProtocolError)


class EnvelopeError(Exception):
    """An Envelope the controller will not serve; ``code`` goes in its response."""

    def __init__(self, code: ErrorCode, reason: str):
        super().__init__(reason)
        self.code = code


# -- what an Envelope carries ---------------------------------------------------------
def encode_principal(principal: str) -> bytes:
    """slog's principal serde: Kafka's "Type:name" string, UTF-8."""
    return principal.encode()


def decode_principal(raw: bytes | None) -> str:
    try:
        principal = bytes(raw).decode() if raw is not None else ""
    except UnicodeDecodeError:
        principal = ""
    kind, colon, name = principal.partition(":")
    if not (kind and colon and name):
        raise EnvelopeError(ErrorCode.invalid_request,
                            f"the forwarded principal {principal!r} is not Type:name")
    return principal


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


def envelopes_trusted(security: Security) -> bool:
    """Whether this cluster can tell a broker's Envelope from a client's (module docstring)."""
    return security.sasl_enabled or not security.authorizer_enabled


# -- the controller's side ----------------------------------------------------------------
@dataclass(frozen=True)
class Unwrapped:
    header: RequestHeader
    frame: bytes  # the client's request: header and body, no size prefix
    body_offset: int
    session: Session  # the client's principal and address, as the forwarding broker saw them


def check_sender(security: Security, sender: Session | None) -> None:
    """EnvelopeError unless ``sender`` may forward requests (module docstring)."""
    if not envelopes_trusted(security) or \
            (security.sasl_enabled and (sender is None or sender.principal != BROKER_PRINCIPAL)):
        raise EnvelopeError(ErrorCode.cluster_authorization_failed,
                            "only brokers may forward requests")


def unwrap(envelope: Any) -> Unwrapped:
    """The request inside ``envelope``, or EnvelopeError if it cannot be served."""
    principal = decode_principal(envelope.request_principal)
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
        try:
            answer = await self._channel.request(ApiKey.ENVELOPE, ENVELOPE_VERSION, {
                "request_data": bytes(frame),
                "request_principal": encode_principal(client.principal or ANONYMOUS),
                "client_host_address": encode_host(client.host)})
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
