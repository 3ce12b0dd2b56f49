"""Partition reassignment APIs (KIP-455): AlterPartitionReassignments and
ListPartitionReassignments.

Alter changes metadata, so only the controller serves it (other brokers
forward it, :mod:`slog.broker.forwarding`); the steps themselves run on the
controller's tick (``Controller.maintain_reassignments``). List reads this
broker's metadata image, which every broker has.
"""

from __future__ import annotations

from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE, NOT_CONTROLLER
from slog.protocol.apis import ApiKey
from slog.replication.reassignment import in_progress


async def alter_partition_reassignments(ctx: RequestContext, request: Any) -> dict[str, Any]:
    controller = ctx.broker.controller
    # v1 (KIP-860): the client may forbid replication factor changes; echoed back.
    allow_rf_change = getattr(request, "allow_replication_factor_change", True)
    if controller is None:
        return {"throttle_time": 0, "error_code": NOT_CONTROLLER,
                "error_message": "this broker is not the controller", "responses": [],
                "allow_replication_factor_change": allow_rf_change}
    targets = {(t.name, p.partition_index): None if p.replicas is None else list(p.replicas)
               for t in request.topics for p in t.partitions}
    outcome = controller.alter_reassignments(targets, allow_rf_change)
    responses = []
    for topic in request.topics:
        results = []
        for entry in topic.partitions:
            error = outcome[(topic.name, entry.partition_index)]
            results.append({"partition_index": entry.partition_index,
                            "error_code": error.code if error else NONE,
                            "error_message": str(error) if error else None})
        responses.append({"name": topic.name, "partitions": results})
    return {"throttle_time": 0, "error_code": NONE, "error_message": None,
            "responses": responses, "allow_replication_factor_change": allow_rf_change}


async def list_partition_reassignments(ctx: RequestContext, request: Any) -> dict[str, Any]:
    image = ctx.broker.image
    if request.topics is None:
        states = [s for s in image.all_partitions() if in_progress(s)]
    else:  # unknown topics and partitions are left out, as in Kafka
        wanted = ((t.name, p) for t in request.topics for p in t.partition_indexes)
        states = [s for key in wanted if (s := image.partition(*key)) is not None
                  and in_progress(s)]
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for state in states:
        by_topic.setdefault(state.topic, []).append({
            "partition_index": state.partition, "replicas": list(state.replicas),
            "adding_replicas": list(state.adding), "removing_replicas": list(state.removing)})
    return {"throttle_time": 0, "error_code": NONE, "error_message": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}


HANDLERS = {
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
}
