"""Administering transactions (KIP-664, as kafka-transactions.sh): list, describe, the
producers of a partition, and aborting a hanging transaction (any Kafka-compatible
cluster).

Transactions live on their coordinators, so ListTransactions goes to every broker
and DescribeTransactions to each id's coordinator; DescribeProducers and the abort
(a WriteTxnMarkers with coordinator epoch -1, which needs CLUSTER_ACTION) go to
partition leaders. Errors follow :mod:`slog.client.admin`: the first failed item's
:class:`KafkaError` is raised with every failure in ``errors``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from slog.client.cluster import ClusterClient
from slog.client.errors import ErrorCode, KafkaError, raise_for_items
from slog.client.group_requests import find_coordinator
from slog.client.types import TopicPartition
from slog.protocol.apis import ApiKey

__all__ = ["ProducerState", "TransactionAdmin", "TransactionDescription", "TransactionListing"]

CHANNEL = "txn-admin"
KEY_TYPE_TRANSACTION = 1
ADMIN_ABORT_EPOCH = -1  # a marker written by an admin, not by a coordinator


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, ...
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int  # 0: no transaction open
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int  # -1: no transaction open on the partition


def _millis(value: object) -> int:
    """kio gives timestamps as datetimes (None for -1) and durations as timedeltas."""
    if value is None:
        return -1
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    if hasattr(value, "timestamp"):
        return round(value.timestamp() * 1000)
    return int(value)  # type: ignore[call-overload]


def described_transactions(response: Any, node_id: int,
                           results: dict[str, TransactionDescription],
                           failures: dict[str, KafkaError]) -> None:
    """Add a DescribeTransactions answer of coordinator ``node_id`` to ``results`` (and
    its failed ids to ``failures``); the dashboard's collector shares it."""
    for t in response.transaction_states:
        if t.error_code:
            failures[t.transactional_id] = KafkaError.for_code(t.error_code,
                                                               item=t.transactional_id)
            continue
        results[t.transactional_id] = TransactionDescription(
            t.transactional_id, node_id, t.transaction_state, t.producer_id,
            t.producer_epoch, _millis(t.transaction_timeout), _millis(t.transaction_start_time),
            tuple(TopicPartition(topic.topic, p) for topic in t.topics
                  for p in topic.partitions))


def described_producers(response: Any, results: dict[TopicPartition, list[ProducerState]],
                        failures: dict[str, KafkaError]) -> None:
    """Add a DescribeProducers answer's partitions to ``results`` (failed ones to
    ``failures``)."""
    for topic in response.topics:
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            if part.error_code:
                failures[str(tp)] = KafkaError.for_code(part.error_code, part.error_message,
                                                        item=str(tp))
                continue
            results[tp] = [ProducerState(p.producer_id, p.producer_epoch, p.last_sequence,
                                         p.last_timestamp, p.current_txn_start_offset)
                           for p in part.active_producers]


def list_transactions_body(states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                           min_duration_ms: int = -1) -> dict[str, object]:
    return {"state_filters": list(states), "producer_id_filters": list(producer_ids),
            "duration_filter": min_duration_ms}


def describe_producers_body(topics: dict[str, list[int]]) -> dict[str, object]:
    return {"topics": [{"name": t, "partition_indexes": p} for t, p in topics.items()]}


class TransactionAdmin:
    def __init__(self, cluster: ClusterClient):
        self._cluster = cluster

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1) -> list[TransactionListing]:
        """Every broker's transactions; ``states`` (Kafka's names), producer ids and
        "open longer than" filter."""
        body = list_transactions_body(states, producer_ids, min_duration_ms)
        found: list[TransactionListing] = []
        for node_id in sorted(self._cluster.refresh_metadata([]).brokers):
            response = self._cluster.connection(node_id, CHANNEL).request(
                ApiKey.LIST_TRANSACTIONS, body)
            if response.error_code:
                raise KafkaError.for_code(response.error_code, item=f"broker {node_id}")
            found += [TransactionListing(t.transactional_id, t.producer_id,
                                         t.transaction_state, node_id)
                      for t in response.transaction_states]
        return sorted(found, key=lambda t: t.transactional_id)

    def describe_transactions(self, transactional_ids: Iterable[str]
                              ) -> dict[str, TransactionDescription]:
        by_coordinator: dict[int, list[str]] = defaultdict(list)
        for txn_id in dict.fromkeys(transactional_ids):
            node = find_coordinator(self._cluster, txn_id, key_type=KEY_TYPE_TRANSACTION)
            by_coordinator[node.node_id].append(txn_id)
        results: dict[str, TransactionDescription] = {}
        failures: dict[str, KafkaError] = {}
        for node_id, ids in by_coordinator.items():
            self._cluster.refresh_metadata([])
            response = self._cluster.connection(node_id, CHANNEL).request(
                ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ids})
            described_transactions(response, node_id, results, failures)
        raise_for_items(failures, results)
        return results

    def _leaders(self, partitions: Iterable[TopicPartition]
                 ) -> dict[int, dict[str, list[int]]]:
        wanted = [TopicPartition(*tp) for tp in partitions]
        self._cluster.refresh_metadata(sorted({tp.topic for tp in wanted}))
        by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for tp in wanted:
            leader = self._cluster.leader_for(tp.topic, tp.partition)
            if leader is None:
                raise KafkaError.for_code(ErrorCode.unknown_topic_or_partition, item=str(tp))
            by_leader[leader][tp.topic].append(tp.partition)
        return by_leader

    def describe_producers(self, partitions: Iterable[TopicPartition]
                           ) -> dict[TopicPartition, list[ProducerState]]:
        results: dict[TopicPartition, list[ProducerState]] = {}
        failures: dict[str, KafkaError] = {}
        for leader, topics in self._leaders(partitions).items():
            response = self._cluster.connection(leader, CHANNEL).request(
                ApiKey.DESCRIBE_PRODUCERS, describe_producers_body(topics))
            described_producers(response, results, failures)
        raise_for_items(failures, results)
        return results

    def abort_transaction(self, partition: TopicPartition, producer_id: int,
                          producer_epoch: int) -> None:
        """Write an ABORT marker for the producer's open transaction on the partition
        (a hanging transaction its coordinator no longer knows)."""
        tp = TopicPartition(*partition)
        [leader] = self._leaders([tp])
        response = self._cluster.connection(leader, CHANNEL).request(
            ApiKey.WRITE_TXN_MARKERS, {"markers": [{
                "producer_id": producer_id, "producer_epoch": producer_epoch,
                "transaction_result": False, "coordinator_epoch": ADMIN_ABORT_EPOCH,
                "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}]}]})
        for marker in response.markers:
            for topic in marker.topics:
                for part in topic.partitions:
                    if part.error_code:
                        raise KafkaError.for_code(part.error_code, item=str(tp))
