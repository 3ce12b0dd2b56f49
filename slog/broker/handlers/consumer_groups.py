"""KIP-848's APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

The request-level checks Kafka makes before a heartbeat reaches the group
(Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid) are here; the group
rules are in :mod:`slog.groups.consumer_group`, the persistence in
:mod:`slog.groups.consumer_coordinator`.
"""

from __future__ import annotations

from typing import Any

from slog.broker.authorized_operations import NOT_REQUESTED, authorized_operations
from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE, answer_of, client_host
from slog.core.acls import ResourceType
from slog.core.kafka_errors import KafkaApiError
from slog.groups.consumer_group import (
    JOIN_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerHeartbeat,
    HeartbeatOutcome,
    new_member_id,
)
from slog.groups.server_assignors import Assignment
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.protocol.shapes import millis

# ConsumerGroupDescribe v1's member_type: the protocol this member speaks.
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1


def _invalid(message: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.invalid_request, message)


def _heartbeat_request(ctx: RequestContext, request: Any) -> ConsumerHeartbeat:
    epoch = request.member_epoch
    member_id = request.member_id
    if not request.group_id:
        raise _invalid("GroupId can't be empty.")
    if not member_id:
        if ctx.version >= 1 or epoch != JOIN_EPOCH:
            raise _invalid("MemberId can't be empty.")
        member_id = new_member_id()  # v0: the coordinator names a joining member
    rebalance = millis(request.rebalance_timeout, -1)
    regex = getattr(request, "subscribed_topic_regex", None)  # v0 as kio has it: absent
    owned: Assignment | None = None
    if request.topic_partitions is not None:
        owned = frozenset((str(t.topic_id), p) for t in request.topic_partitions
                          for p in t.partitions)
    if epoch == JOIN_EPOCH:
        if rebalance < 0:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.subscribed_topic_names is None and regex is None:
            raise _invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                           "first request.")
        if owned:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        owned = frozenset()
    elif epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
        raise _invalid("InstanceId can't be null when leaving with epoch -2.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise _invalid(f"MemberEpoch {epoch} is invalid.")
    return ConsumerHeartbeat(
        member_id, epoch, ctx.header.client_id or "", client_host(ctx), request.instance_id,
        request.rack_id, rebalance,
        None if request.subscribed_topic_names is None
        else tuple(request.subscribed_topic_names),
        regex, request.server_assignor, owned)


def _by_topic(partitions: Assignment) -> list[dict[str, Any]]:
    topics: dict[str, list[int]] = {}
    for topic_id, index in partitions:
        topics.setdefault(topic_id, []).append(index)
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(topics.items())]


async def consumer_group_heartbeat(ctx: RequestContext, request: Any) -> dict[str, Any]:
    coordinator = ctx.broker.consumer_groups
    try:
        heartbeat = _heartbeat_request(ctx, request)
    except KafkaApiError as exc:
        return _failed(exc)
    result: HeartbeatOutcome | KafkaApiError = await answer_of(
        lambda cb: coordinator.handle_heartbeat(request.group_id, heartbeat, cb))
    if isinstance(result, KafkaApiError):
        return _failed(result)
    assignment = None if result.assignment is None else \
        {"topic_partitions": _by_topic(result.assignment)}
    return {"throttle_time": 0, "error_code": NONE, "error_message": None,
            "member_id": result.member_id, "member_epoch": result.member_epoch,
            "heartbeat_interval": coordinator.settings(request.group_id).heartbeat_interval_ms,
            "assignment": assignment}


def _failed(exc: KafkaApiError) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


def _named(ctx: RequestContext, partitions: Assignment) -> dict[str, Any]:
    """An Assignment of the describe answer: topics by id and by name."""
    rows = []
    for row in _by_topic(partitions):
        name = ctx.broker.image.topic_name(row["topic_id"])
        if name is not None:  # a topic deleted since is left out
            rows.append({**row, "topic_name": name})
    return {"topic_partitions": rows}


def _described(ctx: RequestContext, group: ConsumerGroup, operations: int) -> dict[str, Any]:
    return {
        "error_code": NONE, "error_message": None, "group_id": group.group_id,
        "group_state": group.state.value, "group_epoch": group.group_epoch,
        "assignment_epoch": group.target_epoch, "assignor_name": group.assignor_name(),
        "members": [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": _named(ctx, m.assigned),
            "target_assignment": _named(ctx, group.target.get(m.member_id, frozenset())),
            "member_type": MEMBER_TYPE_CONSUMER if m.classic is None else MEMBER_TYPE_CLASSIC,
        } for m in group.members.values()],
        "authorized_operations": operations,
    }


async def consumer_group_describe(ctx: RequestContext, request: Any) -> dict[str, Any]:
    coordinator = ctx.broker.consumer_groups
    groups = []
    for group_id in request.group_ids:
        operations = authorized_operations(ctx.allowed, ResourceType.GROUP, group_id) \
            if request.include_authorized_operations else NOT_REQUESTED
        try:
            groups.append(_described(ctx, coordinator.describe(group_id), operations))
        except KafkaApiError as exc:
            groups.append({"error_code": exc.code, "error_message": exc.message,
                           "group_id": group_id, "group_state": "Dead", "group_epoch": -1,
                           "assignment_epoch": -1, "assignor_name": "", "members": [],
                           "authorized_operations": operations})
    return {"throttle_time": 0, "groups": groups}


HANDLERS = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
}
