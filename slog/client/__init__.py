"""slog's Kafka client: producer, consumer and admin, over standard Kafka APIs only.

It works against slog and against Apache Kafka brokers alike.

=====================  ==========================================================
module                 job
=====================  ==========================================================
``connection``         one broker connection: version negotiation, pipelining
``cluster``            bootstrap, metadata cache, per-broker connection pool
``partitioner``        explicit / murmur3, murmur2 or crc32 key hash / sticky null-key partitioning
``accumulator``        per-partition open batches that ``send()`` appends to
``sender``             the producer's background thread: requests, retries
``producer``           :class:`Producer`
``subscription``       assigned partitions and their positions
``fetcher``            pipelined Fetch requests and lazy record decoding
``offsets``            ListOffsets (consumer resets and admin)
``consumer``           :class:`Consumer`
``group``              consumer-group membership: join, heartbeat, rebalance listener
``assignors``          range, roundrobin, sticky and cooperative-sticky
``group_requests``     FindCoordinator, OffsetCommit/OffsetFetch, group API versions
``group_admin``        :class:`GroupAdmin`: list, describe, offsets, delete groups
``admin``              :class:`Admin`
``errors``, ``types``  Kafka errors and value types
=====================  ==========================================================
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names are imported on first use, so a command that needs only the admin
# client does not pay for the producer, consumer and group machinery.
_EXPORTS = {
    "Admin": "admin",
    "BrokerUnavailableError": "errors",
    "Consumer": "consumer",
    "ConsumerRecord": "types",
    "DeliveryFuture": "producer",
    "GroupAdmin": "group_admin",
    "GroupDescription": "group_admin",
    "GroupListing": "group_admin",
    "KafkaError": "errors",
    "KafkaTimeoutError": "errors",
    "NewTopic": "types",
    "OffsetAndMetadata": "group_requests",
    "OffsetAndTimestamp": "types",
    "ProduceError": "errors",
    "Producer": "producer",
    "RebalanceListener": "group",
    "RecordMetadata": "types",
    "TopicPartition": "types",
}

if TYPE_CHECKING:
    from slog.client.admin import Admin
    from slog.client.consumer import Consumer
    from slog.client.errors import (
        BrokerUnavailableError,
        KafkaError,
        KafkaTimeoutError,
        ProduceError,
    )
    from slog.client.group import RebalanceListener
    from slog.client.group_admin import GroupAdmin, GroupDescription, GroupListing
    from slog.client.group_requests import OffsetAndMetadata
    from slog.client.producer import DeliveryFuture, Producer
    from slog.client.types import (
        ConsumerRecord,
        NewTopic,
        OffsetAndTimestamp,
        RecordMetadata,
        TopicPartition,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'slog.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"slog.client.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Admin",
    "BrokerUnavailableError",
    "Consumer",
    "ConsumerRecord",
    "DeliveryFuture",
    "GroupAdmin",
    "GroupDescription",
    "GroupListing",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "ProduceError",
    "Producer",
    "RebalanceListener",
    "RecordMetadata",
    "TopicPartition",
]
