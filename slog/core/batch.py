"""Frame-level view of Kafka RecordBatch v2: header fields, validation, offset rewrite.

The broker's hot path (produce validation, log append, recovery scans) works on
whole batches and never decodes individual records; this module is all it
needs. Record-level encoding and decoding lives in :mod:`slog.core.records`.

Layout of a v2 batch (all integers big-endian)::

    0  baseOffset            int64   \\ the log overhead: not covered by the CRC
    8  batchLength           int32   /  (bytes that follow this field)
    12 partitionLeaderEpoch  int32   not covered by the CRC either
    16 magic                 int8    always 2
    17 crc                   uint32  CRC-32C of bytes 21..end
    21 attributes            int16
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordCount           int32
    61 records...
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from slog.core.errors import CorruptRecordError

LOG_OVERHEAD = 12  # baseOffset + batchLength
HEADER_SIZE = 61
MAGIC = 2
# Smallest legal batchLength: the header after the overhead, with zero records.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

# What batches are read from: a segment's map as well as bytes and views of it.
BatchBuffer = bytes | bytearray | memoryview | mmap.mmap

BASE_OFFSET_POS = 0
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
CRC_START = ATTRIBUTES_POS

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of one batch, as parsed from the buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, log overhead included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: BatchBuffer, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos`` without any validation."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def peek_batch_size(buf: BatchBuffer, pos: int = 0) -> int:
    """Total size of the batch at ``pos`` according to its length field."""
    length: int = _INT32.unpack_from(buf, pos + 8)[0]
    return length + LOG_OVERHEAD


def compute_crc(buf: BatchBuffer, pos: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch of ``size`` bytes at ``pos``."""
    view = memoryview(buf)[pos + CRC_START : pos + size]
    try:
        return crc32c.crc32c(view)
    finally:
        view.release()


def validate_batch(
    buf: BatchBuffer, pos: int = 0, limit: int | None = None
) -> BatchHeader:
    """Check length, magic and CRC of the batch at ``pos``; return its header.

    ``limit`` is the end of valid data in ``buf``. Raises CorruptRecordError with
    the byte position and the reason; never decodes records.
    """
    end = len(buf) if limit is None else limit
    if end - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"only {end - pos} bytes left, a batch header needs {HEADER_SIZE}", position=pos
        )
    header = parse_header(buf, pos)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}",
            offset=header.base_offset,
            position=pos,
        )
    if pos + header.size > end:
        raise CorruptRecordError(
            f"batch length {header.batch_length} runs past the end of the data "
            f"({end - pos - LOG_OVERHEAD} bytes available)",
            offset=header.base_offset,
            position=pos,
        )
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"unsupported magic {header.magic} (only v2 batches are stored)",
            offset=header.base_offset,
            position=pos,
        )
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptRecordError(
            "negative record count or offset delta", offset=header.base_offset, position=pos
        )
    actual = compute_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch (stored {header.crc:#010x}, computed {actual:#010x})",
            offset=header.base_offset,
            position=pos,
        )
    return header


def iter_batches(
    buf: BatchBuffer, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Validate and yield ``(position, header)`` for consecutive batches.

    Stops cleanly at ``end``; raises CorruptRecordError at the first bad batch,
    including a partial one at the tail.
    """
    limit = len(buf) if end is None else end
    pos = start
    while pos < limit:
        header = validate_batch(buf, pos, limit)
        yield pos, header
        pos += header.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place. It sits outside the CRC, so no re-checksum."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place; also outside the CRC."""
    _INT32.pack_into(buf, pos + LEADER_EPOCH_POS, epoch)
