"""Cluster metadata: the records of the metadata log and the image they build.

This is KRaft's idea on a shared disk. The controller is the only writer of an
ordered log of records; every broker replays the same records in the same
order into a :class:`MetadataImage`, so all brokers agree on topics, replicas,
leaders, ISRs and leader epochs without talking to each other. This module is
pure: no files, no sockets.

Records are plain dicts (JSON in the log) with a ``type`` key:

``controller``       controller_id, controller_epoch: a broker won the controller lock
``broker``           broker_id, host, port, incarnation, fenced, rack (absent or None: no
                     rack), endpoints: a broker (re)registered
``broker_fence``     broker_id, fenced: liveness changed
``topic``            name, topic_id, configs: a topic was created
``partition``        topic, partition, replicas, isr, leader, leader_epoch,
                     partition_epoch, adding, removing: full state of one partition
``topic_config``     topic, configs (value None deletes the override)
``broker_config``    broker_id (None: the cluster-wide default), configs (value None
                     deletes): dynamic broker configs, KRaft's ConfigRecord for BROKER
``remove_topic``     name: a topic was deleted
``producer_ids``     next_producer_id: the next unallocated producer id block start
``acl``              an ACL binding was created (fields of :class:`slog.core.acls.AclBinding`)
``remove_acl``       an ACL binding was deleted (same fields)

Every record also carries ``controller_epoch`` (stale controllers are ignored)
and ``ts`` (milliseconds).

Besides the image itself, applying records accumulates a :class:`MetadataDelta`
(KRaft's MetadataDelta idea): which partitions, topics and brokers the records
touched. Brokers act on the delta, so the cost of a metadata change follows the
change, not the number of partitions in the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from slog.core import health
from slog.core.acls import AclBinding, AclError

# Defined with the health rules; the image's users compare leaders with it.
from slog.core.health import NO_LEADER as NO_LEADER
from slog.core.listeners import Endpoint

Record = dict[str, Any]


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    incarnation: str = ""
    fenced: bool = False
    rack: str | None = None  # broker.rack
    # Every listener's advertised endpoint; host/port are the inter-broker listener's.
    # Empty in records of older versions: then host/port serve every listener.
    endpoints: tuple[Endpoint, ...] = ()

    def endpoint(self, listener: str | None) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches this broker; None if it has no such
        listener (Kafka leaves the broker out of that listener's Metadata)."""
        if not self.endpoints or listener is None:
            return self.host, self.port
        for endpoint in self.endpoints:
            if endpoint.name == listener:
                return endpoint.host, endpoint.port
        return None


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def is_offline(self) -> bool:
        return health.is_offline(self.leader)

    @property
    def is_under_replicated(self) -> bool:
        return health.is_under_replicated(self.replicas, self.isr)

    def to_record(self) -> Record:
        return {
            "type": "partition",
            "topic": self.topic,
            "partition": self.partition,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
            "adding": list(self.adding),
            "removing": list(self.removing),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PartitionState:
        return cls(
            topic=record["topic"],
            partition=int(record["partition"]),
            replicas=tuple(record["replicas"]),
            isr=tuple(record["isr"]),
            leader=int(record["leader"]),
            leader_epoch=int(record.get("leader_epoch", 0)),
            partition_epoch=int(record.get("partition_epoch", 0)),
            adding=tuple(record.get("adding", ())),
            removing=tuple(record.get("removing", ())),
        )


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
    # Indexes kept by the appliers, so the controller's periodic checks visit only
    # the partitions concerned: leaderless ones, and ones being reassigned.
    offline: set[tuple[str, int]] = field(default_factory=set, compare=False, repr=False)
    reassigning: set[tuple[str, int]] = field(default_factory=set, compare=False, repr=False)
    delta: MetadataDelta = field(default_factory=MetadataDelta, compare=False, repr=False)

    def take_delta(self) -> MetadataDelta:
        """What changed since the last call; starts a new, empty delta."""
        delta, self.delta = self.delta, MetadataDelta()
        return delta

    def apply(self, record: Mapping[str, Any], offset: int | None = None) -> bool:
        """Apply one record; returns False when it was ignored as stale."""
        if offset is not None:
            self.offset = offset + 1
        epoch = int(record.get("controller_epoch", 0))
        kind = record["type"]
        if kind == "controller":
            if epoch < self.controller_epoch:
                return False
            self.controller_epoch = epoch
            self.controller_id = int(record["controller_id"])
            return True
        if epoch < self.controller_epoch:
            return False  # written by a controller that has since been replaced
        handler = _APPLIERS.get(kind)
        if handler is None:
            return False  # a newer record type: skip rather than refuse to start
        handler(self, record)
        return True

    def apply_all(self, records: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
        for offset, record in records:
            self.apply(record, offset)

    # -- queries ---------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionState | None:
        image = self.topics.get(topic)
        return image.partitions.get(partition) if image else None

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


def _apply_broker(image: MetadataImage, record: Mapping[str, Any]) -> None:
    reg = BrokerRegistration(
        broker_id=int(record["broker_id"]),
        host=record["host"],
        port=int(record["port"]),
        incarnation=record.get("incarnation", ""),
        fenced=bool(record.get("fenced", False)),
        rack=record.get("rack") or None,
        endpoints=tuple(Endpoint.from_record(e) for e in record.get("endpoints", ())),
    )
    image.brokers[reg.broker_id] = reg
    image.delta.brokers.add(reg.broker_id)


def _apply_broker_fence(image: MetadataImage, record: Mapping[str, Any]) -> None:
    broker_id = int(record["broker_id"])
    current = image.brokers.get(broker_id)
    if current is not None:
        image.brokers[broker_id] = replace(current, fenced=bool(record["fenced"]))
        image.delta.brokers.add(broker_id)


def _apply_topic(image: MetadataImage, record: Mapping[str, Any]) -> None:
    name = record["name"]
    if name in image.topics:
        _forget_partitions(image, name)
    image.topics[name] = TopicImage(
        name=name, topic_id=record["topic_id"], configs=dict(record.get("configs", {}))
    )
    image.delta.topics.add(name)


def _apply_partition(image: MetadataImage, record: Mapping[str, Any]) -> None:
    topic = image.topics.get(record["topic"])
    if topic is None:
        return
    state = PartitionState.from_record(record)
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


def _apply_topic_config(image: MetadataImage, record: Mapping[str, Any]) -> None:
    topic = image.topics.get(record["topic"])
    if topic is None:
        return
    for key, value in record["configs"].items():
        if value is None:
            topic.configs.pop(key, None)
        else:
            topic.configs[key] = str(value)
    image.delta.topics.add(topic.name)


def _apply_broker_config(image: MetadataImage, record: Mapping[str, Any]) -> None:
    broker_id = record.get("broker_id")
    key = None if broker_id is None else int(broker_id)
    configs = image.broker_configs.setdefault(key, {})
    for name, value in record["configs"].items():
        if value is None:
            configs.pop(name, None)
        else:
            configs[name] = str(value)
    if not configs:
        del image.broker_configs[key]
    image.delta.broker_configs = True


def _apply_remove_topic(image: MetadataImage, record: Mapping[str, Any]) -> None:
    name = record["name"]
    if name in image.topics:
        _forget_partitions(image, name)
        del image.topics[name]
        image.delta.topics.add(name)


def _apply_producer_ids(image: MetadataImage, record: Mapping[str, Any]) -> None:
    image.next_producer_id = max(image.next_producer_id, int(record["next_producer_id"]))


def _apply_acl(image: MetadataImage, record: Mapping[str, Any]) -> None:
    try:
        binding = AclBinding.from_record(record)
    except AclError:
        return  # a binding a newer slog wrote with values this one does not know
    if record["type"] == "acl":
        image.acls.add(binding)
    else:
        image.acls.discard(binding)


_APPLIERS = {
    "acl": _apply_acl,
    "remove_acl": _apply_acl,
    "broker": _apply_broker,
    "broker_fence": _apply_broker_fence,
    "topic": _apply_topic,
    "partition": _apply_partition,
    "topic_config": _apply_topic_config,
    "broker_config": _apply_broker_config,
    "remove_topic": _apply_remove_topic,
    "producer_ids": _apply_producer_ids,
}
