"""DeleteRecords: move partitions' log start offsets forward (sent to their leaders).

Each partition's leader advances its log start at once (deleting the segments
wholly below it, and checkpointing it); the answer then waits, up to the
request's timeout, until every live follower has moved its log start too
(the low watermark, which followers report in their fetches), as Kafka's
delayed DeleteRecords does. A partition still waiting when the time is up
is answered REQUEST_TIMED_OUT with the offset asked for: the deletion stands,
and the followers catch up on their own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.core.errors import StorageError
from slog.core.names import OFFSETS_TOPIC
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.protocol.shapes import millis
from slog.replication.partition import Partition

TO_HIGH_WATERMARK = -1  # the offset that means "everything readable"

Waiting = tuple[dict[str, Any], Partition, int]  # result, partition, new log start


def _delete_one(ctx: RequestContext, topic: str, index: int, offset: int,
                waiting: list[Waiting]) -> dict[str, Any]:
    result: dict[str, Any] = {"partition_index": index, "low_watermark": -1}
    partition = ctx.broker.replicas.get(topic, index)
    if partition is None:
        described = ctx.broker.image.topics.get(topic)
        known = described is not None and index in described.partitions
        result["error_code"] = ErrorCode.not_leader_or_follower if known \
            else ErrorCode.unknown_topic_or_partition
        return result
    if not partition.is_leader:
        result["error_code"] = ErrorCode.not_leader_or_follower
        return result
    if topic == OFFSETS_TOPIC:
        # Committed offsets are the coordinator's to expire, never a client's to delete.
        result["error_code"] = ErrorCode.invalid_topic_exception
        return result
    if not partition.log.config.delete_enabled:
        # A compacted-only topic keeps the latest value of every key (as Kafka refuses).
        result["error_code"] = ErrorCode.policy_violation
        return result
    target = partition.high_watermark if offset == TO_HIGH_WATERMARK else offset
    if target < 0 or target > partition.high_watermark:
        result["error_code"] = ErrorCode.offset_out_of_range
        return result
    try:
        # One checkpoint for the whole request, written before anyone is answered.
        partition.advance_log_start(target, checkpoint=False)
    except StorageError:
        result["error_code"] = ErrorCode.kafka_storage_error
        return result
    result.update(error_code=ErrorCode.none, low_watermark=partition.log.log_start_offset)
    waiting.append((result, partition, partition.log.log_start_offset))
    return result


def _checkpoint(waiting: list[Waiting]) -> None:
    """Write the moved log starts down (every log of this broker in one file)."""
    try:
        waiting[0][1].log.checkpoint_log_start()
    except StorageError:
        for result, _, _ in waiting:
            result.update(error_code=ErrorCode.kafka_storage_error, low_watermark=-1)
        waiting.clear()


async def _await_low_watermarks(waiting: list[Waiting], timeout_s: float) -> None:
    async def one(result: dict[str, Any], partition: Partition, offset: int) -> None:
        if await partition.wait_for_low_watermark(offset, timeout_s):
            result["low_watermark"] = partition.low_watermark
        elif partition.is_leader:
            result.update(error_code=ErrorCode.request_timed_out, low_watermark=offset)
        else:
            result.update(error_code=ErrorCode.not_leader_or_follower, low_watermark=-1)

    await asyncio.gather(*(one(*w) for w in waiting))


async def delete_records(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.broker.poll_metadata_if_stale()  # a deposed leader must not delete
    waiting: list[Waiting] = []
    topics = [
        {"name": t.name,
         "partitions": [_delete_one(ctx, t.name, p.partition_index, p.offset, waiting)
                        for p in t.partitions]}
        for t in request.topics
    ]
    if waiting:
        _checkpoint(waiting)
    if waiting:
        await _await_low_watermarks(waiting, max(millis(request.timeout), 0) / 1000)
    return {"throttle_time": 0, "topics": topics}


HANDLERS = {ApiKey.DELETE_RECORDS: delete_records}
