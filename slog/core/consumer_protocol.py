"""The "consumer" embedded protocol: what consumers put in JoinGroup and SyncGroup.

The coordinator treats protocol metadata and assignments as opaque bytes; the
consumers agree on their layout. These are Kafka's
``ConsumerProtocolSubscription`` (v0-v3) and ``ConsumerProtocolAssignment``
(v0-v3) and the user data of the sticky assignors, byte for byte as the Java
client and librdkafka write them, so slog consumers can share a group with
theirs. Both the client (whose leader runs the assignors) and the coordinator
(which reads subscriptions for OffsetDelete and offset expiry) use them.

Partitions are ``(topic, partition)`` pairs; the client's ``TopicPartition`` is one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slog.core.wire import Reader, WireFormatError, Writer

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3

Partition = tuple[str, int]

__all__ = [
    "PROTOCOL_TYPE",
    "Assignment",
    "StickyUserData",
    "Subscription",
    "WireFormatError",
    "decode_assignment",
    "decode_sticky_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_sticky_user_data",
    "encode_subscription",
]


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[Partition, ...] = ()  # v1+
    generation_id: int = -1  # v2+
    rack_id: str | None = None  # v3+
    version: int = SUBSCRIPTION_VERSION


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[Partition, ...]
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION


@dataclass(frozen=True)
class StickyUserData:
    """The sticky assignors' user data: the previous assignment and its generation."""

    previous_assignment: tuple[Partition, ...]
    generation: int | None = None  # absent in v0


# -- topic-partition lists: [topic [partition]] ----------------------------------------


def _group(partitions: Iterable[Partition]) -> list[tuple[str, list[int]]]:
    """Partitions grouped by topic, topics in order of first appearance."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return list(by_topic.items())


def _write_partitions(writer: Writer, partitions: Iterable[Partition]) -> None:
    writer.array(_group(partitions),
                 lambda w, item: w.string(item[0]).array(item[1], Writer.int32))


def _read_partitions(reader: Reader) -> tuple[Partition, ...]:
    entries = reader.array(lambda r: (r.required_string(), r.array(Reader.int32)))
    return tuple((topic, p) for topic, parts in entries for p in parts)


# -- subscription -----------------------------------------------------------------------


def encode_subscription(sub: Subscription) -> bytes:
    version = sub.version
    w = Writer().int16(version).array(sub.topics, Writer.string).bytes(sub.user_data)
    if version >= 1:
        _write_partitions(w, sub.owned_partitions)
    if version >= 2:
        w.int32(sub.generation_id)
    if version >= 3:
        w.string(sub.rack_id)
    return w.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    """Parse any version; newer ones are read as v3 (their extra fields are appended)."""
    reader = Reader(data)
    version = reader.int16()
    if version < 0:
        raise WireFormatError(f"subscription version {version}")
    topics = tuple(reader.array(Reader.required_string))
    user_data = reader.bytes()
    owned = _read_partitions(reader) if version >= 1 else ()
    generation = reader.int32() if version >= 2 else -1
    rack = reader.string() if version >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack, version)


# -- assignment -------------------------------------------------------------------------


def encode_assignment(assignment: Assignment) -> bytes:
    w = Writer().int16(assignment.version)
    _write_partitions(w, assignment.partitions)
    return w.bytes(assignment.user_data).getvalue()


def decode_assignment(data: bytes) -> Assignment:
    """An empty buffer is an empty assignment (the coordinator fills members the
    leader left out with zero bytes)."""
    if not data:
        return Assignment(())
    reader = Reader(data)
    version = reader.int16()
    if version < 0:
        raise WireFormatError(f"assignment version {version}")
    partitions = _read_partitions(reader)
    user_data = reader.bytes() if reader.remaining else None
    return Assignment(partitions, user_data, version)


# -- sticky assignor user data -----------------------------------------------------------


def encode_sticky_user_data(previous: Sequence[Partition], generation: int) -> bytes:
    """StickyAssignor user data v1, as Java's StickyAssignor and librdkafka write it."""
    w = Writer()
    _write_partitions(w, previous)
    return w.int32(generation).getvalue()


def decode_sticky_user_data(data: bytes) -> StickyUserData:
    reader = Reader(data)
    previous = _read_partitions(reader)
    generation = reader.int32() if reader.remaining >= 4 else None
    return StickyUserData(previous, generation)
