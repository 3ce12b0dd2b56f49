"""Replication APIs: OffsetForLeaderEpoch (followers truncating), AlterPartition
(leaders asking the controller for ISR changes) and ElectLeaders (admins)."""

from __future__ import annotations

from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE, NOT_CONTROLLER, NOT_LEADER, UNKNOWN_TOPIC
from slog.broker.handlers.data import check_leader_epoch
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.replication.controller import ControllerError, IsrChange

ELECTION_PREFERRED = 0


async def offset_for_leader_epoch(ctx: RequestContext, request: Any) -> dict[str, Any]:
    """Where does ``leader_epoch`` end in the leader's log? (KIP-101, KIP-279)"""
    topics = []
    for topic in request.topics:
        results = []
        for entry in topic.partitions:
            result: dict[str, Any] = {"partition": entry.partition, "leader_epoch": -1,
                                      "end_offset": -1, "error_code": NONE}
            partition = ctx.broker.replicas.get(topic.topic, entry.partition)
            if partition is None:
                result["error_code"] = UNKNOWN_TOPIC
            elif not partition.is_leader:
                result["error_code"] = NOT_LEADER
            else:
                result["error_code"] = check_leader_epoch(partition, entry.current_leader_epoch)
                if result["error_code"] == NONE:
                    epoch, end = partition.log.leader_epoch_cache.end_offset_for(
                        entry.leader_epoch, partition.log.log_end_offset)
                    result.update(leader_epoch=epoch, end_offset=end)
            results.append(result)
        topics.append({"topic": topic.topic, "partitions": results})
    return {"throttle_time": 0, "topics": topics}


async def alter_partition(ctx: RequestContext, request: Any) -> dict[str, Any]:
    controller = ctx.broker.controller
    if controller is None:
        return {"throttle_time": 0, "error_code": NOT_CONTROLLER, "topics": []}
    names = {t.topic_id: t.name for t in ctx.broker.image.topics.values()}
    # Every partition of the request is decided together: one metadata append.
    entries = [(topic, entry) for topic in request.topics for entry in topic.partitions]
    known = [(topic, entry) for topic, entry in entries if str(topic.topic_id) in names]
    decided = controller.alter_partitions(request.broker_id, [
        IsrChange(names[str(topic.topic_id)], entry.partition_index, entry.leader_epoch,
                  entry.partition_epoch, tuple(entry.new_isr)) for topic, entry in known])
    outcome = {id(entry): result for (_, entry), result in zip(known, decided, strict=True)}
    topics = []
    for topic in request.topics:
        results = []
        for entry in topic.partitions:
            result: dict[str, Any] = {"partition_index": entry.partition_index,
                                      "error_code": NONE, "leader_id": -1, "leader_epoch": -1,
                                      "isr": [], "leader_recovery_state": 0,
                                      "partition_epoch": -1}
            state = outcome.get(id(entry), ControllerError(ErrorCode.unknown_topic_id,
                                                           "no topic has that id"))
            if isinstance(state, ControllerError):
                result["error_code"] = state.code
            else:
                result.update(leader_id=state.leader, leader_epoch=state.leader_epoch,
                              isr=list(state.isr), partition_epoch=state.partition_epoch)
            results.append(result)
        topics.append({"topic_id": topic.topic_id, "partitions": results})
    return {"throttle_time": 0, "error_code": NONE, "topics": topics}


async def elect_leaders(ctx: RequestContext, request: Any) -> dict[str, Any]:
    preferred = getattr(request, "election_type", ELECTION_PREFERRED) == ELECTION_PREFERRED
    wanted = None if request.topic_partitions is None else [
        (t.topic, p) for t in request.topic_partitions for p in t.partitions]
    controller = ctx.broker.controller
    if controller is None:
        return {"throttle_time": 0, "error_code": NOT_CONTROLLER,
                "replica_election_results": []}
    outcome = controller.elect_leaders(preferred, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, number), error in outcome.items():
        if wanted is None and error is not None and error.code is ErrorCode.election_not_needed:
            continue  # "every partition": report only the ones that could change
        by_topic.setdefault(topic, []).append({
            "partition_id": number,
            "error_code": error.code if error else NONE,
            "error_message": str(error) if error else None,
        })
    return {"throttle_time": 0, "error_code": NONE, "replica_election_results": [
        {"topic": topic, "partition_result": results} for topic, results in by_topic.items()]}


HANDLERS = {
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    ApiKey.ALTER_PARTITION: alter_partition,
    ApiKey.ELECT_LEADERS: elect_leaders,
}
