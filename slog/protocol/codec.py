"""Request/response codec on top of kio's schemas.

kio gives us one frozen dataclass per (api, version, request|response) and a
native (Rust) reader plus a Python writer for each. This module adds what a
broker and a client need around them: headers, size prefixes, error mapping,
KIP-511 on the client side, and `guard.py`'s safety net in front of every
read (error responses are built in `error_responses.py`).

kio's reader refuses writable buffers, so bytearrays (and memoryviews of
them) are copied to bytes first; pass bytes to avoid the copy.

**Trailing bytes** after a request body are tolerated, as Kafka's broker does
(RequestContext.parseRequest never checks that the body reached the end of
the frame).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterable
from typing import Any

from kio.serial import entity_reader, entity_writer

from slog.protocol.apis import ALL_APIS, ApiKey, ApiSpec, request_class, response_class
from slog.protocol.apis import warm_up as _load_all
from slog.protocol.errors import MalformedRequestError, MalformedResponseError
from slog.protocol.guard import Buf, compile_guard, guard, readonly
from slog.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    read_tagged_fields,
)
from slog.protocol.produce_decoding import decode_produce_request

__all__ = [
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "warm_up",
]

Entity = Any  # kio dataclass instance; kio's Protocol types are too loose to help here

_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _body_writer(cls: type) -> Callable[[Any, Any], None]:
    return entity_writer(cls)  # kio caches writers per class


def decode_request(header: RequestHeader, frame: Buf, body_offset: int) -> Entity:
    """Decode the request body that starts at `body_offset` in `frame`.

    Raises `UnsupportedVersionError` when kio has no schema for the header's
    (api_key, api_version) (the broker must still check its advertised
    range), `MalformedRequestError` for anything wrong with the bytes. No
    other exception type escapes.
    """
    cls = request_class(header.api_key, header.api_version)
    try:
        if header.api_key == ApiKey.PRODUCE:
            # By hand, so the records stay views of the frame (no copy per request).
            return decode_produce_request(frame, body_offset, header.api_version)
        buf = guard(cls, readonly(frame), body_offset)
        entity, _size = entity_reader(cls)(buf, body_offset)
    except Exception as exc:  # kio raises SerialError, ValueError, KeyError, TypeError...
        raise MalformedRequestError(
            f"{type(exc).__name__}: {exc}",
            api_key=header.api_key,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
        ) from exc
    return entity


def _encode(prefix: bytes, entity: Entity) -> bytes:
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    buf.write(prefix)
    _body_writer(type(entity))(buf, entity)
    with buf.getbuffer() as view:
        _SIZE.pack_into(view, 0, len(view) - 4)
    return buf.getvalue()


def encode_response(header: RequestHeader, response: Entity) -> bytes:
    """Encode `response` with its response header and size prefix.

    The response must be the kio class for the request's exact api key and
    version (a mismatch is a broker bug and raises ValueError).
    """
    cls = type(response)
    if cls.__api_key__ != header.api_key or cls.__version__ != header.api_version:
        raise ValueError(
            f"{cls.__module__}.{cls.__name__} does not answer "
            f"api_key={header.api_key} v{header.api_version}"
        )
    header_version = 1 if cls.__header_schema__.__flexible__ else 0
    return _encode(encode_response_header(header.correlation_id, header_version), response)


def encode_request(request: Entity, *, correlation_id: int, client_id: str | None) -> bytes:
    """Client side: encode `request` with a request header and size prefix."""
    cls = type(request)
    head = encode_request_header(
        cls.__api_key__,
        cls.__version__,
        correlation_id,
        client_id,
        flexible=cls.__header_schema__.__flexible__,
    )
    return _encode(head, request)


def _decode_body(cls: type, frame: Buf, offset: int) -> Entity:
    buf = guard(cls, readonly(frame), offset)
    entity: Entity
    entity, _size = entity_reader(cls)(buf, offset)
    return entity


def decode_response(api_key: int, api_version: int, frame: Buf) -> tuple[int, Entity]:
    """Client side: decode a response frame (size prefix removed).

    Returns (correlation_id, response). For ApiVersions, a broker answers
    errors in v0 layout (KIP-511); such a reply is returned as the v0
    response entity. With UNSUPPORTED_VERSION its api_keys tell the client
    which version to retry with.
    """
    cls = response_class(api_key, api_version)
    try:
        (correlation_id,) = _INT32.unpack_from(frame, 0)
        pos = 4
        if cls.__header_schema__.__flexible__:
            pos = read_tagged_fields(frame, pos)
        if api_key == ApiKey.API_VERSIONS and api_version > 0:
            # ApiVersions bodies start with error_code in every version. Brokers
            # answer errors in v0 layout (KIP-511), so try v0 first for those;
            # otherwise fall back to v0 on failure like Kafka's
            # ApiVersionsResponse.parse does.
            (code,) = _INT16.unpack_from(frame, pos)
            first, second = (0, api_version) if code else (api_version, 0)
            try:
                return correlation_id, _decode_body(response_class(api_key, first), frame, pos)
            except Exception:
                return correlation_id, _decode_body(response_class(api_key, second), frame, pos)
        return correlation_id, _decode_body(cls, frame, pos)
    except Exception as exc:
        raise MalformedResponseError(
            f"api_key={api_key} v{api_version}: {type(exc).__name__}: {exc}"
        ) from exc


def warm_up(specs: Iterable[ApiSpec] = ALL_APIS) -> None:
    """Load and compile everything for `specs` ahead of the first request:
    kio schema modules, kio's native readers, and our guards."""
    specs = tuple(specs)
    _load_all(specs)
    for spec in specs:
        for version in range(spec.min_version, spec.max_version + 1):
            for cls in (
                request_class(spec.api_key, version),
                response_class(spec.api_key, version),
            ):
                compile_guard(cls)
                entity_reader(cls)
                _body_writer(cls)
