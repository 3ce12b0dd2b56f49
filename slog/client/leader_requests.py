"""Requests that partition leaders answer (ListOffsets, DeleteRecords).

The partitions are grouped by leader and each leader is asked once. Those whose
leader is unknown or moved, or that failed with a retriable error, are asked
again after a metadata refresh, a few times, before their error is returned.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from slog.client.cluster import ClusterClient
from slog.client.errors import ErrorCode, KafkaError, LeaderNotAvailableError
from slog.client.types import TopicPartition

V = TypeVar("V")  # what each partition asks for
R = TypeVar("R")  # what each partition's answer is, when not an error
Ask = Callable[[int, dict[TopicPartition, V]], dict[TopicPartition, R | KafkaError]]


def request_leader(cluster: ClusterClient, leader: int, channel: str, api_key: int,
                   body: dict[str, Any]) -> Any:
    """One request to ``leader``; a failed connection is closed for the next attempt."""
    conn = cluster.connection(leader, channel)
    try:
        return conn.request(api_key, body)
    except ConnectionError:
        cluster.close_connection(leader, channel)
        raise


def partition_results(response: Any, parse: Callable[[Any], R]
                      ) -> dict[TopicPartition, R | KafkaError]:
    """Each partition of a leader's answer: its error, or ``parse`` of its entry."""
    out: dict[TopicPartition, R | KafkaError] = {}
    for topic in response.topics:
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            out[tp] = KafkaError.for_code(part.error_code, item=str(tp)) if part.error_code \
                else parse(part)
    return out


def ask_leaders(cluster: ClusterClient, wanted: Mapping[TopicPartition, V], ask: Ask[V, R], *,
                attempts: int = 5, backoff_s: float = 0.1,
                retry: Callable[[KafkaError], bool] = lambda error: error.retriable,
                ) -> dict[TopicPartition, R | KafkaError]:
    """Each partition's answer, or the KafkaError it kept failing with."""
    results: dict[TopicPartition, R | KafkaError] = {}
    todo = dict(wanted)
    for attempt in range(attempts):
        if attempt or any(cluster.leader_for(*tp) is None for tp in todo):
            try:
                cluster.refresh_metadata({tp.topic for tp in todo})
            except ConnectionError:
                if attempt == attempts - 1:
                    raise
                time.sleep(backoff_s)
                continue
        by_leader: dict[int, dict[TopicPartition, V]] = defaultdict(dict)
        for tp, value in todo.items():
            leader = cluster.leader_for(*tp)
            if leader is not None:
                by_leader[leader][tp] = value
            elif cluster.partition(*tp) is not None:
                results[tp] = LeaderNotAvailableError(item=str(tp))
            else:
                results[tp] = KafkaError.for_code(int(ErrorCode.unknown_topic_or_partition),
                                                  item=str(tp))
        for leader, tps in by_leader.items():
            try:
                results.update(ask(leader, tps))
            except ConnectionError as exc:
                for tp in tps:
                    results[tp] = KafkaError.for_code(int(ErrorCode.network_exception),
                                                      str(exc), item=str(tp))
        todo = {tp: wanted[tp] for tp, r in results.items()
                if isinstance(r, KafkaError) and retry(r)}
        if not todo:
            break
        time.sleep(backoff_s)
    return {tp: results[tp] for tp in wanted}
