"""Transactions across failures on three brokers (real processes, kill -9): a
read_committed consumer sees all of a transaction or none of it."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from slog.transactions.coordinator import TRANSACTION_STATE_TOPIC, partition_for
from tests.cluster.conftest import Cluster, wait_until
from tests.transactions.conftest import TXN_BROKER_CONFIG
from tests.transactions.test_clients import (
    TIMEOUT_S,
    _group_member_reading,
    _producer,
    _read,
)

TOPIC = "tx-fo"
STATE_PARTITIONS = int(TXN_BROKER_CONFIG["transaction.state.log.num.partitions"])
# Both outcomes in one run: the commit's and the abort's markers cross the same failure.
COMMITTED = [f"c{i}" for i in range(9)]
ABORTED = [f"a{i}" for i in range(9)]


def _open_transaction(cluster: Cluster, transactional_id: str, values: list[str]
                      ) -> Producer:
    producer = _producer(cluster.bootstrap, transactional_id)
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(TOPIC, value.encode(), partition=i % 3)
    producer.flush(TIMEOUT_S)
    return producer


def _open_two(cluster: Cluster, transactional_id: str) -> tuple[Producer, Producer]:
    """Two transactions open on TOPIC, one to commit and one to abort, with the same
    transaction coordinator (their ids hash to one state partition)."""
    cluster.create_topic(TOPIC, 3, 3)
    state_partition = partition_for(transactional_id, STATE_PARTITIONS)
    other = next(t for t in (f"{transactional_id}-{i}" for i in range(1000))
                 if partition_for(t, STATE_PARTITIONS) == state_partition)
    return (_open_transaction(cluster, transactional_id, COMMITTED),
            _open_transaction(cluster, other, ABORTED))


def _end_and_read(cluster: Cluster, to_commit: Producer, to_abort: Producer) -> list[str]:
    """Commit one, abort the other: a read_committed consumer sees all of the first and
    none of the second."""
    to_commit.commit_transaction(60)
    to_abort.abort_transaction(60)
    expected = sorted(COMMITTED)
    assert _read(cluster.bootstrap, TOPIC, "read_committed", len(expected)) == expected
    return expected


@pytest.mark.broker_config(TXN_BROKER_CONFIG)
def test_the_coordinator_dies_mid_transaction(cluster: Cluster) -> None:
    to_commit, to_abort = _open_two(cluster, "tx-fo-coordinator")
    state_partition = partition_for("tx-fo-coordinator", STATE_PARTITIONS)
    coordinator = cluster.leader(TRANSACTION_STATE_TOPIC, state_partition)
    cluster.step(f"kill -9 the coordinator, broker {coordinator}")
    cluster.kill(coordinator)
    cluster.wait_leader(TRANSACTION_STATE_TOPIC, state_partition, not_in=[coordinator])
    # The clients find the new coordinator, which loaded both transactions.
    _end_and_read(cluster, to_commit, to_abort)


@pytest.mark.broker_config(TXN_BROKER_CONFIG)
def test_a_partition_leader_dies_mid_transaction(cluster: Cluster) -> None:
    to_commit, to_abort = _open_two(cluster, "tx-fo-leader")
    coordinator = cluster.leader(TRANSACTION_STATE_TOPIC,
                                 partition_for("tx-fo-leader", STATE_PARTITIONS))
    victim = next(cluster.leader(TOPIC, p) for p in range(3)
                  if cluster.leader(TOPIC, p) != coordinator)
    cluster.step(f"kill -9 broker {victim}, a leader of {TOPIC} (not the coordinator)")
    cluster.kill(victim)
    for p in range(3):
        cluster.wait_leader(TOPIC, p, not_in=[victim])
    # The new leaders replicated the open transactions; the markers go to them.
    expected = _end_and_read(cluster, to_commit, to_abort)
    # The killed broker comes back, recovers its log and its transaction state, and
    # catches up: the topic still reads the same.
    cluster.restart(victim)
    cluster.wait_in_sync(TOPIC)
    assert _read(cluster.bootstrap, TOPIC, "read_committed", len(expected)) == expected


@pytest.mark.broker_config(TXN_BROKER_CONFIG)
def test_offsets_sent_in_a_transaction_survive_a_group_coordinator_failover(
        cluster: Cluster) -> None:
    """The offsets of TxnOffsetCommit are in __consumer_offsets as a transactional batch:
    the new group coordinator holds them pending and stores them at the COMMIT marker."""
    from confluent_kafka import Consumer, TopicPartition

    from slog.groups.placement import OFFSETS_TOPIC
    from slog.groups.placement import partition_for as group_partition

    cluster.create_topic("tx-src", 1, 3)
    cluster.create_topic(TOPIC, 1, 3)
    source = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(10):
        source.produce("tx-src", f"in{i}".encode())
    source.flush(TIMEOUT_S)
    producer = _producer(cluster.bootstrap, "tx-fo-offsets")
    coordinator = cluster.leader(TRANSACTION_STATE_TOPIC,
                                 partition_for("tx-fo-offsets", STATE_PARTITIONS))
    offsets_partitions = int(TXN_BROKER_CONFIG["offsets.topic.num.partitions"])
    probe = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "probe"})
    probe.committed([TopicPartition("tx-src", 0)], TIMEOUT_S)  # creates the offsets topic
    probe.close()
    cluster.wait_in_sync(OFFSETS_TOPIC)
    group = next(g for g in (f"tx-group-{i}" for i in range(100))
                 if cluster.leader(OFFSETS_TOPIC, group_partition(g, offsets_partitions))
                 != coordinator)
    g = group
    group_coordinator = cluster.leader(OFFSETS_TOPIC, group_partition(g, offsets_partitions))
    consumer, taken = _group_member_reading(cluster.bootstrap, g, "tx-src", 5)
    producer.begin_transaction()
    for message in taken:
        producer.produce(TOPIC, message.value().upper())
    producer.send_offsets_to_transaction([TopicPartition("tx-src", 0, 5)],
                                         consumer.consumer_group_metadata(), TIMEOUT_S)
    consumer.close()
    cluster.step(f"kill -9 the group coordinator, broker {group_coordinator}")
    cluster.kill(group_coordinator)
    cluster.wait_leader(OFFSETS_TOPIC, group_partition(g, offsets_partitions),
                        not_in=[group_coordinator])
    producer.commit_transaction(60)

    def committed() -> int:
        reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": g})
        try:
            [tp] = reader.committed([TopicPartition("tx-src", 0)], TIMEOUT_S)
            return int(tp.offset)
        finally:
            reader.close()

    assert wait_until(lambda: committed() == 5, TIMEOUT_S, "the committed offset")
    assert _read(cluster.bootstrap, TOPIC, "read_committed", 5) == \
        sorted(f"IN{i}" for i in range(5))
