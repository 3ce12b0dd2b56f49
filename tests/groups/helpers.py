"""Helpers for the group suites: fast group settings, a polling loop, waiting."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

from slog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from slog.client.connection import BrokerConnection
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

# Short timeouts so failures and rebalances happen in test time.
GROUP_BROKER = {"group.min.session.timeout.ms": "100", "group.max.size": "4"}
FAST = {"session_timeout_ms": 1500, "heartbeat_interval_ms": 100, "fetch_max_wait_ms": 100,
        "auto_offset_reset": "earliest", "auto_commit_interval_ms": 200}
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{time.monotonic_ns() % 100000}"


def make_topic(bootstrap: str, partitions: int, **configs: str) -> str:
    name = unique("gt")
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, configs=configs)])
    return name


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes, int]]
            ) -> None:
    """(key, value, partition) each."""
    with Producer(bootstrap) as producer:
        for key, value, partition in records:
            producer.send(topic, key=key, value=value, partition=partition)
        producer.flush()


def group_consumer(bootstrap: str, group: str, client_id: str = "slog", **settings: Any
                   ) -> Consumer:
    return Consumer(bootstrap, group_id=group, client_id=client_id, **{**FAST, **settings})


def wait_for(condition: Callable[[], bool], timeout_s: float = 15.0,
             step: Callable[[], None] | None = None, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        if step is not None:
            step()
        else:
            time.sleep(0.02)


def poll_all(consumers: Iterable[Consumer], sink: dict[int, list[Any]] | None = None,
             timeout_ms: float = 20) -> None:
    """One poll of each consumer (same thread: rebalances run in their heartbeat threads)."""
    for i, consumer in enumerate(consumers):
        records = consumer.poll(timeout_ms)
        if sink is not None:
            sink.setdefault(i, []).extend(records)


def assignments(consumers: Iterable[Consumer]) -> list[list[int]]:
    return [sorted(tp.partition for tp in c.assignment()) for c in consumers]


def tps(topic: str, partitions: Iterable[int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


_COORDINATOR_NOT_READY = (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
                          ErrorCode.coordinator_not_available)


def heartbeat_when_ready(conn: BrokerConnection, body: dict[str, Any],
                         timeout_s: float = 20.0) -> Any:
    """A ConsumerGroupHeartbeat, sent again while the coordinator is not ready (it loads
    after a restart; on a fresh broker __consumer_offsets is still being created)."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, version=1)
        if answer.error_code not in _COORDINATOR_NOT_READY:
            return answer
        assert time.monotonic() < deadline
        time.sleep(0.2)
