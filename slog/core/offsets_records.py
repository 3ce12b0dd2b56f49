"""Keys and group metadata values of ``__consumer_offsets``, byte-compatible with Kafka.

A storage format, so it lives in core: the group coordinator writes and replays
these records, and tools that read the topic's files (the dashboard) decode
them. Keys start with an int16 version that also says what the record is:

* 0 and 1: ``OffsetCommitKey`` (group, topic, partition) -> ``OffsetCommitValue``
  (whose codec is in :mod:`slog.groups.records`, beside ``OffsetAndMetadata``)
* 2: ``GroupMetadataKey`` (group) -> ``GroupMetadataValue``

slog writes OffsetCommitKey v1 and GroupMetadataKey v2 with GroupMetadataValue
v3, and reads every non-flexible version. A null value is a tombstone. Other
key versions (Kafka's newer coordinators) decode as None, for the reader to skip
with a warning. Decoding validates as well as parses: truncated data, nulls where
the schema has none, negative partitions and generations, and value versions newer
than slog's raise :class:`WireFormatError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from slog.core.wire import Reader, WireFormatError, Writer

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
GROUP_KEY_PREFIX = GROUP_KEY_VERSION.to_bytes(2, "big")  # how a group metadata key starts


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
        key = OffsetKey(reader.required_string(), reader.required_string(), reader.int32())
        if key.partition < 0:
            raise WireFormatError(f"offset commit key of partition {key.partition}")
        return key
    if version == GROUP_KEY_VERSION:
        return GroupKey(reader.required_string())
    return None


def _write_member(w: Writer, m: MemberValue) -> None:
    (w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
     .string(m.client_host).int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
     .bytes(m.subscription).bytes(m.assignment))


def encode_group_value(value: GroupValue) -> bytes:
    w = (Writer().int16(GROUP_VALUE_VERSION).string(value.protocol_type).int32(value.generation)
         .string(value.protocol).string(value.leader).int64(value.current_state_timestamp_ms))
    return w.array(value.members, _write_member).getvalue()


def read_value_version(reader: Reader, newest: int, what: str) -> int:
    """A value's leading version, refused when it is newer than the codec knows."""
    version = reader.int16()
    if version < 0 or version > newest:
        raise WireFormatError(f"{what} version {version} is not supported")
    return version


def decode_group_value(data: bytes) -> GroupValue:
    reader = Reader(data)
    version = read_value_version(reader, GROUP_VALUE_VERSION, "GroupMetadataValue")
    protocol_type = reader.required_string()
    generation = reader.int32()
    if generation < 0:
        raise WireFormatError(f"GroupMetadataValue of generation {generation}")
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
