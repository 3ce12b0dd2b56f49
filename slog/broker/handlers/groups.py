"""Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete.

Each handler translates between the request's version and the coordinator
(:mod:`slog.groups.coordinator`), which answers JoinGroup, SyncGroup and
OffsetCommit through callbacks; those handlers await a future the callback
resolves. FindCoordinator creates ``__consumer_offsets`` on first use, as Kafka
does (:mod:`slog.broker.topic_creator`, from any broker).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slog.broker.authorized_operations import NOT_REQUESTED, authorized_operations
from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE, answer_of, client_host
from slog.broker.offsets_topic import offsets_topic_spec
from slog.broker.transaction_state import transaction_topic_spec
from slog.core.acls import Operation, ResourceType
from slog.groups.consumer_view import classic_summary
from slog.groups.coordinator import GroupCoordinator
from slog.groups.group import GroupSummary
from slog.groups.member import JoinResult, SyncResult
from slog.groups.offsets import NO_EPOCH, OffsetAndMetadata, TopicPartition
from slog.groups.placement import OFFSETS_TOPIC, partition_for
from slog.groups.requests import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.protocol.shapes import millis
from slog.replication.controller import NewTopic
from slog.transactions.coordinator import TRANSACTION_STATE_TOPIC
from slog.transactions.coordinator import partition_for as transaction_partition_for

if TYPE_CHECKING:
    from slog.core.config import BrokerConfig

log = logging.getLogger("slog.groups")

KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
NO_OFFSET = -1


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.broker.groups


# -- FindCoordinator ----------------------------------------------------------------------
# Each key type's internal topic, how it is made, and which of its partitions a key is in.
_COORDINATOR_TOPICS: dict[int, tuple[str, Callable[[BrokerConfig, int], NewTopic],
                                      Callable[[str, int], int]]] = {
    KEY_TYPE_GROUP: (OFFSETS_TOPIC, offsets_topic_spec, partition_for),
    KEY_TYPE_TRANSACTION: (TRANSACTION_STATE_TOPIC, transaction_topic_spec,
                           transaction_partition_for),
}


async def create_coordinator_topic(ctx: RequestContext, key_type: int) -> None:
    """Create the internal topic of ``key_type``'s coordinators (on first use)."""
    broker = ctx.broker
    topic, spec_of, _ = _COORDINATOR_TOPICS[key_type]
    error = await broker.topic_creator.create(spec_of(broker.config,
                                                      len(broker.image.live_brokers())))
    log.info("creating %s: %s", topic, error.name)


def _find_one(ctx: RequestContext, key: str, key_type: int, creating: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1,
                             "error_code": NONE, "error_message": None}

    def fail(error: ErrorCode, message: str) -> dict[str, Any]:
        entry.update(error_code=error, error_message=message)
        return entry

    if key_type not in _COORDINATOR_TOPICS:
        return fail(ErrorCode.invalid_request, f"unknown coordinator key type {key_type}")
    name, _, place = _COORDINATOR_TOPICS[key_type]
    if key_type == KEY_TYPE_TRANSACTION and not key:
        return fail(ErrorCode.invalid_request, "empty transactional id")
    image = ctx.broker.image
    topic = image.topics.get(name)
    if creating or topic is None or not topic.partitions:
        return fail(ErrorCode.coordinator_not_available, f"creating {name}")
    state = topic.partitions.get(place(key, len(topic.partitions)))
    node = image.brokers.get(state.leader) if state is not None else None
    if node is None or node.fenced:
        return fail(ErrorCode.coordinator_not_available,
                    f"the key's {name} partition has no leader")
    address = node.endpoint(ctx.session.listener if ctx.session is not None else None)
    if address is None:
        return fail(ErrorCode.coordinator_not_available,
                    "the coordinator has no endpoint on this listener")
    entry.update(node_id=node.broker_id, host=address[0], port=address[1])
    return entry


async def find_coordinator(ctx: RequestContext, request: Any) -> dict[str, Any]:
    key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
    creating = key_type in _COORDINATOR_TOPICS and \
        _COORDINATOR_TOPICS[key_type][0] not in ctx.broker.image.topics
    if creating:
        # As Kafka: created on first use, and this answer still says "not yet"
        # (the new partitions' coordinators have yet to load them).
        await create_coordinator_topic(ctx, key_type)
    if ctx.version >= 4:
        return {"throttle_time": 0, "coordinators": [
            _find_one(ctx, key, key_type, creating) for key in request.coordinator_keys]}
    found = _find_one(ctx, request.key, key_type, creating)
    del found["key"]
    return {"throttle_time": 0, **found}


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ------------------------------------------
async def join_group(ctx: RequestContext, request: Any) -> dict[str, Any]:
    v = ctx.version
    session = millis(request.session_timeout)
    rebalance = millis(request.rebalance_timeout) if v >= 1 else session
    instance = getattr(request, "group_instance_id", None)
    joining = JoinGroupRequest(
        request.group_id, request.member_id, instance, ctx.header.client_id or "",
        client_host(ctx), rebalance, session, request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=v >= 4 and instance is None, support_skip_assignment=v >= 9)
    consumers = ctx.broker.consumer_groups
    upgraded = consumers.classic_group(request.group_id)
    result: JoinResult
    if upgraded is not None:  # a consumer group serves its classic members
        result = await answer_of(
            lambda cb: consumers.handle_classic_join(upgraded, joining, cb))
    else:  # an empty KIP-848 group of that id becomes classic
        consumers.release_to_classic(request.group_id)
        result = await answer_of(lambda cb: _coordinator(ctx).handle_join_group(joining, cb))
    return {
        "throttle_time": 0, "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        # Before v7 the name is not nullable.
        "protocol_name": result.protocol_name if v >= 7 else (result.protocol_name or ""),
        "leader": result.leader_id, "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "metadata": m.metadata} for m in result.members],
    }


async def sync_group(ctx: RequestContext, request: Any) -> dict[str, Any]:
    protocol_type = getattr(request, "protocol_type", None)
    protocol_name = getattr(request, "protocol_name", None)
    if ctx.version >= 5 and (protocol_type is None or protocol_name is None):
        # Mandatory from v5 on.
        return {"throttle_time": 0, "error_code": ErrorCode.inconsistent_group_protocol}
    syncing = SyncGroupRequest(
        request.group_id, request.generation_id, request.member_id,
        getattr(request, "group_instance_id", None), protocol_type, protocol_name,
        {a.member_id: a.assignment for a in request.assignments})
    upgraded = ctx.broker.consumer_groups.classic_group(request.group_id)
    result: SyncResult = await answer_of(
        (lambda cb: ctx.broker.consumer_groups.handle_classic_sync(upgraded, syncing, cb))
        if upgraded is not None else
        (lambda cb: _coordinator(ctx).handle_sync_group(syncing, cb)))
    return {"throttle_time": 0, "error_code": result.error,
            "protocol_type": result.protocol_type, "protocol_name": result.protocol_name,
            "assignment": result.assignment}


async def heartbeat(ctx: RequestContext, request: Any) -> dict[str, Any]:
    upgraded = ctx.broker.consumer_groups.classic_group(request.group_id)
    if upgraded is not None:
        return {"throttle_time": 0, "error_code": ctx.broker.consumer_groups
                .handle_classic_heartbeat(upgraded, request.member_id, request.generation_id)}
    error = _coordinator(ctx).handle_heartbeat(HeartbeatRequest(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        request.generation_id))
    return {"throttle_time": 0, "error_code": error}


async def leave_group(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.version < 3:
        leaving = [(request.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    upgraded = ctx.broker.consumer_groups.classic_group(request.group_id)
    error, errors = _coordinator(ctx).handle_leave_group(request.group_id, leaving) \
        if upgraded is None else \
        ctx.broker.consumer_groups.handle_classic_leave(upgraded, leaving)
    if ctx.version < 3:  # one member: its error is the error
        single = errors[0] if errors and error is ErrorCode.none else error
        return {"throttle_time": 0, "error_code": single}
    return {"throttle_time": 0, "error_code": error, "members": [
        {"member_id": m, "group_instance_id": i, "error_code": e}
        for (m, i), e in zip(leaving, errors, strict=False)]}


# -- OffsetCommit / OffsetFetch / OffsetDelete -----------------------------------------------
def _known(ctx: RequestContext, topic: str, partition: int) -> bool:
    entry = ctx.broker.image.topics.get(topic)
    return entry is not None and partition in entry.partitions


def _topic_name(ctx: RequestContext, topic: Any) -> str | None:
    """The topic a request's entry names: by name, or from v10 on by id (KIP-848's
    OffsetCommit/OffsetFetch); None for an id no topic has."""
    if hasattr(topic, "name"):
        return str(topic.name)
    return ctx.broker.image.topic_name(topic.topic_id)


async def offset_commit(ctx: RequestContext, request: Any) -> dict[str, Any]:
    now = int(time.time() * 1000)
    retention = millis(getattr(request, "retention_time", None), -1)
    expire = now + retention if retention >= 0 else None
    named = [(topic, _topic_name(ctx, topic)) for topic in request.topics]
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    errors: dict[TopicPartition, ErrorCode] = {}
    for topic, name in named:
        if name is None:
            continue  # answered UNKNOWN_TOPIC_ID below
        for p in topic.partitions:
            tp = (name, p.partition_index)
            if not _known(ctx, *tp):
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            offsets[tp] = OffsetAndMetadata(
                p.committed_offset, getattr(p, "committed_leader_epoch", NO_EPOCH),
                p.committed_metadata or "", now, expire)
    consumer_group = ctx.broker.consumer_groups.group(request.group_id)
    if offsets and consumer_group is not None:
        # v9's generation_id_or_member_epoch: a KIP-848 member's epoch.
        stored: dict[TopicPartition, ErrorCode] = await answer_of(
            lambda cb: ctx.broker.consumer_groups.handle_commit_offsets(
                consumer_group, request.member_id, request.generation_id_or_member_epoch,
                offsets, cb, version=ctx.version))
        errors.update(stored)
    elif offsets:
        # v9's generation_id_or_member_epoch is the generation for a classic group.
        commit = OffsetCommitRequest(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            request.generation_id_or_member_epoch, offsets,
            report_unknown_group=ctx.version >= 9)
        committed: dict[TopicPartition, ErrorCode] = await answer_of(
            lambda cb: _coordinator(ctx).handle_commit_offsets(commit, cb))
        errors.update(committed)
    return {"throttle_time": 0, "topics": [
        {"name": name, "topic_id": getattr(t, "topic_id", None), "partitions": [
            {"partition_index": p.partition_index,
             "error_code": ErrorCode.unknown_topic_id if name is None
             else errors.get((name, p.partition_index), ErrorCode.none)}
            for p in t.partitions]}
        for t, name in named]}


def _fetched_topics(ctx: RequestContext,
                    offsets: dict[TopicPartition, OffsetAndMetadata | None],
                    partition_error: ErrorCode = ErrorCode.none) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in offsets.items():
        topics.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": NO_OFFSET if value is None else value.offset,
            "committed_leader_epoch": NO_EPOCH if value is None else value.leader_epoch,
            "metadata": "" if value is None else value.metadata,
            "error_code": partition_error})
    image = ctx.broker.image.topics
    answered = [{"name": name, "topic_id": image[name].topic_id if name in image else None,
                 "partitions": parts} for name, parts in topics.items()]
    if ctx.version >= 10:
        # Topics by id: one without an id (deleted since) cannot be named in the answer.
        answered = [t for t in answered if t["topic_id"] is not None]
    return answered


def _unknown_ids(topics: Any) -> list[dict[str, Any]]:
    """v10's answer for topics requested by an id no topic has."""
    return [{"topic_id": t.topic_id, "partitions": [
        {"partition_index": p, "committed_offset": NO_OFFSET, "metadata": "",
         "error_code": ErrorCode.unknown_topic_id} for p in t.partition_indexes]}
        for t in topics]


def _fetch_request(ctx: RequestContext, group_id: str, topics: Any, member_id: str | None,
                   member_epoch: int, require_stable: bool
                   ) -> tuple[OffsetFetchRequest, list[dict[str, Any]]]:
    """One group's OffsetFetch for the coordinator, and the answer for topics requested by
    an id no topic has (v10)."""
    named = None if topics is None else [(t, _topic_name(ctx, t)) for t in topics]
    wanted = None if named is None else \
        [(name, p) for t, name in named if name is not None for p in t.partition_indexes]
    unknown = _unknown_ids(t for t, name in named or () if name is None)
    return OffsetFetchRequest(group_id, wanted, member_id, member_epoch, require_stable), unknown


def _fetch_group(ctx: RequestContext, request: OffsetFetchRequest,
                 unknown: list[dict[str, Any]]) -> dict[str, Any]:
    consumer_group = ctx.broker.consumer_groups.group(request.group_id)
    if consumer_group is not None:
        error, offsets = ctx.broker.consumer_groups.handle_fetch_offsets(consumer_group, request)
    else:
        error, offsets = _coordinator(ctx).handle_fetch_offsets(request)
    wanted = request.partitions
    if error is not ErrorCode.none:
        if ctx.version < 2:  # no top-level error yet: every partition carries it
            return {"topics": _fetched_topics(ctx, dict.fromkeys(wanted or ()), error),
                    "error_code": error}
        return {"topics": [], "error_code": error}
    if wanted is None:
        # All of the group's offsets: only for topics the principal may describe (as
        # Kafka does; named topics were checked before the handler ran).
        offsets = {tp: offset for tp, offset in offsets.items()
                   if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, tp[0])}
    answered = _fetched_topics(ctx, offsets)
    if request.require_stable:
        _mark_unstable(ctx, request.group_id, answered)
    return {"topics": answered + unknown, "error_code": NONE}


def _mark_unstable(ctx: RequestContext, group_id: str, topics: list[dict[str, Any]]) -> None:
    """KIP-447 (v7+ with require_stable): a partition whose offset a transaction has
    committed but whose marker has not arrived yet is UNSTABLE_OFFSET_COMMIT; the
    client asks again."""
    pending = ctx.broker.pending_txn_offsets.partitions_of(group_id)
    for topic in topics if pending else ():
        for entry in topic["partitions"]:
            if (topic["name"], entry["partition_index"]) in pending:
                entry.update(error_code=ErrorCode.unstable_offset_commit,
                             committed_offset=NO_OFFSET)


async def offset_fetch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    stable = getattr(request, "require_stable", False)
    if ctx.version >= 8:
        # v9's member id and epoch only concern KIP-848 groups.
        return {"throttle_time": 0, "groups": [
            {"group_id": g.group_id, **_fetch_group(ctx, *_fetch_request(
                ctx, g.group_id, g.topics, getattr(g, "member_id", None),
                getattr(g, "member_epoch", -1), stable))}
            for g in request.groups]}
    return {"throttle_time": 0, **_fetch_group(ctx, *_fetch_request(
        ctx, request.group_id, request.topics, None, -1, stable))}


async def offset_delete(ctx: RequestContext, request: Any) -> dict[str, Any]:
    requested = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    known = [tp for tp in requested if _known(ctx, *tp)]
    consumer_group = ctx.broker.consumer_groups.group(request.group_id)
    if consumer_group is not None:
        error, errors = ctx.broker.consumer_groups.handle_delete_offsets(consumer_group, known)
    else:
        error, errors = _coordinator(ctx).handle_delete_offsets(request.group_id, known)
    if error is not ErrorCode.none:
        return {"throttle_time": 0, "error_code": error, "topics": []}
    return {"throttle_time": 0, "error_code": NONE, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": errors.get((t.name, p.partition_index),
                                      ErrorCode.unknown_topic_or_partition)}
            for p in t.partitions]}
        for t in request.topics]}


# -- DescribeGroups / ListGroups / DeleteGroups ----------------------------------------------
def _described(group_id: str, error: ErrorCode, summary: GroupSummary, operations: int,
               version: int) -> dict[str, Any]:
    message = None
    if error is ErrorCode.group_id_not_found:
        if version < 6:  # before KIP-1043 an unknown group is described as Dead
            error = ErrorCode.none
        else:
            message = f"group {group_id!r} does not exist"
    failed = error is not ErrorCode.none
    return {
        "error_code": error, "error_message": message, "group_id": group_id,
        "group_state": "" if failed else summary.state,
        "protocol_type": "" if failed else summary.protocol_type,
        "protocol_data": "" if failed else summary.protocol,
        "members": [] if failed else [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "client_id": m.client_id, "client_host": m.client_host,
             "member_metadata": m.metadata, "member_assignment": m.assignment}
            for m in summary.members],
        "authorized_operations": operations,
    }


async def describe_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    with_operations = getattr(request, "include_authorized_operations", False)
    coordinator = _coordinator(ctx)

    def summary(group_id: str) -> tuple[ErrorCode, GroupSummary]:
        consumer_group = ctx.broker.consumer_groups.group(group_id)
        if consumer_group is not None:  # a KIP-848 group, described in the classic shape
            return ErrorCode.none, classic_summary(consumer_group, ctx.broker.image.topic_name)
        return coordinator.handle_describe_group(group_id)

    return {"throttle_time": 0, "groups": [
        _described(g, *summary(g),
                   authorized_operations(ctx.allowed, ResourceType.GROUP, g)
                   if with_operations else NOT_REQUESTED, ctx.version)
        for g in request.groups]}


async def list_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    states, types = getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
    error, groups = _coordinator(ctx).handle_list_groups(states, types)
    groups += ctx.broker.consumer_groups.list_groups(states, types)
    return {"throttle_time": 0, "error_code": error, "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type,
         "group_state": g.state, "group_type": g.group_type} for g in groups
        if ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]}  # as Kafka


async def delete_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    consumer = ctx.broker.consumer_groups
    kip848 = [g for g in request.groups_names if consumer.group(g) is not None]
    errors = _coordinator(ctx).handle_delete_groups(
        [g for g in request.groups_names if g not in kip848])
    errors.update({g: consumer.delete_group(g) for g in kip848})
    return {"throttle_time": 0, "results": [
        {"group_id": g, "error_code": errors[g]} for g in request.groups_names]}


HANDLERS = {
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.OFFSET_DELETE: offset_delete,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.DELETE_GROUPS: delete_groups,
}
