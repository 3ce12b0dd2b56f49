"""Transactional APIs: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn (the coordinator, :mod:`slog.transactions.coordinator`),
TxnOffsetCommit (the group coordinator holds the offsets until the marker),
WriteTxnMarkers (partition leaders, sent by coordinators and by the admin's abort
of a hanging transaction), and KIP-664's DescribeTransactions, ListTransactions
(coordinators) and DescribeProducers (partition leaders).

Clients older than KIP-588 know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH: the
answer is translated below the version that introduced it, as Kafka does.
"""

from __future__ import annotations

import time
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE
from slog.broker.handlers.groups import KEY_TYPE_GROUP, create_coordinator_topic
from slog.broker.transaction_state import write_marker, write_txn_offsets
from slog.core.acls import Operation, ResourceType
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.groups.offsets import NO_EPOCH, OffsetAndMetadata, TopicPartition
from slog.groups.placement import OFFSETS_TOPIC, partition_for
from slog.groups.requests import OffsetCommitRequest
from slog.protocol.apis import ApiKey
from slog.protocol.shapes import millis
from slog.transactions.coordinator import TransactionCoordinator
from slog.transactions.metadata import TransactionState

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
        # No group has been used yet. Create the offsets topic, as FindCoordinator
        # would, so the client's retry finds its partition: clients send this before
        # they look the group's coordinator up (kafka-python then retried forever).
        await create_coordinator_topic(ctx, KEY_TYPE_GROUP)
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
        error = await write_txn_offsets(ctx.broker, request.producer_id,
                                        request.producer_epoch, request.group_id, offsets)
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


# -- DescribeTransactions / ListTransactions / DescribeProducers (KIP-664) -------------------
# No transaction open: Kafka sends -1, which kio (and so slog's own checks of its
# answers) refuses to read as a timestamp; 0 says the same to every client.
NO_START_TIME = 0


def _may_describe(ctx: RequestContext, transactional_id: str) -> bool:
    return ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _described(ctx: RequestContext, transactional_id: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"transactional_id": transactional_id, "transaction_state": "",
                             "transaction_timeout": 0, "transaction_start_time": NO_START_TIME,
                             "producer_id": -1, "producer_epoch": -1, "topics": []}
    if not _may_describe(ctx, transactional_id):
        return {**entry, "error_code": ErrorCode.transactional_id_authorization_failed}
    try:
        meta = _coordinator(ctx).describe(transactional_id)
    except KafkaApiError as exc:
        return {**entry, "error_code": exc.code}
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(index)
    return {**entry, "error_code": NONE, "transaction_state": meta.state.kafka_name,
            "transaction_timeout": meta.timeout_ms,
            "transaction_start_time": max(meta.start_ms, NO_START_TIME),
            "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
            "topics": [{"topic": t, "partitions": p} for t, p in by_topic.items()]}


async def describe_transactions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "transaction_states": [
        _described(ctx, txn_id) for txn_id in request.transactional_ids]}


async def list_transactions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    states = set(request.state_filters)
    known = {state.kafka_name for state in TransactionState}
    answer: dict[str, Any] = {"throttle_time": 0, "error_code": NONE,
                              "unknown_state_filters": sorted(states - known),
                              "transaction_states": []}
    try:
        found = _coordinator(ctx).list_transactions(
            states & known if states else (), set(request.producer_id_filters),
            getattr(request, "duration_filter", -1))
    except KafkaApiError as exc:
        return {**answer, "error_code": exc.code}
    if states and not states & known:
        found = []  # only unknown states asked for: nothing matches
    answer["transaction_states"] = [
        {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
         "transaction_state": m.state.kafka_name}
        for m in found if _may_describe(ctx, m.transactional_id)]
    return answer


def _producers_of(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": index, "error_code": NONE,
                             "error_message": None, "active_producers": []}
    partition = ctx.broker.replicas.get(topic, index)
    if partition is None or not partition.is_leader:
        known = ctx.broker.image.partition(topic, index) is not None
        return {**entry, "error_code": ErrorCode.not_leader_or_follower if known
                else ErrorCode.unknown_topic_or_partition}
    ongoing = partition.transactions.ongoing
    entry["active_producers"] = [
        {"producer_id": producer_id, "producer_epoch": state.epoch,
         "last_sequence": state.last_seq,
         "last_timestamp": state.batches[-1].timestamp if state.batches else -1,
         "coordinator_epoch": -1, "current_txn_start_offset": ongoing.get(producer_id, -1)}
        for producer_id, state in partition.producers.entries()]
    return entry


async def describe_producers(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [_producers_of(ctx, t.name, p)
                                        for p in t.partition_indexes]}
        for t in request.topics]}


HANDLERS = {
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions,
    ApiKey.LIST_TRANSACTIONS: list_transactions,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    ApiKey.END_TXN: end_txn,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers,
}
