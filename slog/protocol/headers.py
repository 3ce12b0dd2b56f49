"""Request and response headers.

Request header layouts (Kafka's RequestHeader.json):

* v1: api_key int16, api_version int16, correlation_id int32,
  client_id nullable *legacy* string (int16 length).
* v2 (flexible requests): v1 + tagged fields. client_id stays a legacy string
  even in v2, so v1 parsers can always find the correlation id.

(v0, without client_id, was only used by ControlledShutdown v0, which no
client we care about sends and kio has no schema for.)

Response header layouts: v0 is just the correlation id; v1 (flexible
responses) appends tagged fields. ApiVersions responses always use v0 (KIP-511)
so that a client that sent a too-new ApiVersions request can still read the
error; kio's response classes already encode that exception in
``__header_schema__``.

Parsing is hand-written with `struct` because it runs for every request and
must also work for API keys and versions that have no schema at all.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from slog.protocol.apis import is_flexible_request, response_class
from slog.protocol.errors import MalformedRequestError, UnsupportedVersionError

__all__ = [
    "RequestHeader",
    "encode_request_header",
    "encode_response_header",
    "parse_request_header",
    "read_tagged_fields",
    "response_header_version",
    "write_uvarint",
]

_HEAD = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    # 1 or 2; 2 means the header (and the body) are flexible.
    header_version: int = 1

    @property
    def flexible(self) -> bool:
        return self.header_version >= 2


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at `pos`; return (value, new_pos).

    At most 5 bytes, like Kafka's ByteUtils.readUnsignedVarint (and kio).
    Raises IndexError on truncation, ValueError on an over-long varint.
    """
    value = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise ValueError("varint longer than 5 bytes")


def write_uvarint(value: int) -> bytes:
    """Encode an unsigned varint."""
    if value < 0x80:
        # The overwhelmingly common case (lengths < 127, tag counts of 0).
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Skip a tagged-field section starting at `pos`; return the position after it.

    Header tagged fields carry nothing slog uses (only client metadata in some
    newer clients), so they are validated for size and dropped.
    """
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise IndexError("tagged field runs past the end of the frame")
    return pos


def parse_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Parse the request header at the start of `frame` (size prefix removed).

    Returns the header and the offset where the body starts. Works for any
    api key / version: the fixed part is read first, and the header version
    for unknown pairs is inferred (see `is_flexible_request`), so the broker
    can always answer with the right correlation id.

    Raises `MalformedRequestError` (with whatever fields were read attached).
    """
    if len(frame) < _HEAD.size:
        raise MalformedRequestError(f"frame of {len(frame)} bytes is too short for a header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
    try:
        (length,) = _INT16.unpack_from(frame, 8)
        pos = 10
        if length == -1:
            client_id = None
        elif length < 0:
            raise ValueError(f"negative client_id length {length}")
        else:
            end = pos + length
            if end > len(frame):
                raise IndexError("client_id runs past the end of the frame")
            # Lenient like Kafka's own header parser: a client id is only ever
            # logged, so bad UTF-8 must not cost the client its answer.
            client_id = bytes(frame[pos:end]).decode("utf-8", errors="replace")
            pos = end
        header_version = 2 if is_flexible_request(api_key, api_version) else 1
        if header_version == 2:
            pos = read_tagged_fields(frame, pos)
    except (struct.error, IndexError, ValueError) as exc:
        raise MalformedRequestError(
            f"bad request header: {exc}",
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
        ) from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version), pos


def encode_request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    *,
    flexible: bool,
) -> bytes:
    """Encode a v1 (or, if `flexible`, v2 with no tagged fields) request header."""
    if client_id is None:
        cid = b"\xff\xff"
    else:
        raw = client_id.encode("utf-8")
        cid = _INT16.pack(len(raw)) + raw
    head = _HEAD.pack(api_key, api_version, correlation_id) + cid
    return head + b"\x00" if flexible else head


def response_header_version(api_key: int, api_version: int) -> int:
    """0 or 1 for a response to (api_key, api_version); 0 for unknown pairs."""
    try:
        cls = response_class(api_key, api_version)
    except UnsupportedVersionError:
        return 0
    return 1 if cls.__header_schema__.__flexible__ else 0


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Encode a response header: correlation id, plus an empty tag section for v1."""
    head = _INT32.pack(correlation_id)
    return head + b"\x00" if header_version >= 1 else head
