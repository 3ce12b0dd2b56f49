"""The transactional producer's conversation with its transaction coordinator
(Kafka's TransactionManager, synchronous, on the caller's thread).

The coordinator is found with FindCoordinator (key type 1) and asked again when it
moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE); a coordinator loading its state
or finishing the previous transaction (COORDINATOR_LOAD_IN_PROGRESS,
CONCURRENT_TRANSACTIONS) is asked again after a backoff, until the call's deadline.
Offsets sent in a transaction go to the group's coordinator (TxnOffsetCommit).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from slog.client.cluster import ClusterClient
from slog.client.errors import ErrorCode, KafkaError, KafkaTimeoutError
from slog.client.group_requests import find_coordinator
from slog.client.types import BrokerMetadata, TopicPartition
from slog.protocol.apis import ApiKey

CHANNEL = "txn"
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
_MOVED = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_WAIT = frozenset({ErrorCode.coordinator_load_in_progress,
                   ErrorCode.concurrent_transactions})
# Versions this client speaks (the classic protocol; brokers offer these or more).
_VERSIONS = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 3,
             ApiKey.ADD_OFFSETS_TO_TXN: 3, ApiKey.END_TXN: 3, ApiKey.TXN_OFFSET_COMMIT: 3}


class TransactionManager:
    def __init__(self, cluster: ClusterClient, transactional_id: str, timeout_ms: int,
                 backoff_s: float, max_wait_s: float):
        self._cluster = cluster
        self.transactional_id = transactional_id
        self._timeout_ms = timeout_ms
        self._backoff_s = backoff_s
        self._max_wait_s = max_wait_s
        self._coordinators: dict[tuple[int, str], BrokerMetadata] = {}

    def _call(self, key_type: int, key: str, api_key: ApiKey, body: dict[str, Any],
              error_of: Callable[[Any], int]) -> Any:
        """One request to the coordinator of ``key``, retried while it moves or is busy."""
        deadline = time.monotonic() + self._max_wait_s
        while True:
            node = self._coordinators.get((key_type, key))
            if node is None:
                node = self._coordinators[(key_type, key)] = find_coordinator(
                    self._cluster, key, key_type=key_type, timeout_s=self._max_wait_s)
            try:
                if node.node_id not in self._cluster.metadata.brokers:
                    self._cluster.refresh_metadata([])
                conn = self._cluster.connection(node.node_id, CHANNEL)
                version = min(_VERSIONS[api_key], conn.versions.get(api_key, (0, 0))[1])
                response = conn.request(api_key, body, version=version)
                code = ErrorCode(error_of(response))
            except ConnectionError:
                self._cluster.close_connection(node.node_id, CHANNEL)
                code = ErrorCode.coordinator_not_available
            if code is ErrorCode.none:
                return response
            if code not in _MOVED and code not in _WAIT:
                raise KafkaError.for_code(code, item=key)
            if code in _MOVED:
                self._coordinators.pop((key_type, key), None)
            if time.monotonic() + self._backoff_s > deadline:
                raise KafkaTimeoutError(f"{api_key.name} for {key!r}: still {code.name} after "
                                        f"{self._max_wait_s:.0f} s")
            time.sleep(self._backoff_s)

    def _txn(self, api_key: ApiKey, body: dict[str, Any],
             error_of: Callable[[Any], int] = lambda r: r.error_code) -> Any:
        return self._call(KEY_TYPE_TRANSACTION, self.transactional_id, api_key, body, error_of)

    def init_producer_id(self, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
        """A producer id and epoch for the transactional id (the current ones given:
        KIP-360, a bumped epoch for the same producer)."""
        response = self._txn(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": self.transactional_id, "transaction_timeout": self._timeout_ms,
            "producer_id": producer_id, "producer_epoch": epoch})
        return response.producer_id, response.producer_epoch

    def add_partitions(self, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)

        def first_error(response: Any) -> int:
            return next((p.partition_error_code for t in response.results_by_topic_v3_and_below
                         for p in t.results_by_partition if p.partition_error_code), 0)

        self._txn(ApiKey.ADD_PARTITIONS_TO_TXN, {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": producer_id, "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": p}
                                    for t, p in by_topic.items()]}, first_error)

    def end(self, producer_id: int, epoch: int, commit: bool) -> None:
        self._txn(ApiKey.END_TXN, {"transactional_id": self.transactional_id,
                                   "producer_id": producer_id, "producer_epoch": epoch,
                                   "committed": commit})

    def send_offsets(self, producer_id: int, epoch: int, offsets: Mapping[TopicPartition, int],
                     group: Any) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit at the group's coordinator; ``group``:
        the consumer's GroupMetadata (its generation and member id are checked)."""
        self._txn(ApiKey.ADD_OFFSETS_TO_TXN, {
            "transactional_id": self.transactional_id, "producer_id": producer_id,
            "producer_epoch": epoch, "group_id": group.group_id})
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, offset in offsets.items():
            by_topic[tp.topic].append({"partition_index": tp.partition,
                                       "committed_offset": offset,
                                       "committed_leader_epoch": -1,
                                       "committed_metadata": ""})

        def first_error(response: Any) -> int:
            return next((p.error_code for t in response.topics for p in t.partitions
                         if p.error_code), 0)

        self._call(KEY_TYPE_GROUP, group.group_id, ApiKey.TXN_OFFSET_COMMIT, {
            "transactional_id": self.transactional_id, "group_id": group.group_id,
            "producer_id": producer_id, "producer_epoch": epoch,
            "generation_id": group.generation_id, "member_id": group.member_id,
            "group_instance_id": group.group_instance_id,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]},
            first_error)
