"""DescribeQuorum: the metadata log described as Kafka describes its KRaft quorum.

slog's metadata log is one shared file that the controller appends to and every
broker replays; the controller is whoever holds ``controller.lock``, and any
broker may take it. So, as ``kafka-metadata-quorum describe`` sees it: the log is
``__cluster_metadata`` partition 0, its leader the controller at the controller
epoch, every registered broker a voter (each is controller-eligible, as in
Kafka's combined mode), and no observers. The high watermark is what this
broker has applied: a record is in the log only once the controller synced it.
A voter's log end offset is known for this broker only (the others replay the
file on their own and report nowhere), so theirs are -1, Kafka's "unknown".
"""

from __future__ import annotations

import time
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

METADATA_TOPIC = "__cluster_metadata"
UNKNOWN = -1


def _voter(broker_id: int, me: int, applied: int, now_ms: int) -> dict[str, Any]:
    mine = broker_id == me
    return {"replica_id": broker_id, "replica_directory_id": None,
            "log_end_offset": applied if mine else UNKNOWN,
            "last_fetch_timestamp": now_ms if mine else UNKNOWN,
            "last_caught_up_timestamp": now_ms if mine else UNKNOWN}


def _partition(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    if (topic, index) != (METADATA_TOPIC, 0):
        return {"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition,
                "error_message": f"the quorum is {METADATA_TOPIC} partition 0",
                "leader_id": UNKNOWN, "leader_epoch": UNKNOWN, "high_watermark": UNKNOWN,
                "current_voters": [], "observers": []}
    broker, image = ctx.broker, ctx.broker.image
    applied, now_ms = broker.metadata_offset, int(time.time() * 1000)
    return {"partition_index": 0, "error_code": NONE, "error_message": None,
            "leader_id": image.controller_id, "leader_epoch": image.controller_epoch,
            "high_watermark": applied,
            "current_voters": [_voter(b, broker.broker_id, applied, now_ms)
                               for b in sorted(image.brokers)],
            "observers": []}


def _nodes(ctx: RequestContext) -> list[dict[str, Any]]:
    """v2: every voter's listeners."""
    nodes = []
    for broker_id, registration in sorted(ctx.broker.image.brokers.items()):
        endpoints = registration.endpoints or ()
        listeners = [{"name": e.name, "host": e.host, "port": e.port} for e in endpoints] \
            or [{"name": "PLAINTEXT", "host": registration.host, "port": registration.port}]
        nodes.append({"node_id": broker_id, "listeners": listeners})
    return nodes


async def describe_quorum(ctx: RequestContext, request: Any) -> dict[str, Any]:
    topics = [{"topic_name": topic.topic_name,
               "partitions": [_partition(ctx, topic.topic_name, p.partition_index)
                              for p in topic.partitions]}
              for topic in request.topics]
    return {"error_code": NONE, "error_message": None, "topics": topics, "nodes": _nodes(ctx)}


HANDLERS = {ApiKey.DESCRIBE_QUORUM: describe_quorum}
