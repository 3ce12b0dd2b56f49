"""GroupMetadataManager: the group cache and its home in ``__consumer_offsets``.

Each group lives in partition ``partition_for(group)`` of ``__consumer_offsets``
and this broker coordinates it while it leads that partition. On becoming
leader the partition is replayed from the start (offset commits, group
metadata, tombstones; later records win) before its groups are served; until
then requests get COORDINATOR_LOAD_IN_PROGRESS. On losing leadership its
groups are dropped from the cache.

Writes go through an :class:`OffsetsLog` that the broker provides (the local
partition leader), so this package stays free of replication and sockets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from slog.core.errors import CorruptRecordError
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.core.records import BatchBuilder, iter_decoded_batches
from slog.groups.consumer_group import ConsumerGroup
from slog.groups.consumer_records import ConsumerGroupReplay, decode_consumer_key
from slog.groups.group import GroupMetadata, GroupState
from slog.groups.member import MemberMetadata
from slog.groups.offsets import OffsetAndMetadata, TopicPartition
from slog.groups.placement import partition_for
from slog.groups.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    WireFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_offset_value,
)

log = logging.getLogger("slog.groups")

Record = tuple[bytes, bytes | None]  # key, value (None: tombstone)


class StoreError(KafkaApiError):
    """An append to __consumer_offsets failed; ``code`` is what the client is told."""


class OffsetsLog(Protocol):
    """What the manager needs from the ``__consumer_offsets`` partitions it leads."""

    def partition_count(self) -> int | None:
        """Partitions of the topic, None while it does not exist."""

    def is_leader(self, partition: int) -> bool:
        """Whether this broker still leads the partition (it may have been deleted)."""

    def becoming_leader(self, partition: int) -> bool:
        """Whether the metadata names this broker the partition's leader but its replica
        has not taken the role yet (its files are still being made)."""

    def append(self, partition: int, batch: bytes) -> int:
        """Append one batch as leader; returns its last offset or raises StoreError."""

    def is_committed(self, partition: int, offset: int) -> bool:
        """Whether ``offset`` is below the high watermark (replicated)."""

    async def wait_committed(self, partition: int, offset: int) -> None:
        """Until ``offset`` is committed; StoreError when that takes too long."""

    def read(self, partition: int, offset: int) -> tuple[bytes, int]:
        """Whole batches from ``offset`` up to the log end and the next offset to read;
        empty bytes at the end."""


class OpenTxnOffsets(Protocol):
    """The offsets TxnOffsetCommit wrote whose transaction has no marker yet (the broker
    holds them: :class:`slog.transactions.offsets.PendingTxnOffsets`)."""

    def partitions_of(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with such an offset."""

    def forget(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
               ) -> None:
        """Drop the group's (or these partitions') offsets: its marker will store nothing."""

    def group_ids(self) -> set[str]:
        """The groups with such an offset."""


class _NoTxnOffsets:
    def partitions_of(self, group_id: str) -> set[TopicPartition]:
        return set()

    def group_ids(self) -> set[str]:
        return set()

    def forget(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
               ) -> None:
        pass


@dataclass
class _Replay:
    """What replaying one partition found, per group (latest record wins)."""

    groups: dict[str, tuple[GroupValue | None, int]]  # value (None: tombstone), record offset
    offsets: dict[str, dict[TopicPartition, tuple[OffsetAndMetadata | None, int]]]
    # Records of key versions slog does not know (a newer coordinator's): version -> count.
    unknown: dict[int, int] = field(default_factory=dict)
    consumer: dict[str, ConsumerGroupReplay] = field(default_factory=dict)  # KIP-848 groups


class GroupMetadataManager:
    def __init__(self, log: OffsetsLog, default_partitions: int,
                 wall_ms: Callable[[], int]):
        self.log = log
        self._default_partitions = default_partitions
        self._wall_ms = wall_ms
        self.groups: dict[str, GroupMetadata] = {}
        # KIP-848 consumer-protocol groups; a group id is in one of the two maps at most.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.new_consumer_group: Callable[[str], ConsumerGroup] = \
            lambda group_id: ConsumerGroup(group_id, ())
        self.on_consumer_loaded: Callable[[ConsumerGroup], None] = lambda group: None
        # As Kafka: an offset awaiting its transaction's marker keeps its partition's
        # committed offset from expiring and its group from being removed, so the COMMIT
        # lands in the group the offsets were committed to; deleting a group drops them.
        self.txn_offsets: OpenTxnOffsets = _NoTxnOffsets()
        self.owned: set[int] = set()
        self.loading: dict[int, asyncio.Task[None] | None] = {}
        self._pending_writes: set[asyncio.Task[None]] = set()
        # The coordinator's hooks: a group appeared (schedule its members'
        # heartbeats) or is going away (answer its pending requests).
        self.on_loaded: Callable[[GroupMetadata], None] = lambda group: None
        self.on_unloaded: Callable[[GroupMetadata], None] = lambda group: None

    # -- placement ----------------------------------------------------------------------
    def partition_count(self) -> int:
        return self.log.partition_count() or self._default_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count())

    def is_loading(self, group_id: str) -> bool:
        """Loading, or about to: Kafka answers COORDINATOR_LOAD_IN_PROGRESS from the
        moment the broker is named leader, and clients wait instead of failing."""
        partition = self.partition_for(group_id)
        return partition in self.loading or \
            (partition not in self.owned and self.log.becoming_leader(partition))

    def owns(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned

    @property
    def any_loading(self) -> bool:
        return bool(self.loading)

    # -- the cache ----------------------------------------------------------------------
    def get(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> GroupMetadata:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, now_ms=self._wall_ms())
        return group

    def offsets_group(self, group_id: str) -> GroupMetadata | ConsumerGroup:
        """The group that holds ``group_id``'s offsets: its KIP-848 group if it has one,
        else its classic group, made a simple one (Empty, no protocol type) if need be."""
        consumer_group = self.consumer_groups.get(group_id)
        return consumer_group if consumer_group is not None else self.get_or_create(group_id)

    def create_txn_offset_groups(self, group_ids: Iterable[str]) -> None:
        """As Kafka: a group id with offsets awaiting a transaction's marker is a group
        from the TxnOffsetCommit on (ListGroups and DescribeGroups show it, Empty),
        without a record of its own; ``txn_offsets`` keeps it until the marker, and
        after an ABORT it expires as any empty group without offsets. Only groups of
        partitions loaded here: a load creates those of the offsets it restored."""
        for group_id in group_ids:
            if self.owns(group_id):
                self.offsets_group(group_id)

    def all_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # -- leadership -----------------------------------------------------------------------
    def on_election(self, partition: int) -> None:
        """Became leader of __consumer_offsets-``partition``: load it before serving."""
        if partition in self.owned or partition in self.loading:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:  # start-up outside the event loop: load in place
            self.loading[partition] = None
            self._finish_load(partition, self._replay_all(partition))
            return
        self.loading[partition] = loop.create_task(self._load(partition),
                                                   name=f"load-offsets-{partition}")

    def on_resignation(self, partition: int) -> None:
        """Lost leadership: forget this partition's groups (the new leader loads them)."""
        task = self.loading.pop(partition, None)
        if task is not None:
            task.cancel()
        self.owned.discard(partition)
        count = self.partition_count()
        for group in [g for g in self.groups.values()
                      if partition_for(g.group_id, count) == partition]:
            del self.groups[group.group_id]
            self.on_unloaded(group)
        for group_id in [g for g in self.consumer_groups if partition_for(g, count) == partition]:
            self.consumer_groups.pop(group_id).dead = True

    def check_ownership(self) -> None:
        """Drop partitions we no longer lead without having been told (a deleted topic)."""
        for partition in [p for p in (*self.owned, *self.loading) if not self.log.is_leader(p)]:
            self.on_resignation(partition)

    async def _load(self, partition: int) -> None:
        try:
            replay = _Replay({}, {})
            offset = 0
            while True:
                chunk, offset = self.log.read(partition, offset)
                if not chunk:
                    break
                self._apply_chunk(replay, chunk)
                await asyncio.sleep(0)  # a big partition must not stall other requests
            self._finish_load(partition, replay)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading __consumer_offsets-%d failed", partition)
            self.loading.pop(partition, None)

    def _replay_all(self, partition: int) -> _Replay:
        replay = _Replay({}, {})
        offset = 0
        while True:
            chunk, offset = self.log.read(partition, offset)
            if not chunk:
                return replay
            self._apply_chunk(replay, chunk)

    def _apply_chunk(self, replay: _Replay, chunk: bytes) -> None:
        try:
            batches = list(iter_decoded_batches(chunk))
        except CorruptRecordError as exc:
            log.warning("skipping unreadable __consumer_offsets data: %s", exc)
            return
        for _, header, records in batches:
            if header.is_control:
                continue
            for record in records:
                self._apply_record(replay, record.offset, record.key, record.value)

    @staticmethod
    def _apply_record(replay: _Replay, offset: int, key: bytes | None, value: bytes | None
                      ) -> None:
        if key is None:
            return
        try:
            parsed = decode_key(key)
            if isinstance(parsed, OffsetKey):
                committed = None if value is None else decode_offset_value(value)
                tp = (parsed.topic, parsed.partition)
                replay.offsets.setdefault(parsed.group, {})[tp] = (committed, offset)
            elif isinstance(parsed, GroupKey):
                group = None if value is None else decode_group_value(value)
                replay.groups[parsed.group] = (group, offset)
            elif (consumer := decode_consumer_key(key)) is not None:
                replay.consumer.setdefault(consumer.group, ConsumerGroupReplay()).apply(
                    consumer, value)
            else:
                version = int.from_bytes(key[:2], "big", signed=True)
                replay.unknown[version] = replay.unknown.get(version, 0) + 1
        except WireFormatError as exc:
            log.warning("skipping unreadable __consumer_offsets record at %d: %s", offset, exc)

    def _finish_load(self, partition: int, replay: _Replay) -> None:
        if replay.unknown:
            log.warning("skipped __consumer_offsets-%d records of unknown key versions "
                        "(version: count) %s: written by a newer coordinator?", partition,
                        dict(sorted(replay.unknown.items())))
        count = self.partition_count()
        loaded = 0
        for group_id in set(replay.groups) | set(replay.offsets) | set(replay.consumer):
            if partition_for(group_id, count) != partition or group_id in self.groups \
                    or group_id in self.consumer_groups:
                continue
            if self._load_consumer_group(group_id, replay):
                loaded += 1
                continue
            value = replay.groups.get(group_id, (None, -1))[0]
            offsets = {tp: v for tp, v in replay.offsets.get(group_id, {}).items()
                       if v[0] is not None}
            if value is None and not offsets:
                continue  # deleted
            group = _group_from(group_id, value, self._wall_ms())
            for tp, (committed, record_offset) in offsets.items():
                group.offsets.load(tp, committed, record_offset)
            self.groups[group_id] = group
            self.on_loaded(group)
            loaded += 1
        self.loading.pop(partition, None)
        self.owned.add(partition)
        self.create_txn_offset_groups(  # restored before this load finished
            g for g in self.txn_offsets.group_ids() if partition_for(g, count) == partition)
        if loaded:
            log.info("loaded %d groups from __consumer_offsets-%d", loaded, partition)

    def _load_consumer_group(self, group_id: str, replay: _Replay) -> bool:
        found = replay.consumer.get(group_id)
        if found is None:
            return False
        group = self.new_consumer_group(group_id)
        if not found.build(group):
            return False
        for tp, (committed, record_offset) in replay.offsets.get(group_id, {}).items():
            if committed is not None:
                group.offsets.load(tp, committed, record_offset)
        self.consumer_groups[group_id] = group
        self.on_consumer_loaded(group)
        return True

    # -- writes ---------------------------------------------------------------------------
    def append(self, group_id: str, records: Iterable[Record],
               callback: Callable[[ErrorCode], None]) -> None:
        """Append records of ``group_id``'s partition; ``callback`` once committed."""
        self._append(group_id, records, lambda error, _offset: callback(error))

    def _append(self, group_id: str, records: Iterable[Record],
                done: Callable[[ErrorCode, int], None]) -> None:
        """Append records for ``group_id`` and call ``done(error, last offset)`` once they
        are committed (at once when that is already true)."""
        partition = self.partition_for(group_id)
        builder = BatchBuilder()
        now = self._wall_ms()
        for key, value in records:
            builder.append(key, value, (), now)
        try:
            last = self.log.append(partition, builder.build())
        except StoreError as exc:
            done(exc.code, -1)
            return
        if self.log.is_committed(partition, last):  # one replica: at once
            done(ErrorCode.none, last)
            return

        async def wait() -> None:
            try:
                await self.log.wait_committed(partition, last)
            except StoreError as exc:
                done(exc.code, last)
            else:
                done(ErrorCode.none, last)

        task = asyncio.get_running_loop().create_task(wait())
        self._pending_writes.add(task)
        task.add_done_callback(self._pending_writes.discard)

    def store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes],
                    callback: Callable[[ErrorCode], None]) -> None:
        value = group_value(group, assignment, self._wall_ms())
        self._append(group.group_id, [(GroupKey(group.group_id).encode(),
                                       encode_group_value(value))],
                     lambda error, _offset: callback(error))

    def store_offsets(self, group: GroupMetadata | ConsumerGroup, offsets: Mapping[TopicPartition,
                      OffsetAndMetadata], callback: Callable[[ErrorCode], None]) -> None:
        """Append the commits; they become visible in ``group.offsets`` on success."""
        records = [(OffsetKey(group.group_id, tp[0], tp[1]).encode(), encode_offset_value(v))
                   for tp, v in offsets.items()]
        group.offsets.prepare(offsets)

        def done(error: ErrorCode, last: int) -> None:
            first = last - len(offsets) + 1
            for i, (tp, value) in enumerate(offsets.items()):
                group.offsets.complete(tp, value, first + i, appended=error is ErrorCode.none)
            callback(error)

        self._append(group.group_id, records, done)

    def remove_offsets(self, group: GroupMetadata | ConsumerGroup,
                       partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Deleted offsets (OffsetDelete): committed ones and those awaiting a marker go,
        as in Kafka, whose tombstone drops both; returns the partitions to tombstone."""
        wanted = set(partitions)
        pending = self.txn_offsets.partitions_of(group.group_id) & wanted
        self.txn_offsets.forget(group.group_id, pending)
        removed = group.offsets.remove(sorted(wanted))
        return removed + sorted(pending.difference(removed))

    def offsets_of_topics(self, group: GroupMetadata | ConsumerGroup,
                          topics: Collection[str]) -> set[TopicPartition]:
        """The group's partitions of ``topics`` with an offset, committed or awaiting a
        marker."""
        return {tp for tp in set(group.offsets.committed) |
                self.txn_offsets.partitions_of(group.group_id) if tp[0] in topics}

    def remove_groupless_txn_offsets(self, topics: Collection[str]) -> int:
        """Offsets of ``topics`` awaiting a marker for a group id that has no group here
        (deleted while they were being appended) go too; their tombstones stop a reload
        from holding them again. Groups remove theirs with :meth:`remove_offsets`."""
        removed = 0
        for group_id in self.txn_offsets.group_ids() - set(self.groups) - \
                set(self.consumer_groups):
            tps = sorted(tp for tp in self.txn_offsets.partitions_of(group_id)
                         if tp[0] in topics)
            if tps and self.owns(group_id):
                self.txn_offsets.forget(group_id, tps)
                self._append(group_id, [(OffsetKey(group_id, topic, part).encode(), None)
                                        for topic, part in tps], lambda error, _o: None)
                removed += len(tps)
        return removed

    def remove_all_offsets(self, group: GroupMetadata | ConsumerGroup) -> list[TopicPartition]:
        """A group is deleted: all its offsets go, those awaiting a marker too."""
        return self.remove_offsets(group, set(group.offsets.committed) |
                                   self.txn_offsets.partitions_of(group.group_id))

    def cleanup(self, groups: Iterable[GroupMetadata],
                select: Callable[[GroupMetadata], list[TopicPartition]]) -> int:
        """Remove offsets chosen by ``select``; groups left Empty without offsets die.
        Tombstones go out best effort: a lost one is written again next time."""
        removed = 0
        for group in groups:
            tps = select(group)
            if group.is_(GroupState.EMPTY) and not group.offsets.has_offsets and \
                    not self.txn_offsets.partitions_of(group.group_id):
                group.transition_to(GroupState.DEAD, self._wall_ms())
            tombstones: list[Record] = [
                (OffsetKey(group.group_id, topic, part).encode(), None) for topic, part in tps]
            if group.is_(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if group.generation_id > 0:  # offset-only groups never wrote metadata
                    tombstones.append((GroupKey(group.group_id).encode(), None))
            if tombstones:
                self._append(group.group_id, tombstones, lambda error, _o: None)
                removed += len(tps)
        return removed


def group_value(group: GroupMetadata, assignment: Mapping[str, bytes], now_ms: int
                ) -> GroupValue:
    protocol = group.protocol_name
    members = tuple(
        MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.rebalance_timeout_ms, m.session_timeout_ms,
                    m.metadata(protocol) if protocol is not None else b"",
                    assignment.get(m.member_id, b""))
        for m in group.members.values())
    return GroupValue(group.protocol_type or "", group.generation_id, protocol,
                      group.leader_id, now_ms, members)


def _group_from(group_id: str, value: GroupValue | None, now_ms: int) -> GroupMetadata:
    """Rebuild a group from its last metadata record (Kafka's GroupMetadata.loadGroup)."""
    if value is None:
        return GroupMetadata(group_id, now_ms=now_ms)
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    timestamp = value.current_state_timestamp_ms if value.current_state_timestamp_ms >= 0 \
        else now_ms
    group = GroupMetadata(group_id, state, now_ms=timestamp)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    for m in value.members:
        protocols = [(value.protocol, m.subscription)] if value.protocol else []
        member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout_ms, m.session_timeout_ms,
                                value.protocol_type, protocols, assignment=m.assignment)
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members), None)
    group.subscribed_topics = group.compute_subscribed_topics()
    return group

