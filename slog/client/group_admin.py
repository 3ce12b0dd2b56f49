"""Administering consumer groups: list, describe, offsets, delete (any Kafka-compatible cluster).

Groups live on their coordinators, so ListGroups goes to every broker and the
other calls go to each group's coordinator; requests to one coordinator are
pipelined, so describing hundreds of groups takes a few round trips. Errors
follow :mod:`slog.client.admin`: a call raises the first failed item's
:class:`KafkaError`, carrying every failure in ``errors`` and what worked in
``results``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slog.client.cluster import ClusterClient
from slog.client.connection import BrokerConnection
from slog.client.errors import ErrorCode, KafkaError, raise_for_items
from slog.client.group_requests import (
    OffsetAndMetadata,
    commit_body,
    commit_errors,
    fetch_body,
    fetched_offsets,
    find_coordinator,
    send,
    version,
)
from slog.client.types import BrokerMetadata, TopicPartition
from slog.core.consumer_protocol import (
    PROTOCOL_TYPE,
    WireFormatError,
    decode_assignment,
    decode_subscription,
)
from slog.protocol.apis import ApiKey

__all__ = ["GroupAdmin", "GroupDescription", "GroupListing", "MemberDescription"]

CHANNEL = "group-admin"
# A coordinator loading its offsets partition (right after __consumer_offsets is
# created, or after a failover) or just moved: Kafka's admin client retries these.
COORDINATOR_RETRIABLE = frozenset({ErrorCode.coordinator_load_in_progress,
                                   ErrorCode.coordinator_not_available,
                                   ErrorCode.not_coordinator})
COORDINATOR_RETRY_S = 30.0
COORDINATOR_BACKOFF_S = 0.1
T = TypeVar("T")


def _retrying_coordinator(call: Callable[[], T]) -> T:
    """``call()``, again while every error it raises is a coordinator loading or moving."""
    give_up = time.monotonic() + COORDINATOR_RETRY_S
    while True:
        try:
            return call()
        except KafkaError as exc:
            errors = getattr(exc, "errors", None) or {"": exc}
            if time.monotonic() > give_up or \
                    any(e.code not in COORDINATOR_RETRIABLE for e in errors.values()):
                raise
        time.sleep(COORDINATOR_BACKOFF_S)


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str
    protocol_type: str
    coordinator: int  # broker id
    # KIP-848's group type: classic, consumer, share or streams. A broker without
    # ListGroups v5 (Kafka before 3.7) has only classic groups.
    group_type: str = "classic"


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)  # its subscription
    # KIP-848 groups only (None for classic ones): the member's epoch and the
    # partitions the broker's assignor means it to have (it may still be reconciling).
    member_epoch: int | None = None
    target_assignment: list[TopicPartition] | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    assignor: str
    members: list[MemberDescription]
    coordinator: BrokerMetadata
    group_type: str = "classic"  # "consumer": a KIP-848 group (ConsumerGroupDescribe)
    group_epoch: int | None = None
    assignment_epoch: int | None = None


def _pipeline(conn: BrokerConnection, api_key: int, bodies: Sequence[dict[str, Any]]
              ) -> list[Any]:
    """Send every request, then read the answers (in order)."""
    for body in bodies:
        send(conn, api_key, body)
    return [conn.receive()[1] for _ in bodies]


def _member(m: Any, consumer: bool) -> MemberDescription:
    assignment: list[TopicPartition] = []
    topics: list[str] = []
    if consumer:
        try:
            assignment = sorted(TopicPartition(*tp)
                                for tp in decode_assignment(m.member_assignment).partitions)
            if m.member_metadata:
                topics = list(decode_subscription(m.member_metadata).topics)
        except WireFormatError:
            pass
    return MemberDescription(m.member_id, getattr(m, "group_instance_id", None), m.client_id,
                             m.client_host, assignment, topics)


def _partitions(assignment: Any) -> list[TopicPartition]:
    return sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions
                  for p in t.partitions)


class GroupAdmin:
    def __init__(self, cluster: ClusterClient):
        self._cluster = cluster

    def _connection(self, node: BrokerMetadata) -> BrokerConnection:
        if node.node_id not in self._cluster.metadata.brokers:
            self._cluster.refresh_metadata([])
        return self._cluster.connection(node.node_id, CHANNEL)

    def coordinators(self, group_ids: Iterable[str]) -> dict[str, BrokerMetadata]:
        return {g: find_coordinator(self._cluster, g) for g in dict.fromkeys(group_ids)}

    def _by_coordinator(self, group_ids: Iterable[str]
                        ) -> dict[BrokerMetadata, list[str]]:
        grouped: dict[BrokerMetadata, list[str]] = defaultdict(list)
        for group_id, node in self.coordinators(group_ids).items():
            grouped[node].append(group_id)
        return grouped

    # -- listing and describing ---------------------------------------------------------
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> list[GroupListing]:
        """Every group of every broker, by id; ``states`` and ``types`` (classic,
        consumer, ...) filter, in any case."""
        wanted = [s for s in states]
        wanted_types = [t for t in types]
        meta = self._cluster.refresh_metadata([])
        out: dict[str, GroupListing] = {}
        for node_id in sorted(meta.brokers):
            conn = self._cluster.connection(node_id, CHANNEL)
            [response] = _pipeline(conn, ApiKey.LIST_GROUPS, [
                {"states_filter": wanted, "types_filter": wanted_types}])
            if response.error_code:
                raise KafkaError.for_code(response.error_code, item=f"broker {node_id}")
            lowered = {s.lower() for s in wanted}
            for g in response.groups:
                state = getattr(g, "group_state", "")
                if version(conn, ApiKey.LIST_GROUPS) < 4 and lowered and \
                        state.lower() not in lowered:
                    continue
                listing = GroupListing(g.group_id, state, g.protocol_type, node_id,
                                       getattr(g, "group_type", "") or "classic")
                if wanted_types and listing.group_type not in {t.lower() for t in wanted_types}:
                    continue  # a broker before v5 cannot filter by type
                out[g.group_id] = listing
        return [out[g] for g in sorted(out)]

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        results: dict[str, GroupDescription] = {}
        failures: dict[str, KafkaError] = {}
        for node, ids in self._by_coordinator(group_ids).items():
            [response] = _pipeline(self._connection(node), ApiKey.DESCRIBE_GROUPS,
                                   [{"groups": ids, "include_authorized_operations": False}])
            for g in response.groups:
                if g.error_code:
                    failures[g.group_id] = KafkaError.for_code(g.error_code, item=g.group_id)
                    continue
                consumer = g.protocol_type == PROTOCOL_TYPE
                results[g.group_id] = GroupDescription(
                    g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                    [_member(m, consumer) for m in g.members], node)
            results.update(self._describe_kip848(node, ids))
        raise_for_items(failures, results)
        return results

    def _describe_kip848(self, node: BrokerMetadata, ids: list[str]
                         ) -> dict[str, GroupDescription]:
        """ConsumerGroupDescribe where the coordinator has it: KIP-848 groups with their
        epochs and target assignments (classic groups answer GROUP_ID_NOT_FOUND)."""
        conn = self._connection(node)
        if ApiKey.CONSUMER_GROUP_DESCRIBE not in conn.versions:
            return {}
        response = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, {
            "group_ids": ids, "include_authorized_operations": False},
            version=min(1, conn.versions[ApiKey.CONSUMER_GROUP_DESCRIBE][1]))
        return {g.group_id: GroupDescription(
            g.group_id, g.group_state, PROTOCOL_TYPE, g.assignor_name,
            [MemberDescription(m.member_id, m.instance_id, m.client_id, m.client_host,
                               _partitions(m.assignment), sorted(m.subscribed_topic_names),
                               m.member_epoch, _partitions(m.target_assignment))
             for m in g.members], node, "consumer", g.group_epoch, g.assignment_epoch)
            for g in response.groups if not g.error_code}

    # -- offsets ----------------------------------------------------------------------------
    def list_offsets(self, group_ids: Iterable[str],
                     partitions: Iterable[TopicPartition] | None = None
                     ) -> dict[str, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets of each group (all of them, or of ``partitions``)."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        ids = list(group_ids)
        return _retrying_coordinator(lambda: self._list_offsets(ids, wanted))

    def _list_offsets(self, group_ids: Iterable[str], wanted: list[TopicPartition] | None
                      ) -> dict[str, dict[TopicPartition, OffsetAndMetadata | None]]:
        results: dict[str, dict[TopicPartition, OffsetAndMetadata | None]] = {}
        failures: dict[str, KafkaError] = {}
        for node, ids in self._by_coordinator(group_ids).items():
            responses = _pipeline(self._connection(node), ApiKey.OFFSET_FETCH,
                                  [fetch_body(g, wanted) for g in ids])
            for group_id, response in zip(ids, responses, strict=True):
                try:
                    results[group_id] = fetched_offsets(response, group_id)
                except KafkaError as exc:
                    failures[group_id] = exc
        raise_for_items(failures, results)
        return results

    def alter_offsets(self, group_id: str,
                      offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> None:
        """Commit offsets for an inactive group (Kafka refuses an active one with
        UNKNOWN_MEMBER_ID: its members own the offsets)."""
        values = {TopicPartition(*tp): v if isinstance(v, OffsetAndMetadata)
                  else OffsetAndMetadata(v) for tp, v in offsets.items()}

        def commit() -> None:
            node = find_coordinator(self._cluster, group_id)
            [response] = _pipeline(self._connection(node), ApiKey.OFFSET_COMMIT,
                                   [commit_body(group_id, -1, "", None, values)])
            raise_for_items({str(tp): e for tp, e in commit_errors(response).items()})

        _retrying_coordinator(commit)

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Forget a group's committed offsets of ``partitions`` (OffsetDelete). The
        group must be empty, or not subscribed to their topics
        (GROUP_SUBSCRIBED_TO_TOPIC per partition otherwise)."""
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp[0]].append(tp[1])
        body = {"group_id": group_id, "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in parts]}
            for t, parts in by_topic.items()]}

        def delete() -> None:
            node = find_coordinator(self._cluster, group_id)
            [response] = _pipeline(self._connection(node), ApiKey.OFFSET_DELETE, [body])
            if response.error_code:
                raise KafkaError.for_code(response.error_code, item=group_id)
            raise_for_items({f"{t.name}-{p.partition_index}": KafkaError.for_code(
                p.error_code, item=f"{t.name}-{p.partition_index}")
                for t in response.topics for p in t.partitions if p.error_code})

        _retrying_coordinator(delete)

    def delete_groups(self, group_ids: Iterable[str]) -> None:
        failures: dict[str, KafkaError] = {}
        deleted: list[str] = []
        for node, ids in self._by_coordinator(group_ids).items():
            [response] = _pipeline(self._connection(node), ApiKey.DELETE_GROUPS,
                                   [{"groups_names": ids}])
            for r in response.results:
                if r.error_code:
                    failures[r.group_id] = KafkaError.for_code(r.error_code, item=r.group_id)
                else:
                    deleted.append(r.group_id)
        raise_for_items(failures, deleted)
