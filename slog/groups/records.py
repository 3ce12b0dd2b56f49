"""The record format of ``__consumer_offsets``, byte-compatible with Kafka.

Keys start with an int16 version that also says what the record is:

* 0 and 1: ``OffsetCommitKey`` (group, topic, partition) -> ``OffsetCommitValue``
* 2: ``GroupMetadataKey`` (group) -> ``GroupMetadataValue``

slog writes OffsetCommitKey v1 with OffsetCommitValue v3 (v1 when the commit
carries an explicit expire timestamp, as Kafka does) and GroupMetadataKey v2
with GroupMetadataValue v3. It reads every non-flexible version. A null value
is a tombstone. Other key versions (Kafka's newer coordinators) are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from slog.core.wire import Reader, WireFormatError, Writer
from slog.groups.offsets import OffsetAndMetadata

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

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


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        return (Writer().int16(OFFSET_KEY_VERSION).string(self.group).string(self.topic)
                .int32(self.partition).getvalue())


@dataclass(frozen=True)
class GroupKey:
    group: str

    def encode(self) -> bytes:
        return Writer().int16(GROUP_KEY_VERSION).string(self.group).getvalue()


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberValue, ...]


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of a record, or None for a record type slog does not know."""
    reader = Reader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetKey(reader.required_string(), reader.required_string(), reader.int32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(reader.required_string())
    return None


# -- offsets --------------------------------------------------------------------------


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
    version = reader.int16()
    if version < 0 or version > OFFSET_VALUE_VERSION:
        raise WireFormatError(f"OffsetCommitValue version {version} is not supported")
    offset = reader.int64()
    epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string() or ""
    committed = reader.int64()
    expire = reader.int64() if version == 1 else None
    return OffsetAndMetadata(offset, epoch, metadata, committed, expire)


# -- group metadata -------------------------------------------------------------------


def _write_member(w: Writer, m: MemberValue) -> None:
    (w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
     .string(m.client_host).int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
     .bytes(m.subscription).bytes(m.assignment))


def encode_group_value(value: GroupValue) -> bytes:
    w = (Writer().int16(GROUP_VALUE_VERSION).string(value.protocol_type).int32(value.generation)
         .string(value.protocol).string(value.leader).int64(value.current_state_timestamp_ms))
    return w.array(value.members, _write_member).getvalue()


def decode_group_value(data: bytes) -> GroupValue:
    reader = Reader(data)
    version = reader.int16()
    if version < 0 or version > GROUP_VALUE_VERSION:
        raise WireFormatError(f"GroupMetadataValue version {version} is not supported")
    protocol_type = reader.required_string()
    generation = reader.int32()
    protocol = reader.string()
    leader = reader.string()
    timestamp = reader.int64() if version >= 2 else -1

    def member(r: Reader) -> MemberValue:
        member_id = r.required_string()
        instance = r.string() if version >= 3 else None
        client_id = r.required_string()
        host = r.required_string()
        rebalance = r.int32() if version >= 1 else -1
        session = r.int32()
        if rebalance < 0:
            rebalance = session  # v0 had no rebalance timeout; Kafka used the session one
        return MemberValue(member_id, instance, client_id, host, rebalance, session,
                           r.bytes() or b"", r.bytes() or b"")

    return GroupValue(protocol_type, generation, protocol, leader, timestamp,
                      tuple(reader.array(member)))
