"""Test helper: valid RecordBatch v2 bytes, independent of slog.core.records.

Records are encoded as Kafka does (varint length, attributes, timestamp and
offset deltas, key, value, no headers), uncompressed, so any v2 decoder reads
them; the CRC-32C is real.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")
BASE_TIMESTAMP = 1_700_000_000_000


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _varint(timestamp_delta) + _varint(offset_delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(len(value)) + value
    body += _varint(0)  # no headers
    return _varint(len(body)) + bytes(body)


def make_batch(
    base_offset: int = 0,
    values: Sequence[bytes] = (b"value",),
    *,
    timestamps: Sequence[int] | None = None,
    base_timestamp: int = BASE_TIMESTAMP,
    leader_epoch: int = -1,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    key: bytes | None = None,
) -> bytes:
    """One batch holding ``values``; timestamps default to base_timestamp + i."""
    if timestamps is None:
        timestamps = [base_timestamp + i for i in range(len(values))]
    first_ts = min(timestamps) if timestamps else base_timestamp
    records = b"".join(
        _record(i, ts - first_ts, key, value)
        for i, (value, ts) in enumerate(zip(values, timestamps, strict=True))
    )
    count = len(values)
    header = bytearray(
        _HEADER.pack(
            base_offset,
            0,  # batchLength, set below
            leader_epoch,
            2,
            0,  # crc, set below
            attributes,
            max(count - 1, 0),
            first_ts,
            max(timestamps) if timestamps else first_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    data = header + records
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def make_sized_batch(
    base_offset: int,
    size: int,
    *,
    timestamp: int = BASE_TIMESTAMP,
    leader_epoch: int = -1,
    records: int = 1,
) -> bytes:
    """A batch of exactly ``size`` bytes (>= 80) with ``records`` records.

    A few sizes cannot be hit (e.g. 126: one record's length varint jumps from
    one byte to two there); they raise ValueError.
    """
    timestamps = [timestamp] * records
    overhead = len(make_batch(base_offset, [b""] * records, timestamps=timestamps))
    pad = size - overhead
    if pad < 0:
        raise ValueError(f"a batch of {records} records needs at least {overhead} bytes")
    # Varint lengths grow with the value, so some sizes need a one-byte key to hit exactly.
    for key in (None, b"k"):
        for extra in range(pad, max(pad - 8, -1), -1):
            values = [b"x" * extra] + [b""] * (records - 1)
            batch = make_batch(
                base_offset, values, timestamps=timestamps, leader_epoch=leader_epoch, key=key
            )
            if len(batch) == size:
                return batch
    raise ValueError(f"cannot make a batch of exactly {size} bytes")


def batch_stream(first_offset: int, sizes: Sequence[int], **kwargs: object) -> list[bytes]:
    """Consecutive single-record batches of the given sizes."""
    return [
        make_sized_batch(first_offset + i, size, **kwargs)  # type: ignore[arg-type]
        for i, size in enumerate(sizes)
    ]
