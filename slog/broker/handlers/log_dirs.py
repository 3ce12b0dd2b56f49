"""DescribeLogDirs and AlterReplicaLogDirs: this broker's one log directory.

A slog broker has one log directory (``brokers/<id>/logs``), so DescribeLogDirs
answers one result. ``offset_lag`` is Kafka's: how far the replica's log end is
behind the high watermark it knows (0 on a leader, and on a follower that
caught up). AlterReplicaLogDirs can only move a replica to where it is: that
directory is a no-op that succeeds, as on Kafka, any other LOG_DIR_NOT_FOUND.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

KAFKA_STORAGE_ERROR = ErrorCode.kafka_storage_error


def _wanted(request: Any) -> dict[str, set[int]] | None:
    """topic → partitions asked about; None means every replica."""
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = defaultdict(set)
    for t in request.topics:
        wanted[t.topic].update(t.partitions)
    return wanted


def _partition_entry(ctx: RequestContext, topic: str, index: int, size: int,
                     log_end: int) -> dict[str, Any]:
    partition = ctx.broker.replicas.get(topic, index)
    lag = max(0, partition.high_watermark - log_end) if partition is not None else 0
    return {"partition_index": index, "partition_size": size, "offset_lag": lag,
            "is_future_key": False}


async def describe_log_dirs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    manager = ctx.broker.log_manager
    wanted = _wanted(request)
    topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (topic, index), plog in sorted(manager.all_logs().items()):
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        topics[topic].append(_partition_entry(ctx, topic, index, plog.size_in_bytes,
                                              plog.log_end_offset))
    try:
        usage = shutil.disk_usage(manager.logs_dir)
        total, usable, error = usage.total, usage.free, NONE
    except OSError:
        total, usable, error = -1, -1, KAFKA_STORAGE_ERROR
    return {
        "throttle_time": 0,
        "error_code": NONE,
        "results": [{
            "error_code": error,
            "log_dir": str(manager.logs_dir),
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            "total_bytes": total,
            "usable_bytes": usable,
        }],
    }


def _move_outcome(ctx: RequestContext, here: bool, topic: str, index: int) -> ErrorCode:
    """As Kafka: a partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION; one
    that exists goes (or, once this broker gets a replica, will go) to the directory."""
    if ctx.broker.image.partition(topic, index) is None:
        return ErrorCode.unknown_topic_or_partition
    return NONE if here else ErrorCode.log_dir_not_found


async def alter_replica_log_dirs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    logs_dir = os.path.realpath(ctx.broker.log_manager.logs_dir)
    results: dict[str, dict[int, ErrorCode]] = defaultdict(dict)
    for wanted in request.dirs:
        here = os.path.realpath(wanted.path) == logs_dir
        for topic in wanted.topics:
            for index in topic.partitions:
                results[topic.name][index] = _move_outcome(ctx, here, topic.name, index)
    return {"throttle_time": 0, "results": [
        {"topic_name": name, "partitions": [{"partition_index": index, "error_code": code}
                                            for index, code in partitions.items()]}
        for name, partitions in results.items()]}


HANDLERS = {ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs,
            ApiKey.ALTER_REPLICA_LOG_DIRS: alter_replica_log_dirs}
