"""The record format of ``__consumer_offsets``, byte-compatible with Kafka.

Keys and group metadata values are a storage format shared with tools that read
the topic's files, so their codec is :mod:`slog.core.offsets_records` (re-exported
here). This module adds the offset commit values, which decode to the
coordinator's :class:`OffsetAndMetadata`: slog writes OffsetCommitValue v3 (v1
when the commit carries an explicit expire timestamp, as Kafka does) and reads
every non-flexible version.
"""

from __future__ import annotations

from slog.core.offsets_records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    decode_group_value,
    decode_key,
    encode_group_value,
    read_value_version,
)
from slog.core.wire import Reader, WireFormatError, Writer
from slog.groups.offsets import OffsetAndMetadata

OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1

__all__ = [
    "GroupKey",
    "GroupValue",
    "MemberValue",
    "OffsetKey",
    "WireFormatError",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_value",
    "encode_offset_value",
]


def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    w = Writer()
    if value.expire_timestamp_ms is not None:
        return (w.int16(OFFSET_VALUE_VERSION_WITH_EXPIRY).int64(value.offset)
                .string(value.metadata).int64(value.commit_timestamp_ms)
                .int64(value.expire_timestamp_ms).getvalue())
    return (w.int16(OFFSET_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
            .string(value.metadata).int64(value.commit_timestamp_ms).getvalue())


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    reader = Reader(data)
    version = read_value_version(reader, OFFSET_VALUE_VERSION, "OffsetCommitValue")
    offset = reader.int64()
    epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string() or ""
    committed = reader.int64()
    expire = reader.int64() if version == 1 else None
    return OffsetAndMetadata(offset, epoch, metadata, committed, expire)
