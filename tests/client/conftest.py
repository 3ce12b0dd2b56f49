"""Fixtures for the client suite: one real broker per module, fresh topics per test."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator

import pytest

from slog.client import Admin, Consumer, ConsumerRecord, NewTopic, TopicPartition
from tests.brokers import BrokerProcess

_names = itertools.count()


@pytest.fixture(scope="module")
def bootstrap(shared_broker: BrokerProcess) -> str:
    return shared_broker.bootstrap


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[Admin]:
    with Admin(bootstrap) as client:
        yield client


@pytest.fixture
def make_topic(admin: Admin) -> Callable[..., str]:
    """Create a uniquely named topic: make_topic(partitions=1, **configs) -> name."""

    def make(partitions: int = 1, **configs: str) -> str:
        name = f"client-{next(_names)}"
        admin.create_topics([NewTopic(name, partitions, configs=configs)])
        return name

    return make


def read_all(bootstrap: str, topic: str, partitions: int = 1, timeout_s: float = 10
             ) -> list[ConsumerRecord]:
    """Every record of ``topic`` up to its current end, with slog's consumer."""
    with Admin(bootstrap) as admin:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = {tp: r.offset for tp, r in admin.list_offsets(dict.fromkeys(tps, "latest")).items()}
    out: list[ConsumerRecord] = []
    with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
        consumer.assign(tps)
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            assert time.monotonic() < deadline, f"read {len(out)} records, ends {ends}"
            out += consumer.poll(200)
    return out
