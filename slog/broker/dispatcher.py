"""Request dispatch: header → version check → decode → handler → encode.

Whatever a client sends, the outcome is one of: a well-formed response, no
response (acks=0 produce), or a closed connection (unparseable frames and
unsupported versions, as Kafka does). A handler bug becomes an error response
or a closed connection, never a dead broker.

Controller-only requests reaching another broker are forwarded to the
controller before any ACL check here; the controller serves the Envelope by
running the request inside through this same path, as the forwarded
principal (:mod:`slog.broker.forwarding`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from slog.broker.access import denial, replica_id_of
from slog.broker.forwarding import (
    CONTROLLER_APIS,
    ENVELOPE_VERSION,
    EnvelopeError,
    Forwarder,
    envelope_response,
    unwrap,
)
from slog.broker.quotas import TimedHandler, quota_user
from slog.broker.sasl import any_topic_allowed, raw_sasl_token
from slog.broker.security import BROKER_PRINCIPAL
from slog.core.acls import Operation, ResourceType
from slog.core.quotas import PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from slog.protocol.apis import ApiKey, ApiSpec, api_versions_table, response_class
from slog.protocol.codec import decode_request, encode_response
from slog.protocol.error_responses import api_versions_fallback_response, error_response
from slog.protocol.errors import ErrorCode, ProtocolError
from slog.protocol.headers import RequestHeader, parse_request_header
from slog.protocol.produce_encoding import can_encode, encode_produce_response
from slog.protocol.shapes import shape
from slog.replication.controller import ControllerDeposedError

if TYPE_CHECKING:
    from slog.broker.broker import Broker
    from slog.broker.security import Session

log = logging.getLogger("slog.broker.dispatch")

# Never throttled: version and login handshakes, and broker-to-broker requests.
_UNMETERED_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                             ApiKey.SASL_AUTHENTICATE, ApiKey.ALTER_PARTITION})

Buffers = list[bytes | bytearray | memoryview]


class _Sentinel:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


CLOSE_CONNECTION: Final = _Sentinel("CLOSE_CONNECTION")
NO_RESPONSE: Final = _Sentinel("NO_RESPONSE")
# What a connection may ask before it has authenticated (security.protocol=SASL_PLAINTEXT).
PRE_AUTHENTICATION_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                     ApiKey.SASL_AUTHENTICATE})


@dataclass(frozen=True)
class Encoded:
    """A response a handler encoded itself (the zero-copy fetch path)."""

    buffers: Buffers


@dataclass(frozen=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    peer: str
    session: Session | None = None  # None: a caller without a connection (tests)

    @property
    def version(self) -> int:
        return self.header.api_version

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the ACLs let this connection's principal do ``operation`` on the resource."""
        broker = self.broker
        return broker.security.allows(broker.image.acls, self.session, operation,
                                      resource_type, name)


Handler = Callable[[RequestContext, Any], Awaitable[Any]]


def _metered(header: RequestHeader, request: Any, session: Session | None) -> bool:
    """Whether client quotas apply to this request (brokers are exempt, as in Kafka)."""
    if header.api_key in _UNMETERED_APIS:
        return False
    if session is not None and session.principal == BROKER_PRINCIPAL:
        return False
    return not (header.api_key == ApiKey.FETCH and replica_id_of(request) >= 0)


class Dispatcher:
    def __init__(self, broker: Broker, handlers: Mapping[int, Handler]):
        self._broker = broker
        self._forwarder = Forwarder(broker.controller_requests, broker.security)
        self._handlers = dict(handlers)
        self.table: tuple[ApiSpec, ...] = api_versions_table(self._handlers)
        self._specs = {spec.api_key: spec for spec in self.table}

    async def handle(self, frame: bytes | memoryview, peer: str, session: Session | None = None
                     ) -> Buffers | _Sentinel | None:
        stats = self._broker.stats
        stats.requests += 1
        security = self._broker.security
        if session is not None and session.raw_tokens:
            token = await raw_sasl_token(security, session, frame, peer)
            return CLOSE_CONNECTION if token is None else [token]
        try:
            header, body_offset = parse_request_header(frame)
        except ProtocolError as exc:
            log.info("unparseable request header from %s: %s", peer, exc)
            return CLOSE_CONNECTION
        stats.count(header.api_key)
        must_log_in = session.sasl_required if session is not None else security.sasl_enabled
        if must_log_in and not (session is not None and session.authenticated) \
                and header.api_key not in PRE_AUTHENTICATION_APIS:
            # Kafka closes an unauthenticated connection that asks for anything else.
            log.info("closing %s: api %s before authentication", peer, header.api_key)
            return CLOSE_CONNECTION
        if header.api_key == ApiKey.ENVELOPE:
            return await self._envelope(header, frame, body_offset, peer, session)
        return await self._serve(header, frame, body_offset, peer, session)

    async def _serve(self, header: RequestHeader, frame: bytes | memoryview, body_offset: int,
                     peer: str, session: Session | None, forwarded: bool = False
                     ) -> Buffers | _Sentinel | None:
        """One request, once its header is known: decode, forward or authorize, handle."""
        spec = self._specs.get(header.api_key)
        if spec is None or not spec.supports(header.api_version):
            if header.api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer in v0 with the table so the client can downgrade.
                return [api_versions_fallback_response(header.correlation_id, self.table)]
            log.info("unsupported api %s v%s from %s", header.api_key, header.api_version, peer)
            return CLOSE_CONNECTION
        try:
            request = decode_request(header, frame, body_offset)
        except ProtocolError as exc:
            log.info("malformed %s v%d from %s: %s", spec.name, header.api_version, peer, exc)
            return CLOSE_CONNECTION
        if not forwarded and header.api_key in CONTROLLER_APIS \
                and self._broker.controller is None and self._forwarder.enabled:
            # KIP-590: the controller authorizes it, as this client's principal.
            answer = await self._forwarder.forward(header, request, frame, session)
            return CLOSE_CONNECTION if answer is None else [answer]
        context = RequestContext(self._broker, header, peer, session)
        if self._broker.security.authorizer_enabled:
            refused = self._refuse_unauthorized(context, request)
            if refused is not None:
                return refused
        metered = self._broker.client_quotas.active and not forwarded and \
            _metered(header, request, session)
        if session is not None and not forwarded:
            quotas = self._broker.client_quotas
            session.produce_quota = quotas.active and session.principal != BROKER_PRINCIPAL \
                and quotas.quota(quota_user(session.principal), header.client_id or "",
                                 PRODUCER_BYTE_RATE) is not None
        try:
            handling = self._handlers[header.api_key](context, request)
            if metered:
                timed = TimedHandler(handling)
                result = await timed
                self._throttle(header, len(frame), session, timed.spent_s, result)
            else:
                result = await handling
        except ControllerDeposedError as exc:
            # Served as the controller by one that a successor has replaced (it was
            # paused): nothing was written. The client retries elsewhere.
            log.warning("%s v%d from %s not served: %s", spec.name, header.api_version, peer,
                        exc)
            return CLOSE_CONNECTION
        except Exception:
            log.exception("%s v%d handler failed", spec.name, header.api_version)
            return CLOSE_CONNECTION
        if result is NO_RESPONSE:
            return None
        if result is CLOSE_CONNECTION:
            return CLOSE_CONNECTION
        if isinstance(result, Encoded):
            return result.buffers
        if header.api_key == ApiKey.PRODUCE and can_encode(header.api_version, result):
            # One answer per partition batch from librdkafka: written by hand, not via kio.
            return [encode_produce_response(header, result)]
        body = shape(response_class(header.api_key, header.api_version), result)
        return [encode_response(header, body)]

    def _throttle(self, header: RequestHeader, size: int, session: Session | None,
                  spent_s: float, result: Any) -> None:
        """Count a request against its client's quotas; a client over one gets the time
        in its response and its connection muted for that long (slog.broker.quotas)."""
        quotas = self._broker.client_quotas
        user = quota_user(session.principal if session is not None else None)
        client_id = header.client_id or ""
        # request_percentage: percent-seconds of one thread, so the rate is a percentage.
        throttle_ms = quotas.record(user, client_id, REQUEST_PERCENTAGE, spent_s * 100)
        if header.api_key == ApiKey.PRODUCE and can_encode(header.api_version, result):
            throttle_ms = max(throttle_ms,
                              quotas.record(user, client_id, PRODUCER_BYTE_RATE, size))
        if throttle_ms <= 0:
            return
        if isinstance(result, dict) and "throttle_time" in result:
            result["throttle_time"] = max(int(result["throttle_time"]), throttle_ms)
        if session is not None:
            session.muted_until = max(session.muted_until,
                                      time.monotonic() + throttle_ms / 1000)

    async def _envelope(self, header: RequestHeader, frame: bytes | memoryview, body_offset: int,
                        peer: str, session: Session | None) -> Buffers | _Sentinel:
        """The controller's side of forwarding: serve the request inside, as its client."""
        if header.api_version != ENVELOPE_VERSION:
            log.info("unsupported Envelope v%d from %s", header.api_version, peer)
            return CLOSE_CONNECTION
        try:
            envelope = decode_request(header, frame, body_offset)
        except ProtocolError as exc:
            log.info("malformed Envelope from %s: %s", peer, exc)
            return CLOSE_CONNECTION
        try:
            inner = unwrap(envelope, self._broker.security, session)
            if self._broker.controller is None:
                raise EnvelopeError(ErrorCode.not_controller, "this broker is not the controller")
        except EnvelopeError as exc:
            log.info("refused an Envelope from %s (%s): %s", peer,
                     session.principal if session else "?", exc)
            return [envelope_response(header, exc.code)]
        client = f"{inner.session.host} via {peer}"
        result = await self._serve(inner.header, inner.frame, inner.body_offset, client,
                                   inner.session, forwarded=True)
        if not isinstance(result, list):  # unsupported, malformed or a handler bug
            return [envelope_response(header, ErrorCode.invalid_request)]
        response = b"".join(result)
        return [envelope_response(header, ErrorCode.none, response[4:])]

    def _refuse_unauthorized(self, context: RequestContext, request: Any
                             ) -> Buffers | _Sentinel | None:
        """None if the ACLs allow the request, else its answer: every item gets the error."""
        header = context.header
        error = denial(header.api_key, request, context.allowed,
                       lambda: any_topic_allowed(context, Operation.WRITE),
                       self._broker.image.topic_name)
        if error is None:
            return None
        log.info("%s denied api %s from %s (error %d)", context.session.principal
                 if context.session else "?", header.api_key, context.peer, error)
        body = error_response(header, request, error)
        return CLOSE_CONNECTION if body is None else [encode_response(header, body)]
