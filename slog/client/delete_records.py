"""DeleteRecords: delete every record below an offset, partition by partition.

Requests go to each partition's leader. Partitions whose leader moved or is
unknown are retried after a metadata refresh, a few times; a deletion is
idempotent (the log start only moves forward), so a retry is harmless. A
timeout is not retried: the leader has deleted already, and only waited for
its followers.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from slog.client.cluster import ClusterClient
from slog.client.errors import KafkaError, LeaderNotAvailableError
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
    conn = cluster.connection(leader, CHANNEL)
    try:
        response = conn.request(ApiKey.DELETE_RECORDS, _request_body(offsets, timeout_ms))
    except ConnectionError:
        cluster.close_connection(leader, CHANNEL)
        raise
    out: dict[TopicPartition, Result] = {}
    for topic in response.topics:
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            out[tp] = KafkaError.for_code(part.error_code, item=str(tp)) if part.error_code \
                else int(part.low_watermark)
    return out


def delete_records(cluster: ClusterClient, offsets: Mapping[TopicPartition, int], *,
                   timeout_ms: int = 30_000, attempts: int = 5, backoff_s: float = 0.1
                   ) -> dict[TopicPartition, Result]:
    """Each partition's low watermark after the deletion, or its KafkaError."""
    wanted = {TopicPartition(*tp): int(offset) for tp, offset in offsets.items()}
    results: dict[TopicPartition, Result] = {}
    todo = dict(wanted)
    for attempt in range(attempts):
        if attempt or any(cluster.leader_for(*tp) is None for tp in todo):
            try:
                cluster.refresh_metadata({tp.topic for tp in todo})
            except ConnectionError:
                if attempt == attempts - 1:
                    raise
                time.sleep(backoff_s)
                continue
        by_leader: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        for tp, offset in todo.items():
            leader = cluster.leader_for(*tp)
            if leader is None:
                known = cluster.partition(*tp) is not None
                results[tp] = (LeaderNotAvailableError(item=str(tp)) if known else
                               KafkaError.for_code(int(ErrorCode.unknown_topic_or_partition),
                                                   item=str(tp)))
            else:
                by_leader[leader][tp] = offset
        for leader, tps in by_leader.items():
            try:
                results.update(_ask_leader(cluster, leader, tps, timeout_ms))
            except ConnectionError as exc:
                for tp in tps:
                    results[tp] = KafkaError.for_code(int(ErrorCode.network_exception), str(exc),
                                                      item=str(tp))
        todo = {tp: wanted[tp] for tp, r in results.items()
                if isinstance(r, KafkaError) and r.retriable and r.code != _TIMED_OUT}
        if not todo:
            break
        time.sleep(backoff_s)
    return {tp: results[tp] for tp in wanted}
