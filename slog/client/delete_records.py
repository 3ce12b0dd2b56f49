"""DeleteRecords: delete every record below an offset, partition by partition.

Requests go to each partition's leader. Partitions whose leader moved or is
unknown are retried after a metadata refresh, a few times; a deletion is
idempotent (the log start only moves forward), so a retry is harmless. A
timeout is not retried: the leader has deleted already, and only waited for
its followers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from slog.client.cluster import ClusterClient
from slog.client.errors import KafkaError
from slog.client.leader_requests import ask_leaders, partition_results, request_leader
from slog.client.types import TopicPartition
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

TO_HIGH_WATERMARK = -1  # delete everything below the high watermark
CHANNEL = "delete-records"
_TIMED_OUT = int(ErrorCode.request_timed_out)

Result = int | KafkaError  # the partition's low watermark, or why not


def _request_body(offsets: Mapping[TopicPartition, int], timeout_ms: int) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
    for tp, offset in offsets.items():
        by_topic[tp.topic].append({"partition_index": tp.partition, "offset": offset})
    return {"topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
            "timeout": timeout_ms}


def _ask_leader(cluster: ClusterClient, leader: int, offsets: Mapping[TopicPartition, int],
                timeout_ms: int) -> dict[TopicPartition, Result]:
    response = request_leader(cluster, leader, CHANNEL, ApiKey.DELETE_RECORDS,
                              _request_body(offsets, timeout_ms))
    return partition_results(response, lambda part: int(part.low_watermark))


def delete_records(cluster: ClusterClient, offsets: Mapping[TopicPartition, int], *,
                   timeout_ms: int = 30_000, attempts: int = 5, backoff_s: float = 0.1
                   ) -> dict[TopicPartition, Result]:
    """Each partition's low watermark after the deletion, or its KafkaError."""
    wanted = {TopicPartition(*tp): int(offset) for tp, offset in offsets.items()}
    return ask_leaders(cluster, wanted,
                       lambda leader, tps: _ask_leader(cluster, leader, tps, timeout_ms),
                       attempts=attempts, backoff_s=backoff_s,
                       retry=lambda error: error.retriable and error.code != _TIMED_OUT)
