"""Transactional APIs: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn (the coordinator, :mod:`slog.transactions.coordinator`),
TxnOffsetCommit (the group coordinator holds the offsets until the marker), and
WriteTxnMarkers (partition leaders, sent by coordinators).

Clients older than KIP-588 know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH: the
answer is translated below the version that introduced it, as Kafka does.
"""

from __future__ import annotations

import time
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE
from slog.broker.transaction_state import write_marker
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.groups.offsets import NO_EPOCH, OffsetAndMetadata, TopicPartition
from slog.groups.placement import OFFSETS_TOPIC, partition_for
from slog.groups.requests import OffsetCommitRequest
from slog.protocol.apis import ApiKey
from slog.protocol.shapes import millis
from slog.transactions.coordinator import TransactionCoordinator

# The first version of each API that may answer PRODUCER_FENCED (KIP-588).
_FENCED_FROM = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
                ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2, ApiKey.TXN_OFFSET_COMMIT: 3}


def _coordinator(ctx: RequestContext) -> TransactionCoordinator:
    return ctx.broker.transactions


def _for_version(ctx: RequestContext, api_key: ApiKey, code: ErrorCode) -> ErrorCode:
    if code is ErrorCode.producer_fenced and ctx.version < _FENCED_FROM[api_key]:
        return ErrorCode.invalid_producer_epoch
    return code


def _error(ctx: RequestContext, api_key: ApiKey, exc: KafkaApiError) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": _for_version(ctx, api_key, exc.code)}


# -- InitProducerId (with a transactional id) -----------------------------------------------
async def init_transactional_producer(ctx: RequestContext, request: Any) -> dict[str, Any]:
    try:
        producer_id, epoch = await _coordinator(ctx).init_producer_id(
            request.transactional_id, millis(request.transaction_timeout),
            getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1))
    except KafkaApiError as exc:
        return {**_error(ctx, ApiKey.INIT_PRODUCER_ID, exc), "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": NONE, "producer_id": producer_id,
            "producer_epoch": epoch}


# -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------
async def add_partitions_to_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    asked = [(t.name, list(t.partitions)) for t in request.v3_and_below_topics]
    image = ctx.broker.image
    unknown = {(topic, p) for topic, parts in asked for p in parts
               if image.partition(topic, p) is None}
    errors: dict[tuple[str, int], ErrorCode] = {}
    if unknown:
        # As Kafka: nothing is added when a partition is unknown; the rest were not tried.
        for topic, parts in asked:
            for p in parts:
                errors[(topic, p)] = ErrorCode.unknown_topic_or_partition \
                    if (topic, p) in unknown else ErrorCode.operation_not_attempted
    else:
        wanted = {(topic, p) for topic, parts in asked for p in parts}
        code = ErrorCode.none
        try:
            await _coordinator(ctx).add_partitions(
                request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch, wanted)
        except KafkaApiError as exc:
            code = _for_version(ctx, ApiKey.ADD_PARTITIONS_TO_TXN, exc.code)
        errors = dict.fromkeys(wanted, code)
    return {"throttle_time": 0, "results_by_topic_v3_and_below": [
        {"name": topic, "results_by_partition": [
            {"partition_index": p, "partition_error_code": errors[(topic, p)]}
            for p in parts]}
        for topic, parts in asked]}


def _offsets_partition(ctx: RequestContext, group_id: str) -> tuple[str, int] | None:
    topic = ctx.broker.image.topics.get(OFFSETS_TOPIC)
    if topic is None or not topic.partitions:
        return None
    return OFFSETS_TOPIC, partition_for(group_id, len(topic.partitions))


async def add_offsets_to_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    found = _offsets_partition(ctx, request.group_id)
    if found is None:
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_not_available}
    try:
        await _coordinator(ctx).add_partitions(request.transactional_id, request.producer_id,
                                               request.producer_epoch, {found})
    except KafkaApiError as exc:
        return _error(ctx, ApiKey.ADD_OFFSETS_TO_TXN, exc)
    return {"throttle_time": 0, "error_code": NONE}


# -- EndTxn -----------------------------------------------------------------------------
async def end_txn(ctx: RequestContext, request: Any) -> dict[str, Any]:
    try:
        await _coordinator(ctx).end_transaction(request.transactional_id, request.producer_id,
                                                request.producer_epoch, request.committed)
    except KafkaApiError as exc:
        return _error(ctx, ApiKey.END_TXN, exc)
    return {"throttle_time": 0, "error_code": NONE}


# -- TxnOffsetCommit -----------------------------------------------------------------------
async def txn_offset_commit(ctx: RequestContext, request: Any) -> dict[str, Any]:
    now = int(time.time() * 1000)
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in request.topics:
        for p in topic.partitions:
            offsets[(topic.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, getattr(p, "committed_leader_epoch", NO_EPOCH),
                p.committed_metadata or "", now, None)
    commit = OffsetCommitRequest(
        request.group_id, getattr(request, "member_id", ""),
        getattr(request, "group_instance_id", None), getattr(request, "generation_id", -1),
        offsets)
    error = ctx.broker.groups.validate_txn_offset_commit(commit)
    if error is None:
        ctx.broker.pending_txn_offsets.add(request.producer_id, request.producer_epoch,
                                           request.group_id, offsets)
        code = ErrorCode.none
    else:
        code = _for_version(ctx, ApiKey.TXN_OFFSET_COMMIT, error)
    return {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": code} for p in t.partitions]}
        for t in request.topics]}


# -- WriteTxnMarkers (partition leaders) ------------------------------------------------------
async def write_txn_markers(ctx: RequestContext, request: Any) -> dict[str, Any]:
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                code = await write_marker(ctx.broker, topic.name, index, marker.producer_id,
                                          marker.producer_epoch, marker.transaction_result,
                                          marker.coordinator_epoch)
                partitions.append({"partition_index": index, "error_code": code})
            topics.append({"name": topic.name, "partitions": partitions})
        results.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": results}


HANDLERS = {
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    ApiKey.END_TXN: end_txn,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers,
}
