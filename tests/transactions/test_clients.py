"""Real transactional clients (confluent-kafka / librdkafka) against real brokers:
commit and abort as read_committed consumers see them, zombie fencing, offsets sent
in a transaction, timeouts, and markers written by leaders on other brokers."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from slog.client import Consumer as SlogConsumer
from tests.brokers import BrokerProcess
from tests.cluster.conftest import Cluster, wait_until
from tests.transactions.conftest import TXN_BROKER_CONFIG

TIMEOUT_S = 30


def _create(bootstrap: str, topic: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, replication)]).values():
        future.result(TIMEOUT_S)


def _producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         **extra})
    producer.init_transactions(TIMEOUT_S)
    return producer


def _hanging(bootstrap: str, transactional_id: str, topic: str, value: bytes,
             **extra: object) -> Producer:
    """A producer with a transaction open on ``topic``-0, holding ``value``."""
    producer = _producer(bootstrap, transactional_id, **extra)
    producer.begin_transaction()
    producer.produce(topic, value, partition=0)
    producer.flush(TIMEOUT_S)
    return producer


def _transaction(producer: Producer, topic: str, values: Iterable[str], partitions: int,
                 commit: bool) -> None:
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % partitions)
    producer.flush(TIMEOUT_S)
    if commit:
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.abort_transaction(TIMEOUT_S)


def _read(bootstrap: str, topic: str, isolation: str, expected: int) -> list[str]:
    """Everything a fresh consumer reads from the start (waits for ``expected`` values,
    then a little longer for any that should not be there)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": isolation,
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if len(values) >= expected:
                    quiet_until = quiet_until or time.monotonic() + 1.0
                    if time.monotonic() > quiet_until:
                        break
                continue
            assert message.error() is None, message.error()
            values.append(message.value().decode())
    finally:
        consumer.close()
    return sorted(values)


def _group_member_reading(bootstrap: str, group: str, topic: str, count: int
                          ) -> tuple[Consumer, list[Any]]:
    """A read_committed member of ``group`` and the first ``count`` records it polled."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    taken: list[Any] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(taken) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            taken.append(message)
    assert len(taken) == count
    return consumer, taken


def test_read_committed_sees_committed_transactions_only(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-visible", 3)
    producer = _producer(bootstrap, "tx-visible-1")
    _transaction(producer, "tx-visible", [f"c{i}" for i in range(6)], 3, commit=True)
    _transaction(producer, "tx-visible", [f"a{i}" for i in range(6)], 3, commit=False)
    _transaction(producer, "tx-visible", [f"d{i}" for i in range(3)], 3, commit=True)
    committed = sorted([f"c{i}" for i in range(6)] + [f"d{i}" for i in range(3)])
    assert _read(bootstrap, "tx-visible", "read_committed", 9) == committed
    # read_uncommitted sees the aborted records too, but never the markers.
    everything = sorted(committed + [f"a{i}" for i in range(6)])
    assert _read(bootstrap, "tx-visible", "read_uncommitted", 15) == everything
    # slog's own consumer, both ways.
    for isolation, expected in (("read_committed", committed),
                                ("read_uncommitted", everything)):
        with SlogConsumer(bootstrap, auto_offset_reset="earliest",
                          isolation_level=isolation) as consumer:
            consumer.assign([("tx-visible", p) for p in range(3)])
            got: list[str] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < len(expected) and time.monotonic() < deadline:
                got += [r.value.decode() for r in consumer.poll(200) if r.value]
            assert sorted(got) == expected
            assert not consumer.poll(300)  # nothing else: no markers


def test_an_open_transaction_holds_read_committed_back(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-open", 1)
    producer = _hanging(bootstrap, "tx-open-1", "tx-open", b"pending")
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("tx-open", b"after")  # behind the open transaction: not stable yet
    plain.flush(TIMEOUT_S)
    assert _read(bootstrap, "tx-open", "read_committed", 0) == []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso",
                         "isolation.level": "read_committed"})
    low, high = consumer.get_watermark_offsets(TopicPartition("tx-open", 0), TIMEOUT_S)
    assert (low, high) == (0, 0)  # read_committed: the end is the LSO
    producer.commit_transaction(TIMEOUT_S)
    assert _read(bootstrap, "tx-open", "read_committed", 2) == ["after", "pending"]
    low, high = consumer.get_watermark_offsets(TopicPartition("tx-open", 0), TIMEOUT_S)
    assert high == 3  # two records and the marker
    consumer.close()


def test_a_zombie_producer_is_fenced(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-zombie", 2)
    zombie = _hanging(bootstrap, "tx-zombie-1", "tx-zombie", b"zombie")
    # The same transactional id starts again elsewhere: the open transaction is aborted.
    successor = _producer(bootstrap, "tx-zombie-1")
    _transaction(successor, "tx-zombie", ["fresh"], 2, commit=True)
    with pytest.raises(KafkaException) as raised:
        zombie.produce("tx-zombie", b"late", partition=1)
        zombie.commit_transaction(TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    assert error.fatal() and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH)
    assert _read(bootstrap, "tx-zombie", "read_committed", 1) == ["fresh"]


def test_offsets_sent_in_a_transaction_commit_with_it(txn_broker: BrokerProcess) -> None:
    """A consume-transform-produce loop: the group's offsets move only when committed."""
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-in", 1)
    _create(bootstrap, "tx-out", 1)
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        source.produce("tx-in", f"in{i}".encode())
    source.flush(TIMEOUT_S)
    group = "tx-pipeline"

    def run_once(commit: bool) -> None:
        consumer, batch = _group_member_reading(bootstrap, group, "tx-in", 5)
        producer = _producer(bootstrap, "tx-pipeline-1")
        producer.begin_transaction()
        for message in batch:
            producer.produce("tx-out", message.value().upper())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.abort_transaction(TIMEOUT_S)
        consumer.close()

    def committed_offset() -> int:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        [tp] = consumer.committed([TopicPartition("tx-in", 0)], TIMEOUT_S)
        consumer.close()
        return int(tp.offset)

    run_once(commit=False)
    assert committed_offset() < 0  # aborted: no offset stored
    run_once(commit=True)
    assert committed_offset() == 5
    run_once(commit=True)  # resumes where the committed transaction left off
    assert committed_offset() == 10
    assert _read(bootstrap, "tx-out", "read_committed", 10) == \
        sorted(f"IN{i}" for i in range(10))


def test_abort_right_after_produce_follows_a_commit(txn_broker: BrokerProcess) -> None:
    """abort_transaction() with the records still unsent, just after a commit: the
    AddPartitionsToTxn may be held until the commit completes, and the EndTxn behind
    it must still find the transaction the client believes is open."""
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-quick-abort", 2)
    client_log = _ClientLog()
    producer = _producer(bootstrap, "tx-quick-abort-1", debug="eos", logger=client_log)
    committed = []
    # librdkafka sends no EndTxn when no AddPartitionsToTxn went out yet: a short pause
    # lets it go out, to be held while the commit completes, in some rounds at least.
    for round_, pause_s in enumerate((0, 0.001, 0.002, 0.003, 0.005, 0.001, 0.002, 0.02)):
        values = [f"c{round_}-{i}" for i in range(4)]
        _transaction(producer, "tx-quick-abort", values, 2, commit=True)
        committed += values
        producer.begin_transaction()
        for i in range(4):
            producer.produce("tx-quick-abort", f"a{round_}-{i}".encode(), partition=i % 2)
        time.sleep(pause_s)
        producer.abort_transaction(TIMEOUT_S)  # raises on INVALID_TXN_STATE or fatal
    _transaction(producer, "tx-quick-abort", ["last"], 2, commit=True)
    producer.poll(0)  # serves the client's log
    assert any("EndTxn returned NO_ERROR in state AbortingTransaction" in line
               for line in client_log.lines), "no abort reached the coordinator"
    assert _read(bootstrap, "tx-quick-abort", "read_committed", len(committed) + 1) == \
        sorted([*committed, "last"])


class _ClientLog(logging.Logger):
    """librdkafka's log lines (confluent-kafka's ``logger`` setting)."""

    def __init__(self) -> None:
        super().__init__("librdkafka")
        self.lines: list[str] = []

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        self.lines.append(str(msg) % args if args else str(msg))


def test_a_transaction_past_its_timeout_is_aborted(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-timeout", 1)
    producer = _hanging(bootstrap, "tx-timeout-1", "tx-timeout", b"stuck",
                        **{"transaction.timeout.ms": 1000})
    # The coordinator aborts it (bumping the epoch): the LSO moves past it.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "timeout",
                         "isolation.level": "read_committed"})
    wait_until(lambda: consumer.get_watermark_offsets(
        TopicPartition("tx-timeout", 0), TIMEOUT_S)[1] == 2, TIMEOUT_S, "the abort marker")
    consumer.close()
    with pytest.raises(KafkaException):
        producer.commit_transaction(TIMEOUT_S)
    assert _read(bootstrap, "tx-timeout", "read_committed", 0) == []


def test_too_long_a_timeout_is_refused(txn_broker: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": txn_broker.bootstrap,
                         "transactional.id": "tx-long", "transaction.timeout.ms": 900_001})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


@pytest.mark.broker_config(TXN_BROKER_CONFIG)
def test_markers_reach_leaders_on_every_broker(cluster: Cluster) -> None:
    """Three brokers, RF 3: the coordinator has the other leaders write the markers."""
    cluster.create_topic("tx-spread", 3, 3, assignment={0: [1, 2, 3], 1: [2, 3, 1],
                                                        2: [3, 1, 2]})
    producer = _producer(cluster.bootstrap, "tx-spread-1")
    _transaction(producer, "tx-spread", [f"c{i}" for i in range(9)], 3, commit=True)
    _transaction(producer, "tx-spread", [f"a{i}" for i in range(9)], 3, commit=False)
    assert _read(cluster.bootstrap, "tx-spread", "read_committed", 9) == \
        sorted(f"c{i}" for i in range(9))
    state = cluster.image().topics["__transaction_state"]
    assert len(state.partitions) == 5
    assert all(len(p.replicas) == 3 for p in state.partitions.values())
    assert state.configs["cleanup.policy"] == "compact"
    assert state.configs["min.insync.replicas"] == "2"
