"""The broker's side of consumer groups: ``__consumer_offsets`` as the coordinator sees it.

:class:`OffsetsTopicLog` gives the group manager the partitions of
``__consumer_offsets`` this broker leads (appends as leader, waits for the
high watermark, replays from the start); :func:`build_group_coordinator`
wires a :class:`GroupCoordinator` to the broker, including the leadership
hook (became leader of ``__consumer_offsets-N`` → load, lost it → unload).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from slog.core import batch
from slog.core.errors import OffsetOutOfRangeError, StorageError
from slog.core.group_config import GroupSettings, group_settings
from slog.core.log import RecordTooLargeError
from slog.core.names import INTERNAL_TOPICS
from slog.groups.consumer_coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator
from slog.groups.consumer_group import TopicInfo
from slog.groups.coordinator import GroupConfig, GroupCoordinator
from slog.groups.manager import GroupMetadataManager, StoreError
from slog.groups.migration import MigrationPolicy
from slog.groups.placement import OFFSETS_TOPIC
from slog.protocol.errors import ErrorCode
from slog.replication.controller import NewTopic
from slog.replication.partition import Partition, ReplicaError
from slog.replication.placement import RackAwareMode

if TYPE_CHECKING:
    from slog.broker.broker import Broker
    from slog.core.config import BrokerConfig

log = logging.getLogger("slog.groups")

LOAD_CHUNK_BYTES = 1024 * 1024


class OffsetsTopicLog:
    """:class:`slog.groups.manager.OffsetsLog` over this broker's replicas of
    ``topic``: ``__consumer_offsets``, or ``__transaction_state`` for the transaction
    coordinator (which also honours the topic's ``min.insync.replicas``)."""

    def __init__(self, broker: Broker, topic: str = OFFSETS_TOPIC,
                 use_min_isr: bool = False):
        self._broker = broker
        self._topic = topic
        self._use_min_isr = use_min_isr
        self._commit_timeout_s = broker.config.get_int("offsets.commit.timeout.ms") / 1000

    def partition_count(self) -> int | None:
        topic = self._broker.image.topics.get(self._topic)
        return len(topic.partitions) if topic is not None and topic.partitions else None

    def is_leader(self, partition: int) -> bool:
        found = self._broker.replicas.get(self._topic, partition)
        return found is not None and found.is_leader

    def becoming_leader(self, partition: int) -> bool:
        state = self._broker.image.partition(self._topic, partition)
        return state is not None and state.leader == self._broker.broker_id and \
            not self.is_leader(partition)

    def _leader(self, partition: int) -> Partition:
        found = self._broker.replicas.get(self._topic, partition)
        if found is None:
            raise StoreError(ErrorCode.coordinator_not_available, f"no such {self._topic} "
                             "partition")
        if not found.is_leader:
            raise StoreError(ErrorCode.not_coordinator,
                             f"no longer the {self._topic} partition's leader")
        return found

    def leader_epoch(self, partition: int) -> int:
        """Our leader epoch of the partition (the transaction coordinator's epoch)."""
        return self._leader(partition).leader_epoch

    def _min_isr(self) -> int:
        if not self._use_min_isr:
            return 1
        return int(self._broker.replicas.topic_setting(self._topic, "min.insync.replicas"))

    def append(self, partition: int, records: bytes) -> int:
        leader = self._leader(partition)
        try:
            result = leader.append_as_leader(records, required_acks=-1,
                                             min_insync_replicas=self._min_isr())
        except ReplicaError as exc:
            moved = exc.code is ErrorCode.not_leader_or_follower
            raise StoreError(ErrorCode.not_coordinator if moved
                             else ErrorCode.coordinator_not_available, str(exc)) from exc
        except RecordTooLargeError as exc:
            raise StoreError(ErrorCode.invalid_commit_offset_size, str(exc)) from exc
        except StorageError as exc:
            raise StoreError(ErrorCode.not_coordinator, str(exc)) from exc
        return result.base_offset + batch.parse_header(records).last_offset_delta

    def is_committed(self, partition: int, offset: int) -> bool:
        return self._leader(partition).high_watermark > offset

    async def wait_committed(self, partition: int, offset: int) -> None:
        try:
            await self._leader(partition).wait_for_commit(offset, self._commit_timeout_s,
                                                          self._min_isr())
        except ReplicaError as exc:
            if exc.code is ErrorCode.not_leader_or_follower:
                raise StoreError(ErrorCode.not_coordinator, str(exc)) from exc
            raise StoreError(ErrorCode.coordinator_not_available,
                             f"the {self._topic} partition did not replicate in time") from exc

    def read(self, partition: int, offset: int) -> tuple[bytes, int]:
        leader = self._leader(partition)
        offset = max(offset, leader.log.log_start_offset)
        while True:
            try:
                # Up to the log end, as Kafka loads: a new leader's high watermark may
                # still lag the records the old leader had already acknowledged.
                found = leader.read(offset, LOAD_CHUNK_BYTES, committed_only=False)
            except OffsetOutOfRangeError:
                return b"", offset
            # Offsets committed in a transaction (TxnOffsetCommit) count once it
            # committed; open ones are restored as pending (broker.transaction_state).
            data = leader.transactions.committed_only(found.tobytes())
            if data or not found.size:  # empty only at the end
                return data, found.next_offset
            offset = found.next_offset


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        max_size=config.get_int("group.max.size"),
        offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_ms=config.get_int("offsets.retention.check.interval.ms"),
    )


def offsets_topic_spec(config: BrokerConfig, live_brokers: int) -> NewTopic:
    """Kafka's settings for the offsets topic; RF capped by the brokers there are."""
    return NewTopic(
        OFFSETS_TOPIC,
        num_partitions=config.get_int("offsets.topic.num.partitions"),
        replication_factor=max(1, min(config.get_int("offsets.topic.replication.factor"),
                                      live_brokers)),
        configs={"cleanup.policy": "compact",
                 "segment.bytes": config.values["offsets.topic.segment.bytes"],
                 # 50 partitions preallocating whole segments would take gigabytes.
                 "preallocate": "false"},
        rack_mode=RackAwareMode.SAFE,  # a broker creates it: never refused over racks
    )


def build_group_coordinator(broker: Broker) -> GroupCoordinator:
    """The broker's coordinator, hooked to leadership changes of __consumer_offsets
    (``broker.replicas`` must exist; nothing is read or written yet)."""
    config = broker.config
    manager = GroupMetadataManager(OffsetsTopicLog(broker),
                                   config.get_int("offsets.topic.num.partitions"),
                                   lambda: int(time.time() * 1000))
    coordinator = GroupCoordinator(group_config(config), manager)
    follow_leadership(broker, OFFSETS_TOPIC, manager.on_election, manager.on_resignation)
    return coordinator


def consumer_group_config(config: BrokerConfig) -> ConsumerGroupConfig:
    return ConsumerGroupConfig(
        session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        assignors=config.values["group.consumer.assignors"],
        max_size=config.get_int("group.consumer.max.size"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_ms=config.get_int("offsets.retention.check.interval.ms"),
        migration_policy=MigrationPolicy(config.values["group.consumer.migration.policy"]),
    )


def build_consumer_group_coordinator(broker: Broker, manager: GroupMetadataManager
                                     ) -> ConsumerGroupCoordinator:
    """KIP-848 groups on the same manager as the classic ones. Their view of the
    topics is rebuilt only when the metadata image has moved on; internal topics
    are left out (never matched by a regex subscription, as in Kafka)."""
    cached: list[tuple[dict[str, TopicInfo], int]] = []

    def topics() -> tuple[dict[str, TopicInfo], int]:
        image = broker.image
        if not cached or cached[0][1] != image.offset:
            view = {name: TopicInfo(t.topic_id, len(t.partitions))
                    for name, t in image.topics.items() if name not in INTERNAL_TOPICS}
            cached[:] = [(view, image.offset)]
        return cached[0]

    def overrides(group_id: str) -> GroupSettings | None:
        configs = broker.image.group_configs.get(group_id)
        return group_settings(configs, broker.config.values) if configs else None

    coordinator = ConsumerGroupCoordinator(consumer_group_config(broker.config), manager, topics,
                                           overrides=overrides)
    coordinator.on_downgrade = broker.groups.adopt_downgraded
    return coordinator


def follow_leadership(broker: Broker, topic: str, on_election: Callable[[int], None],
                      on_resignation: Callable[[int], None]) -> None:
    """Tell a coordinator when this broker gains or loses a partition of its topic."""

    def on_role_change(changed: str, partition: int, is_leader: bool) -> None:
        if changed == topic:
            (on_election if is_leader else on_resignation)(partition)

    broker.replicas.leadership_listeners.append(on_role_change)

