"""Decode record batches straight into Arrow columns, without a Python object per record.

The export's hot path. Only the walk from one record to the next is a Python
loop (each record's start depends on the previous record's length varint);
every other field is decoded for all records at once with numpy, and keys
and values become Arrow binary arrays cut out of the batch bytes by C++
(``take`` over an array whose pieces are the gaps, keys and values in file
order). Records of the common shape only: a batch whose records carry
headers, or that does not parse cleanly, returns None and the caller decodes
it with :func:`slog.core.records.decode_records_as`, which also reports
corruption precisely.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from slog.core.batch import HEADER_SIZE, TIMESTAMP_TYPE_BIT, BatchHeader
from slog.core.errors import CorruptRecordError
from slog.core.records import MIN_RECORD_BODY, decode_varint

_MAX_TIMESTAMP_MS = (2**63 - 1) // 1000  # beyond this, ms -> us overflows int64


@dataclass
class Columns:
    """One group of records as numpy columns; keys and values as byte ranges of ``data``."""

    data: bytes
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, ms
    timestamp_types: np.ndarray  # int32
    bounds: np.ndarray  # int64 (n, 4): key start, key end, value start, value end
    key_null: np.ndarray  # bool
    value_null: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.offsets)

    def select(self, keep: np.ndarray) -> Columns:
        return Columns(self.data, self.offsets[keep], self.timestamps[keep],
                       self.timestamp_types[keep], self.bounds[keep], self.key_null[keep],
                       self.value_null[keep])


def _record_starts(data: bytes, pos: int, end: int, count: int) -> list[int] | None:
    """Where each record of one records section starts (its length varint), or None if
    the lengths do not chain exactly to ``end``. One step per record: the only Python loop."""
    starts: list[int] = []
    add = starts.append
    try:
        for _ in range(count):
            add(pos)
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = decode_varint(data, pos)
            if length < MIN_RECORD_BODY:
                return None
            pos += length
    except (IndexError, CorruptRecordError):
        return None
    return starts if pos == end else None


def _varints(buf: np.ndarray, pos: np.ndarray, max_bytes: int
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """Zigzag varints starting at each of ``pos``: values and sizes, or None if one takes
    ``max_bytes`` (rare, may overflow: the slow path judges it). Byte by byte, so the
    usual one- or two-byte varints cost one or two passes."""
    last = len(buf) - 1
    byte = buf[np.minimum(pos, last)]
    more = byte >= 0x80
    value = (byte & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), dtype=np.int64)
    for i in range(1, max_bytes):
        if not more.any():
            break
        byte = buf[np.minimum(pos + i, last)]
        value |= np.where(more, (byte & 0x7F).astype(np.uint64) << np.uint64(7 * i), 0
                          ).astype(np.uint64)
        size += more
        more &= byte >= 0x80
    else:
        return None
    decoded = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return decoded, size


def decode_group(data: bytes, batches: list[tuple[int, int, BatchHeader]]) -> Columns | None:
    """Columns of ``batches`` (records section start, end, header), all in ``data``."""
    buf = np.frombuffer(data, dtype=np.uint8)
    pieces = []
    for section_start, section_end, header in batches:
        starts = _record_starts(data, section_start, section_end, header.record_count)
        if starts is None:
            return None
        pieces.append(np.array(starts, dtype=np.int64))
    counts = [h.record_count for _s, _e, h in batches]
    pos = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int64)
    n = len(pos)
    decoded = _varints(buf, pos, 5)  # the record lengths, already checked to chain
    if decoded is None:
        return None
    end = pos + decoded[1] + decoded[0]
    pos = pos + decoded[1] + 1  # the attributes byte is unused
    fields = []
    for max_bytes in (10, 5):  # timestamp delta (varlong), offset delta
        decoded = _varints(buf, pos, max_bytes)
        if decoded is None:
            return None
        fields.append(decoded[0])
        pos = pos + decoded[1]
    bounds = np.empty((n, 4), dtype=np.int64)
    nulls = []
    for column in (0, 2):  # key, then value: a length (-1 for null), then the bytes
        decoded = _varints(buf, pos, 5)
        if decoded is None or (decoded[0] < -1).any():
            return None
        length, size = decoded
        pos = pos + size
        bounds[:, column] = pos
        pos = pos + np.maximum(length, 0)
        bounds[:, column + 1] = pos
        nulls.append(length == -1)
    # Header count 0 ends every record; anything else (headers, a bad length) is slow path.
    if (pos + 1 != end).any() or (buf[pos] != 0).any():
        return None
    if n and np.abs(fields[0]).max() > _MAX_TIMESTAMP_MS:
        return None  # a delta this large would overflow; the slow path keeps Python ints

    repeat = np.array(counts)
    headers = [h for _s, _e, h in batches]
    append_time = np.repeat([bool(h.attributes & TIMESTAMP_TYPE_BIT) for h in headers], repeat)
    created = np.repeat([h.base_timestamp for h in headers], repeat) + fields[0]
    timestamps = np.where(append_time, np.repeat([h.max_timestamp for h in headers], repeat),
                          created)
    if n and np.abs(timestamps).max() > _MAX_TIMESTAMP_MS:
        return None
    offsets = np.repeat(np.array([h.base_offset for h in headers], dtype=np.int64), repeat) \
        + fields[1]
    return Columns(data, offsets, timestamps, append_time.astype(np.int32), bounds,
                   nulls[0], nulls[1])


def records_section(pos: int, header: BatchHeader) -> tuple[int, int]:
    """Where an uncompressed batch at ``pos`` keeps its records."""
    return pos + HEADER_SIZE, pos + header.size


def _binary_columns(columns: Columns) -> tuple[Any, Any]:
    """Keys and values as Arrow binary arrays, copied out of ``columns.data`` by C++."""
    import pyarrow as pa

    n = len(columns)
    # Pieces in file order: gap, key, gap, value for each record; all cover data contiguously.
    edges = np.empty(4 * n + 1, dtype=np.int64)
    edges[0] = 0
    edges[1:] = columns.bounds.ravel()
    if n and edges[-1] > np.iinfo(np.int32).max:
        edges = edges.astype(np.int64)
        kind = pa.large_binary()
    else:
        edges = edges.astype(np.int32)
        kind = pa.binary()
    pieces = pa.Array.from_buffers(kind, 4 * n, [None, pa.py_buffer(edges),
                                                 pa.py_buffer(columns.data)])
    out = []
    for first, null in ((1, columns.key_null), (3, columns.value_null)):
        column = pieces.take(pa.array(np.arange(first, 4 * n, 4)))
        if kind != pa.binary():
            column = column.cast(pa.binary())
        if null.any():
            validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
            column = pa.Array.from_buffers(pa.binary(), n, [validity, *column.buffers()[1:]],
                                           null_count=int(null.sum()))
        out.append(column)
    return out[0], out[1]


def to_record_batch(columns: Columns, topic: str, partition: int, schema: Any,
                    include_headers: bool) -> Any:
    """An Arrow RecordBatch in the Kafka source schema (see reading.arrow_schema)."""
    import pyarrow as pa

    n = len(columns)
    keys, values = _binary_columns(columns)
    micros = columns.timestamps * 1000
    arrays = [
        keys, values,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(columns.offsets, pa.int64()),
        pa.Array.from_buffers(schema.field("timestamp").type, n, [None, pa.py_buffer(micros)]),
        pa.array(columns.timestamp_types, pa.int32()),
    ]
    if include_headers:  # the fast path only takes records without headers
        kind = schema.field("headers").type
        arrays.append(pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)),
                                               pa.array([], kind.value_type), type=kind))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
