"""ListOffsets: the offset of the earliest record, the latest, or the first at a timestamp.

Shared by the consumer (offset resets) and the admin client. Requests go to
each partition's leader; partitions whose leader moved or is unknown are
retried after a metadata refresh, a few times, before their error is
returned.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from slog.client.cluster import ClusterClient
from slog.client.errors import InvalidArgumentError, KafkaError, raise_for_items
from slog.client.leader_requests import ask_leaders, partition_results, request_leader
from slog.client.types import OffsetAndTimestamp, TopicPartition
from slog.protocol.apis import ApiKey

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
SPEC_NAMES = {"earliest": EARLIEST, "beginning": EARLIEST, "latest": LATEST, "end": LATEST,
              "max_timestamp": MAX_TIMESTAMP}
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
CHANNEL = "offsets"

OffsetSpec = str | int
Result = OffsetAndTimestamp | KafkaError


def spec_timestamp(spec: OffsetSpec) -> int:
    """"earliest" / "latest" / "max_timestamp" or a timestamp in ms → ListOffsets' timestamp."""
    if isinstance(spec, str):
        try:
            return SPEC_NAMES[spec.lower()]
        except KeyError:
            raise InvalidArgumentError(f"offset spec must be earliest, latest, max_timestamp or a "
                                       f"timestamp in ms, not {spec!r}") from None
    if spec < MAX_TIMESTAMP:
        raise InvalidArgumentError(f"bad timestamp {spec}")
    return int(spec)


def _request_body(tps: Mapping[TopicPartition, int], isolation_level: int) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
    for tp, ts in tps.items():
        by_topic[tp.topic].append({"partition_index": tp.partition, "current_leader_epoch": -1,
                                   "timestamp": ts})
    return {"replica_id": -1, "isolation_level": isolation_level,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}


def _ask_leader(cluster: ClusterClient, leader: int, tps: Mapping[TopicPartition, int],
                isolation_level: int) -> dict[TopicPartition, Result]:
    response = request_leader(cluster, leader, CHANNEL, ApiKey.LIST_OFFSETS,
                              _request_body(tps, isolation_level))
    return partition_results(response, lambda part: OffsetAndTimestamp(
        part.offset, part.timestamp, getattr(part, "leader_epoch", -1)))


def list_offsets(cluster: ClusterClient, specs: Mapping[TopicPartition, OffsetSpec], *,
                 isolation_level: int = READ_UNCOMMITTED, attempts: int = 5,
                 backoff_s: float = 0.1) -> dict[TopicPartition, Result]:
    """Offsets for each partition; a partition that keeps failing maps to its KafkaError."""
    wanted = {TopicPartition(*tp): spec_timestamp(spec) for tp, spec in specs.items()}
    return ask_leaders(cluster, wanted,
                       lambda leader, tps: _ask_leader(cluster, leader, tps, isolation_level),
                       attempts=attempts, backoff_s=backoff_s)


def found_offsets(results: Mapping[TopicPartition, Result]) -> dict[TopicPartition, int]:
    """The offsets of :func:`list_offsets`' results; raises the first failure, with all."""
    raise_for_items({str(tp): r for tp, r in results.items() if isinstance(r, KafkaError)})
    return {tp: r.offset for tp, r in results.items() if not isinstance(r, KafkaError)}
