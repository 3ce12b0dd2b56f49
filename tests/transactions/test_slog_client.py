"""slog's own transactional Producer: commit, abort, fencing, and offsets sent in a
transaction by a consume-transform-produce loop of slog's group Consumer."""

from __future__ import annotations

import time

import pytest

from slog.client import Consumer, Producer, TopicPartition
from slog.client.errors import InvalidArgumentError, KafkaError
from tests.brokers import BrokerProcess
from tests.transactions.test_clients import TIMEOUT_S, _create, _read


def test_commit_and_abort(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-slog", 2)
    with Producer(bootstrap, transactional_id="tx-slog-1") as producer:
        with pytest.raises(InvalidArgumentError):
            producer.begin_transaction()  # before init_transactions()
        producer.init_transactions()
        with pytest.raises(InvalidArgumentError):
            producer.send("tx-slog", b"outside")  # no transaction open
        producer.begin_transaction()
        for i in range(6):
            producer.send("tx-slog", f"c{i}".encode(), partition=i % 2)
        producer.commit_transaction(TIMEOUT_S)
        producer.begin_transaction()
        for i in range(6):
            producer.send("tx-slog", f"a{i}".encode(), partition=i % 2)
        producer.abort_transaction(TIMEOUT_S)
        producer.begin_transaction()
        producer.commit_transaction(TIMEOUT_S)  # an empty transaction: nothing to end
    assert _read(bootstrap, "tx-slog", "read_committed", 6) == sorted(f"c{i}" for i in range(6))
    assert len(_read(bootstrap, "tx-slog", "read_uncommitted", 12)) == 12


def test_a_second_instance_fences_the_first(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-slog-zombie", 1)
    zombie = Producer(bootstrap, transactional_id="tx-slog-zombie-1")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("tx-slog-zombie", b"zombie").result(TIMEOUT_S)
    with Producer(bootstrap, transactional_id="tx-slog-zombie-1") as successor:
        successor.init_transactions()
        successor.begin_transaction()
        successor.send("tx-slog-zombie", b"fresh")
        successor.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaError):
        zombie.commit_transaction(TIMEOUT_S)
    zombie.close(1)
    assert _read(bootstrap, "tx-slog-zombie", "read_committed", 1) == ["fresh"]


def test_consume_transform_produce_with_offsets_in_the_transaction(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-slog-in", 1)
    _create(bootstrap, "tx-slog-out", 1)
    with Producer(bootstrap) as source:
        for i in range(10):
            source.send("tx-slog-in", f"in{i}".encode())
    group = "tx-slog-pipeline"

    def run_once(commit: bool) -> None:
        with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, isolation_level="read_committed",
                      max_poll_records=5) as consumer, \
                Producer(bootstrap, transactional_id="tx-slog-pipeline-1") as producer:
            consumer.subscribe(["tx-slog-in"])
            producer.init_transactions()
            records = []
            deadline = time.monotonic() + TIMEOUT_S
            while not records and time.monotonic() < deadline:
                records = consumer.poll(200)
            assert len(records) == 5
            producer.begin_transaction()
            for record in records:
                producer.send("tx-slog-out", record.value.upper())
            producer.send_offsets_to_transaction(
                {TopicPartition("tx-slog-in", 0): records[-1].offset + 1},
                consumer.group_metadata())
            if commit:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)

    def committed() -> int | None:
        # read_committed asks for stable offsets (KIP-447), so a COMMIT marker still
        # on its way is waited for rather than read past
        with Consumer(bootstrap, group_id=group, isolation_level="read_committed") as reader:
            found = reader.committed([("tx-slog-in", 0)])
        value = found.get(TopicPartition("tx-slog-in", 0))
        return None if value is None else getattr(value, "offset", value)

    run_once(commit=False)
    assert committed() is None
    run_once(commit=True)
    assert committed() == 5
    run_once(commit=True)
    assert committed() == 10
    assert _read(bootstrap, "tx-slog-out", "read_committed", 10) == \
        sorted(f"IN{i}" for i in range(10))
