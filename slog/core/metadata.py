"""Cluster metadata: the image the records of the metadata log build.

This is KRaft's idea on a shared disk. The controller is the only writer of an
ordered log of records (:mod:`slog.core.metadata_records`: the record types and
their codec); every broker replays the same records in the same order into a
:class:`MetadataImage`, so all brokers agree on topics, replicas, leaders, ISRs
and leader epochs without talking to each other. This module is pure: no files,
no sockets.

Besides the image itself, applying records accumulates a :class:`MetadataDelta`
(KRaft's MetadataDelta idea): which partitions, topics and brokers the records
touched. Brokers act on the delta, so the cost of a metadata change follows the
change, not the number of partitions in the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from slog.core import metadata_records as records
from slog.core.acls import AclBinding
from slog.core.metadata_records import NO_LEADER, BrokerRegistration, MetadataRecord, PartitionState
from slog.core.quotas import QuotaEntity

# The value types records carry are the image's too; they are importable from here.
__all__ = ["NO_LEADER", "BrokerRegistration", "MetadataDelta", "MetadataImage",
           "PartitionState", "TopicImage"]


@dataclass
class TopicImage:
    name: str
    topic_id: str
    configs: dict[str, str] = field(default_factory=dict)
    partitions: dict[int, PartitionState] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        first = self.partitions.get(0)
        return len(first.replicas) if first else 0


@dataclass
class MetadataDelta:
    """What applied records changed since the delta was last taken.

    ``partitions``: partition records applied (new or changed state);
    ``topics``: topics created, deleted or whose configs changed (every partition
    of such a topic is affected); ``brokers``: registrations or fencing changed;
    ``broker_configs``: dynamic broker configs changed (may touch every log).
    """

    partitions: set[tuple[str, int]] = field(default_factory=set)
    topics: set[str] = field(default_factory=set)
    brokers: set[int] = field(default_factory=set)
    broker_configs: bool = False

    def __bool__(self) -> bool:
        return bool(self.partitions or self.topics or self.brokers or self.broker_configs)


@dataclass
class MetadataImage:
    """Everything the metadata log says, as of ``offset`` (last applied record + 1)."""

    offset: int = 0
    controller_id: int = NO_LEADER
    controller_epoch: int = 0
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicImage] = field(default_factory=dict)
    next_producer_id: int = 0
    acls: set[AclBinding] = field(default_factory=set)
    # Dynamic broker configs: broker id -> {key: value}; None is the cluster default.
    broker_configs: dict[int | None, dict[str, str]] = field(default_factory=dict)
    # Per-group config overrides (Kafka 4's GROUP resource): group id -> {key: value}.
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # Client quotas (KIP-546): entity -> {quota key: value}; entities without values go.
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    # Bumped by every quota record: brokers cache what each client resolves to until then.
    client_quotas_version: int = field(default=0, compare=False, repr=False)
    # Indexes kept by the appliers, so the controller's periodic checks visit only
    # the partitions concerned: leaderless ones, and ones being reassigned.
    offline: set[tuple[str, int]] = field(default_factory=set, compare=False, repr=False)
    reassigning: set[tuple[str, int]] = field(default_factory=set, compare=False, repr=False)
    # topic id -> name, for the requests that name topics by id (Fetch v13+, Produce v13).
    topic_names: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    delta: MetadataDelta = field(default_factory=MetadataDelta, compare=False, repr=False)

    def take_delta(self) -> MetadataDelta:
        """What changed since the last call; starts a new, empty delta."""
        delta, self.delta = self.delta, MetadataDelta()
        return delta

    def apply(self, record: MetadataRecord, offset: int | None = None) -> bool:
        """Apply one record; returns False when it was ignored as stale."""
        if offset is not None:
            self.offset = offset + 1
        if isinstance(record, records.ControllerRecord):
            if record.controller_epoch < self.controller_epoch:
                return False
            self.controller_epoch = record.controller_epoch
            self.controller_id = record.controller_id
            return True
        if record.controller_epoch < self.controller_epoch:
            return False  # written by a controller that has since been replaced
        _APPLIERS[type(record)](self, record)
        return True

    def apply_all(self, entries: Iterable[tuple[int, MetadataRecord]]) -> None:
        for offset, record in entries:
            self.apply(record, offset)

    # -- queries ---------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionState | None:
        image = self.topics.get(topic)
        return image.partitions.get(partition) if image else None

    def topic_name(self, topic_id: object) -> str | None:
        """The name of the topic with this id (a UUID or its text), None if there is none."""
        return self.topic_names.get(str(topic_id)) if topic_id is not None else None

    def live_brokers(self) -> list[BrokerRegistration]:
        return [b for b in self.brokers.values() if not b.fenced]

    def racks(self, broker_ids: Iterable[int]) -> dict[int, str | None]:
        """broker id → its broker.rack (None: no rack, or not registered)."""
        return {b: reg.rack if (reg := self.brokers.get(b)) else None for b in broker_ids}

    def partitions_of(self, broker_id: int) -> list[PartitionState]:
        return [
            p
            for t in self.topics.values()
            for p in t.partitions.values()
            if broker_id in p.replicas
        ]

    def partitions_in(self, keys: Iterable[tuple[str, int]]) -> list[PartitionState]:
        """The states of those of ``keys`` that still exist."""
        found = (self.partition(topic, number) for topic, number in keys)
        return [state for state in found if state is not None]

    def all_partitions(self) -> list[PartitionState]:
        return [p for t in self.topics.values() for p in t.partitions.values()]

    def dynamic_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """Broker ``broker_id``'s dynamic configs (None: the cluster-wide default)."""
        return dict(self.broker_configs.get(broker_id, {}))


def _apply_broker(image: MetadataImage, record: records.RegisterBrokerRecord) -> None:
    reg = record.registration
    if reg.rack == "":
        reg = replace(reg, rack=None)  # no rack, as older versions sometimes wrote it
    image.brokers[reg.broker_id] = reg
    image.delta.brokers.add(reg.broker_id)


def _apply_broker_fence(image: MetadataImage, record: records.FenceBrokerRecord) -> None:
    current = image.brokers.get(record.broker_id)
    if current is not None:
        image.brokers[record.broker_id] = replace(current, fenced=record.fenced)
        image.delta.brokers.add(record.broker_id)


def _apply_topic(image: MetadataImage, record: records.TopicRecord) -> None:
    name = record.name
    if name in image.topics:
        _forget_partitions(image, name)
        image.topic_names.pop(image.topics[name].topic_id, None)
    image.topics[name] = TopicImage(name=name, topic_id=record.topic_id,
                                    configs=dict(record.configs))
    image.topic_names[record.topic_id] = name
    image.delta.topics.add(name)


def _apply_partition(image: MetadataImage, record: records.PartitionRecord) -> None:
    state = record.state
    topic = image.topics.get(state.topic)
    if topic is None:
        return
    topic.partitions[state.partition] = state
    key = (state.topic, state.partition)
    image.delta.partitions.add(key)
    _index(image.offline, key, state.is_offline)
    _index(image.reassigning, key, bool(state.adding or state.removing))


def _index(index: set[tuple[str, int]], key: tuple[str, int], member: bool) -> None:
    if member:
        index.add(key)
    else:
        index.discard(key)


def _forget_partitions(image: MetadataImage, name: str) -> None:
    for number in image.topics[name].partitions:
        image.offline.discard((name, number))
        image.reassigning.discard((name, number))


def _overlay(configs: dict[str, str], changes: dict[str, str | None]) -> None:
    """Apply config changes in place; None deletes the key."""
    for key, value in changes.items():
        if value is None:
            configs.pop(key, None)
        else:
            configs[key] = value


def _apply_topic_config(image: MetadataImage, record: records.TopicConfigRecord) -> None:
    topic = image.topics.get(record.topic)
    if topic is None:
        return
    _overlay(topic.configs, record.configs)
    image.delta.topics.add(topic.name)


def _apply_broker_config(image: MetadataImage, record: records.BrokerConfigRecord) -> None:
    configs = image.broker_configs.setdefault(record.broker_id, {})
    _overlay(configs, record.configs)
    if not configs:
        del image.broker_configs[record.broker_id]
    image.delta.broker_configs = True


def _apply_group_config(image: MetadataImage, record: records.GroupConfigRecord) -> None:
    configs = image.group_configs.setdefault(record.group, {})
    _overlay(configs, record.configs)
    if not configs:
        del image.group_configs[record.group]


def _apply_remove_topic(image: MetadataImage, record: records.RemoveTopicRecord) -> None:
    name = record.name
    if name in image.topics:
        _forget_partitions(image, name)
        image.topic_names.pop(image.topics[name].topic_id, None)
        del image.topics[name]
        image.delta.topics.add(name)


def _apply_producer_ids(image: MetadataImage, record: records.ProducerIdsRecord) -> None:
    image.next_producer_id = max(image.next_producer_id, record.next_producer_id)


def _apply_acl(image: MetadataImage, record: records.AccessControlEntryRecord) -> None:
    image.acls.add(record.binding)


def _apply_remove_acl(image: MetadataImage,
                      record: records.RemoveAccessControlEntryRecord) -> None:
    image.acls.discard(record.binding)


def _apply_client_quota(image: MetadataImage, record: records.ClientQuotaRecord) -> None:
    entity: QuotaEntity = tuple(sorted(record.entity.items()))
    values = image.client_quotas.setdefault(entity, {})
    for key, value in record.values.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    if not values:
        del image.client_quotas[entity]
    image.client_quotas_version += 1


# Every record type but ControllerRecord, which apply() handles itself.
_APPLIERS: dict[type[MetadataRecord], Callable[[MetadataImage, Any], None]] = {
    records.AccessControlEntryRecord: _apply_acl,
    records.RemoveAccessControlEntryRecord: _apply_remove_acl,
    records.RegisterBrokerRecord: _apply_broker,
    records.FenceBrokerRecord: _apply_broker_fence,
    records.TopicRecord: _apply_topic,
    records.PartitionRecord: _apply_partition,
    records.TopicConfigRecord: _apply_topic_config,
    records.BrokerConfigRecord: _apply_broker_config,
    records.GroupConfigRecord: _apply_group_config,
    records.RemoveTopicRecord: _apply_remove_topic,
    records.ProducerIdsRecord: _apply_producer_ids,
    records.ClientQuotaRecord: _apply_client_quota,
}
