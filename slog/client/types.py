"""Plain value types shared by the producer, consumer and admin client (Kafka's names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

Header = tuple[str, bytes | None]

CREATE_TIME = 0
LOG_APPEND_TIME = 1


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class RecordMetadata(NamedTuple):
    """Where a produced record landed. ``offset`` is -1 with acks=0 (nobody said)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    """One record as the consumer returns it. ``timestamp_type``: 0 CreateTime, 1 LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


class OffsetAndTimestamp(NamedTuple):
    """A ListOffsets answer; ``offset`` is -1 when no record matches a timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


@dataclass(frozen=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int  # -1 when there is none
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: str | None
    is_internal: bool
    partitions: dict[int, PartitionMetadata]
    error_code: int = 0


@dataclass(frozen=True)
class ClusterMetadata:
    """One snapshot of what Metadata said; replaced whole on every refresh."""

    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerMetadata] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 partitions / replication factor take the broker's defaults.

    ``assignment`` maps each partition to its replica broker ids (then
    ``partitions`` and ``replication_factor`` must stay -1).
    """

    name: str
    partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    assignment: dict[int, list[int]] | None = None


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: str | None
    partitions: int
    replication_factor: int


@dataclass(frozen=True)
class PartitionDescription:
    """One partition as ``Admin.describe_topics`` reports it.

    ``log_end_offset`` is what a non-replica client can observe, the high
    watermark: Kafka only reveals the LEO to followers.
    """

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    # Below the oldest open transaction (and the HW): where read_committed readers stop.
    last_stable_offset: int = -1


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str | None
    is_internal: bool
    partitions: list[PartitionDescription]


@dataclass(frozen=True)
class TopicListing:
    name: str
    topic_id: str | None
    partitions: int
    is_internal: bool


@dataclass(frozen=True)
class ConfigEntry:
    """A topic or broker config; ``source`` is Kafka's name (DYNAMIC_TOPIC_CONFIG,
    DYNAMIC_BROKER_CONFIG, DEFAULT_CONFIG, ...)."""

    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerMetadata]
