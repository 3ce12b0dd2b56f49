"""ApiVersions, Metadata and DescribeCluster: what a client asks before anything else."""

from __future__ import annotations

from typing import Any

from slog.broker.access import TOPIC_DENIED
from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import INVALID_TOPIC, LEADER_NOT_AVAILABLE, NONE, UNKNOWN_TOPIC
from slog.core.acls import CLUSTER_NAME, Operation, ResourceType
from slog.core.errors import InvalidTopicError
from slog.core.metadata import MetadataImage, PartitionState
from slog.core.names import INTERNAL_TOPICS, validate_topic_name
from slog.protocol.apis import ApiKey
from slog.replication.controller import ControllerError, NewTopic


async def api_versions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    return {
        "error_code": NONE,
        "api_keys": [
            {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
            for s in ctx.broker.api_table
        ],
        "throttle_time": 0,
    }


def broker_list(image: MetadataImage, listener: str | None = None) -> list[dict[str, Any]]:
    """The live brokers as a client of ``listener`` reaches them (Kafka's rule: the
    endpoints of the listener the request arrived on; brokers without it are left out)."""
    entries = []
    for b in sorted(image.live_brokers(), key=lambda b: b.broker_id):
        address = b.endpoint(listener)
        if address is not None:
            entries.append({"node_id": b.broker_id, "broker_id": b.broker_id,
                            "host": address[0], "port": address[1], "rack": None})
    return entries


def listener_of(ctx: RequestContext) -> str | None:
    return ctx.session.listener if ctx.session is not None else None


def _partition_entry(image: MetadataImage, state: PartitionState) -> dict[str, Any]:
    live = {b.broker_id for b in image.live_brokers()}
    return {
        "error_code": LEADER_NOT_AVAILABLE if state.is_offline else NONE,
        "partition_index": state.partition,
        "leader_id": state.leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": list(state.replicas),
        "isr_nodes": list(state.isr),
        "offline_replicas": [r for r in state.replicas if r not in live],
    }


def topic_entry(image: MetadataImage, name: str) -> dict[str, Any]:
    topic = image.topics[name]
    return {
        "error_code": NONE,
        "name": name,
        "topic_id": topic.topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [_partition_entry(image, p) for _, p in sorted(topic.partitions.items())],
    }


def _missing_topic(name: str, error: int) -> dict[str, Any]:
    return {"error_code": error, "name": name, "is_internal": False, "partitions": []}


def _auto_create(ctx: RequestContext, name: str) -> int:
    """Create a topic a client asked about, as auto.create.topics.enable allows."""
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return INVALID_TOPIC
    controller = ctx.broker.controller
    if controller is None:
        return LEADER_NOT_AVAILABLE  # the controller creates it; the client retries
    [result] = controller.create_topics([NewTopic(name)])
    if isinstance(result, ControllerError) and result.code != "topic_already_exists":
        return INVALID_TOPIC if result.code == "invalid_topic_exception" else UNKNOWN_TOPIC
    return NONE


def _describable(ctx: RequestContext, topic: str) -> bool:
    return ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic)


def _may_create(ctx: RequestContext, topic: str) -> bool:
    return ctx.allowed(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or \
        ctx.allowed(Operation.CREATE, ResourceType.TOPIC, topic)


async def metadata(ctx: RequestContext, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    image = broker.image
    requested = request.topics
    if requested is None or (ctx.version == 0 and not requested):
        # v0: an empty list means every topic; only those the principal may describe.
        names = [n for n in sorted(image.topics) if _describable(ctx, n)]
    else:
        names = [t.name for t in requested if t.name is not None]
    allow_auto = getattr(request, "allow_auto_topic_creation", True) and \
        broker.config.get_bool("auto.create.topics.enable")
    topics = []
    for name in names:
        if not _describable(ctx, name):
            topics.append(_missing_topic(name, TOPIC_DENIED))
            continue
        if name not in image.topics:
            error = _auto_create(ctx, name) if allow_auto and _may_create(ctx, name) \
                else UNKNOWN_TOPIC
            if error != NONE or name not in broker.image.topics:
                topics.append(_missing_topic(name, error or LEADER_NOT_AVAILABLE))
                continue
            image = broker.image
        topics.append(topic_entry(image, name))
    return {
        "throttle_time": 0,
        "brokers": broker_list(image, listener_of(ctx)),
        "cluster_id": broker.cluster_id,
        "controller_id": image.controller_id,
        "topics": topics,
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
        "brokers": broker_list(image, listener_of(ctx)),
        "cluster_authorized_operations": -2147483648,
    }


HANDLERS = {
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.METADATA: metadata,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
}
