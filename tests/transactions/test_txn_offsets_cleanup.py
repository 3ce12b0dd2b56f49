"""Offsets sent in a transaction that is still open when their topic or their group is
deleted: as in Kafka, the deletion drops them, so the transaction's COMMIT marker does
not bring them back, neither at once nor after the coordinator reloads its log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.brokers import BrokerProcess, running_broker
from tests.cluster.conftest import wait_until
from tests.transactions.conftest import TXN_BROKER_CONFIG
from tests.transactions.test_clients import TIMEOUT_S, _create, _producer


@pytest.fixture
def own_txn_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of its own, for a test that restarts it."""
    with running_broker(tmp_path / "data", 1, **TXN_BROKER_CONFIG) as process:
        yield process


def _filled(bootstrap: str, topic: str, count: int) -> None:
    _create(bootstrap, topic, 1)
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        source.produce(topic, b"v%d" % i, partition=0)
    source.flush(TIMEOUT_S)


def _offsets_pending(bootstrap: str, group: str, topic: str, transactional_id: str
                     ) -> Producer:
    """A producer whose open transaction holds ``group``'s offset 3 on ``topic``-0."""
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False})
    producer = _producer(bootstrap, transactional_id)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 3)],
                                         member.consumer_group_metadata(), TIMEOUT_S)
    member.close()
    return producer


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], TIMEOUT_S)
        return int(tp.offset)
    finally:
        consumer.close()


def test_deleting_a_topic_drops_its_offsets_awaiting_a_marker(txn_broker: BrokerProcess
                                                               ) -> None:
    bootstrap, topic, group = txn_broker.bootstrap, "txo-deleted", "txo-deleted-group"
    _filled(bootstrap, topic, 5)
    producer = _offsets_pending(bootstrap, group, topic, "txo-deleted-1")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(TIMEOUT_S)
    wait_until(lambda: topic not in admin.list_topics(timeout=TIMEOUT_S).topics, TIMEOUT_S,
               "the topic to be deleted")
    producer.commit_transaction(TIMEOUT_S)
    _filled(bootstrap, topic, 1)  # created again: it must not inherit the old offset
    assert _committed(bootstrap, group, topic) < 0


def test_a_deleted_groups_pending_offsets_stay_deleted_after_a_reload(
        own_txn_broker: BrokerProcess) -> None:
    """The group's tombstone follows the transactional offset in ``__consumer_offsets``;
    the reloading coordinator holds the open transaction's offsets again but applies the
    tombstone, so the COMMIT after the restart stores nothing."""
    bootstrap, topic, group = own_txn_broker.bootstrap, "txo-group", "txo-group-deleted"
    _filled(bootstrap, topic, 5)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    member.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # the group exists
    member.close()
    producer = _offsets_pending(bootstrap, group, topic, "txo-group-1")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_consumer_groups([group])[group].result(TIMEOUT_S)
    own_txn_broker.stop()
    own_txn_broker.start()
    producer.commit_transaction(TIMEOUT_S)
    assert _committed(bootstrap, group, topic) < 0
    # The same transactional id and group work as usual afterwards.
    producer = _offsets_pending(bootstrap, group, topic, "txo-group-1")
    producer.commit_transaction(TIMEOUT_S)
    assert _committed(bootstrap, group, topic) == 3
