"""DescribeTopicPartitions (API 75, KIP-966): Metadata's topic half, paged.

A cluster with many partitions answers Metadata in one response of any size;
this API answers at most ``response_partition_limit`` partitions (capped by
the broker's ``max.request.partition.size.limit``) and a ``next_cursor``
(topic, first partition) to ask for the rest. Kafka's rules, kept here:

* Topics are answered in name order, from the cursor's topic on (a cursor
  whose topic is not among the requested ones is an INVALID_REQUEST, and so is
  a negative partition index).
* No topic named means every topic the principal may describe; then unknown
  topics are skipped silently. Named topics it may not describe are answered
  TOPIC_AUTHORIZATION_FAILED with no id (after the others, as Kafka does), so
  their existence is not disclosed; named unknown ones UNKNOWN_TOPIC_OR_PARTITION
  (INVALID_TOPIC_EXCEPTION for a name no topic can have).
* A topic is cut where the limit falls, and the cursor names the next
  partition; when a topic ends exactly at the limit and more follow, the cursor
  names the next topic's partition 0.
* Every answered topic carries the principal's authorized operations: the
  request has no flag to ask for them, and Kafka always fills them.
"""

from __future__ import annotations

import uuid
from typing import Any

from slog.broker.access import TOPIC_DENIED
from slog.broker.authorized_operations import authorized_operations
from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.cluster import live_broker_ids, partition_entry
from slog.broker.handlers.common import INVALID_TOPIC, NONE, UNKNOWN_TOPIC
from slog.core.acls import Operation, ResourceType
from slog.core.errors import InvalidTopicError
from slog.core.metadata import MetadataImage
from slog.core.names import INTERNAL_TOPICS, validate_topic_name
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

NO_TOPIC_ID = uuid.UUID(int=0)


def _topic(error: int, name: str, topic_id: uuid.UUID | str = NO_TOPIC_ID,
           partitions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": topic_id,
            "is_internal": name in INTERNAL_TOPICS, "partitions": partitions or []}


def _missing_error(name: str) -> int:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return INVALID_TOPIC
    return UNKNOWN_TOPIC


def _refused(request: Any) -> dict[str, Any]:
    """Kafka's answer to an invalid request: every named topic gets INVALID_REQUEST."""
    return {"throttle_time": 0, "next_cursor": None, "topics": [
        _topic(ErrorCode.invalid_request, t.name) for t in request.topics]}


def _candidates(image: MetadataImage, request: Any, cursor: Any) -> list[str]:
    """The topic names to answer, from the cursor's topic on, in name order."""
    start = cursor.topic_name if cursor is not None else ""
    names = image.topics if not request.topics else {t.name for t in request.topics}
    return sorted(name for name in names if name >= start)


class _Page:
    """One response's worth of partitions: Kafka's limit-and-cursor walk."""

    def __init__(self, image: MetadataImage, limit: int, cursor: Any, every_topic: bool):
        self.image = image
        self.every_topic = every_topic
        self.live = live_broker_ids(image)
        self.remaining = limit
        self.cursor = cursor
        self.next_cursor: dict[str, Any] | None = None

    def add(self, name: str) -> dict[str, Any] | None:
        """The entry of ``name`` (None for an unknown topic when every topic was asked
        for); once the page is full, sets ``next_cursor`` to it instead."""
        if self.remaining <= 0:
            self.next_cursor = {"topic_name": name, "partition_index": 0}
            return None
        topic = self.image.topics.get(name)
        if topic is None:
            return None if self.every_topic else _topic(_missing_error(name), name)
        first = self.cursor.partition_index \
            if self.cursor is not None and self.cursor.topic_name == name else 0
        indexes = [i for i in sorted(topic.partitions) if i >= first]
        taken = indexes[:self.remaining]
        self.remaining -= len(taken)
        if len(taken) < len(indexes):
            # Cut inside this topic: the cursor names its next partition, and the
            # page ends here.
            self.next_cursor = {"topic_name": name, "partition_index": indexes[len(taken)]}
        return _topic(NONE, name, topic.topic_id, [
            {**partition_entry(topic.partitions[i], self.live),
             "eligible_leader_replicas": [], "last_known_elr": []} for i in taken])


async def describe_topic_partitions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    cursor = request.cursor
    named = bool(request.topics)
    if cursor is not None and (cursor.partition_index < 0 or (
            named and cursor.topic_name not in {t.name for t in request.topics})):
        return _refused(request)
    image = ctx.broker.image
    limit = min(request.response_partition_limit,
                ctx.broker.config.get_int("max.request.partition.size.limit"))
    page = _Page(image, limit, cursor, every_topic=not named)
    allowed: list[str] = []
    denied: list[dict[str, Any]] = []
    for name in _candidates(image, request, cursor):
        if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name):
            allowed.append(name)
        elif named:  # asking for every topic: the unauthorized are simply left out
            denied.append(_topic(TOPIC_DENIED, name))
    topics: list[dict[str, Any]] = []
    for name in allowed:
        entry = page.add(name)
        if entry is not None:
            entry["topic_authorized_operations"] = authorized_operations(
                ctx.allowed, ResourceType.TOPIC, name)
            topics.append(entry)
        if page.next_cursor is not None:
            break
    return {"throttle_time": 0, "topics": topics + denied, "next_cursor": page.next_cursor}


HANDLERS = {ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions}
