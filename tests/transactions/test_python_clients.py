"""aiokafka's and kafka-python's transactional producers and read_committed consumers
against slog: commit, abort, and what each isolation level sees."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer

from tests.brokers import BrokerProcess
from tests.groups.helpers import wait_for
from tests.transactions.test_clients import TIMEOUT_S, _create, _read

COMMITTED = [f"c{i}" for i in range(4)]
ABORTED = [f"a{i}" for i in range(4)]


def test_aiokafka_transactions(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-aiokafka", 2)

    async def scenario() -> tuple[list[str], list[str]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                    transactional_id="tx-aiokafka-1")
        await producer.start()
        try:
            async with producer.transaction():
                for i, value in enumerate(COMMITTED):
                    await producer.send("tx-aiokafka", value.encode(), partition=i % 2)
            await producer.begin_transaction()
            for i, value in enumerate(ABORTED):
                await producer.send_and_wait("tx-aiokafka", value.encode(), partition=i % 2)
            await producer.abort_transaction()
        finally:
            await producer.stop()
        seen = []
        for isolation, expected in (("read_committed", 4), ("read_uncommitted", 8)):
            consumer = AIOKafkaConsumer("tx-aiokafka", bootstrap_servers=bootstrap,
                                        auto_offset_reset="earliest",
                                        isolation_level=isolation)
            await consumer.start()
            values: list[str] = []
            deadline = time.monotonic() + TIMEOUT_S
            try:
                while len(values) < expected and time.monotonic() < deadline:
                    batches = await consumer.getmany(timeout_ms=200)
                    values += [m.value.decode() for ms in batches.values() for m in ms]
                values += [m.value.decode() for ms in
                           (await consumer.getmany(timeout_ms=500)).values() for m in ms]
            finally:
                await consumer.stop()
            seen.append(sorted(values))
        return seen[0], seen[1]

    committed, everything = asyncio.run(scenario())
    assert committed == sorted(COMMITTED)
    assert everything == sorted(COMMITTED + ABORTED)
    assert _read(bootstrap, "tx-aiokafka", "read_committed", 4) == sorted(COMMITTED)


def test_kafka_python_transactions(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-kafka-python", 2)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-kp-1")
    producer.init_transactions()
    producer.begin_transaction()
    for i, value in enumerate(COMMITTED):
        producer.send("tx-kafka-python", value.encode(), partition=i % 2)
    producer.commit_transaction()
    producer.begin_transaction()
    for i, value in enumerate(ABORTED):
        producer.send("tx-kafka-python", value.encode(), partition=i % 2)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer("tx-kafka-python", bootstrap_servers=bootstrap,
                             auto_offset_reset="earliest", isolation_level="read_committed",
                             consumer_timeout_ms=5000)
    values = sorted(m.value.decode() for m in consumer)
    consumer.close()
    assert values == sorted(COMMITTED)
    assert _read(bootstrap, "tx-kafka-python", "read_uncommitted", 8) == \
        sorted(COMMITTED + ABORTED)


def test_kip_664_admin_tools_find_and_abort_a_hanging_transaction(
        txn_broker: BrokerProcess) -> None:
    """kafka-python's admin (kafka-transactions.sh's calls): list, describe, describe
    producers, and abort a transaction by writing its marker at the partition leader."""
    from kafka import TopicPartition
    from kafka.admin import AbortTransactionSpec, KafkaAdminClient
    from kafka.errors import KafkaError

    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-hanging", 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-hanging-1")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("tx-hanging", b"stuck")
    producer.flush()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listings = [t for ts in admin.list_transactions().values() for t in ts]
        mine = [t for t in listings if t.transactional_id == "tx-hanging-1"]
        assert len(mine) == 1 and str(mine[0].state.value) == "Ongoing"
        assert not [t for ts in admin.list_transactions(state_filters=["CompleteCommit"])
                    .values() for t in ts if t.transactional_id == "tx-hanging-1"]
        described = admin.describe_transactions(["tx-hanging-1"])["tx-hanging-1"]
        assert described.producer_id == mine[0].producer_id
        assert described.topic_partitions == {TopicPartition("tx-hanging", 0)}
        tp = TopicPartition("tx-hanging", 0)
        [active] = admin.describe_producers([tp])[tp].active_producers
        assert active.producer_id == described.producer_id
        assert active.current_transaction_start_offset == 0
        # The partition's side of a hanging transaction: the admin writes the ABORT.
        with pytest.raises(KafkaError):  # an older epoch than the partition knows
            admin.abort_transaction(AbortTransactionSpec(tp, active.producer_id,
                                                         active.producer_epoch - 1))
        admin.abort_transaction(AbortTransactionSpec(tp, active.producer_id,
                                                     active.producer_epoch))
        [after] = admin.describe_producers([tp])[tp].active_producers
        assert after.current_transaction_start_offset == -1
        with pytest.raises(KafkaError):
            admin.describe_transactions(["no-such-id"])
    finally:
        admin.close()
        producer.close(timeout=1)
    assert _read(bootstrap, "tx-hanging", "read_committed", 0) == []


def test_offsets_into_a_transaction_before_any_group_exists(tmp_path) -> None:
    """kafka-python sends AddOffsetsToTxn before it looks the group's coordinator up.
    On a broker where no group was ever used (no __consumer_offsets yet), the first
    answer is retriable and makes the topic, so the retry goes through."""
    import threading

    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    from tests.brokers import running_broker

    with running_broker(tmp_path / "data") as broker:
        _create(broker.bootstrap, "tx-first", 1)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap,
                                 transactional_id="tx-first-1")
        outcome: list[object] = []

        def transaction() -> None:
            try:
                producer.init_transactions()
                producer.begin_transaction()
                producer.send("tx-first", b"v").get(30)
                producer.send_offsets_to_transaction(
                    {TopicPartition("tx-first", 0): OffsetAndMetadata(1, "", -1)},
                    "never-joined")
                producer.commit_transaction()
                outcome.append("committed")
            except Exception as exc:  # reported below, with what it was
                outcome.append(exc)

        worker = threading.Thread(target=transaction, daemon=True)
        worker.start()
        worker.join(TIMEOUT_S)  # kafka-python waits without a deadline: bound it here
        producer.close(timeout=1)
        assert outcome == ["committed"], outcome or "the transaction hung"
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        tp = TopicPartition("tx-first", 0)

        def committed() -> int | None:
            offsets = admin.list_group_offsets("never-joined")["never-joined"]
            return offsets[tp].offset if tp in offsets else None

        try:
            # The commit marker reaches __consumer_offsets after EndTxn is answered (as on
            # Kafka): the offset shows once it has, and must then be the one sent.
            wait_for(lambda: committed() is not None, TIMEOUT_S,
                     what="the group's offset after the commit marker")
            assert committed() == 1
        finally:
            admin.close()
