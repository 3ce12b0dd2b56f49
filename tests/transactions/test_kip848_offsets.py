"""Transactions x KIP-848: a transactional producer sends the offsets of a
``group.protocol=consumer`` member (TxnOffsetCommit v3+ with its member id and
epoch); they land in the consumer group at COMMIT, nowhere at ABORT, and a
restarted coordinator replays them into the consumer group."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from slog.client import Consumer as SlogConsumer
from slog.client import TopicPartition as SlogPartition
from slog.client.group_requests import fetch_body, find_coordinator, request
from slog.core.kafka_errors import ErrorCode
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess, running_broker
from tests.transactions.conftest import TXN_BROKER_CONFIG
from tests.transactions.test_clients import _producer

TIMEOUT_S = 60
BROKER = {**TXN_BROKER_CONFIG, "group.consumer.session.timeout.ms": "6000",
          "group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("txn848") / "data", 1, **BROKER) as process:
        yield process


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(TIMEOUT_S)


def _fill(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"in{i}".encode(), partition=i % partitions)
    assert producer.flush(TIMEOUT_S) == 0


def _member(bootstrap: str, group: str, topic: str) -> Consumer:
    """A KIP-848 member holding all of ``topic``'s partitions."""
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "group.protocol": "consumer", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False, "isolation.level": "read_committed"})
    member.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    while not member.assignment():
        assert time.monotonic() < deadline, "no assignment"
        member.poll(0.1)
    return member


def _consume(member: Consumer, count: int) -> None:
    taken = 0
    deadline = time.monotonic() + TIMEOUT_S
    while taken < count:
        assert time.monotonic() < deadline, f"polled {taken} of {count}"
        message = member.poll(0.2)
        if message is not None and message.error() is None:
            taken += 1


def _open_with_offsets(bootstrap: str, member: Consumer, transactional_id: str) -> Producer:
    """A transaction left open holding ``member``'s positions as its group's offsets."""
    producer = _producer(bootstrap, transactional_id)
    producer.begin_transaction()
    producer.send_offsets_to_transaction(member.position(member.assignment()),
                                         member.consumer_group_metadata(), TIMEOUT_S)
    return producer


def _send_offsets(bootstrap: str, member: Consumer, transactional_id: str,
                  commit: bool) -> None:
    producer = _open_with_offsets(bootstrap, member, transactional_id)
    end = producer.commit_transaction if commit else producer.abort_transaction
    end(TIMEOUT_S)


def _stable_fetch_codes(bootstrap: str, group: str, tp: SlogPartition) -> list[ErrorCode]:
    """OffsetFetch with require_stable (KIP-447), as a read_committed consumer asks."""
    with SlogConsumer(bootstrap, group_id=group, enable_auto_commit=False) as probe:
        node = find_coordinator(probe.cluster, group)
        probe.cluster.refresh_metadata([])
        conn = probe.cluster.connection(node.node_id, "stable-probe")
        answer = request(conn, ApiKey.OFFSET_FETCH, fetch_body(group, [tp], True))
        return [p.error_code for t in answer.topics for p in t.partitions]


def _member_past(bootstrap: str, topic: str, count: int, partitions: int) -> Consumer:
    """A member of group ``topic``-group that has consumed ``count`` records of a new
    ``topic``."""
    _create(bootstrap, topic, partitions)
    _fill(bootstrap, topic, count, partitions)
    member = _member(bootstrap, f"{topic}-group", topic)
    _consume(member, count)
    return member


def _committed(member: Consumer, topic: str, partitions: int) -> list[int]:
    wanted = [TopicPartition(topic, p) for p in range(partitions)]
    return [int(tp.offset) for tp in member.committed(wanted, TIMEOUT_S)]


def test_offsets_of_a_consumer_group_commit_and_abort_with_the_transaction(
        broker: BrokerProcess) -> None:
    bootstrap, topic, group = broker.bootstrap, "t848-in", "t848-in-group"
    member = _member_past(bootstrap, topic, 8, 2)
    try:
        _send_offsets(bootstrap, member, "t848-abort", commit=False)
        assert _committed(member, topic, 2) == [-1001, -1001]  # aborted: nothing stored
        _send_offsets(bootstrap, member, "t848-commit", commit=True)
        assert _committed(member, topic, 2) == [4, 4]
    finally:
        member.close()
    # The offsets are the consumer group's: a new member resumes from them.
    _fill(bootstrap, topic, 2, 2)
    member = _member(bootstrap, group, topic)
    try:
        message = None
        deadline = time.monotonic() + TIMEOUT_S
        while message is None or message.error() is not None:
            assert time.monotonic() < deadline
            message = member.poll(0.2)
        assert message.offset() == 4
    finally:
        member.close()


def test_offsets_of_a_departed_member_are_refused(broker: BrokerProcess) -> None:
    """The metadata of a member that has left names a member the group no longer has:
    the transaction cannot commit the offsets (UNKNOWN_MEMBER_ID)."""
    bootstrap, topic, group = broker.bootstrap, "t848-stale", "t848-stale-group"
    first = _member_past(bootstrap, topic, 3, 1)
    positions = first.position(first.assignment())
    metadata = first.consumer_group_metadata()
    first.close()
    second = _member(bootstrap, group, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t848-stale"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    try:
        with pytest.raises(KafkaException):
            producer.send_offsets_to_transaction(positions, metadata, TIMEOUT_S)
        producer.abort_transaction(TIMEOUT_S)
        assert _committed(second, topic, 1) == [-1001]
    finally:
        second.close()


def test_offsets_sent_with_only_the_group_id_land_in_the_active_group(
        broker: BrokerProcess) -> None:
    """aiokafka's send_offsets_to_transaction names only the group (TxnOffsetCommit without
    member id, instance id or generation): as Kafka, that is accepted while the consumer
    group has members, and the COMMIT stores the offsets in that group."""
    bootstrap, topic, group = broker.bootstrap, "t848-anon", "t848-anon-group"
    member = _member_past(bootstrap, topic, 6, 2)

    async def send_offsets() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="t848-anon")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_offsets_to_transaction(
                    {AioPartition(topic, p): 3 for p in range(2)}, group)
        finally:
            await producer.stop()

    try:
        asyncio.run(send_offsets())
        deadline = time.monotonic() + TIMEOUT_S  # the marker lands after EndTxn's answer
        while (committed := _committed(member, topic, 2)) != [3, 3]:
            assert time.monotonic() < deadline, committed
            time.sleep(0.05)
    finally:
        member.close()


def test_pending_offsets_of_a_consumer_group_are_unstable(broker: BrokerProcess) -> None:
    """Until the COMMIT marker, OffsetFetch with require_stable answers
    UNSTABLE_OFFSET_COMMIT for the consumer group's partition; then the offset."""
    bootstrap, topic, group = broker.bootstrap, "t848-unstable", "t848-unstable-group"
    member = _member_past(bootstrap, topic, 3, 1)
    try:
        producer = _open_with_offsets(bootstrap, member, "t848-unstable")
        tp = SlogPartition(topic, 0)
        assert _stable_fetch_codes(bootstrap, group, tp) == [ErrorCode.unstable_offset_commit]
        producer.commit_transaction(TIMEOUT_S)
        # EndTxn is answered before the markers are written (as in Kafka), so the
        # offsets may stay unstable for a moment: they must turn stable, not stay so
        deadline = time.monotonic() + TIMEOUT_S
        while (codes := _stable_fetch_codes(bootstrap, group, tp)) != [ErrorCode.none] \
                and time.monotonic() < deadline:
            assert codes == [ErrorCode.unstable_offset_commit]
            time.sleep(0.05)
        assert codes == [ErrorCode.none]
        assert _committed(member, topic, 1) == [3]
    finally:
        member.close()


def test_committed_offsets_survive_a_coordinator_restart(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The restarted coordinator replays the committed transaction's offsets into the
    consumer group, and not those of the aborted one after it."""
    data = tmp_path_factory.mktemp("txn848-restart") / "data"
    topic, group = "t848-restart", "t848-restart-group"
    with running_broker(data, 1, **BROKER) as process:
        member = _member_past(process.bootstrap, topic, 5, 1)
        try:
            _send_offsets(process.bootstrap, member, "t848-restart-1", commit=True)
            _fill(process.bootstrap, topic, 2, 1)
            _consume(member, 2)
            _send_offsets(process.bootstrap, member, "t848-restart-2", commit=False)
            assert _committed(member, topic, 1) == [5]
        finally:
            member.close()
        process.stop()
        process.start()
        member = _member(process.bootstrap, group, topic)
        try:
            assert _committed(member, topic, 1) == [5]
        finally:
            member.close()
