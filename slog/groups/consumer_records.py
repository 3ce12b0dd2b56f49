"""The ``__consumer_offsets`` records of consumer-protocol groups, Kafka's formats.

Keys are non-flexible (an int16 record type, then the group id and, for the
per-member ones, the member id); values are an int16 version (0) followed by a
flexible struct (compact strings and arrays, tagged fields), as Kafka's
coordinator writes them:

====  ==========================================  ======================================
type  key                                         value
====  ==========================================  ======================================
3     ConsumerGroupMetadataKey                    group epoch (+ tag 0: metadata hash)
4     ConsumerGroupPartitionMetadataKey           read and ignored (Kafka 4.1 dropped it)
5     ConsumerGroupMemberMetadataKey              subscriptions, ids, rebalance timeout
6     ConsumerGroupTargetAssignmentMetadataKey    target assignment epoch
7     ConsumerGroupTargetAssignmentMemberKey      a member's target partitions
8     ConsumerGroupCurrentMemberAssignmentKey     member epochs, state, owned and revoking
====  ==========================================  ======================================

Unknown tagged fields (newer Kafkas add some) are skipped when reading.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TypeVar

from slog.core.wire import Reader, WireFormatError, Writer
from slog.groups.consumer_group import (
    Changes,
    ClassicMembership,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from slog.groups.server_assignors import Assignment, TopicIdPartition

T = TypeVar("T")
VALUE_VERSION = 0
METADATA_HASH_TAG = 0


class RecordType(IntEnum):
    GROUP_METADATA = 3
    PARTITION_METADATA = 4
    MEMBER_METADATA = 5
    TARGET_METADATA = 6
    TARGET_MEMBER = 7
    CURRENT_ASSIGNMENT = 8


PER_MEMBER = frozenset({RecordType.MEMBER_METADATA, RecordType.TARGET_MEMBER,
                        RecordType.CURRENT_ASSIGNMENT})


@dataclass(frozen=True)
class ConsumerGroupKey:
    type: RecordType
    group: str
    member: str | None = None

    def encode(self) -> bytes:
        w = Writer().int16(self.type).string(self.group)
        if self.type in PER_MEMBER:
            w.string(self.member)
        return w.getvalue()


def decode_consumer_key(data: bytes) -> ConsumerGroupKey | None:
    """A consumer-group key, or None for a key of another record type."""
    reader = Reader(data)
    version = reader.int16()
    if version not in RecordType._value2member_map_:
        return None
    kind = RecordType(version)
    group = reader.required_string()
    return ConsumerGroupKey(kind, group, reader.required_string() if kind in PER_MEMBER
                            else None)


# -- the flexible encoding ------------------------------------------------------------------
class _FlexWriter(Writer):
    __slots__ = ()

    def uvarint(self, value: int) -> _FlexWriter:
        out = bytearray()
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self._buf += out
        return self

    def cstring(self, value: str | None) -> _FlexWriter:
        if value is None:
            return self.uvarint(0)
        data = value.encode()
        self.uvarint(len(data) + 1)
        self._buf += data
        return self

    def carray(self, items: Iterable[T], write: Callable[[_FlexWriter, T], object]
               ) -> _FlexWriter:
        items = list(items)
        self.uvarint(len(items) + 1)
        for item in items:
            write(self, item)
        return self

    def uuid(self, value: str) -> _FlexWriter:
        self._buf += uuid.UUID(value).bytes
        return self

    def cbytes(self, value: bytes) -> _FlexWriter:
        self.uvarint(len(value) + 1)
        self._buf += value
        return self

    def int8(self, value: int) -> _FlexWriter:
        self._buf += value.to_bytes(1, "big", signed=True)
        return self

    def tags(self, fields: dict[int, bytes] | None = None) -> _FlexWriter:
        fields = fields or {}
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag).uvarint(len(fields[tag]))
            self._buf += fields[tag]
        return self


class _FlexReader(Reader):
    __slots__ = ()

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise WireFormatError("unsigned varint longer than 5 bytes")

    def cstring(self) -> str | None:
        size = self.uvarint()
        if size == 0:
            return None
        try:
            return self._take(size - 1).decode()
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"string is not UTF-8: {exc}") from None

    def required_cstring(self) -> str:
        value = self.cstring()
        if value is None:
            raise WireFormatError("null where a string is required")
        return value

    def carray(self, read: Callable[[_FlexReader], T]) -> list[T]:
        count = self.uvarint() - 1
        if count < 0:
            return []
        if count > self.remaining:
            raise WireFormatError(f"array of {count} items in {self.remaining} bytes")
        return [read(self) for _ in range(count)]

    def uuid(self) -> str:
        return str(uuid.UUID(bytes=self._take(16)))

    def cbytes(self) -> bytes:
        size = self.uvarint() - 1
        return self._take(size) if size > 0 else b""

    def int8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def tags(self) -> dict[int, bytes]:
        return {self.uvarint(): self._take(self.uvarint()) for _ in range(self.uvarint())}


def _value_reader(data: bytes, what: str) -> _FlexReader:
    reader = _FlexReader(data)
    version = reader.int16()
    if version != VALUE_VERSION:
        raise WireFormatError(f"{what} version {version}: slog reads version 0")
    return reader


def _write_partitions(w: _FlexWriter, partitions: Assignment) -> None:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)

    def one(w: _FlexWriter, item: tuple[str, list[int]]) -> None:
        w.uuid(item[0]).carray(sorted(item[1]), _FlexWriter.int32).tags()

    w.carray(sorted(by_topic.items()), one)


def _read_partitions(r: _FlexReader) -> Assignment:
    def one(r: _FlexReader) -> list[TopicIdPartition]:
        topic = r.uuid()
        indexes = r.carray(_FlexReader.int32)
        r.tags()  # AssignmentEpochs (KIP-1251) and anything newer
        return [(topic, p) for p in indexes]

    return frozenset(tp for topic in r.carray(one) for tp in topic)


# -- values ---------------------------------------------------------------------------------
def encode_group_metadata(epoch: int, metadata_hash: int) -> bytes:
    hashed = Writer().int64(metadata_hash).getvalue()
    return (_FlexWriter().int16(VALUE_VERSION).int32(epoch)
            .tags({METADATA_HASH_TAG: hashed}).getvalue())


def decode_group_metadata(data: bytes) -> tuple[int, int]:
    """(group epoch, metadata hash; 0 when absent)."""
    reader = _value_reader(data, "ConsumerGroupMetadataValue")
    epoch = reader.int32()
    tagged = reader.tags().get(METADATA_HASH_TAG)
    return epoch, Reader(tagged).int64() if tagged is not None and len(tagged) == 8 else 0


CLASSIC_MEMBER_TAG = 0  # ClassicMemberMetadata: a classic member after an online upgrade


def _write_protocol(w: _FlexWriter, protocol: tuple[str, bytes]) -> None:
    w.cstring(protocol[0]).cbytes(protocol[1]).tags()


def _read_protocol(r: _FlexReader) -> tuple[str, bytes]:
    name = r.required_cstring()
    data = r.cbytes()
    r.tags()
    return name, data


def _classic_tags(m: ConsumerMember) -> dict[int, bytes]:
    if m.classic is None:
        return {}
    w = _FlexWriter().int32(m.classic.session_timeout_ms)
    w.carray(m.classic.protocols, _write_protocol).tags()
    return {CLASSIC_MEMBER_TAG: w.getvalue()}


def _read_classic(data: bytes | None) -> ClassicMembership | None:
    if data is None:
        return None
    r = _FlexReader(data)
    timeout = r.int32()
    protocols = tuple(r.carray(_read_protocol))
    return ClassicMembership(timeout, protocols)


def encode_member_metadata(m: ConsumerMember) -> bytes:
    w = _FlexWriter().int16(VALUE_VERSION)
    (w.cstring(m.instance_id).cstring(m.rack_id).cstring(m.client_id).cstring(m.client_host)
     .carray(m.subscribed_topic_names, _FlexWriter.cstring).cstring(m.subscribed_topic_regex)
     .int32(m.rebalance_timeout_ms).cstring(m.server_assignor).tags(_classic_tags(m)))
    return w.getvalue()


def decode_member_metadata(member_id: str, data: bytes) -> ConsumerMember:
    r = _value_reader(data, "ConsumerGroupMemberMetadataValue")
    instance, rack = r.cstring(), r.cstring()
    client_id, client_host = r.required_cstring(), r.required_cstring()
    topics = tuple(r.carray(_FlexReader.required_cstring))
    regex = r.cstring()
    timeout = r.int32()
    assignor = r.cstring()
    classic = _read_classic(r.tags().get(CLASSIC_MEMBER_TAG))
    return ConsumerMember(member_id, instance, rack, client_id, client_host, topics, regex,
                          assignor, timeout, classic=classic)


def encode_target_metadata(epoch: int) -> bytes:
    return _FlexWriter().int16(VALUE_VERSION).int32(epoch).tags().getvalue()


def decode_target_metadata(data: bytes) -> int:
    reader = _value_reader(data, "ConsumerGroupTargetAssignmentMetadataValue")
    return reader.int32()


def encode_target_member(partitions: Assignment) -> bytes:
    w = _FlexWriter().int16(VALUE_VERSION)
    _write_partitions(w, partitions)
    return w.tags().getvalue()


def decode_target_member(data: bytes) -> Assignment:
    return _read_partitions(_value_reader(data, "ConsumerGroupTargetAssignmentMemberValue"))


@dataclass(frozen=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def encode_current_assignment(m: ConsumerMember) -> bytes:
    w = (_FlexWriter().int16(VALUE_VERSION).int32(m.member_epoch)
         .int32(m.previous_member_epoch).int8(m.state.value))
    _write_partitions(w, m.assigned)
    _write_partitions(w, m.pending_revocation)
    return w.tags().getvalue()


def decode_current_assignment(data: bytes) -> CurrentAssignment:
    r = _value_reader(data, "ConsumerGroupCurrentMemberAssignmentValue")
    epoch, previous, state = r.int32(), r.int32(), r.int8()
    try:
        member_state = MemberState(state)
    except ValueError:
        member_state = MemberState.UNKNOWN
    return CurrentAssignment(epoch, previous, member_state, _read_partitions(r),
                             _read_partitions(r))


# -- a group to records and back -------------------------------------------------------------
Record = tuple[bytes, bytes | None]  # key, value (None: tombstone)


def change_records(group: ConsumerGroup, changes: Changes) -> list[Record]:
    """The records that make ``changes`` durable, in Kafka's order: tombstones of
    departed members, member metadata, the group epoch, the target assignment (its
    members, then its epoch), current assignments."""
    gid = group.group_id
    out: list[Record] = []
    for member_id in sorted(changes.removed):
        out += [(ConsumerGroupKey(kind, gid, member_id).encode(), None)
                for kind in (RecordType.CURRENT_ASSIGNMENT, RecordType.TARGET_MEMBER,
                             RecordType.MEMBER_METADATA)]
    out += [(ConsumerGroupKey(RecordType.MEMBER_METADATA, gid, m).encode(),
             encode_member_metadata(group.members[m]))
            for m in sorted(changes.members) if m in group.members]
    if changes.epoch:
        out.append((ConsumerGroupKey(RecordType.GROUP_METADATA, gid).encode(),
                    encode_group_metadata(group.group_epoch, group.metadata_hash)))
    if changes.target:
        out += [(ConsumerGroupKey(RecordType.TARGET_MEMBER, gid, m).encode(),
                 encode_target_member(tps)) for m, tps in sorted(group.target.items())]
        out.append((ConsumerGroupKey(RecordType.TARGET_METADATA, gid).encode(),
                    encode_target_metadata(group.target_epoch)))
    out += [(ConsumerGroupKey(RecordType.CURRENT_ASSIGNMENT, gid, m).encode(),
             encode_current_assignment(group.members[m]))
            for m in sorted(changes.assignments) if m in group.members]
    return out


def deletion_records(group: ConsumerGroup) -> list[Record]:
    """Tombstones for everything a (now empty) group wrote."""
    gid = group.group_id
    return [(ConsumerGroupKey(RecordType.TARGET_METADATA, gid).encode(), None),
            (ConsumerGroupKey(RecordType.GROUP_METADATA, gid).encode(), None)]


@dataclass
class ConsumerGroupReplay:
    """What replaying ``__consumer_offsets`` found for one group (later records win)."""

    epoch: int | None = None  # None: never written, or deleted
    metadata_hash: int = 0
    target_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    current: dict[str, CurrentAssignment] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)

    def apply(self, key: ConsumerGroupKey, value: bytes | None) -> None:
        kind, member = key.type, key.member or ""
        if kind is RecordType.GROUP_METADATA:
            if value is None:
                self.epoch = None
            else:
                self.epoch, self.metadata_hash = decode_group_metadata(value)
        elif kind is RecordType.TARGET_METADATA:
            self.target_epoch = 0 if value is None else decode_target_metadata(value)
        elif kind is RecordType.MEMBER_METADATA:
            _put(self.members, member, None if value is None
                 else decode_member_metadata(member, value))
        elif kind is RecordType.TARGET_MEMBER:
            _put(self.target, member, None if value is None else decode_target_member(value))
        elif kind is RecordType.CURRENT_ASSIGNMENT:
            _put(self.current, member, None if value is None
                 else decode_current_assignment(value))

    def build(self, group: ConsumerGroup) -> bool:
        """Fill ``group``; False when the group was deleted (or never had metadata)."""
        if self.epoch is None:
            return False
        group.group_epoch = self.epoch
        group.metadata_hash = self.metadata_hash
        group.target_epoch = self.target_epoch
        group.target = {m: tps for m, tps in self.target.items() if m in self.members}
        for member_id, member in self.members.items():
            current = self.current.get(member_id)
            if current is not None:
                member.member_epoch = current.member_epoch
                member.previous_member_epoch = current.previous_member_epoch
                member.state = current.state
                member.assigned = current.assigned
                member.pending_revocation = current.pending_revocation
            group.members[member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member_id
            for tp in member.assigned | member.pending_revocation:
                group.owners[tp] = member_id
        return True


def _put(table: dict[str, T], key: str, value: T | None) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value
