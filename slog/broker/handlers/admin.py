"""Topic and config administration: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs and IncrementalAlterConfigs.

Changes go through the controller; a broker that is not the controller answers
NOT_CONTROLLER so the client retries against the one named in Metadata.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import INVALID_TOPIC, NONE, NOT_CONTROLLER, UNKNOWN_TOPIC, code
from slog.core.config import SENSITIVE_BROKER_SETTINGS, TOPIC_CONFIGS, ConfigSource
from slog.core.errors import InvalidTopicError
from slog.core.names import validate_topic_name
from slog.protocol.apis import ApiKey
from slog.replication.controller import ControllerError, CreatedTopic, NewTopic

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
# DescribeConfigs v3+ config types.
TYPE_BOOLEAN, TYPE_STRING, TYPE_LONG, TYPE_LIST = 1, 2, 5, 7
_LIST_CONFIGS = {"cleanup.policy"}


def _error(exc: ControllerError) -> dict[str, Any]:
    return {"error_code": code(exc.code), "error_message": str(exc)}


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
               "error_code": code("invalid_request"),
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
            {"name": n, "error_code": code("topic_deletion_disabled")} for n in names]}
    outcome = controller.delete_topics([n for n in names if n is not None])
    responses = []
    for name in names:
        error = outcome.get(name) if name is not None else ControllerError(
            "unknown_topic_id", "no topic has that id")
        entry: dict[str, Any] = {"name": name, "error_code": NONE, "error_message": None}
        if error is not None:
            entry.update(_error(error))
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}


def _name_for_id(ctx: RequestContext, topic_id: Any) -> str | None:
    wanted = str(topic_id)
    return next((t.name for t in ctx.broker.image.topics.values() if t.topic_id == wanted), None)


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


# -- configs --------------------------------------------------------------------------
def _invalid_topic(name: str) -> dict[str, Any] | None:
    """INVALID_TOPIC_EXCEPTION for a name no topic can have, as Kafka's Topic.validate."""
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        return {"error_code": INVALID_TOPIC, "error_message": str(exc)}
    return None


def _config_type(name: str, value: str) -> int:
    if name in _LIST_CONFIGS:
        return TYPE_LIST
    if value in ("true", "false"):
        return TYPE_BOOLEAN
    return TYPE_LONG if value.lstrip("-").isdigit() else TYPE_STRING


def _describe_topic(ctx: RequestContext, resource: Any, synonyms: bool) -> dict[str, Any]:
    name = resource.resource_name
    entry: dict[str, Any] = {"resource_type": RESOURCE_TOPIC, "resource_name": name,
                             "error_code": NONE, "error_message": None, "configs": []}
    invalid = _invalid_topic(name)
    if invalid is not None:
        entry.update(invalid)
        return entry
    topic = ctx.broker.image.topics.get(name)
    if topic is None:
        entry.update(error_code=UNKNOWN_TOPIC, error_message=f"topic {name!r} does not exist")
        return entry
    config = ctx.broker.config
    wanted = set(resource.configuration_keys) if resource.configuration_keys else None
    for key, (value, source) in sorted(config.effective_topic_config(topic.configs).items()):
        if wanted is not None and key not in wanted:
            continue
        chain = []
        if synonyms:
            if key in topic.configs:
                chain.append({"name": key, "value": value,
                              "source": int(ConfigSource.DYNAMIC_TOPIC_CONFIG)})
            broker_key = TOPIC_CONFIGS[key].broker_key
            chain.append({"name": broker_key, "value": config.values[broker_key],
                          "source": int(ConfigSource.STATIC_BROKER_CONFIG
                                        if broker_key in config.overridden
                                        else ConfigSource.DEFAULT_CONFIG)})
        entry["configs"].append({
            "name": key, "value": value, "read_only": False, "config_source": int(source),
            "is_default": source == ConfigSource.DEFAULT_CONFIG, "is_sensitive": False,
            "synonyms": chain, "config_type": _config_type(key, value), "documentation": None,
        })
    return entry


def _describe_broker(ctx: RequestContext, resource: Any) -> dict[str, Any]:
    config = ctx.broker.config
    entry: dict[str, Any] = {"resource_type": RESOURCE_BROKER,
                             "resource_name": resource.resource_name,
                             "error_code": NONE, "error_message": None, "configs": []}
    if resource.resource_name not in ("", str(config.broker_id)):
        entry.update(error_code=code("invalid_request"),
                     error_message=f"this is broker {config.broker_id}")
        return entry
    wanted = set(resource.configuration_keys) if resource.configuration_keys else None
    for key, value in sorted(config.values.items()):
        if wanted is not None and key not in wanted:
            continue
        source = ConfigSource.STATIC_BROKER_CONFIG if key in config.overridden \
            else ConfigSource.DEFAULT_CONFIG
        sensitive = key in SENSITIVE_BROKER_SETTINGS
        entry["configs"].append({
            "name": key, "value": None if sensitive else value, "read_only": True,
            "config_source": int(source),
            "is_default": source == ConfigSource.DEFAULT_CONFIG, "is_sensitive": sensitive,
            "synonyms": [], "config_type": _config_type(key, value), "documentation": None,
        })
    return entry


async def describe_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    synonyms = getattr(request, "include_synonyms", False)
    results = []
    for resource in request.resources:
        if resource.resource_type == RESOURCE_TOPIC:
            results.append(_describe_topic(ctx, resource, synonyms))
        elif resource.resource_type == RESOURCE_BROKER:
            results.append(_describe_broker(ctx, resource))
        else:
            results.append({"resource_type": resource.resource_type,
                            "resource_name": resource.resource_name,
                            "error_code": code("invalid_request"),
                            "error_message": "only topic and broker configs exist", "configs": []})
    return {"throttle_time": 0, "results": results}


def _apply_ops(current: dict[str, str], ops: Any) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for op in ops:
        if op.config_operation == OP_SET:
            changes[op.name] = op.value
        elif op.config_operation == OP_DELETE:
            changes[op.name] = None
        elif op.name in _LIST_CONFIGS:
            items = [i for i in (changes.get(op.name) or current.get(op.name, "")).split(",") if i]
            new = [v for v in (op.value or "").split(",") if v]
            if op.config_operation == OP_APPEND:
                items += [v for v in new if v not in items]
            else:
                items = [i for i in items if i not in new]
            changes[op.name] = ",".join(items) or None
        else:
            raise ControllerError("invalid_config",
                                  f"APPEND/SUBTRACT only apply to list configs, not {op.name}")
    return changes


async def incremental_alter_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    controller = ctx.broker.controller
    responses = []
    for resource in request.resources:
        entry: dict[str, Any] = {"resource_type": resource.resource_type,
                                 "resource_name": resource.resource_name,
                                 "error_code": NONE, "error_message": None}
        if resource.resource_type != RESOURCE_TOPIC:
            entry.update(error_code=code("invalid_request"),
                         error_message="broker configs are static: pass --config at start-up")
        elif controller is None:
            entry.update(_not_controller())
        elif (invalid := _invalid_topic(resource.resource_name)) is not None:
            entry.update(invalid)
        else:
            topic = ctx.broker.image.topics.get(resource.resource_name)
            try:
                changes = _apply_ops(topic.configs if topic else {}, resource.configs)
                controller.alter_topic_configs(resource.resource_name, changes,
                                               validate_only=request.validate_only)
            except ControllerError as exc:
                entry.update(_error(exc))
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}


HANDLERS = {
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
}
