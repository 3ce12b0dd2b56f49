"""The data path: Produce, ListOffsets and InitProducerId (Fetch: ``fetch.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from slog.broker.dispatcher import CLOSE_CONNECTION, NO_RESPONSE, RequestContext
from slog.broker.handlers.common import NONE, NOT_LEADER, UNKNOWN_TOPIC
from slog.broker.handlers.transactions import init_transactional_producer
from slog.core import batch
from slog.core.errors import CorruptRecordError, StorageError
from slog.core.log import RecordTooLargeError
from slog.core.record_keys import keyless_records
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.protocol.shapes import millis
from slog.replication.partition import Partition, ReplicaError

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
# Tiered storage's specs (ListOffsets v8, KIP-405; v9, KIP-1005). slog keeps every
# segment local, so the earliest local offset is the log start and nothing is tiered.
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
CORRUPT_MESSAGE = ErrorCode.corrupt_message
INVALID_RECORD = ErrorCode.invalid_record


# -- Produce ------------------------------------------------------------------------
# result, partition, last offset, min ISR, acks
Commit = tuple[dict[str, Any], Partition, int, int, int]


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
    if partition.log.config.compact_enabled:
        refused = _refuse_keyless(topic, index, records)
        if refused:
            result.update(refused)
            return result
    # Only acks=-1 looks at min.insync.replicas; resolving topic configs is not free.
    min_isr = int(replicas.topic_setting(topic, "min.insync.replicas")) if acks == -1 else 1
    try:
        appended = partition.append_as_leader(records, required_acks=acks,
                                              min_insync_replicas=min_isr)
    except ReplicaError as exc:
        result.update(error_code=exc.code, error_message=str(exc))
    except RecordTooLargeError as exc:
        result.update(error_code=ErrorCode.message_too_large, error_message=str(exc))
    except CorruptRecordError as exc:
        result.update(error_code=CORRUPT_MESSAGE, error_message=str(exc))
    except StorageError as exc:
        result.update(error_code=ErrorCode.kafka_storage_error, error_message=str(exc))
    else:
        result.update(error_code=NONE, base_offset=appended.base_offset,
                      log_append_time=appended.log_append_time,
                      log_start_offset=appended.log_start_offset)
        if acks == -1 or (acks == 1 and not partition.log.config.write_caching):
            commits.append((result, partition, appended.last_offset, min_isr, acks))
    return result


def _refuse_keyless(topic: str, index: int, records: bytes) -> dict[str, Any] | None:
    """A compacted partition keeps one value per key, so a keyless record is refused.

    The whole batch is refused, as Kafka's LogValidator does, naming every keyless
    record in ``record_errors`` (Produce v8+: clients fail those with INVALID_RECORD
    and the batch's others as refused for another record's sake). None: every record
    has a key.
    """
    try:
        keyless = keyless_records(records)
    except CorruptRecordError as exc:
        return {"error_code": ErrorCode.corrupt_message, "error_message": str(exc)}
    if not keyless:
        return None
    why = f"{topic}-{index} is compacted (cleanup.policy includes compact), so every " \
          "record needs a key"
    return {"error_code": ErrorCode.invalid_record,
            "error_message": f"{len(keyless)} record(s) of the batch have no key; {why}",
            "record_errors": [{"batch_index": i, "batch_index_error_message":
                               f"record {i} of the batch has no key; {why}"}
                              for i in keyless]}


async def _await_commits(commits: list[Commit], timeout_s: float) -> None:
    """acks=all: answer only once the ISR has every batch (the HW counts only what
    replicas fsynced, unless write.caching); acks=1: once the leader has it on disk
    (at once with write.caching). Or say why not.

    One wait with one timer for the whole request, on plain futures: librdkafka
    sends one partition per request, and a task, a timer and a coroutine for each
    partition's wait cost more than its append."""
    waiting: list[tuple[asyncio.Future[None], Commit]] = []
    for commit in commits:
        _, partition, last, _, acks = commit
        future = partition.commit_waiter(last) if acks == -1 \
            else partition.durable_waiter(last + 1)
        if future is not None:
            waiting.append((future, commit))
    if not waiting:
        return
    try:
        if len(waiting) == 1:
            await _wait_one(waiting[0][0], timeout_s)
        else:
            await asyncio.wait([future for future, _ in waiting], timeout=timeout_s)
    finally:
        for future, _ in waiting:
            future.cancel()  # timed out, or the request was cancelled: stop waiting
    for future, (result, partition, last, min_isr, acks) in waiting:
        error: BaseException | None
        if future.cancelled():  # out of time
            error = partition.commit_timed_out(last, min_isr) if acks == -1 else TimeoutError()
        else:
            error = future.exception()
        if isinstance(error, ReplicaError):
            result.update(error_code=error.code, error_message=str(error), base_offset=-1)
        elif isinstance(error, StorageError):
            result.update(error_code=ErrorCode.kafka_storage_error, error_message=str(error),
                          base_offset=-1)
        elif isinstance(error, TimeoutError):
            result.update(error_code=ErrorCode.request_timed_out, base_offset=-1,
                          error_message=f"offset {last} was not synced to disk in time")
        elif error is not None:
            raise error


async def _wait_one(future: asyncio.Future[None], timeout_s: float) -> None:
    """Until ``future`` is done, or cancelled when ``timeout_s`` runs out (what
    asyncio.wait does for one future, without its waiter future and callbacks:
    the common case, as librdkafka sends one partition per request)."""
    task = asyncio.current_task()
    timer = asyncio.get_running_loop().call_later(timeout_s, future.cancel)
    try:
        await future
    except asyncio.CancelledError:
        if task is not None and task.cancelling():
            raise  # the request itself was cancelled, not just out of time
    except Exception:  # the caller reads the future's exception
        pass
    finally:
        timer.cancel()


def _refused(index: int, error: ErrorCode) -> dict[str, Any]:
    return {"index": index, "base_offset": -1, "log_append_time": -1, "log_start_offset": -1,
            "error_code": error}


async def produce(ctx: RequestContext, request: Any) -> Any:
    ctx.broker.poll_metadata_if_stale()  # never append as a leader deposed during a stall
    acks = request.acks
    image = ctx.broker.image
    responses: list[dict[str, Any]] = []
    named: list[tuple[str | None, list[dict[str, Any]]]] = []
    commits: list[Commit] = []
    for topic in request.topic_data:
        # v13 names topics by id (KIP-516); an id no topic has is UNKNOWN_TOPIC_ID.
        topic_id = getattr(topic, "topic_id", None)
        name = topic.name if topic_id is None and hasattr(topic, "name") \
            else image.topic_name(topic_id)
        partitions = []
        for data in topic.partition_data:
            if name is None:
                partitions.append(_refused(data.index, ErrorCode.unknown_topic_id))
            elif acks not in (0, 1, -1):
                partitions.append(_refused(data.index, ErrorCode.invalid_required_acks))
            else:
                partitions.append(_append(ctx, name, data.index, data.records, acks, commits))
        named.append((name, partitions))
        responses.append({"name": name, "topic_id": topic_id, "partition_responses": partitions})
    if commits:
        await _await_commits(commits, millis(request.timeout) / 1000)
    if acks == 0:
        # An acks=0 producer reads no response, so Kafka reports a failed
        # partition by closing the connection (the client then refreshes metadata).
        failed = any(p["error_code"] != NONE for _, partitions in named for p in partitions)
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    endpoints = leader_hints(ctx, named, "index")
    return {"responses": responses, "throttle_time": 0, "node_endpoints": endpoints}


# KIP-951: errors after which the client's metadata names the wrong leader.
_STALE_LEADER_ERRORS = frozenset({ErrorCode.not_leader_or_follower,
                                  ErrorCode.fenced_leader_epoch})


def leader_hints(ctx: RequestContext, topics: Iterable[tuple[str | None, list[dict[str, Any]]]],
                 index_key: str) -> list[dict[str, Any]]:
    """KIP-951 (Produce v10+, Fetch v16+): a partition answered NOT_LEADER_OR_FOLLOWER
    (or, in Fetch, FENCED_LEADER_EPOCH) gets ``current_leader`` (id and epoch, as this
    broker's metadata has them) and the answer the leaders' endpoints, so the client
    moves without a Metadata round trip. Returns those endpoints; older versions drop
    both fields when the response is shaped."""
    image = ctx.broker.image
    leaders: set[int] = set()
    for name, partitions in topics:
        for result in partitions:
            if result.get("error_code") not in _STALE_LEADER_ERRORS or name is None:
                continue
            state = image.partition(name, result[index_key])
            if state is not None and state.leader >= 0:
                result["current_leader"] = {"leader_id": state.leader,
                                            "leader_epoch": state.leader_epoch}
                leaders.add(state.leader)
    listener = ctx.session.listener if ctx.session is not None else None
    endpoints = []
    for broker_id in sorted(leaders):
        broker = image.brokers.get(broker_id)
        address = broker.endpoint(listener) if broker is not None else None
        if broker is not None and address is not None:
            endpoints.append({"node_id": broker_id, "host": address[0], "port": address[1],
                              "rack": broker.rack})
    return endpoints


# -- Fetch --------------------------------------------------------------------------
def check_leader_epoch(partition: Partition, requested: int) -> int:
    if requested < 0:
        return NONE
    if requested < partition.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if requested > partition.leader_epoch:
        return ErrorCode.unknown_leader_epoch
    return NONE


# -- ListOffsets --------------------------------------------------------------------
def _list_offset(ctx: RequestContext, topic: str, request: Any, replica_id: int,
                 read_committed: bool) -> dict[str, Any]:
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
    if ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        result["offset"] = plog.log_start_offset
    elif ts == LATEST_TIERED_TIMESTAMP:
        pass  # no tiered offset: -1 with no error, as Kafka without remote storage
    elif ts == LATEST_TIMESTAMP:
        # Replicas and debugging tools (replica id -2, as in Kafka) see the LEO.
        if replica_id != -1:
            result["offset"] = plog.log_end_offset
        elif read_committed:
            result["offset"] = partition.last_stable_offset
        else:
            result["offset"] = partition.high_watermark
    elif ts == MAX_TIMESTAMP:
        found = plog.max_timestamp_and_offset()
        if found is not None:
            result["timestamp"], result["offset"] = found
    else:
        first = plog.offset_for_timestamp(ts)
        if first is not None and first[0] < partition.high_watermark:
            result["offset"], result["timestamp"] = first
    if result["offset"] >= 0:
        result["leader_epoch"] = partition.leader_epoch
    return result


async def list_offsets(ctx: RequestContext, request: Any) -> dict[str, Any]:
    read_committed = getattr(request, "isolation_level", 0) == 1  # v2+
    return {
        "throttle_time": 0,
        "topics": [
            {"name": t.name,
             "partitions": [_list_offset(ctx, t.name, p, request.replica_id, read_committed)
                            for p in t.partitions]}
            for t in request.topics
        ],
    }


# -- InitProducerId -----------------------------------------------------------------
MAX_PRODUCER_EPOCH = 32767


async def init_producer_id(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        return await init_transactional_producer(ctx, request)
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
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
}
