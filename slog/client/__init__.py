"""slog's Kafka client: producer, consumer and admin, over standard Kafka APIs only.

It works against slog and against Apache Kafka brokers alike.

=====================  ==========================================================
module                 job
=====================  ==========================================================
``connection``         one broker connection: version negotiation, pipelining
``cluster``            bootstrap, metadata cache, per-broker connection pool
``partitioner``        explicit / murmur3 key hash / sticky null-key partitioning
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
