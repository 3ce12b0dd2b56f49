"""The broker's side of transactions: ``__transaction_state`` for the coordinator, and
the markers it has partition leaders write.

:func:`build_transaction_coordinator` wires a
:class:`slog.transactions.coordinator.TransactionCoordinator` to this broker's
replicas of ``__transaction_state`` (through :class:`OffsetsTopicLog`, which the
group coordinator uses for ``__consumer_offsets``) and to the leadership hook.
:class:`LeaderMarkers` sends WriteTxnMarkers to each partition's leader (a
direct append when that is this broker); :func:`write_marker` is the leader's
append, shared with the WriteTxnMarkers handler.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from slog.broker.offsets_topic import OffsetsTopicLog, follow_leadership
from slog.core.errors import CorruptRecordError, OffsetOutOfRangeError, StorageError
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.core.records import BatchBuilder, iter_decoded_batches
from slog.core.transaction_index import build_marker
from slog.groups.offsets import OffsetAndMetadata
from slog.groups.offsets import TopicPartition as GroupPartition
from slog.groups.placement import OFFSETS_TOPIC, partition_for
from slog.groups.records import (
    OffsetKey,
    WireFormatError,
    decode_key,
    decode_offset_value,
    encode_offset_value,
)
from slog.protocol.apis import ApiKey
from slog.replication.broker_channel import BrokerChannel
from slog.replication.controller import NewTopic
from slog.replication.partition import ReplicaError
from slog.replication.placement import RackAwareMode
from slog.transactions.coordinator import (
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinator,
    TxnConfig,
)
from slog.transactions.metadata import TopicPartition

if TYPE_CHECKING:
    from slog.broker.broker import Broker
    from slog.core.config import BrokerConfig
    from slog.transactions.offsets import PendingTxnOffsets

log = logging.getLogger("slog.transactions")

WRITE_TXN_MARKERS_VERSION = 1
_DONE = (ErrorCode.none, ErrorCode.unknown_topic_or_partition)  # written, or topic gone


def transaction_topic_spec(config: BrokerConfig, live_brokers: int) -> NewTopic:
    """Kafka's settings: compacted, RF min(configured, live brokers), min ISR where RF allows."""
    replication = max(1, min(config.get_int("transaction.state.log.replication.factor"),
                             live_brokers))
    min_isr = min(config.get_int("transaction.state.log.min.isr"), replication)
    return NewTopic(
        TRANSACTION_STATE_TOPIC,
        num_partitions=config.get_int("transaction.state.log.num.partitions"),
        replication_factor=replication,
        configs={"cleanup.policy": "compact", "min.insync.replicas": str(min_isr),
                 "segment.bytes": config.values["transaction.state.log.segment.bytes"],
                 "preallocate": "false"},
        rack_mode=RackAwareMode.SAFE,
    )


async def write_marker(broker: Broker, topic: str, index: int, producer_id: int,
                       producer_epoch: int, commit: bool, coordinator_epoch: int) -> ErrorCode:
    """As the partition's leader: append the COMMIT/ABORT marker and wait for the ISR."""
    partition = broker.replicas.get(topic, index)
    if partition is None:
        known = broker.image.partition(topic, index) is not None
        return ErrorCode.not_leader_or_follower if known else \
            ErrorCode.unknown_topic_or_partition
    if partition.transactions.fences(producer_id, coordinator_epoch):
        return ErrorCode.transaction_coordinator_fenced  # a deposed coordinator's marker
    marker = build_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                          int(time.time() * 1000))
    min_isr = int(broker.replicas.topic_setting(topic, "min.insync.replicas"))
    timeout_s = broker.config.get_int("offsets.commit.timeout.ms") / 1000
    try:
        appended = partition.append_as_leader(marker, required_acks=-1,
                                              min_insync_replicas=min_isr)
        await partition.wait_for_commit(appended.last_offset, timeout_s, min_isr)
    except ReplicaError as exc:
        return exc.code
    except StorageError:
        return ErrorCode.kafka_storage_error
    if topic == OFFSETS_TOPIC:
        return await _complete_txn_offsets(broker, index, producer_id, commit)
    return ErrorCode.none


async def write_txn_offsets(broker: Broker, producer_id: int, producer_epoch: int,
                            group_id: str, offsets: Mapping[GroupPartition, OffsetAndMetadata]
                            ) -> ErrorCode:
    """TxnOffsetCommit: the offsets go to the group's ``__consumer_offsets`` partition as
    a transactional batch (as Kafka writes them), so a new group coordinator restores
    them as pending; they are also held here until the marker. A group id the
    coordinator did not know becomes a group with them, as in Kafka, where the group
    is created by the same write as the records (and not if they fail)."""
    if not offsets:
        return ErrorCode.none
    manager = broker.groups.manager
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                           is_transactional=True)
    for (topic, index), value in offsets.items():
        builder.append(OffsetKey(group_id, topic, index).encode(), encode_offset_value(value))
    partition = manager.partition_for(group_id)
    try:
        last = manager.log.append(partition, builder.build())
        await manager.log.wait_committed(partition, last)
    except KafkaApiError as exc:
        return exc.code
    broker.pending_txn_offsets.add(producer_id, producer_epoch, group_id, offsets)
    manager.create_txn_offset_groups([group_id])  # held first: it cannot expire empty
    return ErrorCode.none


def restore_pending_offsets(broker: Broker, index: int) -> None:
    """Now leading ``__consumer_offsets-index``: hold the offsets of its open transactions
    as pending again (their marker is still to come)."""
    partition = broker.replicas.get(OFFSETS_TOPIC, index)
    if partition is None or not partition.transactions.ongoing:
        return
    open_since = dict(partition.transactions.ongoing)
    try:
        data = partition.read(min(open_since.values()), 1 << 30, committed_only=False)
        batches = list(iter_decoded_batches(data.tobytes()))
    except (OffsetOutOfRangeError, CorruptRecordError) as exc:
        log.warning("cannot restore pending transactional offsets of %s-%d: %s",
                    OFFSETS_TOPIC, index, exc)
        return
    for _, header, records in batches:
        first = open_since.get(header.producer_id)
        ongoing = first is not None and header.is_transactional and header.base_offset >= first
        if header.is_control or not (ongoing or not header.is_transactional):
            continue
        for record in records:
            try:
                key = decode_key(record.key or b"")
                if not isinstance(key, OffsetKey):
                    continue
                if record.value is None:  # a deleted group's tombstone drops pending ones too
                    broker.pending_txn_offsets.forget(key.group, [(key.topic, key.partition)])
                elif ongoing:
                    broker.pending_txn_offsets.add(
                        header.producer_id, header.producer_epoch, key.group,
                        {(key.topic, key.partition): decode_offset_value(record.value)})
            except WireFormatError as exc:
                log.warning("skipping a transactional offset record: %s", exc)
    # Their groups exist, as Kafka's replay of the records makes them (at once when the
    # group manager already loaded this partition, else when it has).
    broker.groups.manager.create_txn_offset_groups(broker.pending_txn_offsets.group_ids())


def _stored(pending: PendingTxnOffsets, group_id: str, partitions: list[GroupPartition],
            _done: asyncio.Future[ErrorCode]) -> None:
    pending.stored(group_id, partitions)


async def _complete_txn_offsets(broker: Broker, index: int, producer_id: int,
                                commit: bool) -> ErrorCode:
    """The marker reached ``__consumer_offsets-index``: the transaction's offsets for
    the groups placed there are stored (COMMIT) or dropped (ABORT)."""
    count = len(broker.image.topics[OFFSETS_TOPIC].partitions)
    taken = broker.pending_txn_offsets.take(
        producer_id, lambda group: partition_for(group, count) == index)
    if not commit or not taken:
        return ErrorCode.none
    loop = asyncio.get_running_loop()
    stored: list[asyncio.Future[ErrorCode]] = []
    pending = broker.pending_txn_offsets
    for group_id, offsets in taken.items():
        future: asyncio.Future[ErrorCode] = loop.create_future()
        broker.groups.store_txn_offsets(group_id, offsets, future.set_result)
        # Unstable until the append completes (no await since take(): no fetch between).
        pending.storing(group_id, offsets)
        future.add_done_callback(partial(_stored, pending, group_id, list(offsets)))
        stored.append(future)
    errors = [code for code in await asyncio.gather(*stored) if code is not ErrorCode.none]
    return errors[0] if errors else ErrorCode.none


class LeaderMarkers:
    """:class:`slog.transactions.coordinator.MarkerWriter`: WriteTxnMarkers to leaders."""

    def __init__(self, broker: Broker):
        self._broker = broker
        self._channels: dict[int, BrokerChannel] = {}

    def _channel(self, broker_id: int) -> BrokerChannel | None:
        node = self._broker.image.brokers.get(broker_id)
        if node is None or node.fenced:
            return None
        channel = self._channels.get(broker_id)
        if channel is None or (channel.host, channel.port) != (node.host, node.port):
            if channel is not None:
                channel.close()
            channel = self._channels[broker_id] = BrokerChannel(
                node.host, node.port, client_id=f"broker-{self._broker.broker_id}-txn")
        return channel

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: set[TopicPartition]
                            ) -> set[TopicPartition]:
        by_leader: dict[int, list[TopicPartition]] = {}
        for topic, index in partitions:
            state = self._broker.image.partition(topic, index)
            if state is None:
                continue  # deleted: nothing to mark
            by_leader.setdefault(state.leader, []).append((topic, index))
        results = await asyncio.gather(*(
            self._to_leader(leader, items, producer_id, producer_epoch, commit,
                            coordinator_epoch)
            for leader, items in by_leader.items()))
        return {tp for remaining in results for tp in remaining}

    async def _to_leader(self, leader: int, items: list[TopicPartition], producer_id: int,
                         producer_epoch: int, commit: bool, coordinator_epoch: int
                         ) -> set[TopicPartition]:
        if leader == self._broker.broker_id:
            codes = await asyncio.gather(*(
                write_marker(self._broker, topic, index, producer_id, producer_epoch, commit,
                             coordinator_epoch) for topic, index in items))
            return {tp for tp, code in zip(items, codes, strict=True) if code not in _DONE}
        channel = self._channel(leader)
        if channel is None:
            return set(items)
        by_topic: dict[str, list[int]] = {}
        for topic, index in items:
            by_topic.setdefault(topic, []).append(index)
        body = {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]}]}
        try:
            response = await channel.request(ApiKey.WRITE_TXN_MARKERS,
                                             WRITE_TXN_MARKERS_VERSION, body)
        except (OSError, TimeoutError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return set(items)
        done = {(t.name, p.partition_index)
                for m in response.markers for t in m.topics for p in t.partitions
                if ErrorCode(p.error_code) in _DONE}
        return set(items) - done

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()


def build_transaction_coordinator(broker: Broker) -> TransactionCoordinator:
    config = broker.config
    coordinator = TransactionCoordinator(
        TxnConfig(partitions=config.get_int("transaction.state.log.num.partitions"),
                  max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
                  abort_check_interval_ms=config.get_int(
                      "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                  id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
                  id_expiration_check_ms=config.get_int(
                      "transaction.remove.expired.transaction.cleanup.interval.ms")),
        OffsetsTopicLog(broker, TRANSACTION_STATE_TOPIC, use_min_isr=True),
        LeaderMarkers(broker), broker.producer_ids.next_id, lambda: int(time.time() * 1000))
    follow_leadership(broker, TRANSACTION_STATE_TOPIC, coordinator.on_election,
                      coordinator.on_resignation)
    follow_leadership(broker, OFFSETS_TOPIC, lambda index: restore_pending_offsets(
        broker, index), lambda index: broker.pending_txn_offsets.drop(
        lambda group: partition_for(group, _offsets_partitions(broker)) == index))
    return coordinator


def _offsets_partitions(broker: Broker) -> int:
    topic = broker.image.topics.get(OFFSETS_TOPIC)
    return len(topic.partitions) if topic is not None and topic.partitions else 1
