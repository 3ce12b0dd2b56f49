"""Which ACL checks each request needs, and the error code Kafka answers a denial with.

Pure: ``denial`` gets the decoded request and an ``allowed(operation,
resource_type, name)`` predicate, and returns the error code of the first check
that fails (or None). The dispatcher answers a denied request with that code
on every topic/partition/group of the response.

Kafka answers a request that mixes allowed and denied topics per topic; slog
refuses such a request whole (see docs/SECURITY.md). Metadata is not checked
here: its handler filters the topics a principal may not describe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from slog.core.acls import CLUSTER_NAME, Operation, ResourceType
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

TOPIC_DENIED = ErrorCode.topic_authorization_failed.value
GROUP_DENIED = ErrorCode.group_authorization_failed.value
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed.value
TXN_ID_DENIED = ErrorCode.transactional_id_authorization_failed.value
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_GROUP = 2, 4, 32
_GROUP_KEY, _TRANSACTION_KEY = 0, 1

Allowed = Callable[[Operation, ResourceType, str], bool]


@dataclass(frozen=True)
class Check:
    operation: Operation
    resource_type: ResourceType
    name: str
    error: int
    or_cluster: bool = False  # the same operation on the cluster also grants it (CREATE)
    # A topic named by id only (Fetch v13+, Produce v13): checked under the name the
    # metadata gives that id; an id no topic has is skipped (the handler answers
    # UNKNOWN_TOPIC_ID, and an unknown id discloses nothing).
    topic_id: object = None


def _topic(op: Operation, name: str | None, topic_id: object = None, **kw: Any
           ) -> Iterator[Check]:
    if name is not None:
        yield Check(op, ResourceType.TOPIC, name, TOPIC_DENIED, **kw)
    elif topic_id is not None:
        yield Check(op, ResourceType.TOPIC, "", TOPIC_DENIED, topic_id=topic_id, **kw)


def _group(op: Operation, name: str) -> Check:
    return Check(op, ResourceType.GROUP, name, GROUP_DENIED)


def _cluster(op: Operation) -> Check:
    return Check(op, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_DENIED)


def _name(item: Any) -> str | None:
    """Topic entries call the name ``name`` in most APIs and ``topic`` in a few."""
    return getattr(item, "name", None) or getattr(item, "topic", None)


def _topics(op: Operation, items: Any) -> Iterator[Check]:
    for item in items or ():
        yield from _topic(op, _name(item), getattr(item, "topic_id", None))


def replica_id_of(request: Any) -> int:
    """The fetching replica's id (-1: a consumer); Fetch v15+ moved it into replica_state."""
    state = getattr(request, "replica_state", None)
    return state.replica_id if state is not None else getattr(request, "replica_id", -1)


def _replica_or(op: Operation, request: Any) -> Iterator[Check]:
    """Fetch/OffsetForLeaderEpoch from a follower is CLUSTER_ACTION, else ``op`` on topics."""
    if replica_id_of(request) >= 0:
        yield _cluster(Operation.CLUSTER_ACTION)
    else:
        yield from _topics(op, request.topics)


def _offset_fetch(request: Any) -> Iterator[Check]:
    groups = getattr(request, "groups", None)
    if groups is None:
        groups = [request]
    for group in groups:
        yield _group(Operation.DESCRIBE, group.group_id)
        yield from _topics(Operation.DESCRIBE, group.topics)


def _txn_id(op: Operation, transactional_id: str | None) -> Iterator[Check]:
    if transactional_id is not None:
        yield Check(op, ResourceType.TRANSACTIONAL_ID, transactional_id, TXN_ID_DENIED)


def _find_coordinator(request: Any) -> Iterator[Check]:
    key_type = getattr(request, "key_type", _GROUP_KEY)  # v0 has groups only
    if key_type not in (_GROUP_KEY, _TRANSACTION_KEY):
        return
    keys = getattr(request, "coordinator_keys", None)
    for key in keys if keys is not None else [request.key]:
        if key_type == _GROUP_KEY:
            yield _group(Operation.DESCRIBE, key)
        else:
            yield from _txn_id(Operation.DESCRIBE, key)


def _configs(op: Operation, request: Any) -> Iterator[Check]:
    for resource in request.resources:
        if resource.resource_type == _CONFIG_TOPIC:
            yield from _topic(op, resource.resource_name)
        elif resource.resource_type == _CONFIG_BROKER:
            yield _cluster(op)
        elif resource.resource_type == _CONFIG_GROUP:
            yield _group(op, resource.resource_name)


def _delete_topics(request: Any) -> Iterator[Check]:
    names = getattr(request, "topic_names", None)
    if names is None:
        names = [t.name for t in request.topics]
    for name in names:
        # v6 may name a topic by id only: "" so that only DELETE on every topic
        # (LITERAL "*" or PREFIXED "") or a super user passes.
        yield Check(Operation.DELETE, ResourceType.TOPIC, name or "", TOPIC_DENIED)


def _group_then_topics(group_op: Operation, topic_op: Operation, request: Any
                       ) -> Iterator[Check]:
    yield _group(group_op, request.group_id)
    yield from _topics(topic_op, request.topics)


def _checks(api_key: int, request: Any) -> Iterator[Check]:
    op = Operation
    if api_key == ApiKey.PRODUCE:
        yield from _txn_id(op.WRITE, getattr(request, "transactional_id", None))
        yield from _topics(op.WRITE, request.topic_data)
    elif api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        yield from _txn_id(op.WRITE, request.v3_and_below_transactional_id)
        yield from _topics(op.WRITE, request.v3_and_below_topics)
    elif api_key == ApiKey.ADD_OFFSETS_TO_TXN:
        yield from _txn_id(op.WRITE, request.transactional_id)
        yield _group(op.READ, request.group_id)
    elif api_key == ApiKey.END_TXN:
        yield from _txn_id(op.WRITE, request.transactional_id)
    elif api_key == ApiKey.TXN_OFFSET_COMMIT:
        yield from _txn_id(op.WRITE, request.transactional_id)
        yield from _group_then_topics(op.READ, op.READ, request)
    elif api_key == ApiKey.WRITE_TXN_MARKERS:
        yield _cluster(op.CLUSTER_ACTION)
    elif api_key == ApiKey.DESCRIBE_PRODUCERS:
        yield from _topics(op.READ, request.topics)
    elif api_key == ApiKey.FETCH:
        yield from _replica_or(op.READ, request)
    elif api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
        yield from _replica_or(op.DESCRIBE, request)
    elif api_key == ApiKey.LIST_OFFSETS:
        yield from _topics(op.DESCRIBE, request.topics)
    elif api_key == ApiKey.OFFSET_COMMIT:
        yield from _group_then_topics(op.READ, op.READ, request)
    elif api_key == ApiKey.OFFSET_DELETE:
        yield from _group_then_topics(op.DELETE, op.READ, request)
    elif api_key == ApiKey.OFFSET_FETCH:
        yield from _offset_fetch(request)
    elif api_key == ApiKey.FIND_COORDINATOR:
        yield from _find_coordinator(request)
    elif api_key in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
                     ApiKey.LEAVE_GROUP, ApiKey.CONSUMER_GROUP_HEARTBEAT):
        yield _group(op.READ, request.group_id)
    elif api_key == ApiKey.CONSUMER_GROUP_DESCRIBE:
        yield from (_group(op.DESCRIBE, g) for g in request.group_ids)
    elif api_key == ApiKey.DESCRIBE_GROUPS:
        yield from (_group(op.DESCRIBE, g) for g in request.groups)
    elif api_key == ApiKey.DELETE_GROUPS:
        yield from (_group(op.DELETE, g) for g in request.groups_names)
    elif api_key == ApiKey.CREATE_TOPICS:
        for topic in request.topics:
            yield from _topic(op.CREATE, topic.name, or_cluster=True)
    elif api_key == ApiKey.DELETE_TOPICS:
        yield from _delete_topics(request)
    elif api_key == ApiKey.DELETE_RECORDS:
        yield from _topics(op.DELETE, request.topics)
    elif api_key == ApiKey.CREATE_PARTITIONS:
        yield from _topics(op.ALTER, request.topics)
    elif api_key == ApiKey.DESCRIBE_CONFIGS:
        yield from _configs(op.DESCRIBE_CONFIGS, request)
    elif api_key in (ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS):
        yield from _configs(op.ALTER_CONFIGS, request)
    elif api_key == ApiKey.DESCRIBE_CLIENT_QUOTAS:
        yield _cluster(op.DESCRIBE_CONFIGS)
    elif api_key == ApiKey.ALTER_CLIENT_QUOTAS:
        yield _cluster(op.ALTER_CONFIGS)
    elif api_key in (ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                     ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_REPLICA_LOG_DIRS):
        yield _cluster(op.ALTER)
    elif api_key in (ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_LOG_DIRS,
                     ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_QUORUM):
        yield _cluster(op.DESCRIBE)
    elif api_key == ApiKey.LIST_CONFIG_RESOURCES:
        yield _cluster(op.DESCRIBE_CONFIGS)
    elif api_key == ApiKey.ALTER_PARTITION:
        yield _cluster(op.CLUSTER_ACTION)


def denial(api_key: int, request: Any, allowed: Allowed,
           any_topic_writable: Callable[[], bool],
           topic_name: Callable[[object], str | None] = lambda topic_id: None) -> int | None:
    """The error code for the first failed check of ``request``, or None if all pass.

    ``topic_name`` gives the name of a topic id (requests that name topics by id)."""
    transactional_id = getattr(request, "transactional_id", None)
    if api_key == ApiKey.INIT_PRODUCER_ID and transactional_id is not None:
        # A transactional producer needs WRITE on its transactional id.
        if allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return TXN_ID_DENIED
    if api_key == ApiKey.INIT_PRODUCER_ID:
        # KIP-679: idempotent producers need IDEMPOTENT_WRITE on the cluster or
        # WRITE on some topic.
        if allowed(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) \
                or any_topic_writable():
            return None
        return CLUSTER_DENIED
    for check in _checks(api_key, request):
        if check.topic_id is not None:
            name = topic_name(check.topic_id)
            if name is None:
                continue
            check = replace(check, name=name)
        if check.or_cluster and allowed(check.operation, ResourceType.CLUSTER, CLUSTER_NAME):
            continue
        if not allowed(check.operation, check.resource_type, check.name):
            return check.error
    return None
