"""Config administration: DescribeConfigs, IncrementalAlterConfigs and the legacy
AlterConfigs, for TOPIC and BROKER resources.

A BROKER resource named "N" is broker N's dynamic configs, "" the cluster-wide
default. Describing broker N is answered by broker N (only it knows its static
settings; clients send it there); the default by any broker. Changes are
written by the controller as metadata records; other brokers forward the
requests to it (``slog.broker.forwarding``), so these handlers answer
NOT_CONTROLLER only when the controller moved while a request was forwarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.core.config import (
    BROKER_CONFIG_NAMES,
    DYNAMIC_BROKER_CONFIGS,
    SENSITIVE_BROKER_SETTINGS,
    ConfigSource,
    Synonym,
    topic_config_supplied_by,
)
from slog.core.errors import InvalidTopicError
from slog.core.group_config import effective_group_configs
from slog.core.names import validate_topic_name
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.replication.controller import ControllerError

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
# Kafka's other config resources; slog has none of them to list.
RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS = 8, 16
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
# DescribeConfigs v3+ config types.
TYPE_BOOLEAN, TYPE_STRING, TYPE_LONG, TYPE_LIST = 1, 2, 5, 7
_LIST_CONFIGS = {"cleanup.policy", "log.cleanup.policy"}

Changes = dict[str, str | None]
_INT32_MAX = 2**31 - 1  # broker ids are Kafka INT32s


def _failure(error: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": error, "error_message": message}


def _controller_failure(exc: ControllerError) -> dict[str, Any]:
    return _failure(exc.code, str(exc))


_NOT_CONTROLLER = _failure(ErrorCode.not_controller, "this broker is not the controller")


def _invalid_topic(name: str) -> dict[str, Any] | None:
    """INVALID_TOPIC_EXCEPTION for a name no topic can have, as Kafka's Topic.validate."""
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        return _failure(ErrorCode.invalid_topic_exception, str(exc))
    return None


def broker_resource_id(name: str) -> int | None:
    """The broker a BROKER resource names (None: the cluster default); ValueError if neither."""
    if name == "":
        return None
    if not (name.isascii() and name.isdigit()) or int(name) > _INT32_MAX:
        raise ValueError(f"invalid broker resource name {name!r}: a broker id or \"\"")
    return int(name)


def _config_type(name: str, value: str | None) -> int:
    supplied = topic_config_supplied_by(name)
    if value is None and supplied is not None:
        value = supplied.default  # unset, as log.retention.ms by default: the type it has
    if name in _LIST_CONFIGS:
        return TYPE_LIST
    if value in ("true", "false"):
        return TYPE_BOOLEAN
    return TYPE_LONG if value is not None and value.lstrip("-").isdigit() else TYPE_STRING


def _entry(name: str, value: str | None, source: ConfigSource, read_only: bool,
           synonyms: list[Synonym]) -> dict[str, Any]:
    # Kafka reports a secret's presence and source, never its value.
    sensitive = name in SENSITIVE_BROKER_SETTINGS
    return {
        "name": name, "value": None if sensitive else value, "read_only": read_only,
        "config_source": int(source),
        "is_default": source == ConfigSource.DEFAULT_CONFIG, "is_sensitive": sensitive,
        "synonyms": [{"name": n, "value": None if sensitive else v, "source": int(s)}
                     for n, v, s in synonyms],
        "config_type": _config_type(name, value), "documentation": None,
    }


# -- DescribeConfigs ------------------------------------------------------------------
def _describe_topic(ctx: RequestContext, resource: Any, synonyms: bool) -> dict[str, Any]:
    name = resource.resource_name
    entry: dict[str, Any] = {"resource_type": RESOURCE_TOPIC, "resource_name": name,
                             "error_code": 0, "error_message": None, "configs": []}
    invalid = _invalid_topic(name)
    if invalid is not None:
        return {**entry, **invalid}
    topic = ctx.broker.image.topics.get(name)
    if topic is None:
        return {**entry, **_failure(ErrorCode.unknown_topic_or_partition,
                                    f"topic {name!r} does not exist")}
    config = ctx.broker.config
    wanted = set(resource.configuration_keys) if resource.configuration_keys else None
    for key, (value, source) in sorted(config.effective_topic_config(topic.configs).items()):
        if wanted is not None and key not in wanted:
            continue
        chain: list[Synonym] = []
        if synonyms:
            if key in topic.configs:
                chain.append((key, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
            chain += config.topic_synonyms(key)
        entry["configs"].append(_entry(key, value, source, False, chain))
    return entry


def _describe_broker(ctx: RequestContext, resource: Any, synonyms: bool) -> dict[str, Any]:
    config = ctx.broker.config
    entry: dict[str, Any] = {"resource_type": RESOURCE_BROKER,
                             "resource_name": resource.resource_name,
                             "error_code": 0, "error_message": None, "configs": []}
    try:
        broker_id = broker_resource_id(resource.resource_name)
    except ValueError as exc:
        return {**entry, **_failure(ErrorCode.invalid_request, str(exc))}
    wanted = set(resource.configuration_keys) if resource.configuration_keys else None
    if broker_id is None:
        # As Kafka: the default resource lists the cluster-wide dynamic defaults only.
        for key, value in sorted(config.dynamic_default.items()):
            if wanted is None or key in wanted:
                chain = [(key, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)] \
                    if synonyms else []
                entry["configs"].append(_entry(key, value,
                                               ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                               False, chain))
        return entry
    if broker_id != config.broker_id:
        return {**entry, **_failure(
            ErrorCode.invalid_request,
            f"this is broker {config.broker_id}: ask broker {broker_id} for its configs")}
    entry["configs"] = _broker_entries(ctx, wanted, synonyms)
    return entry


def _broker_entries(ctx: RequestContext, wanted: set[str] | None,
                    synonyms: bool) -> list[dict[str, Any]]:
    """Every setting of this broker, as Kafka's: one unset by default (log.retention.ms)
    has no value."""
    config = ctx.broker.config
    started_with = _start_up_settings(ctx)
    entries = []
    for key in sorted(BROKER_CONFIG_NAMES | started_with.keys()):
        if wanted is not None and key not in wanted:
            continue
        value = config.values.get(key)
        source = config.source(key)
        if key in started_with and source == ConfigSource.DEFAULT_CONFIG:
            value, source = started_with[key], ConfigSource.STATIC_BROKER_CONFIG
            chain = [(key, value, source)] if synonyms else []
        else:
            chain = config.synonyms(key) if synonyms else []
        entries.append(_entry(key, value, source, key not in DYNAMIC_BROKER_CONFIGS, chain))
    return entries


def _start_up_settings(ctx: RequestContext) -> dict[str, str]:
    """What ``slog broker start``'s own options set, under Kafka's names: its id, its log
    directory and, unless given with ``--config``, the listeners from ``--listen``. A
    Kafka broker reads them from server.properties, so they are static settings."""
    broker = ctx.broker
    settings = {"node.id": str(broker.broker_id), "broker.id": str(broker.broker_id),
                "log.dirs": str(broker.log_manager.logs_dir)}
    if broker.bound:
        settings["listeners"] = ",".join(e.url for e in broker.bound)
        settings["advertised.listeners"] = ",".join(e.url for e in broker.advertised)
    return settings


def _describe_group(ctx: RequestContext, resource: Any, synonyms: bool) -> dict[str, Any]:
    """A group's configs, whether or not the group exists (as Kafka): its overrides, and
    the broker's values for the rest."""
    name = resource.resource_name
    entry: dict[str, Any] = {"resource_type": RESOURCE_GROUP, "resource_name": name,
                             "error_code": 0, "error_message": None, "configs": []}
    if not name:
        return {**entry, **_failure(ErrorCode.invalid_request, "empty group name")}
    wanted = set(resource.configuration_keys) if resource.configuration_keys else None
    overrides = ctx.broker.image.group_configs.get(name, {})
    for key, (value, overridden) in effective_group_configs(
            overrides, ctx.broker.config.values).items():
        if wanted is not None and key not in wanted:
            continue
        source = ConfigSource.GROUP_CONFIG if overridden else ConfigSource.DEFAULT_CONFIG
        chain = [(key, value, source)] if synonyms else []
        entry["configs"].append(_entry(key, value, source, False, chain))
    return entry


async def describe_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    synonyms = getattr(request, "include_synonyms", False)
    results = []
    for resource in request.resources:
        if resource.resource_type == RESOURCE_TOPIC:
            results.append(_describe_topic(ctx, resource, synonyms))
        elif resource.resource_type == RESOURCE_BROKER:
            results.append(_describe_broker(ctx, resource, synonyms))
        elif resource.resource_type == RESOURCE_GROUP:
            results.append(_describe_group(ctx, resource, synonyms))
        else:
            results.append({"resource_type": resource.resource_type,
                            "resource_name": resource.resource_name, "configs": [],
                            **_failure(ErrorCode.invalid_request,
                                       "only topic, broker and group configs exist")})
    return {"throttle_time": 0, "results": results}


# -- changes --------------------------------------------------------------------------
def _apply_ops(current: Mapping[str, str], ops: Any) -> Changes:
    """IncrementalAlterConfigs operations as (key -> new value, None to delete)."""
    changes: Changes = {}
    for op in ops:
        if op.config_operation == OP_SET:
            changes[op.name] = op.value
        elif op.config_operation == OP_DELETE:
            changes[op.name] = None
        elif op.config_operation in (OP_APPEND, OP_SUBTRACT) and op.name in _LIST_CONFIGS:
            base = changes[op.name] if op.name in changes else current.get(op.name)
            items = [i for i in (base or "").split(",") if i]
            new = [v for v in (op.value or "").split(",") if v]
            if op.config_operation == OP_APPEND:
                items += [v for v in new if v not in items]
            else:
                items = [i for i in items if i not in new]
            changes[op.name] = ",".join(items) or None
        elif op.config_operation in (OP_APPEND, OP_SUBTRACT):
            raise ControllerError(ErrorCode.invalid_config,
                                  f"APPEND/SUBTRACT only apply to list configs, not {op.name}")
        else:
            raise ControllerError(ErrorCode.invalid_request,
                                  f"unknown config operation {op.config_operation}")
    return changes


def _replace_all(current: Mapping[str, str], configs: Any) -> Changes:
    """Legacy AlterConfigs: the request is the whole new set; what it leaves out goes."""
    given: Changes = {c.name: c.value for c in configs if c.value is not None}
    return {**{key: None for key in current if key not in given}, **given}


def _alter(ctx: RequestContext, resource: Any, validate_only: bool, incremental: bool
           ) -> dict[str, Any]:
    """One resource of an (Incremental)AlterConfigs request; the response row."""
    entry: dict[str, Any] = {"resource_type": resource.resource_type,
                             "resource_name": resource.resource_name,
                             "error_code": 0, "error_message": None}
    controller = ctx.broker.controller
    image = ctx.broker.image
    try:
        if resource.resource_type == RESOURCE_TOPIC:
            if (invalid := _invalid_topic(resource.resource_name)) is not None:
                return {**entry, **invalid}
            if controller is None:
                return {**entry, **_NOT_CONTROLLER}
            topic = image.topics.get(resource.resource_name)
            current = topic.configs if topic else {}
            changes = _apply_ops(current, resource.configs) if incremental \
                else _replace_all(current, resource.configs)
            controller.alter_topic_configs(resource.resource_name, changes,
                                           validate_only=validate_only)
        elif resource.resource_type == RESOURCE_BROKER:
            try:
                broker_id = broker_resource_id(resource.resource_name)
            except ValueError as exc:
                return {**entry, **_failure(ErrorCode.invalid_request, str(exc))}
            if controller is None:
                return {**entry, **_NOT_CONTROLLER}
            dynamic = image.dynamic_broker_configs(broker_id)
            if incremental:
                # APPEND/SUBTRACT start from the value the resource has now.
                current = {key: dynamic.get(key) or ctx.broker.config.cluster_value(key)
                           for key in _LIST_CONFIGS if key in ctx.broker.config.values}
                changes = _apply_ops(current, resource.configs)
            else:
                changes = _replace_all(dynamic, resource.configs)
            controller.alter_broker_configs(broker_id, changes, validate_only=validate_only)
        elif resource.resource_type == RESOURCE_GROUP:
            if not incremental:  # as Kafka: group configs only through the incremental API
                return {**entry, **_failure(
                    ErrorCode.invalid_request,
                    "group configs are altered with IncrementalAlterConfigs")}
            if not resource.resource_name:
                return {**entry, **_failure(ErrorCode.invalid_request, "empty group name")}
            if controller is None:
                return {**entry, **_NOT_CONTROLLER}
            current = image.group_configs.get(resource.resource_name, {})
            controller.alter_group_configs(resource.resource_name,
                                           _apply_ops(current, resource.configs),
                                           ctx.broker.config.values, validate_only=validate_only)
        else:
            return {**entry, **_failure(ErrorCode.invalid_request,
                                        "only topic, broker and group configs exist")}
    except ControllerError as exc:
        return {**entry, **_controller_failure(exc)}
    return entry


async def incremental_alter_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "responses": [
        _alter(ctx, r, request.validate_only, incremental=True) for r in request.resources]}


async def alter_configs(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "responses": [
        _alter(ctx, r, request.validate_only, incremental=False) for r in request.resources]}


# -- ListConfigResources ----------------------------------------------------------------
def _config_resources(ctx: RequestContext, resource_type: int) -> list[tuple[str, int]]:
    """(name, type) of every resource of ``resource_type`` with configs to describe: every
    topic and broker, and the groups with overrides. v0 (ListClientMetricsResources) asks
    for client metrics only."""
    image = ctx.broker.image
    if resource_type == RESOURCE_TOPIC:
        return [(name, RESOURCE_TOPIC) for name in sorted(image.topics)]
    if resource_type == RESOURCE_BROKER:
        return [(str(b), RESOURCE_BROKER) for b in sorted(image.brokers)]
    if resource_type == RESOURCE_GROUP:
        return [(group, RESOURCE_GROUP) for group in sorted(image.group_configs)]
    return []


async def list_config_resources(ctx: RequestContext, request: Any) -> dict[str, Any]:
    known = (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS,
             RESOURCE_GROUP)
    if ctx.version == 0:
        wanted: tuple[int, ...] = (RESOURCE_CLIENT_METRICS,)
    else:
        wanted = tuple(request.resource_types) or known
    unknown = [t for t in wanted if t not in known]
    if unknown:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request,
                "config_resources": []}
    found = [entry for t in dict.fromkeys(wanted) for entry in _config_resources(ctx, t)]
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "config_resources": [{"resource_name": name, "resource_type": kind}
                                 for name, kind in found]}


HANDLERS = {
    ApiKey.LIST_CONFIG_RESOURCES: list_config_resources,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    ApiKey.ALTER_CONFIGS: alter_configs,
}
