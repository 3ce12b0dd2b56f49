"""Group-API requests shared by the group consumer and the group admin client.

Finding a group's coordinator, committing and fetching offsets, and the
version choice for every group API (the versions whose semantics slog's
client implements: JoinGroup v9 with skip_assignment, LeaveGroup v3+ batches,
OffsetCommit with leader epochs and instance ids, ListGroups v5's group types).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from slog.client.cluster import ClusterClient
from slog.client.connection import BrokerConnection, UnsupportedApiError
from slog.client.errors import KafkaError
from slog.client.types import BrokerMetadata, TopicPartition
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

GROUP_API_VERSIONS: dict[int, int] = {
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 9,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 5,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 5,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.OFFSET_DELETE: 0,
}
# Errors that mean "ask who the coordinator is again".
COORDINATOR_MOVED = frozenset({int(ErrorCode.not_coordinator),
                               int(ErrorCode.coordinator_not_available)})
LOADING = int(ErrorCode.coordinator_load_in_progress)
NO_OFFSET = -1


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the next record the group will read, plus its metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


def version(conn: BrokerConnection, api_key: int) -> int:
    offered = conn.versions.get(api_key, (0, -1))
    chosen = min(GROUP_API_VERSIONS[api_key], offered[1])
    if chosen < offered[0]:
        raise UnsupportedApiError(api_key, conn.address, offered,
                                  (0, GROUP_API_VERSIONS[api_key]))
    return chosen


def request(conn: BrokerConnection, api_key: int, body: dict[str, Any]) -> Any:
    return conn.request(api_key, body, version=version(conn, api_key))


def send(conn: BrokerConnection, api_key: int, body: dict[str, Any]) -> int:
    return conn.send(api_key, body, version=version(conn, api_key))


def find_coordinator(cluster: ClusterClient, group_id: str, *, timeout_s: float = 10.0,
                     backoff_s: float = 0.1, key_type: int = 0) -> BrokerMetadata:
    """The group's coordinator (``key_type`` 1: a transactional id's); retries while the
    broker says it is not ready yet (the first FindCoordinator of a cluster creates
    ``__consumer_offsets``, or ``__transaction_state``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = cluster.request_any(ApiKey.FIND_COORDINATOR, {
            "key": group_id, "key_type": key_type, "coordinator_keys": [group_id]})
        # v4+ answers in a list of coordinators, one per key.
        found = response.coordinators[0] if hasattr(response, "coordinators") else response
        error = int(found.error_code)
        if not error:
            return BrokerMetadata(found.node_id, found.host, found.port)
        failure = KafkaError.for_code(error, getattr(found, "error_message", None),
                                      item=group_id)
        if not failure.retriable or time.monotonic() + backoff_s > deadline:
            raise failure
        time.sleep(backoff_s)


# -- OffsetCommit -------------------------------------------------------------------------
def commit_body(group_id: str, generation: int, member_id: str, instance_id: str | None,
                offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for tp, value in offsets.items():
        by_topic[tp.topic].append({"partition_index": tp.partition,
                                   "committed_offset": value.offset,
                                   "committed_leader_epoch": value.leader_epoch,
                                   "committed_metadata": value.metadata,
                                   "commit_timestamp": -1})
    return {"group_id": group_id, "generation_id_or_member_epoch": generation,
            "member_id": member_id, "group_instance_id": instance_id, "retention_time": -1,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}


def commit_errors(response: Any) -> dict[TopicPartition, KafkaError]:
    return {TopicPartition(t.name, p.partition_index):
            KafkaError.for_code(p.error_code, item=f"{t.name}-{p.partition_index}")
            for t in response.topics for p in t.partitions if p.error_code}


# -- OffsetFetch --------------------------------------------------------------------------
def fetch_body(group_id: str, partitions: Iterable[TopicPartition] | None,
               require_stable: bool = False) -> dict[str, Any]:
    """``require_stable``: a partition whose offset a transaction has yet to commit or
    abort is answered UNSTABLE_OFFSET_COMMIT (retriable) instead of the older offset."""
    if partitions is None:
        topics = None
    else:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        topics = [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]
    return {"group_id": group_id, "topics": topics, "require_stable": require_stable}


def fetched_offsets(response: Any, group_id: str
                    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Committed offsets from an OffsetFetch response (None: nothing committed)."""
    error = int(getattr(response, "error_code", 0))
    if error:
        raise KafkaError.for_code(error, item=group_id)
    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if p.error_code:
                raise KafkaError.for_code(p.error_code, item=str(tp))
            out[tp] = None if p.committed_offset < 0 else OffsetAndMetadata(
                p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1))
    return out
