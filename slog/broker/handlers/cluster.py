"""ApiVersions, Metadata and DescribeCluster: what a client asks before anything else.

Metadata creates the unknown topics it is asked about when
``auto.create.topics.enable`` and the client allow it, on any broker
(:mod:`slog.broker.topic_creator`). ``controller_id`` always names the real
controller: KRaft brokers may name any live broker there because they forward
admin requests, and slog brokers forward too, but naming the controller saves
clients that address it directly (kafka-python's admin, slog's) one hop.
"""

from __future__ import annotations

import asyncio
import dataclasses
from functools import partial
from typing import Any

from slog.broker.access import TOPIC_DENIED
from slog.broker.authorized_operations import NOT_REQUESTED, authorized_operations
from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import INVALID_TOPIC, LEADER_NOT_AVAILABLE, NONE, UNKNOWN_TOPIC
from slog.core.acls import CLUSTER_NAME, Operation, ResourceType
from slog.core.errors import InvalidTopicError
from slog.core.metadata import MetadataImage, PartitionState
from slog.core.names import INTERNAL_TOPICS, validate_topic_name
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.replication.controller import NewTopic
from slog.replication.placement import RackAwareMode


async def api_versions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "error_code": NONE,
        "api_keys": [
            {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
            for s in ctx.broker.api_table
        ],
        "throttle_time": 0,
    }


def broker_list(image: MetadataImage, listener: str | None = None,
                include_fenced: bool = False) -> list[dict[str, Any]]:
    """The live brokers as a client of ``listener`` reaches them (Kafka's rule: the
    endpoints of the listener the request arrived on; brokers without it are left out),
    and the fenced ones too if asked (DescribeCluster v2, KIP-1073)."""
    brokers = image.brokers.values() if include_fenced else image.live_brokers()
    entries = []
    for b in sorted(brokers, key=lambda b: b.broker_id):
        address = b.endpoint(listener)
        if address is not None:
            entries.append({"node_id": b.broker_id, "broker_id": b.broker_id,
                            "host": address[0], "port": address[1], "rack": b.rack,
                            "is_fenced": b.fenced})
    return entries


def listener_of(ctx: RequestContext) -> str | None:
    return ctx.session.listener if ctx.session is not None else None


def partition_entry(state: PartitionState, live: frozenset[int]) -> dict[str, Any]:
    return {
        "error_code": LEADER_NOT_AVAILABLE if state.is_offline else NONE,
        "partition_index": state.partition,
        "leader_id": state.leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": list(state.replicas),
        "isr_nodes": list(state.isr),
        "offline_replicas": [r for r in state.replicas if r not in live],
    }


def live_broker_ids(image: MetadataImage) -> frozenset[int]:
    return frozenset(b.broker_id for b in image.live_brokers())


def topic_entry(image: MetadataImage, name: str,
                live: frozenset[int] | None = None) -> dict[str, Any]:
    topic = image.topics[name]
    live = live_broker_ids(image) if live is None else live
    return {
        "error_code": NONE,
        "name": name,
        "topic_id": topic.topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [partition_entry(p, live) for _, p in sorted(topic.partitions.items())],
    }


def _missing_topic(name: str, error: int) -> dict[str, Any]:
    return {"error_code": error, "name": name, "is_internal": False, "partitions": []}


async def _auto_create(ctx: RequestContext, name: str) -> int:
    """Create a topic a client asked about, as auto.create.topics.enable allows.

    NONE once the topic exists in this broker's image; LEADER_NOT_AVAILABLE
    (retriable) while the controller cannot be asked, so the client asks again.
    """
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return INVALID_TOPIC
    error = await ctx.broker.topic_creator.create(NewTopic(name, rack_mode=RackAwareMode.SAFE))
    if error in (ErrorCode.none, ErrorCode.invalid_topic_exception):
        return int(error)
    if error == ErrorCode.not_controller:  # no controller could be asked: retry Metadata
        return LEADER_NOT_AVAILABLE
    return UNKNOWN_TOPIC


def _describable(ctx: RequestContext, topic: str) -> bool:
    return ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic)


def _may_create(ctx: RequestContext, topic: str) -> bool:
    return ctx.allowed(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or \
        ctx.allowed(Operation.CREATE, ResourceType.TOPIC, topic)


def _with_operations(ctx: RequestContext, entry: Any) -> Any:
    """A described topic's entry with the principal's operations on it (Metadata v8+)."""
    operations = authorized_operations(ctx.allowed, ResourceType.TOPIC, entry.name)
    return dataclasses.replace(entry, topic_authorized_operations=operations)


def cluster_operations(ctx: RequestContext, requested: bool) -> int:
    if not requested:
        return NOT_REQUESTED
    return authorized_operations(ctx.allowed, ResourceType.CLUSTER, CLUSTER_NAME)


async def metadata(ctx: RequestContext, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    image = broker.image
    requested = request.topics
    unknown_ids: list[Any] = []
    if requested is None or (ctx.version == 0 and not requested):
        # v0: an empty list means every topic; only those the principal may describe.
        names = [n for n in sorted(image.topics) if _describable(ctx, n)]
    else:
        names = [t.name for t in requested if t.name is not None]
        # v12+ may name topics by id only (KIP-516; KIP-848 consumers do, for the
        # topic ids of their assignments); an entry with neither is ignored, as before.
        by_id = [t.topic_id for t in requested if ctx.version >= 12 and t.name is None
                 and t.topic_id is not None and t.topic_id.int]
        for topic_id in by_id:
            name = image.topic_name(topic_id)
            if name is None:
                unknown_ids.append(topic_id)
            else:
                names.append(name)
    allow_auto = getattr(request, "allow_auto_topic_creation", True) and \
        broker.config.get_bool("auto.create.topics.enable")
    describable = {name: _describable(ctx, name) for name in names}
    missing = [n for n in dict.fromkeys(names) if describable[n] and n not in image.topics]
    creatable = [n for n in missing if allow_auto and _may_create(ctx, n)]
    # Kafka: a topic auto-creation would make, for a principal without CREATE on the
    # cluster or the topic, is TOPIC_AUTHORIZATION_FAILED, not UNKNOWN_TOPIC_OR_PARTITION.
    create_denied = {n for n in missing if allow_auto and n not in creatable}
    # Concurrently: a client asking for several new topics waits for one round trip.
    created = dict(zip(creatable, await asyncio.gather(*map(partial(_auto_create, ctx),
                                                              creatable)), strict=True))
    image = broker.image
    live = live_broker_ids(image)
    # v8+: only topics the principal may describe get their operations (as in Kafka).
    with_operations = getattr(request, "include_topic_authorized_operations", False)
    topics = []
    for name in names:
        if not describable[name]:
            topics.append(_missing_topic(name, TOPIC_DENIED))
        elif name in image.topics:
            entry = broker.metadata_cache.topic(image, name, ctx.version, live)
            topics.append(_with_operations(ctx, entry) if with_operations else entry)
        elif name in create_denied:
            topics.append(_missing_topic(name, TOPIC_DENIED))
        else:
            error = created.get(name, UNKNOWN_TOPIC)
            topics.append(_missing_topic(name, error or LEADER_NOT_AVAILABLE))
    topics += [{"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id,
                "is_internal": False, "partitions": []} for topic_id in unknown_ids]
    return {
        "throttle_time": 0,
        "brokers": broker_list(image, listener_of(ctx)),
        "cluster_id": broker.cluster_id,
        "controller_id": image.controller_id,
        "topics": topics,
        "error_code": NONE,  # v13: a top-level error (Kafka's REBOOTSTRAP_REQUIRED); none here
        # v8-10 only (v11 dropped it for DescribeCluster).
        "cluster_authorized_operations": cluster_operations(
            ctx, getattr(request, "include_cluster_authorized_operations", False)),
    }


async def describe_cluster(ctx: RequestContext, request: Any) -> dict[str, Any]:
    image = ctx.broker.image
    return {
        "throttle_time": 0,
        "error_code": NONE,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": ctx.broker.cluster_id,
        "controller_id": image.controller_id,
        "brokers": broker_list(image, listener_of(ctx),
                               getattr(request, "include_fenced_brokers", False)),
        "cluster_authorized_operations": cluster_operations(
            ctx, request.include_cluster_authorized_operations),
    }


HANDLERS = {
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.METADATA: metadata,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
}
