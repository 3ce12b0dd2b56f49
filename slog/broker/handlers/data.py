"""The data path: Produce, Fetch, ListOffsets and InitProducerId."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from slog.broker.dispatcher import CLOSE_CONNECTION, NO_RESPONSE, Encoded, RequestContext
from slog.broker.handlers.common import NONE, NOT_LEADER, UNKNOWN_TOPIC, code
from slog.core import batch
from slog.core.errors import CorruptRecordError, OffsetOutOfRangeError, StorageError
from slog.core.log import RecordTooLargeError
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.protocol.fetch_encoding import (
    FetchPartitionResult,
    FetchTopicResult,
    encode_fetch_response,
)
from slog.protocol.shapes import millis
from slog.replication.partition import Partition, ReplicaError
from slog.replication.replica_selector import (
    NO_PREFERRED_REPLICA,
    ReplicaView,
    preferred_read_replica,
)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
CORRUPT_MESSAGE = code("corrupt_message")
INVALID_RECORD = code("invalid_record")
FETCH_FROM_FOLLOWER_VERSION = 11  # KIP-392: rack_id and preferred_read_replica


# -- Produce ------------------------------------------------------------------------
Commit = tuple[dict[str, Any], Partition, int, int]  # result, partition, last offset, min ISR


def _append(ctx: RequestContext, topic: str, index: int, records: bytes | None, acks: int,
            commits: list[Commit]) -> dict[str, Any]:
    result: dict[str, Any] = {"index": index, "base_offset": -1, "log_append_time": -1,
                              "log_start_offset": -1}
    replicas = ctx.broker.replicas
    partition = replicas.get(topic, index)
    if partition is None:
        known = topic in ctx.broker.image.topics
        result["error_code"] = NOT_LEADER if known and index in \
            ctx.broker.image.topics[topic].partitions else UNKNOWN_TOPIC
        return result
    if not records or len(records) < batch.HEADER_SIZE or \
            batch.peek_batch_size(records) != len(records):
        # Produce v3+ carries exactly one v2 batch per partition.
        result["error_code"] = INVALID_RECORD
        result["error_message"] = "expected exactly one record batch per partition"
        return result
    if records[batch.MAGIC_POS] != batch.MAGIC:
        # As Kafka's ProduceRequest.validateRecords: v3+ carries only magic v2 batches.
        result["error_code"] = INVALID_RECORD
        result["error_message"] = f"record batches must have magic {batch.MAGIC}"
        return result
    # Only acks=-1 looks at min.insync.replicas; resolving topic configs is not free.
    min_isr = int(replicas.topic_setting(topic, "min.insync.replicas")) if acks == -1 else 1
    try:
        appended = partition.append_as_leader(records, required_acks=acks,
                                              min_insync_replicas=min_isr)
    except ReplicaError as exc:
        result.update(error_code=code(exc.code), error_message=str(exc))
    except RecordTooLargeError as exc:
        result.update(error_code=code("message_too_large"), error_message=str(exc))
    except CorruptRecordError as exc:
        result.update(error_code=CORRUPT_MESSAGE, error_message=str(exc))
    except StorageError as exc:
        result.update(error_code=code("kafka_storage_error"), error_message=str(exc))
    else:
        result.update(error_code=NONE, base_offset=appended.base_offset,
                      log_append_time=appended.log_append_time,
                      log_start_offset=appended.log_start_offset)
        if acks == -1:
            commits.append((result, partition, appended.last_offset, min_isr))
    return result


async def _await_commits(commits: list[Commit], timeout_s: float) -> None:
    """acks=all: answer only once the ISR has every batch (or say why not)."""

    async def one(result: dict[str, Any], partition: Partition, last: int, min_isr: int
                  ) -> None:
        try:
            await partition.wait_for_commit(last, timeout_s, min_isr)
        except ReplicaError as exc:
            result.update(error_code=code(exc.code), error_message=str(exc), base_offset=-1)

    await asyncio.gather(*(one(*commit) for commit in commits))


async def produce(ctx: RequestContext, request: Any) -> Any:
    ctx.broker.poll_metadata_if_stale()  # never append as a leader deposed during a stall
    acks = request.acks
    responses = []
    commits: list[Commit] = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            if acks not in (0, 1, -1):
                partitions.append({"index": data.index, "base_offset": -1,
                                   "log_append_time": -1, "log_start_offset": -1,
                                   "error_code": code("invalid_required_acks")})
                continue
            partitions.append(_append(ctx, topic.name, data.index, data.records, acks, commits))
        responses.append({"name": topic.name, "partition_responses": partitions})
    ctx.broker.replicas.notify()
    if commits:
        await _await_commits(commits, millis(request.timeout) / 1000)
    if acks == 0:
        # An acks=0 producer reads no response, so Kafka reports a failed
        # partition by closing the connection (the client then refreshes metadata).
        failed = any(p["error_code"] != NONE for t in responses for p in t["partition_responses"])
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    return {"responses": responses, "throttle_time": 0}


# -- Fetch --------------------------------------------------------------------------
def check_leader_epoch(partition: Partition, requested: int) -> int:
    if requested < 0:
        return NONE
    if requested < partition.leader_epoch:
        return code("fenced_leader_epoch")
    if requested > partition.leader_epoch:
        return code("unknown_leader_epoch")
    return NONE


def _read_partition(ctx: RequestContext, topic: str, request: Any, budget: int,
                    follower: int, client_rack: str) -> tuple[FetchPartitionResult, int, bool]:
    """One partition of a fetch: (result, bytes read, answer now without waiting)."""
    partition = ctx.broker.replicas.get(topic, request.partition)
    result = FetchPartitionResult(partition_index=request.partition)
    if partition is None:
        result.error_code = UNKNOWN_TOPIC
        return result, 0, True
    result.high_watermark = partition.high_watermark
    result.last_stable_offset = partition.high_watermark
    result.log_start_offset = partition.log.log_start_offset
    if not partition.is_leader:
        why_not = _why_follower_cannot_serve(ctx, partition, follower)
        if why_not is not ErrorCode.none:
            result.error_code = why_not
            return result, 0, True
    current_epoch = getattr(request, "current_leader_epoch", -1)
    result.error_code = check_leader_epoch(partition, current_epoch)
    if result.error_code != NONE:
        return result, 0, True
    if follower >= 0 and partition.update_follower(follower, request.fetch_offset):
        ctx.broker.replicas.notify()  # the HW moved: consumers and acks=all may proceed
    if follower < 0 and client_rack and partition.is_leader and \
            ctx.broker.config.fetch_from_follower:
        preferred = _preferred_read_replica(ctx, partition, client_rack, request.fetch_offset)
        if preferred != NO_PREFERRED_REPLICA:
            # KIP-392: no records, only where to read them; the consumer moves there.
            result.preferred_read_replica = preferred
            return result, 0, True
    try:
        fetched = ctx.broker.replication_throttle.read(  # throttles reassignment copies only
            ctx.broker.image, partition, follower, request.fetch_offset,
            min(budget, request.partition_max_bytes))
    except OffsetOutOfRangeError:
        if not partition.is_leader and current_epoch < 0 and \
                request.fetch_offset > partition.log.log_end_offset:
            # A consumer without leader epochs (KIP-320) may be here on stale metadata:
            # Kafka answers empty so it retries instead of resetting its position.
            return result, 0, False
        result.error_code = ErrorCode.offset_out_of_range
        return result, 0, True
    result.records = fetched.views
    result.high_watermark = partition.high_watermark
    return result, fetched.size, False


def _why_follower_cannot_serve(ctx: RequestContext, partition: Partition, follower: int
                               ) -> ErrorCode:
    """KIP-392: a follower serves consumers that fetch with v11+ (they know to expect it),
    while it is in the ISR; anyone else is sent back to the leader."""
    if follower >= 0 or ctx.version < FETCH_FROM_FOLLOWER_VERSION:
        return ErrorCode.not_leader_or_follower
    if partition.broker_id not in partition.isr:
        # Out of the ISR it may lag without bound: back to the leader, who knows.
        return ErrorCode.not_leader_or_follower
    return ErrorCode.none


def _preferred_read_replica(ctx: RequestContext, partition: Partition, client_rack: str,
                            fetch_offset: int) -> int:
    image = ctx.broker.image
    live = {b.broker_id for b in image.live_brokers()}
    followers = [
        ReplicaView(replica, rack, state.log_end_offset, state.last_caught_up_ms)
        for replica, state in partition.followers.items()
        if replica in partition.isr and replica in live
        and replica not in partition.fenced_replicas
        and (rack := image.brokers[replica].rack) is not None
    ]
    leader = ReplicaView(ctx.broker.broker_id, ctx.broker.config.rack,
                         partition.log.log_end_offset, 0.0)
    return preferred_read_replica(client_rack, leader, followers, fetch_offset)


def _gather(ctx: RequestContext, request: Any, follower: int) -> tuple[list[FetchTopicResult],
                                                                     int, bool]:
    budget = request.max_bytes if ctx.version >= 3 else 2**31 - 1
    client_rack = (getattr(request, "rack_id", "") or "") if follower < 0 else ""
    total, answer_now = 0, False
    topics = []
    for topic in request.topics:
        results = []
        for part in topic.partitions:
            # KIP-74: once something is returned, later partitions get only what is left.
            result, size, now = _read_partition(ctx, topic.topic, part, max(budget - total, 0)
                                                if total else budget, follower, client_rack)
            answer_now |= now
            total += size
            results.append(result)
        topics.append(FetchTopicResult(topic=topic.topic, partitions=results))
    return topics, total, answer_now


async def fetch(ctx: RequestContext, request: Any) -> Encoded:
    follower = request.replica_id
    max_wait_s = millis(request.max_wait) / 1000
    deadline = time.monotonic() + max_wait_s
    session_error = NONE
    if getattr(request, "session_id", 0) != 0:
        session_error = code("fetch_session_id_not_found")  # slog keeps no fetch sessions
        topics: list[FetchTopicResult] = []
    else:
        marks = None
        while True:
            topics, total, answer_now = _gather(ctx, request, follower)
            remaining = deadline - time.monotonic()
            if total >= request.min_bytes or answer_now or remaining <= 0:
                break
            # Woken by new data or a moved high watermark: a follower replica serving
            # consumers wakes as its own HW advances with each answer from the leader.
            # A replica fetcher also wants to hear about a new high watermark promptly.
            hws = [p.high_watermark for t in topics for p in t.partitions]
            if follower >= 0 and marks is not None and hws != marks:
                break
            marks = hws
            await ctx.broker.replicas.wait_for_data(remaining)
    buffers = encode_fetch_response(
        ctx.header, ctx.version, throttle_ms=0, error_code=session_error, session_id=0,
        topics=topics,
    )
    return Encoded(buffers)


# -- ListOffsets --------------------------------------------------------------------
def _list_offset(ctx: RequestContext, topic: str, request: Any, replica_id: int
                 ) -> dict[str, Any]:
    result: dict[str, Any] = {"partition_index": request.partition_index, "timestamp": -1,
                              "offset": -1, "leader_epoch": -1}
    partition = ctx.broker.replicas.get(topic, request.partition_index)
    if partition is None:
        result["error_code"] = UNKNOWN_TOPIC
        return result
    if not partition.is_leader:
        result["error_code"] = NOT_LEADER
        return result
    result["error_code"] = check_leader_epoch(partition,
                                               getattr(request, "current_leader_epoch", -1))
    if result["error_code"] != NONE:
        return result
    plog = partition.log
    ts = request.timestamp
    if ts == EARLIEST_TIMESTAMP:
        result["offset"] = plog.log_start_offset
    elif ts == LATEST_TIMESTAMP:
        # Replicas and debugging tools (replica id -2, as in Kafka) see the LEO.
        result["offset"] = plog.log_end_offset if replica_id != -1 else partition.high_watermark
    elif ts == MAX_TIMESTAMP:
        found = plog.max_timestamp_and_offset()
        if found is not None:
            result["timestamp"], result["offset"] = found
    else:
        found = plog.offset_for_timestamp(ts)
        if found is not None and found[0] < partition.high_watermark:
            result["offset"], result["timestamp"] = found
    if result["offset"] >= 0:
        result["leader_epoch"] = partition.leader_epoch
    return result


async def list_offsets(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {"name": t.name,
             "partitions": [_list_offset(ctx, t.name, p, request.replica_id)
                            for p in t.partitions]}
            for t in request.topics
        ],
    }


# -- InitProducerId -----------------------------------------------------------------
MAX_PRODUCER_EPOCH = 32767


async def init_producer_id(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        # Transactions are out of scope; say so in a way clients report clearly.
        return {"throttle_time": 0, "error_code": code("transactional_id_authorization_failed"),
                "producer_id": -1, "producer_epoch": -1}
    current_id = getattr(request, "producer_id", -1)
    current_epoch = getattr(request, "producer_epoch", -1)
    if current_id >= 0 and 0 <= current_epoch < MAX_PRODUCER_EPOCH - 1:
        # KIP-360: an idempotent producer bumps its epoch to reset sequences.
        return {"throttle_time": 0, "error_code": NONE, "producer_id": current_id,
                "producer_epoch": current_epoch + 1}
    return {"throttle_time": 0, "error_code": NONE,
            "producer_id": ctx.broker.producer_ids.next_id(), "producer_epoch": 0}


HANDLERS = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
}
