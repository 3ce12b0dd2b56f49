"""Request dispatch: header → version check → decode → handler → encode.

Whatever a client sends, the outcome is one of: a well-formed response, no
response (acks=0 produce), or a closed connection (unparseable frames and
unsupported versions, as Kafka does). A handler bug becomes an error response
or a closed connection, never a dead broker.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from slog.protocol.apis import ApiKey, ApiSpec, api_versions_table, response_class
from slog.protocol.codec import api_versions_fallback_response, decode_request, encode_response
from slog.protocol.errors import ProtocolError
from slog.protocol.headers import RequestHeader, parse_request_header
from slog.protocol.shapes import shape

if TYPE_CHECKING:
    from slog.broker.broker import Broker

log = logging.getLogger("slog.broker.dispatch")

Buffers = list[bytes | memoryview]


class _Sentinel:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


CLOSE_CONNECTION: Final = _Sentinel("CLOSE_CONNECTION")
NO_RESPONSE: Final = _Sentinel("NO_RESPONSE")


@dataclass(frozen=True)
class Encoded:
    """A response a handler encoded itself (the zero-copy fetch path)."""

    buffers: Buffers


@dataclass(frozen=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    peer: str

    @property
    def version(self) -> int:
        return self.header.api_version


Handler = Callable[[RequestContext, Any], Awaitable[Any]]


class Dispatcher:
    def __init__(self, broker: Broker, handlers: Mapping[int, Handler]):
        self._broker = broker
        self._handlers = dict(handlers)
        self.table: tuple[ApiSpec, ...] = api_versions_table(self._handlers)
        self._specs = {spec.api_key: spec for spec in self.table}

    async def handle(self, frame: bytes, peer: str) -> Buffers | _Sentinel | None:
        stats = self._broker.stats
        stats.requests += 1
        stats.bytes_in += len(frame) + 4
        try:
            header, body_offset = parse_request_header(frame)
        except ProtocolError as exc:
            log.info("unparseable request header from %s: %s", peer, exc)
            return CLOSE_CONNECTION
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
        context = RequestContext(self._broker, header, peer)
        try:
            result = await self._handlers[header.api_key](context, request)
        except Exception:
            log.exception("%s v%d handler failed", spec.name, header.api_version)
            return CLOSE_CONNECTION
        if result is NO_RESPONSE:
            return None
        if result is CLOSE_CONNECTION:
            return CLOSE_CONNECTION
        if isinstance(result, Encoded):
            buffers = result.buffers
        else:
            body = shape(response_class(header.api_key, header.api_version), result)
            buffers = [encode_response(header, body)]
        stats.bytes_out += sum(len(b) for b in buffers)
        return buffers
