"""Dynamic broker configs take effect without a restart, on a real broker.

One test per family: log settings at the cluster default (segment size, retention)
rebuild every partition's LogConfig that has no topic override; min.insync.replicas
applies to the next acks=all produce; max.connections to the next accepted socket.
(unclean.leader.election.enable, a controller decision, is in tests/cluster/test_unclean.py.)
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slog.client import Admin, NewTopic, Producer, TopicPartition
from slog.client.connection import BrokerConnection
from slog.core.names import DataDirLayout
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess, running_broker
from tests.cluster.conftest import produce_body, produce_error, wait_until

HOUR_AGO_MS = int(time.time() * 1000) - 3_600_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path / "data", **{"log.retention.check.interval.ms": "200"}) as b:
        yield b


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[Admin]:
    with Admin(broker.bootstrap) as client:
        yield client


def _produce(broker: BrokerProcess, topic: str, count: int, *, timestamp_ms: int | None = None
             ) -> None:
    with Producer(broker.bootstrap, acks=1, linger_ms=0) as producer:
        for _ in range(count):  # one batch each, so segments can roll between them
            producer.send(topic, b"x" * 200, partition=0, timestamp_ms=timestamp_ms
                          ).result(timeout=15)


def _segments(broker: BrokerProcess, topic: str) -> int:
    directory = DataDirLayout(broker.data_dir).partition_dir(1, topic, 0)
    return len(list(directory.glob("*.log")))


def test_segment_size_at_the_cluster_default_rolls_topics_without_an_override(
        broker: BrokerProcess, admin: Admin) -> None:
    admin.create_topics([NewTopic("follows", 1, 1),
                         NewTopic("own-size", 1, 1, configs={"segment.bytes": str(2**20)})])
    _produce(broker, "follows", 3)
    assert _segments(broker, "follows") == 1
    admin.alter_broker_configs(None, {"log.segment.bytes": "1024"})
    _produce(broker, "follows", 20)
    _produce(broker, "own-size", 20)
    assert _segments(broker, "follows") >= 4, "the new default segment size did not apply"
    assert _segments(broker, "own-size") == 1, "a topic override must win over the default"
    # Back to the built-in default: no more rolls for small appends.
    admin.alter_broker_configs(None, delete=["log.segment.bytes"])
    before = _segments(broker, "follows")
    _produce(broker, "follows", 20)
    assert _segments(broker, "follows") <= before + 1


def test_retention_at_the_cluster_default_deletes_old_segments(
        broker: BrokerProcess, admin: Admin) -> None:
    topic = "aging"
    admin.create_topics([NewTopic(topic, 1, 1, configs={"segment.bytes": "1024"})])
    _produce(broker, topic, 20, timestamp_ms=HOUR_AGO_MS)
    tp = TopicPartition(topic, 0)

    def earliest() -> int:
        return admin.list_offsets({tp: "earliest"})[tp].offset

    time.sleep(0.5)  # a few retention checks at the default (7 days): nothing goes
    assert earliest() == 0
    admin.alter_broker_configs(1, {"log.retention.ms": "60000"})  # this broker: one minute
    wait_until(lambda: earliest() > 0, 15, "retention to delete hour-old segments")


def test_min_insync_replicas_default_applies_to_the_next_produce(
        broker: BrokerProcess, admin: Admin) -> None:
    admin.create_topics([NewTopic("acks-all", 1, 1)])

    def produce() -> int:
        with BrokerConnection("127.0.0.1", broker.port).connect() as conn:
            return produce_error(conn.request(
                ApiKey.PRODUCE, produce_body("acks-all", 0, [b"record"], acks=-1)))

    wait_until(lambda: produce() == ErrorCode.none, 10, "the new topic to take writes")
    admin.alter_broker_configs(None, {"min.insync.replicas": "2"})
    assert produce() == ErrorCode.not_enough_replicas
    admin.alter_broker_configs(None, delete=["min.insync.replicas"])
    assert produce() == ErrorCode.none


def _refused(port: int) -> bool:
    """True if the broker closes a new socket at once (max.connections reached)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(0.5)
        try:
            return sock.recv(1) == b""
        except TimeoutError:
            return False


def test_max_connections_applies_to_new_connections(broker: BrokerProcess, admin: Admin
                                                    ) -> None:
    held = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(3)]
    try:
        assert not _refused(broker.port)
        # The admin client holds connections too: a limit of 2 is already full.
        admin.alter_broker_configs(1, {"max.connections": "2"})
        assert _refused(broker.port)
        for sock in held:
            sock.close()
        held = []
        admin.cluster.close()  # the admin's own sockets go as well
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: not _refused(broker.port), 10, "room below max.connections again")
