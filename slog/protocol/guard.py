"""The safety net in front of kio's native reader, and what slog reads of kio's schemas.

kio 0.6.5's native reader pre-allocates ``Vec::with_capacity(n)`` for every
array from the untrusted length on the wire. A 5-byte body announcing a
4-billion-element array makes the allocator fail and Rust *aborts the whole
process* (no exception). It also rejects unknown tagged fields with a
KeyError, where Kafka says they must be skipped. So before kio sees a body,
a Python walker generated per class mirrors kio's reading order, checks every
array length against the bytes that remain, checks every known tagged field
consumes exactly its declared size, and cuts unknown tagged fields out of the
buffer. It costs about as much as kio's own parse (~8 us for a 50-partition
Fetch v12 request).

The walker has to know how kio lays out each field, which only kio's private
``kio.serial._introspect`` says. This is the one module that imports it (the
``kio<0.7`` pin in pyproject.toml is for this file); the response builders
read field types through `FieldSchema` below.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import Field, dataclass, fields
from typing import TYPE_CHECKING, Any

from kio.serial import _introspect

from slog.protocol.headers import read_uvarint, write_uvarint

if TYPE_CHECKING:
    from kio.static.protocol import Entity  # a kio schema class: __flexible__ and friends

__all__ = ["FieldSchema", "compile_guard", "field_schema", "guard", "readonly"]

Buf = bytes | bytearray | memoryview

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class FieldSchema:
    """How kio encodes one dataclass field."""

    kafka_type: str | None  # "int32", "string", ...; None for a struct or array of structs
    entity: type | None  # the class of a struct or of an array's structs
    is_array: bool
    optional: bool  # kio models a nullable field as Optional
    tag: int | None  # a tagged field's tag


def field_schema(f: Field[Any]) -> FieldSchema:
    """Read one field of a kio entity class through kio's private introspection."""
    kind = _introspect.classify_field(f)
    optional = _introspect.is_optional(f)
    raw_tag = _introspect.get_field_tag(f)
    tag = None if raw_tag is None else int(raw_tag)
    if isinstance(kind, _introspect.EntityField | _introspect.EntityTupleField):
        return FieldSchema(None, kind.type_, kind.is_array, optional, tag)
    if isinstance(kind, _introspect.PrimitiveField | _introspect.PrimitiveTupleField):
        return FieldSchema(_introspect.get_schema_field_type(f), None, kind.is_array,
                           optional, tag)
    raise TypeError(f"unsupported field {f.name}")  # pragma: no cover - kio has four kinds


# --------------------------------------------------------------------------------------
# The walker: validates lengths before kio allocates
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


def _field(schema: FieldSchema, flexible: bool) -> tuple[int | _Skip, int]:
    """Mirror of kio's build_field_schema: how one dataclass field is encoded."""
    inner: int | _Skip
    if schema.entity is None:
        assert schema.kafka_type is not None
        inner, inner_min = _primitive(schema.kafka_type, flexible)
    else:
        # A struct may be null (KIP-893); an array's items may not.
        inner, inner_min = _entity(schema.entity, schema.optional and not schema.is_array)
    if schema.is_array:
        # kio models a nullable array as Optional; anything else must not be null.
        return _array(inner, inner_min, flexible, schema.optional)
    return inner, inner_min


@functools.cache
def _entity(cls: type[Entity], nullable: bool) -> tuple[_Skip, int]:
    """Compile a skip function for one kio entity class."""
    flexible: bool = cls.__flexible__
    ops: list[int | _Skip] = []
    tagged: dict[int, _Skip] = {}
    min_size = 1 if flexible else 0  # the tag count
    for f in fields(cls):
        schema = field_schema(f)
        op, op_min = _field(schema, flexible)
        if schema.tag is not None:
            tagged[schema.tag] = _as_skip(op)
            continue
        min_size += op_min
        if isinstance(op, int) and ops and isinstance(ops[-1], int):
            ops[-1] += op  # merge runs of fixed-width fields into one skip
        else:
            ops.append(op)
    return _compile_skip(cls, nullable, ops, tagged), (1 if nullable else min_size)


def _compile_skip(
    cls: type[Entity], nullable: bool, ops: list[int | _Skip], tagged: dict[int, _Skip]
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


def readonly(buf: Buf) -> bytes | memoryview:
    # kio's native reader refuses writable buffers ("Received writable byte
    # buffer where read-only was expected"), so bytearrays are copied once.
    if isinstance(buf, bytes) or (isinstance(buf, memoryview) and buf.readonly):
        return buf
    return bytes(buf)


def guard(cls: type[Entity], buf: Buf, offset: int) -> Buf:
    """Validate `buf[offset:]` as an encoded `cls`; return the buffer kio may read.

    Raises `_Bad` (or struct.error / IndexError / ValueError from short
    reads) when the bytes cannot be a valid encoding.
    """
    skip, _ = _entity(cls, False)
    edits: list[_Edit] = []
    skip(buf, offset, len(buf), edits)
    return _splice(buf, edits) if edits else buf


def compile_guard(cls: type[Entity]) -> None:
    """Build the walker for `cls` now rather than on its first request."""
    _entity(cls, False)
