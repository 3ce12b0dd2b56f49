"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions (configs are in
``configs.py``).

Changes are applied by the controller: other brokers forward them to it
(:mod:`slog.broker.forwarding`), so these handlers run on the controller. The
NOT_CONTROLLER answers below are for a controller deposed mid-request, and for
clusters where forwarding is off (an authorizer without SASL); the client then
retries against the controller named in Metadata.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE, NOT_CONTROLLER
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.replication.controller import ControllerError, CreatedTopic, NewTopic


def _error(exc: ControllerError) -> dict[str, Any]:
    return {"error_code": exc.code, "error_message": str(exc)}


def _not_controller() -> dict[str, Any]:
    return {"error_code": NOT_CONTROLLER, "error_message": "this broker is not the controller"}


# -- topics ---------------------------------------------------------------------------
def _new_topic(t: Any) -> NewTopic:
    return NewTopic(
        name=t.name,
        num_partitions=t.num_partitions,
        replication_factor=t.replication_factor,
        assignment={a.partition_index: list(a.broker_ids) for a in t.assignments},
        configs={c.name: c.value for c in t.configs if c.value is not None},
    )


def _created_entry(ctx: RequestContext, created: CreatedTopic) -> dict[str, Any]:
    values = ctx.broker.config.effective_topic_config(created.configs)
    return {
        "name": created.name,
        "topic_id": created.topic_id,
        "error_code": NONE,
        "error_message": None,
        "num_partitions": created.num_partitions,
        "replication_factor": created.replication_factor,
        "configs": [
            {"name": k, "value": v, "read_only": False, "config_source": int(source),
             "is_sensitive": False}
            for k, (v, source) in sorted(values.items())
        ],
    }


async def create_topics(ctx: RequestContext, request: Any) -> dict[str, Any]:
    controller = ctx.broker.controller
    if controller is None:
        return {"throttle_time": 0,
                "topics": [{"name": t.name, **_not_controller()} for t in request.topics]}
    # Kafka answers a name given twice once, with INVALID_REQUEST, and creates
    # nothing for it; librdkafka rejects a response that lists a topic twice.
    counts = Counter(t.name for t in request.topics)
    duplicates = [name for name, n in counts.items() if n > 1]
    specs = [_new_topic(t) for t in request.topics if counts[t.name] == 1]
    validate_only = getattr(request, "validate_only", False)
    outcomes = controller.create_topics(specs, validate_only=validate_only)
    topics = [{"name": name, "num_partitions": -1, "replication_factor": -1,
               "error_code": ErrorCode.invalid_request,
               "error_message": "the topic is named more than once in the request"}
              for name in duplicates]
    for spec, outcome in zip(specs, outcomes, strict=True):
        if isinstance(outcome, ControllerError):
            topics.append({"name": spec.name, "num_partitions": -1, "replication_factor": -1,
                           **_error(outcome)})
        else:
            topics.append(_created_entry(ctx, outcome))
    return {"throttle_time": 0, "topics": topics}


async def delete_topics(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if ctx.version >= 6:
        names = [t.name if t.name is not None else _name_for_id(ctx, t.topic_id)
                 for t in request.topics]
    else:
        names = list(request.topic_names)
    controller = ctx.broker.controller
    if controller is None:
        return {"throttle_time": 0,
                "responses": [{"name": n, **_not_controller()} for n in names]}
    if not ctx.broker.config.get_bool("delete.topic.enable"):
        return {"throttle_time": 0, "responses": [
            {"name": n, "error_code": ErrorCode.topic_deletion_disabled} for n in names]}
    outcome = controller.delete_topics([n for n in names if n is not None])
    responses = []
    for name in names:
        error = outcome.get(name) if name is not None else ControllerError(
            ErrorCode.unknown_topic_id, "no topic has that id")
        entry: dict[str, Any] = {"name": name, "error_code": NONE, "error_message": None}
        if error is not None:
            entry.update(_error(error))
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}


def _name_for_id(ctx: RequestContext, topic_id: Any) -> str | None:
    return ctx.broker.image.topic_name(topic_id)


async def create_partitions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    controller = ctx.broker.controller
    results = []
    for topic in request.topics:
        entry: dict[str, Any] = {"name": topic.name, "error_code": NONE, "error_message": None}
        if controller is None:
            entry.update(_not_controller())
        else:
            assignment = [list(a.broker_ids) for a in topic.assignments] \
                if topic.assignments else None
            try:
                controller.create_partitions(topic.name, topic.count, assignment,
                                             validate_only=request.validate_only)
            except ControllerError as exc:
                entry.update(_error(exc))
        results.append(entry)
    return {"throttle_time": 0, "results": results}


HANDLERS = {
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions,
}
