"""Request/response codec on top of kio's schemas.

kio gives us one frozen dataclass per (api, version, request|response) and a
native (Rust) reader plus a Python writer for each. This module adds what a
broker and a client need around them: headers, size prefixes, error mapping,
KIP-511, error responses, and one safety net.

**The safety net (`_guard`).** kio 0.6.5's native reader pre-allocates
``Vec::with_capacity(n)`` for every array from the untrusted length on the
wire. A 5-byte body announcing a 4-billion-element array makes the allocator
fail and Rust *aborts the whole process* (no exception). It also rejects
unknown tagged fields with a KeyError, where Kafka says they must be skipped.
So before kio sees a body, a Python walker generated per class mirrors kio's
reading order, checks every array length against the bytes that remain,
checks every known tagged field consumes exactly its declared size, and cuts
unknown tagged fields out of the buffer. It costs about as much as kio's own
parse (~8 us for a 50-partition Fetch v12 request).

kio's reader also refuses writable buffers, so bytearrays (and memoryviews of
them) are copied to bytes first; pass bytes to avoid the copy.

**Trailing bytes** after a request body are tolerated, as Kafka's broker does
(RequestContext.parseRequest never checks that the body reached the end of
the frame).
"""

from __future__ import annotations

import datetime
import functools
import io
import struct
from collections.abc import Callable, Iterable
from dataclasses import MISSING, Field, fields
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.constants import uuid_zero

from slog.protocol.apis import (
    ALL_APIS,
    ApiKey,
    ApiSpec,
    request_class,
    response_class,
)
from slog.protocol.apis import warm_up as _load_all
from slog.protocol.errors import (
    ErrorCode,
    MalformedRequestError,
    MalformedResponseError,
    UnsupportedVersionError,
)
from slog.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    read_tagged_fields,
    read_uvarint,
    write_uvarint,
)
from slog.protocol.produce_decoding import decode_produce_request

__all__ = [
    "api_versions_fallback_response",
    "api_versions_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "error_response",
    "request_class",
    "response_class",
    "warm_up",
]

Entity = Any  # kio dataclass instance; kio's Protocol types are too loose to help here
Buf = bytes | bytearray | memoryview

_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


# --------------------------------------------------------------------------------------
# The guard: a schema-driven walker that validates lengths before kio allocates
# --------------------------------------------------------------------------------------


class _Bad(Exception):
    """Internal: the walker found an impossible length or layout."""


# (start, stop, replacement): splice edits that remove unknown tagged fields.
_Edit = tuple[int, int, bytes]
_Skip = Callable[[Buf, int, int, list[_Edit]], int]

_FIXED_WIDTH = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


def _skip_compact_blob(buf: Buf, pos: int, end: int, edits: list[_Edit]) -> int:
    n, pos = read_uvarint(buf, pos)
    if n:  # 0 means null; otherwise n - 1 bytes follow
        pos += n - 1
    if pos > end:
        raise _Bad("compact string/bytes runs past the end")
    return pos


def _legacy_skipper(length: struct.Struct, what: str) -> _Skip:
    """Skip a non-flexible STRING (int16 length) or BYTES (int32 length); -1 is null."""

    def skip(buf: Buf, pos: int, end: int, edits: list[_Edit]) -> int:
        (n,) = length.unpack_from(buf, pos)
        pos += length.size
        if n >= 0:
            pos += n
        elif n != -1:
            raise _Bad(f"negative {what} length {n}")
        if pos > end:
            raise _Bad(f"{what} runs past the end")
        return pos

    return skip


_skip_legacy_string = _legacy_skipper(_INT16, "string")
_skip_legacy_bytes = _legacy_skipper(_INT32, "bytes")


def _primitive(kafka_type: str, flexible: bool) -> tuple[int | _Skip, int]:
    """(fixed width or skip function, minimum encoded size) for a primitive."""
    width = _FIXED_WIDTH.get(kafka_type)
    if width is not None:
        return width, width
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return _skip_compact_blob, 1
        if kafka_type == "string":
            return _skip_legacy_string, 2
        return _skip_legacy_bytes, 4
    raise TypeError(f"unknown kafka_type {kafka_type!r}")


def _array(inner: int | _Skip, inner_min: int, flexible: bool, nullable: bool
           ) -> tuple[_Skip, int]:
    per_item = max(inner_min, 1)  # zero-width items are bounded as if they took a byte

    def check(n: int, pos: int, end: int) -> None:
        if n * per_item > end - pos:
            raise _Bad(f"array of {n} items cannot fit in {end - pos} bytes")

    if isinstance(inner, int):
        width = inner

        def skip_items(buf: Buf, pos: int, end: int, edits: list[_Edit], n: int) -> int:
            return pos + n * width

    else:
        item = inner

        def skip_items(buf: Buf, pos: int, end: int, edits: list[_Edit], n: int) -> int:
            for _ in range(n):
                pos = item(buf, pos, end, edits)
            return pos

    if flexible:

        def skip_compact(buf: Buf, pos: int, end: int, edits: list[_Edit]) -> int:
            n, pos = read_uvarint(buf, pos)
            if n == 0:  # null array
                if not nullable:
                    raise _Bad("null for a non-nullable array")
                return pos
            check(n - 1, pos, end)
            return skip_items(buf, pos, end, edits, n - 1)

        return skip_compact, 1

    def skip_legacy(buf: Buf, pos: int, end: int, edits: list[_Edit]) -> int:
        (n,) = _INT32.unpack_from(buf, pos)
        pos += 4
        if n == -1:
            if not nullable:
                raise _Bad("null for a non-nullable array")
            return pos
        if n < 0:
            raise _Bad(f"negative array length {n}")
        check(n, pos, end)
        return skip_items(buf, pos, end, edits, n)

    return skip_legacy, 4


def _field(field: Field[Any], flexible: bool) -> tuple[int | _Skip, int]:
    """Mirror of kio's build_field_schema: how one dataclass field is encoded."""
    kind = classify_field(field)
    inner: int | _Skip
    if isinstance(kind, PrimitiveField | PrimitiveTupleField):
        inner, inner_min = _primitive(get_schema_field_type(field), flexible)
    elif isinstance(kind, EntityField):
        inner, inner_min = _entity(kind.type_, is_optional(field))
    elif isinstance(kind, EntityTupleField):
        inner, inner_min = _entity(kind.type_, False)
    else:  # pragma: no cover - kio only has the four kinds
        raise TypeError(f"unsupported field {field.name}")
    if kind.is_array:
        # kio models a nullable array as Optional; anything else must not be null.
        return _array(inner, inner_min, flexible, is_optional(field))
    return inner, inner_min


@functools.cache
def _entity(cls: type, nullable: bool) -> tuple[_Skip, int]:
    """Compile a skip function for one kio entity class."""
    flexible: bool = cls.__flexible__
    ops: list[int | _Skip] = []
    tagged: dict[int, _Skip] = {}
    min_size = 1 if flexible else 0  # the tag count
    for f in fields(cls):
        op, op_min = _field(f, flexible)
        tag = get_field_tag(f)
        if tag is not None:
            tagged[int(tag)] = _as_skip(op)
            continue
        min_size += op_min
        if isinstance(op, int) and ops and isinstance(ops[-1], int):
            ops[-1] += op  # merge runs of fixed-width fields into one skip
        else:
            ops.append(op)
    return _compile_skip(cls, nullable, ops, tagged), (1 if nullable else min_size)


def _compile_skip(
    cls: type, nullable: bool, ops: list[int | _Skip], tagged: dict[int, _Skip]
) -> _Skip:
    """Generate a straight-line skip function for one entity.

    This runs for every field of every request, so instead of interpreting
    `ops` in a loop we emit the equivalent Python source once per class:
    fixed-width runs become ``pos += n`` and everything else a direct call.
    """
    env: dict[str, Any] = {"_Bad": _Bad, "_skip_tags": _skip_tags, "tagged": tagged}
    lines = ["def skip(buf, pos, end, edits):"]
    if nullable:
        lines += [
            "    if pos >= end:",
            "        raise _Bad('missing nullable struct marker')",
            "    pos += 1",
            "    if buf[pos - 1] == 0xFF:  # int8 -1: null struct (KIP-893)",
            "        return pos",
        ]
    for i, op in enumerate(ops):
        if isinstance(op, int):
            lines.append(f"    pos += {op}")
        else:
            env[f"s{i}"] = op
            lines.append(f"    pos = s{i}(buf, pos, end, edits)")
    lines += ["    if pos > end:", f"        raise _Bad('{cls.__name__} runs past the end')"]
    if cls.__flexible__:
        lines += [
            "    if pos < end and buf[pos] == 0:  # the usual empty tag section",
            "        return pos + 1",
            "    return _skip_tags(buf, pos, end, edits, tagged)",
        ]
    else:
        lines.append("    return pos")
    exec("\n".join(lines), env)  # the source is built from schema metadata only
    skip: _Skip = env["skip"]
    return skip


def _as_skip(op: int | _Skip) -> _Skip:
    if isinstance(op, int):
        width = op

        def skip_fixed(buf: Buf, pos: int, end: int, edits: list[_Edit]) -> int:
            return pos + width

        return skip_fixed
    return op


def _skip_tags(buf: Buf, pos: int, end: int, edits: list[_Edit], known: dict[int, _Skip]) -> int:
    count_start = pos
    count, pos = read_uvarint(buf, pos)
    if count * 2 > end - pos:  # each tag takes at least a tag byte and a size byte
        raise _Bad(f"{count} tagged fields cannot fit in {end - pos} bytes")
    count_end = pos
    unknown: list[_Edit] = []
    for _ in range(count):
        tag_start = pos
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        body_end = pos + size
        if body_end > end:
            raise _Bad("tagged field runs past the end")
        skip = known.get(tag)
        if skip is None:
            unknown.append((tag_start, body_end, b""))
        elif skip(buf, pos, body_end, edits) != body_end:
            # kio ignores the declared size and reads by schema; refuse any
            # disagreement rather than let the two drift apart.
            raise _Bad(f"tagged field {tag} does not match its declared size")
        pos = body_end
    if unknown:
        edits.append((count_start, count_end, write_uvarint(count - len(unknown))))
        edits.extend(unknown)
    return pos


def _splice(buf: Buf, edits: list[_Edit]) -> bytes:
    out: list[Buf] = []
    last = 0
    for start, stop, replacement in sorted(edits):
        out.append(buf[last:start])
        out.append(replacement)
        last = stop
    out.append(buf[last:])
    return b"".join(out)


def _readonly(buf: Buf) -> bytes | memoryview:
    # kio's native reader refuses writable buffers ("Received writable byte
    # buffer where read-only was expected"), so bytearrays are copied once.
    if isinstance(buf, bytes) or (isinstance(buf, memoryview) and buf.readonly):
        return buf
    return bytes(buf)


def _guard(cls: type, buf: Buf, offset: int) -> Buf:
    """Validate `buf[offset:]` as an encoded `cls`; return the buffer kio may read.

    Raises `_Bad` (or struct.error / IndexError / ValueError from short
    reads) when the bytes cannot be a valid encoding.
    """
    skip, _ = _entity(cls, False)
    edits: list[_Edit] = []
    skip(buf, offset, len(buf), edits)
    return _splice(buf, edits) if edits else buf


# --------------------------------------------------------------------------------------
# Encoding and decoding
# --------------------------------------------------------------------------------------


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
        buf = _guard(cls, _readonly(frame), body_offset)
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
    buf = _guard(cls, _readonly(frame), offset)
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


# --------------------------------------------------------------------------------------
# Building responses
# --------------------------------------------------------------------------------------


def _neutral(f: Field[Any]) -> Any:
    """The value Kafka's generated *Data classes hold for a field with no default."""
    kind = classify_field(f)
    if is_optional(f):
        return None
    if kind.is_array:
        return ()
    if isinstance(kind, EntityField):
        return _fill(kind.type_)
    kafka_type = get_schema_field_type(f)
    if kafka_type in ("string",):
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid_zero
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    if kafka_type == "float64":
        return 0.0
    return 0


def _fill(cls: type, **values: Any) -> Entity:
    """Instantiate `cls` from `values`, ignoring names the class lacks.

    Fields change between versions (throttle_time appears in v1, etc.), so
    builders pass a superset and let each version keep what it has. Missing
    required fields get Kafka's neutral values.
    """
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in values:
            kwargs[f.name] = values[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            kwargs[f.name] = _neutral(f)
    return cls(**kwargs)


def _item(cls: type, name: str) -> type:
    """The entity class of field `name` (array element or nested struct)."""
    for f in fields(cls):
        if f.name == name:
            kind = classify_field(f)
            if isinstance(kind, EntityField | EntityTupleField):
                return kind.type_
            break
    raise KeyError(f"{cls.__name__} has no struct field {name!r}")


def _has(cls: type, name: str) -> bool:
    return any(f.name == name for f in fields(cls))


def api_versions_response(
    version: int,
    table: Iterable[ApiSpec],
    *,
    error_code: ErrorCode = ErrorCode.none,
    throttle_ms: int = 0,
) -> Entity:
    """Build an ApiVersions response entity of `version` advertising `table`."""
    cls = response_class(ApiKey.API_VERSIONS, version)
    row = _item(cls, "api_keys")
    return _fill(
        cls,
        error_code=error_code,
        api_keys=tuple(
            row(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in table
        ),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
    )


def api_versions_fallback_response(
    correlation_id: int,
    table: Iterable[ApiSpec],
    error_code: ErrorCode = ErrorCode.unsupported_version,
) -> bytes:
    """KIP-511: the answer to an ApiVersions request of a version we don't support.

    Encoded as a v0 response (v0 header, no tagged fields) with
    UNSUPPORTED_VERSION and the whole table, so any client can read it and
    retry with a version from the ApiVersions row. (Kafka itself only
    includes the ApiVersions row; sending all of them is a superset clients
    accept.)

    Use it for *every* ApiVersions error, whatever version was asked for:
    kafka-python (and librdkafka for UNSUPPORTED_VERSION) parse an
    ApiVersions body with a non-zero error code as v0, so an error answered
    in v1-v3 layout would be misread.
    """
    response = api_versions_response(0, table, error_code=error_code)
    return _encode(encode_response_header(correlation_id, 0), response)


_NO_TIME = datetime.timedelta(0)
_Builder = Callable[[type, Any, ErrorCode, int], Entity | None]


def _produce(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    topic_cls = _item(cls, "responses")
    part_cls = _item(topic_cls, "partition_responses")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        responses=tuple(
            _fill(
                topic_cls,
                name=t.name,
                partition_responses=tuple(
                    _fill(part_cls, index=p.index, error_code=e, base_offset=-1)
                    for p in t.partition_data
                ),
            )
            for t in req.topic_data
        ),
    )


def _fetch(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    topic_cls = _item(cls, "responses")
    part_cls = _item(topic_cls, "partitions")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        error_code=e,
        session_id=0,
        responses=tuple(
            _fill(
                topic_cls,
                topic=t.topic,
                partitions=tuple(
                    _fill(
                        part_cls,
                        partition_index=p.partition,
                        error_code=e,
                        high_watermark=-1,
                        aborted_transactions=None,
                        records=b"",
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        ),
    )


def _list_offsets(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    topic_cls = _item(cls, "topics")
    part_cls = _item(topic_cls, "partitions")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        topics=tuple(
            _fill(
                topic_cls,
                name=t.name,
                partitions=tuple(
                    _fill(part_cls, partition_index=p.partition_index, error_code=e)
                    for p in t.partitions
                ),
            )
            for t in req.topics
        ),
    )


def _metadata(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    topic_cls = _item(cls, "topics")
    topics = req.topics or ()
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        brokers=(),
        topics=tuple(
            _fill(
                topic_cls,
                error_code=e,
                name=t.name,
                topic_id=getattr(t, "topic_id", None) or uuid_zero,
                partitions=(),
            )
            for t in topics
        ),
    )


def _init_producer_id(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, producer_id=-1, producer_epoch=-1)


def _create_topics(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    row = _item(cls, "topics")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        topics=tuple(_fill(row, name=t.name, error_code=e) for t in req.topics),
    )


def _delete_topics(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    row = _item(cls, "responses")
    if _has(type(req), "topics"):  # v6+: by name or id
        rows = tuple(
            _fill(row, name=t.name, topic_id=t.topic_id or uuid_zero, error_code=e)
            for t in req.topics
        )
    else:
        rows = tuple(_fill(row, name=name, error_code=e) for name in req.topic_names)
    return _fill(cls, throttle_time=_NO_TIME, responses=rows)


def _create_partitions(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    row = _item(cls, "results")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        results=tuple(_fill(row, name=t.name, error_code=e) for t in req.topics),
    )


def _describe_configs(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    row = _item(cls, "results")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        results=tuple(
            _fill(
                row,
                error_code=e,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=(),
            )
            for r in req.resources
        ),
    )


def _incremental_alter_configs(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    row = _item(cls, "responses")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        responses=tuple(
            _fill(row, error_code=e, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in req.resources
        ),
    )


def _find_coordinator(cls: type, req: Any, e: ErrorCode, v: int) -> Entity | None:
    if _has(cls, "coordinators"):  # v4+: one row per requested key
        if req is None:
            return None
        row = _item(cls, "coordinators")
        return _fill(
            cls,
            throttle_time=_NO_TIME,
            coordinators=tuple(
                _fill(row, key=k, node_id=-1, host="", port=-1, error_code=e)
                for k in req.coordinator_keys
            ),
        )
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, node_id=-1, host="", port=-1)


def _join_group(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, generation_id=-1, members=())


def _top_level(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    """APIs whose response is just an error code plus empty payload fields."""
    return _fill(cls, throttle_time=_NO_TIME, error_code=e)


def _create_acls(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    result_cls = _item(cls, "results")
    return _fill(cls, throttle_time=_NO_TIME, results=tuple(
        _fill(result_cls, error_code=e) for _ in req.creations))


def _delete_acls(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    result_cls = _item(cls, "filter_results")
    return _fill(cls, throttle_time=_NO_TIME, filter_results=tuple(
        _fill(result_cls, error_code=e) for _ in req.filters))


def _describe_log_dirs(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    # v1-3 have no top-level error code: one log-dir result carries it.
    result = _fill(_item(cls, "results"), error_code=e, log_dir="", topics=(),
                   total_bytes=-1, usable_bytes=-1)
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, results=(result,))


def _offset_commit(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    # Same shape as ListOffsets: topics → partitions with an error code each.
    return _list_offsets(cls, req, e, v)


def _offset_fetch(cls: type, req: Any, e: ErrorCode, v: int) -> Entity | None:
    if _has(cls, "groups"):  # v8+: batched groups
        if req is None:
            return None
        group_cls = _item(cls, "groups")
        return _fill(
            cls,
            throttle_time=_NO_TIME,
            groups=tuple(_fill(group_cls, group_id=g.group_id, error_code=e) for g in req.groups),
        )
    if _has(cls, "error_code") and (req is None or req.topics is None):
        return _fill(cls, throttle_time=_NO_TIME, error_code=e, topics=())
    if req is None:
        return None
    topic_cls = _item(cls, "topics")
    part_cls = _item(topic_cls, "partitions")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        error_code=e,
        topics=tuple(
            _fill(
                topic_cls,
                name=t.name,
                partitions=tuple(
                    _fill(
                        part_cls, partition_index=i, committed_offset=-1, metadata="", error_code=e
                    )
                    for i in t.partition_indexes
                ),
            )
            for t in req.topics
        ),
    )


def _describe_groups(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    row = _item(cls, "groups")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        groups=tuple(_fill(row, error_code=e, group_id=g, members=()) for g in req.groups),
    )


def _delete_groups(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    row = _item(cls, "results")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        results=tuple(_fill(row, group_id=g, error_code=e) for g in req.groups_names),
    )


def _elect_leaders(cls: type, req: Any, e: ErrorCode, v: int) -> Entity | None:
    if req is None:
        # v1+ has a top-level error code; v0 can only report per partition.
        return _top_level(cls, req, e, v) if _has(cls, "error_code") else None
    topic_cls = _item(cls, "replica_election_results")
    part_cls = _item(topic_cls, "partition_result")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        error_code=e,
        replica_election_results=tuple(
            _fill(
                topic_cls,
                topic=t.topic,
                partition_result=tuple(
                    _fill(part_cls, partition_id=p, error_code=e) for p in t.partitions
                ),
            )
            for t in (req.topic_partitions or ())
        ),
    )


def _offset_for_leader_epoch(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    topic_cls = _item(cls, "topics")
    part_cls = _item(topic_cls, "partitions")
    return _fill(
        cls,
        throttle_time=_NO_TIME,
        topics=tuple(
            _fill(
                topic_cls,
                topic=t.topic,
                partitions=tuple(
                    _fill(part_cls, partition=p.partition, error_code=e) for p in t.partitions
                ),
            )
            for t in req.topics
        ),
    )


# (builder, needs_request): builders that mirror request arrays can't run without one.
_ERROR_BUILDERS: dict[int, tuple[_Builder, bool]] = {
    ApiKey.PRODUCE: (_produce, True),
    ApiKey.FETCH: (_fetch, True),
    ApiKey.LIST_OFFSETS: (_list_offsets, True),
    ApiKey.METADATA: (_metadata, True),
    ApiKey.OFFSET_COMMIT: (_offset_commit, True),
    ApiKey.OFFSET_FETCH: (_offset_fetch, False),
    ApiKey.FIND_COORDINATOR: (_find_coordinator, False),
    ApiKey.JOIN_GROUP: (_join_group, False),
    ApiKey.HEARTBEAT: (_top_level, False),
    ApiKey.LEAVE_GROUP: (_top_level, False),
    ApiKey.SYNC_GROUP: (_top_level, False),
    ApiKey.DESCRIBE_GROUPS: (_describe_groups, True),
    ApiKey.LIST_GROUPS: (_top_level, False),
    ApiKey.SASL_HANDSHAKE: (_top_level, False),
    # ApiVersions errors must be sent in v0 layout: api_versions_fallback_response.
    ApiKey.CREATE_TOPICS: (_create_topics, True),
    ApiKey.DELETE_TOPICS: (_delete_topics, True),
    ApiKey.INIT_PRODUCER_ID: (_init_producer_id, False),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (_offset_for_leader_epoch, True),
    ApiKey.DESCRIBE_CONFIGS: (_describe_configs, True),
    ApiKey.DESCRIBE_LOG_DIRS: (_describe_log_dirs, False),
    ApiKey.DESCRIBE_ACLS: (_top_level, False),
    ApiKey.CREATE_ACLS: (_create_acls, True),
    ApiKey.DELETE_ACLS: (_delete_acls, True),
    ApiKey.SASL_AUTHENTICATE: (_top_level, False),
    ApiKey.CREATE_PARTITIONS: (_create_partitions, True),
    ApiKey.DELETE_GROUPS: (_delete_groups, True),
    ApiKey.ELECT_LEADERS: (_elect_leaders, False),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (_incremental_alter_configs, True),
    ApiKey.ALTER_CONFIGS: (_incremental_alter_configs, True),  # the same response shape
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (_top_level, False),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (_top_level, False),
    ApiKey.OFFSET_DELETE: (_top_level, False),
    ApiKey.DESCRIBE_CLUSTER: (_top_level, False),
    ApiKey.ALTER_PARTITION: (_top_level, False),
    ApiKey.ENVELOPE: (_top_level, False),
}


def error_response(
    header: RequestHeader, request: Entity | None, error_code: ErrorCode | int
) -> Entity | None:
    """A version-correct response where every topic/partition/group carries `error_code`.

    `request` may be None (the body failed to decode); then only APIs with a
    top-level error code can be answered. Returns None when no meaningful
    response can be built: the broker should close the connection, which is
    what Kafka does for requests it cannot parse. ApiVersions is always None:
    answer its errors with `api_versions_fallback_response`.
    """
    entry = _ERROR_BUILDERS.get(header.api_key)
    if entry is None:
        return None
    builder, needs_request = entry
    if needs_request and request is None:
        return None
    try:
        cls = response_class(header.api_key, header.api_version)
    except UnsupportedVersionError:
        return None
    return builder(cls, request, ErrorCode(error_code), header.api_version)


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
                _entity(cls, False)
                entity_reader(cls)
                _body_writer(cls)
