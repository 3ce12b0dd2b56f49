"""DescribeLogDirs: the size of every partition replica this broker holds.

A slog broker has one log directory (``brokers/<id>/logs``), so the answer is
one result. ``offset_lag`` is Kafka's: how far the replica's log end is behind
the high watermark it knows (0 on a leader, and on a follower that caught up).
"""

from __future__ import annotations

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
            "is_cordoned": False,  # v5 (KIP-1066): slog never cordons its log dir
        }],
    }


HANDLERS = {ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs}
