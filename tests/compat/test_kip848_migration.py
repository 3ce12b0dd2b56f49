"""KIP-848's online migration with real librdkafka consumers: a classic group
upgraded member by member to the consumer protocol under produce load (nothing
lost, no partition held twice), and the downgrade when the last consumer-protocol
member leaves."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer

from slog.client.connection import BrokerConnection
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess, running_broker
from tests.compat.test_kip848 import (
    BROKER,
    TIMEOUT_S,
    Ownership,
    create,
    describe,
    produce_slowly,
)
from tests.groups.helpers import unique


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("migration") / "data", **BROKER) as process:
        yield process


def group_type(conn: BrokerConnection, group: str) -> str | None:
    listed = conn.request(ApiKey.LIST_GROUPS, {"types_filter": []}, version=5)
    return next((g.group_type for g in listed.groups if g.group_id == group), None)


class Members:
    """Consumers of one group, classic or consumer protocol, polled in turn on this
    thread; what they read and who holds which partition are recorded."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str):
        self.broker, self.group, self.topic = broker, group, topic
        self.consumers: dict[str, Consumer] = {}
        self.ownership = Ownership()
        self.seen: set[bytes] = set()

    def join(self, name: str, protocol: str, strategy: str = "range") -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": self.broker.bootstrap, "group.id": self.group,
            "auto.offset.reset": "earliest", "enable.auto.commit": True,
            "auto.commit.interval.ms": 200, "group.protocol": protocol}
        if protocol == "classic":
            config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                           "partition.assignment.strategy": strategy})
        c = Consumer(config)
        c.subscribe([self.topic], **self.ownership.callbacks(name))
        self.consumers[name] = c

    def leave(self, name: str) -> None:
        self.consumers.pop(name).close()

    def poll(self, rounds: int) -> None:
        for _ in range(rounds):
            for c in list(self.consumers.values()):
                msg = c.poll(0.02)
                if msg is not None and msg.error() is None:
                    self.seen.add(msg.value())

    def poll_until(self, done: Any, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not done():
            assert time.monotonic() < deadline, what
            self.poll(5)

    def all_assigned(self) -> bool:
        return all(c.assignment() for c in self.consumers.values())

    def close(self) -> None:
        for name in list(self.consumers):
            self.leave(name)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])  # eager, incremental
def test_a_rolling_upgrade_under_load_loses_nothing(broker: BrokerProcess,
                                                     conn: BrokerConnection,
                                                     strategy: str) -> None:
    topic, partitions, total = unique("mig"), 6, 3000
    create(broker, topic, partitions)
    members = Members(broker, unique("g"), topic)
    group = members.group
    producer = threading.Thread(target=produce_slowly, args=(
        broker, topic, [b"v%d" % i for i in range(total)], partitions))
    producer.start()
    try:
        members.join("classic-1", "classic", strategy)
        members.join("classic-2", "classic", strategy)
        members.poll_until(members.all_assigned, "the classic members' first assignment")
        assert group_type(conn, group) == "classic"
        # Classic members replaced one by one by consumer-protocol members.
        members.join("new-1", "consumer")
        members.poll_until(lambda: group_type(conn, group) == "consumer", "the upgrade")
        members.poll_until(members.all_assigned, "the mixed group's assignment")
        # ConsumerGroupDescribe tells classic (0) from consumer-protocol (1) members.
        assert sorted(m.member_type for m in describe(conn, group).members) == [0, 0, 1]
        members.leave("classic-1")
        members.join("new-2", "consumer")
        members.poll_until(members.all_assigned, "new-2's assignment")
        members.leave("classic-2")
        members.poll_until(lambda: not producer.is_alive(), "the end of the load")
        members.poll_until(lambda: len(members.seen) == total, "every record")
        assert not members.ownership.violations, members.ownership.violations
        members.poll_until(lambda: describe(conn, group).group_state == "Stable",
                           "a stable group")
        described = describe(conn, group)
        assert described.error_code == ErrorCode.none and len(described.members) == 2
        assert all(m.member_type == 1 for m in described.members)
        owned = sorted(p for m in described.members for t in m.assignment.topic_partitions
                       for p in t.partitions)
        assert owned == list(range(partitions))
    finally:
        members.close()
        producer.join()


def test_the_last_consumer_member_leaving_downgrades(broker: BrokerProcess,
                                                    conn: BrokerConnection) -> None:
    topic, group = unique("mig"), unique("g")
    partitions = 4
    create(broker, topic, partitions)
    members = Members(broker, group, topic)
    try:
        members.join("classic-1", "classic")
        members.poll_until(members.all_assigned, "the classic member's assignment")
        members.join("new-1", "consumer")
        members.poll_until(lambda: group_type(conn, group) == "consumer", "the upgrade")
        members.poll_until(members.all_assigned, "the mixed group's assignment")
        members.leave("new-1")
        members.poll_until(lambda: group_type(conn, group) == "classic", "the downgrade")
        # The classic member rebalances into the classic group and takes everything.
        members.poll_until(lambda: len(members.consumers["classic-1"].assignment())
                           == partitions, "the classic member's full assignment")
        members.join("classic-2", "classic")
        members.poll_until(lambda: members.all_assigned() and sum(
            len(c.assignment()) for c in members.consumers.values()) == partitions,
            "a classic rebalance with a new member")
        assert not members.ownership.violations, members.ownership.violations
    finally:
        members.close()
