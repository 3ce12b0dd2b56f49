"""Record-level codec of Kafka RecordBatch v2: build batches, decode their records.

:mod:`slog.core.batch` handles batches as opaque frames; this module looks inside.
Each record in the records section is (all varints zigzag-encoded)::

    length          varint   bytes that follow, up to the end of the record
    attributes      int8     unused, always 0
    timestampDelta  varlong  from the batch's baseTimestamp
    offsetDelta     varint   from the batch's baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headerCount     varint
    headers         keyLength varint, utf-8 key, valueLength varint (-1 null), value

The records section as a whole is compressed with the batch's codec.

:class:`BatchBuilder` is the producer hot path: a plain record is encoded with a
few table look-ups and one bytes concatenation, without per-record objects.
Decoding reads one- and two-byte varints (nearly all of them: offset deltas
below 8192, lengths below 8192) through tables, inline, and only falls back to
the general loop for longer ones. :func:`decode_records_as` builds the
consumer's record type directly, so the consumer makes one object per record.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from operator import index as _as_int
from typing import Any, NamedTuple, TypedDict, TypeVar, Unpack

import crc32c

from slog.core import compression as codecs
from slog.core.batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_POS,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    peek_batch_size,
    validate_batch,
)
from slog.core.errors import CorruptRecordError

BytesLike = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]
T = TypeVar("T", bound=tuple[Any, ...])

CREATE_TIME = 0
LOG_APPEND_TIME = 1

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# A record is at least attributes, timestampDelta, offsetDelta, keyLength,
# valueLength and headerCount: six one-byte fields.
MIN_RECORD_BODY = 6

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_tuple_new = tuple.__new__
_time_ns = time.time_ns


class Record(NamedTuple):
    """One decoded record; ``offset`` and ``timestamp`` are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


# ---------------------------------------------------------------- varints


class _Malformed(Exception):
    """Internal: a record is malformed; converted to CorruptRecordError with context."""


def _zigzag_varint(value: int) -> bytes:
    """Zigzag varint bytes of any 64-bit signed value (no range check)."""
    u = (value << 1) ^ (value >> 63)
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a signed 32-bit value, as Kafka's ByteUtils.writeVarint."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")
    return _zigzag_varint(value)


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of a signed 64-bit value, as Kafka's ByteUtils.writeVarlong."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} is outside the int64 range")
    return _zigzag_varint(value)


def _read_varint(data: BytesLike, pos: int, max_bytes: int) -> tuple[int, int]:
    """General varint reader: ``(value, next_pos)``; raises _Malformed or IndexError.

    ``max_bytes`` is 5 for an int32 varint, 10 for an int64 varlong.
    """
    bits = 32 if max_bytes == 5 else 64
    u = 0
    shift = 0
    for _ in range(max_bytes):
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            # The last byte of a maximal varint may carry bits the type has no room for.
            if u >> bits:
                raise _Malformed(f"varint overflows {bits} bits")
            return (u >> 1) ^ -(u & 1), pos
        shift += 7
    raise _Malformed(f"varint is longer than {max_bytes} bytes")


def _public_read(data: BytesLike, pos: int, max_bytes: int) -> tuple[int, int]:
    try:
        return _read_varint(data, pos, max_bytes)
    except _Malformed as exc:
        raise CorruptRecordError(str(exc), position=pos) from None
    except IndexError:
        raise CorruptRecordError("truncated varint", position=pos) from None


def decode_varint(data: BytesLike, pos: int = 0) -> tuple[int, int]:
    """Read a zigzag int32 varint at ``pos``; return ``(value, next_pos)``."""
    return _public_read(data, pos, 5)


def decode_varlong(data: BytesLike, pos: int = 0) -> tuple[int, int]:
    """Read a zigzag int64 varint at ``pos``; return ``(value, next_pos)``."""
    return _public_read(data, pos, 10)


# Encoding tables for the values that dominate: lengths and offset deltas below
# 16 KiB, timestamp deltas below ~4 s. Anything else takes the general path.
_ENC_TABLE_SIZE = 1 << 14
_TS_TABLE_SIZE = 1 << 12
_ENC: list[bytes] = [_zigzag_varint(n) for n in range(_ENC_TABLE_SIZE)]
# offsetDelta followed by a null key's length (-1 -> 0x01).
_OD_NULL_KEY: list[bytes] = [enc + b"\x01" for enc in _ENC]
# attributes (always 0) followed by timestampDelta. A dict, not a list, so that a
# negative delta misses instead of wrapping around.
_ATTR_TS: dict[int, bytes] = {n: b"\x00" + _ENC[n] for n in range(_TS_TABLE_SIZE)}
_NULL = _zigzag_varint(-1)
_NO_HEADERS = b"\x00"

# Decoding table for a one-byte varint; None marks a continuation byte.
_DEC1: list[int | None] = [(b >> 1) ^ -(b & 1) for b in range(0x80)] + [None] * 0x80
# Decoding table for a two-byte varint b0 b1 (b0 >= 0x80 > b1), indexed by
# b0 + (b1 << 7), which is 0x80 more than the unsigned value: the cheapest index.
_DEC2: list[int] = [0] * 0x80 + [(u >> 1) ^ -(u & 1) for u in range(1 << 14)]


# ---------------------------------------------------------------- encoding


def _check_bytes(what: str, data: object) -> None:
    if data is not None and not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"record {what} must be bytes or None, not {type(data).__name__}")


def _encode_bytes(data: BytesLike | None) -> bytes:
    if data is None:
        return _NULL
    return _zigzag_varint(len(data)) + data


def _encode_headers(headers: Iterable[Header]) -> bytes:
    parts: list[bytes] = []
    count = 0
    for item in headers:
        try:
            hkey, hvalue = item
        except (TypeError, ValueError):
            raise TypeError(f"a record header must be a (key, value) pair, not {item!r}") from None
        if isinstance(hkey, str):
            hkey_bytes = hkey.encode()
        elif isinstance(hkey, bytes | bytearray | memoryview):
            hkey_bytes = bytes(hkey)  # taken as already utf-8
        else:
            raise TypeError(f"a header key must be str, not {type(hkey).__name__}")
        _check_bytes("header value", hvalue)
        parts.append(_zigzag_varint(len(hkey_bytes)))
        parts.append(hkey_bytes)
        parts.append(_encode_bytes(hvalue))
        count += 1
    return _zigzag_varint(count) + b"".join(parts)


def _encode_record_body(
    timestamp_delta: int,
    offset_delta: int,
    key: BytesLike | None,
    value: BytesLike | None,
    encoded_headers: bytes,
) -> bytes:
    """Everything after the length prefix, for any input (the slow, checked path)."""
    _check_bytes("key", key)
    _check_bytes("value", value)
    return b"".join(
        (
            b"\x00",
            encode_varlong(timestamp_delta),
            encode_varint(offset_delta),
            _encode_bytes(key),
            _encode_bytes(value),
            encoded_headers,
        )
    )


class BatchBuilder:
    """Accumulates records and builds one v2 batch (the producer's hot path).

    Records are encoded on ``append`` straight into a bytearray that already
    reserves the 61-byte batch header, so ``build`` only has to compress (if
    asked), fill in the header and checksum.
    """

    __slots__ = (
        "_attributes",
        "_base_sequence",
        "_base_timestamp",
        "_buf",
        "_compression",
        "_count",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
    )

    def __init__(
        self,
        *,
        compression: int = codecs.NONE,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        timestamp_type: int = CREATE_TIME,
        is_control: bool = False,
    ) -> None:
        if compression not in codecs.CODEC_NAMES:
            raise ValueError(f"unknown compression codec id {compression!r}")
        if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError("timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime)")
        self._compression = compression
        self._attributes = (
            compression
            | (TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0)
            | (TRANSACTIONAL_BIT if is_transactional else 0)
            | (CONTROL_BIT if is_control else 0)
        )
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._buf = bytearray(HEADER_SIZE)
        self._count = 0
        self._base_timestamp = 0
        self._max_timestamp = -1

    def append(
        self,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[Header] = (),
        timestamp: int | None = None,
    ) -> int:
        """Add one record; return the batch's estimated size in bytes so far.

        ``timestamp`` is in milliseconds since the epoch and defaults to now.
        """
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        elif type(timestamp) is not int:
            timestamp = _as_int(timestamp)  # rejects floats, accepts int-likes
        count = self._count
        # The first record's timestamp is the base, as in the Java client.
        delta = timestamp - self._base_timestamp if count else 0
        # Encoded once, outside the fast path, so an iterator is consumed only once.
        tail = _encode_headers(headers) if headers else _NO_HEADERS
        try:
            # Fast path: small values, plain bytes. Any miss (null value, big
            # lengths, negative delta, wrong types) raises and goes the slow way.
            # A null value fails len() with TypeError, so it too takes the slow path.
            fast_value: BytesLike = value  # type: ignore[assignment]  # see the line above
            if key is None:
                body = (
                    _ATTR_TS[delta]
                    + _OD_NULL_KEY[count]
                    + _ENC[len(fast_value)]
                    + fast_value
                    + tail
                )
            else:
                body = (
                    _ATTR_TS[delta]
                    + _ENC[count]
                    + _ENC[len(key)]
                    + key
                    + _ENC[len(fast_value)]
                    + fast_value
                    + tail
                )
            prefix = _ENC[len(body)]
        except (KeyError, IndexError, TypeError):
            body = _encode_record_body(delta, count, key, value, tail)
            prefix = encode_varint(len(body))
        # State changes only once the record is encoded, so a rejected one leaves no trace.
        buf = self._buf
        buf += prefix
        buf += body
        if not count:
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._count = count + 1
        return len(buf)

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        """Set the idempotence fields; producers assign the sequence when a batch is drained."""
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        if is_transactional:
            self._attributes |= TRANSACTIONAL_BIT
        else:
            self._attributes &= ~TRANSACTIONAL_BIT

    def size_estimate(self) -> int:
        """Bytes the batch would take uncompressed, header included.

        For a compressed batch this is an upper bound in practice: it is what
        the codec gets as input.
        """
        return len(self._buf)

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def compression(self) -> int:
        return self._compression

    def build(self, base_offset: int = 0) -> bytes:
        """Return the complete batch with ``base_offset``; the builder stays usable."""
        count = self._count
        if not count:
            raise ValueError("cannot build a batch with no records")
        buf = self._buf
        if self._compression:
            with memoryview(buf) as view:
                compressed = codecs.compress(self._compression, view[HEADER_SIZE:])
            out = bytearray(HEADER_SIZE)
            out += compressed
        else:
            out = buf
        _HEADER.pack_into(
            out,
            0,
            base_offset,
            len(out) - LOG_OVERHEAD,
            self._partition_leader_epoch,
            MAGIC,
            0,  # CRC, filled in below once the header is in place
            self._attributes,
            count - 1,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            count,
        )
        with memoryview(out) as view:
            crc = crc32c.crc32c(view[CRC_START:])
        _CRC.pack_into(out, CRC_POS, crc)
        return bytes(out)


class BuilderOptions(TypedDict, total=False):
    """:class:`BatchBuilder`'s keyword arguments, as :func:`build_batch` passes them on."""

    compression: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    partition_leader_epoch: int
    timestamp_type: int
    is_control: bool


def build_batch(
    records: Iterable[tuple[BytesLike | None, BytesLike | None, Sequence[Header], int | None]],
    *,
    base_offset: int = 0,
    **builder_kwargs: Unpack[BuilderOptions],
) -> bytes:
    """Build one batch from ``(key, value, headers, timestamp)`` tuples.

    Keyword arguments other than ``base_offset`` go to :class:`BatchBuilder`.
    """
    builder = BatchBuilder(**builder_kwargs)
    append = builder.append
    for key, value, headers, timestamp in records:
        append(key, value, headers, timestamp)
    return builder.build(base_offset)


# ---------------------------------------------------------------- decoding


def _decode_headers(data: bytes, pos: int, count: int) -> tuple[tuple[Header, ...], int]:
    dec1 = _DEC1
    headers = []
    for _ in range(count):
        klen = dec1[data[pos]]
        if klen is None:
            klen, pos = _read_varint(data, pos, 5)
        else:
            pos += 1
        if klen < 0:
            raise _Malformed(f"negative header key length {klen}")
        end = pos + klen
        try:
            hkey = data[pos:end].decode()
        except UnicodeDecodeError:
            raise _Malformed("header key is not valid utf-8") from None
        pos = end
        vlen = dec1[data[pos]]
        if vlen is None:
            vlen, pos = _read_varint(data, pos, 5)
        else:
            pos += 1
        if vlen >= 0:
            hvalue: bytes | None = data[pos : pos + vlen]
            pos += vlen
        elif vlen == -1:
            hvalue = None
        else:
            raise _Malformed(f"negative header value length {vlen}")
        headers.append((hkey, hvalue))
    return tuple(headers), pos


def _decode_section(
    data: bytes,
    pos: int,
    end: int,
    header: BatchHeader,
    batch_pos: int,
    record_type: type[tuple[Any, ...]] | None = None,
    topic: str = "",
    partition: int = 0,
) -> list[Any]:
    """Decode ``header.record_count`` records from ``data[pos:end]``.

    Records come out as :class:`Record`, or with ``record_type`` as that tuple
    subclass holding ``(topic, partition, offset, timestamp, timestamp_type,
    key, value, headers)``.

    The hot loop. A varint of one byte (most fields) is a table look-up; one of
    two bytes (offset deltas from 64 on, lengths of 64..8191, timestamp deltas
    up to ~8 s) is inlined as a second look-up in ``_DEC2``; longer ones take
    the general reader.
    """
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_BIT)
    max_timestamp = header.max_timestamp
    records: list[Any] = []
    append = records.append
    dec1 = _DEC1
    dec2 = _DEC2
    read_varint = _read_varint
    new = _tuple_new
    wide = record_type is not None
    cls: type[tuple[Any, ...]] = Record if record_type is None else record_type
    ts_type = LOG_APPEND_TIME if log_append_time else CREATE_TIME
    index = 0
    try:
        for index in range(header.record_count):  # noqa: B007 - index is read on error
            length = dec1[data[pos]]
            if length is None:
                b = data[pos + 1]
                if b < 0x80:
                    length = dec2[data[pos] + (b << 7)]
                    pos += 2
                else:
                    length, pos = read_varint(data, pos, 5)
            else:
                pos += 1
            record_end = pos + length
            if length < MIN_RECORD_BODY or record_end > end:
                raise _Malformed(
                    f"record length {length} is invalid ({end - pos} bytes left in the batch)"
                )
            # data[pos] is the attributes byte, unused by every Kafka version so far.
            ts_delta = dec1[data[pos + 1]]
            if ts_delta is None:
                b = data[pos + 2]
                if b < 0x80:
                    ts_delta = dec2[data[pos + 1] + (b << 7)]
                    pos += 3
                else:
                    ts_delta, pos = read_varint(data, pos + 1, 10)
            else:
                pos += 2
            offset_delta = dec1[data[pos]]
            if offset_delta is None:
                b = data[pos + 1]
                if b < 0x80:
                    offset_delta = dec2[data[pos] + (b << 7)]
                    pos += 2
                else:
                    offset_delta, pos = read_varint(data, pos, 5)
            else:
                pos += 1
            klen = dec1[data[pos]]
            if klen is None:
                b = data[pos + 1]
                if b < 0x80:
                    klen = dec2[data[pos] + (b << 7)]
                    pos += 2
                else:
                    klen, pos = read_varint(data, pos, 5)
            else:
                pos += 1
            if klen >= 0:
                key: bytes | None = data[pos : pos + klen]
                pos += klen
            elif klen == -1:
                key = None
            else:
                raise _Malformed(f"negative key length {klen}")
            vlen = dec1[data[pos]]
            if vlen is None:
                b = data[pos + 1]
                if b < 0x80:
                    vlen = dec2[data[pos] + (b << 7)]
                    pos += 2
                else:
                    vlen, pos = read_varint(data, pos, 5)
            else:
                pos += 1
            if vlen >= 0:
                value: bytes | None = data[pos : pos + vlen]
                pos += vlen
            elif vlen == -1:
                value = None
            else:
                raise _Malformed(f"negative value length {vlen}")
            if data[pos] == 0:  # no headers, nearly always
                headers: tuple[Header, ...] = ()
                pos += 1
            else:
                header_count = dec1[data[pos]]
                if header_count is None:
                    header_count, pos = read_varint(data, pos, 5)
                else:
                    pos += 1
                if header_count == 0:  # a zero in more than one byte
                    headers = ()
                elif 0 < header_count <= (record_end - pos) // 2:
                    headers, pos = _decode_headers(data, pos, header_count)
                else:
                    raise _Malformed(f"invalid header count {header_count}")
            if pos != record_end:
                # Slices never raise, so a length running past the record shows up here.
                raise _Malformed(
                    f"record fields take {pos - record_end + length} bytes, "
                    f"its length says {length}"
                )
            timestamp = max_timestamp if log_append_time else base_timestamp + ts_delta
            if wide:
                append(new(cls, (topic, partition, base_offset + offset_delta, timestamp,
                                 ts_type, key, value, headers)))
            else:
                append(new(cls, (base_offset + offset_delta, timestamp, key, value, headers)))
    except _Malformed as exc:
        raise CorruptRecordError(
            f"record {index} of the batch: {exc}", offset=base_offset + index, position=batch_pos
        ) from None
    except IndexError:
        raise CorruptRecordError(
            f"record {index} of the batch runs past the end of the records section",
            offset=base_offset + index,
            position=batch_pos,
        ) from None
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes left after the {header.record_count} records the header declares",
            offset=base_offset,
            position=batch_pos,
        )
    return records


def _decode_validated(
    buf: BytesLike,
    pos: int,
    header: BatchHeader,
    record_type: type[tuple[Any, ...]] | None = None,
    topic: str = "",
    partition: int = 0,
) -> list[Any]:
    """Records of a batch that validate_batch already accepted (see _decode_section)."""
    start = pos + HEADER_SIZE
    end = pos + header.size
    codec = header.attributes & COMPRESSION_MASK
    if codec:
        with memoryview(buf) as view:
            section = view[start:end]
            try:
                data = codecs.decompress(codec, section)
            except CorruptRecordError as exc:
                raise CorruptRecordError(
                    exc.reason, offset=header.base_offset, position=pos
                ) from exc.__cause__
            finally:
                section.release()
        return _decode_section(data, 0, len(data), header, pos, record_type, topic, partition)
    if type(buf) is bytes:
        return _decode_section(buf, start, end, header, pos, record_type, topic, partition)
    # bytearray or memoryview: copy the section once so records come out as bytes.
    with memoryview(buf) as view:
        data = view[start:end].tobytes()
    return _decode_section(data, 0, len(data), header, pos, record_type, topic, partition)


def decode_records(buf: BytesLike, pos: int = 0) -> tuple[BatchHeader, list[Record]]:
    """Validate the batch at ``pos`` and decode all its records.

    Control batches are decoded like any other; :func:`iter_records` is the
    one that skips them.
    """
    header = validate_batch(buf, pos)
    return header, _decode_validated(buf, pos, header)


def decode_records_as(
    buf: BytesLike,
    pos: int,
    header: BatchHeader,
    record_type: type[T],
    topic: str,
    partition: int,
) -> list[T]:
    """Decode the records of a batch straight into consumer-style tuples.

    ``header`` must come from :func:`validate_batch` (or :func:`iter_valid_batches`)
    on the same bytes. Each record is built, without an intermediate
    :class:`Record`, as ``record_type`` (a tuple subclass, such as the client's
    ``ConsumerRecord``, whose ``__new__`` is bypassed) holding ``(topic,
    partition, offset, timestamp, timestamp_type, key, value, headers)``, with
    ``timestamp_type`` 0 for CreateTime and 1 for LogAppendTime. Malformed
    records raise CorruptRecordError as :func:`decode_records` does.
    """
    return _decode_validated(buf, pos, header, record_type, topic, partition)


def iter_valid_batches(
    buf: BytesLike,
    start: int = 0,
    end: int | None = None,
    *,
    allow_partial_tail: bool = True,
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of consecutive validated batches, records not decoded.

    Like batch.iter_batches, but with ``allow_partial_tail`` a batch cut off by
    ``end`` (or the end of ``buf``) ends the iteration quietly; a complete batch
    that fails validation always raises CorruptRecordError.
    """
    limit = len(buf) if end is None else end
    pos = start
    while pos < limit:
        if allow_partial_tail:
            left = limit - pos
            # A fetch response is cut at a byte limit, so its last batch may be
            # partial; the consumer asks again from that offset.
            if left < LOG_OVERHEAD or peek_batch_size(buf, pos) > left:
                return
        header = validate_batch(buf, pos, limit)
        yield pos, header
        pos += header.size


def iter_decoded_batches(
    buf: BytesLike,
    start: int = 0,
    end: int | None = None,
    *,
    allow_partial_tail: bool = True,
) -> Iterator[tuple[int, BatchHeader, list[Record]]]:
    """Yield ``(position, header, records)`` for consecutive batches, control ones too.

    Partial tails and corruption are handled as in :func:`iter_valid_batches`.
    """
    for pos, header in iter_valid_batches(buf, start, end, allow_partial_tail=allow_partial_tail):
        yield pos, header, _decode_validated(buf, pos, header)


def iter_records(
    buf: BytesLike,
    start: int = 0,
    end: int | None = None,
    *,
    allow_partial_tail: bool = True,
) -> Iterator[Record]:
    """Yield the records of consecutive batches, skipping control batches.

    Control batches carry transaction markers, not data. Partial tails and
    corruption are handled as in :func:`iter_valid_batches`.
    """
    for pos, header in iter_valid_batches(buf, start, end, allow_partial_tail=allow_partial_tail):
        if not header.attributes & CONTROL_BIT:
            yield from _decode_validated(buf, pos, header)
