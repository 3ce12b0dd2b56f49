"""Groups with other Kafka clients: mixed librdkafka + slog groups (either leading),
kafka-python, aiokafka, kcat -G, and confluent-kafka's AdminClient reading slog's groups."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import ConsumerGroupState
from confluent_kafka import TopicPartition as ConfluentTP
from confluent_kafka.admin import AdminClient

from slog.client import Consumer, GroupAdmin, RebalanceListener, TopicPartition
from slog.client.cluster import ClusterClient
from tests.brokers import BrokerProcess
from tests.compat.clients import run_kcat
from tests.groups.helpers import (
    group_consumer,
    make_topic,
    produce,
    unique,
    wait_for,
)


def confluent(bootstrap: str, group: str, strategy: str, **extra: Any) -> ConfluentConsumer:
    return ConfluentConsumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "session.timeout.ms": 3000, "heartbeat.interval.ms": 100,
        "partition.assignment.strategy": strategy, "auto.commit.interval.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000, **extra})


def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    with ClusterClient(bootstrap) as cluster:
        found = GroupAdmin(cluster).list_offsets([group])[group]
    return {tp: v.offset for tp, v in found.items() if v is not None}


class Mixed:
    """A slog consumer and a librdkafka consumer in one group, polled in turn."""

    def __init__(self, ours: Consumer, theirs: ConfluentConsumer):
        self.ours, self.theirs = ours, theirs
        self.values: list[bytes] = []

    def step(self) -> None:
        self.values += [r.value for r in self.ours.poll(20)]  # type: ignore[misc]
        message = self.theirs.poll(0.02)
        if message is not None and not message.error():
            self.values.append(message.value())

    def split(self) -> tuple[set[int], set[int]]:
        return ({tp.partition for tp in self.ours.assignment()},
                {tp.partition for tp in self.theirs.assignment()})

    def settled(self, partitions: int) -> bool:
        ours, theirs = self.split()
        return bool(ours) and bool(theirs) and not ours & theirs and \
            len(ours | theirs) == partitions


@pytest.mark.parametrize("leader", ["slog", "librdkafka"])
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_mixed_group_with_librdkafka(broker: BrokerProcess, strategy: str, leader: str) -> None:
    topic = make_topic(broker.bootstrap, 4)
    produce(broker.bootstrap, topic, [(None, b"%d" % i, i % 4) for i in range(40)])
    group = unique(f"mixed-{strategy}")
    ours = group_consumer(broker.bootstrap, group, partition_assignment_strategy=[strategy])
    theirs = confluent(broker.bootstrap, group, strategy)
    mixed = Mixed(ours, theirs)
    first, second = (ours, theirs) if leader == "slog" else (theirs, ours)
    try:
        first.subscribe([topic])
        wait_for(lambda: bool(first.assignment()), step=mixed.step, what="the first member")
        second.subscribe([topic])
        wait_for(lambda: mixed.settled(4) and set(mixed.values) >= {b"%d" % i for i in range(40)},
                 step=mixed.step, what="a shared assignment and every record")
        with ClusterClient(broker.bootstrap) as cluster:
            described = GroupAdmin(cluster).describe_groups([group])[group]
        assert described.assignor == strategy and len(described.members) == 2
        assert {m.client_id for m in described.members} == {"slog", "rdkafka"}
    finally:
        theirs.close()
        ours.close()


class Revocations(RebalanceListener):
    def __init__(self) -> None:
        self.revoked: set[TopicPartition] = set()

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.revoked |= partitions


def test_cooperative_rebalance_revokes_only_moved_partitions(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 6)
    group = unique("incremental")
    listener = Revocations()
    ours = group_consumer(broker.bootstrap, group,
                          partition_assignment_strategy=["cooperative-sticky"])
    theirs = confluent(broker.bootstrap, group, "cooperative-sticky")
    newcomer = group_consumer(broker.bootstrap, group,
                              partition_assignment_strategy=["cooperative-sticky"])
    mixed = Mixed(ours, theirs)
    try:
        ours.subscribe([topic], listener=listener)
        wait_for(lambda: len(ours.assignment()) == 6, step=mixed.step, what="all six")
        theirs.subscribe([topic])
        wait_for(lambda: mixed.settled(6), step=mixed.step, what="two members")
        kept = ours.assignment()
        assert len(kept) == 3 and listener.revoked == {TopicPartition(topic, p)
                                                       for p in range(6)} - kept
        listener.revoked.clear()
        newcomer.subscribe([topic])

        def step() -> None:
            mixed.step()
            newcomer.poll(20)

        wait_for(lambda: all(len(c.assignment()) == 2 for c in (ours, theirs, newcomer)),
                 step=step, what="three members")
        assert ours.assignment() <= kept  # it only lost partitions, and only those
        assert listener.revoked == kept - ours.assignment()
    finally:
        for consumer in (theirs, ours, newcomer):
            consumer.close()


def test_kafka_python_group(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    topic = make_topic(broker.bootstrap, 4)
    produce(broker.bootstrap, topic, [(None, b"%d" % i, i % 4) for i in range(40)])
    group = unique("kafka-python")
    consumers = [KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                               auto_offset_reset="earliest", session_timeout_ms=10000,
                               heartbeat_interval_ms=100, consumer_timeout_ms=100,
                               auto_commit_interval_ms=100, max_poll_interval_ms=15000)
                 for _ in range(2)]
    for consumer in consumers:
        # kafka-python's leader assigns nothing for a topic missing from its metadata
        # cache (and only notices later), so make sure it knows the new topic first.
        assert consumer.partitions_for_topic(topic) == {0, 1, 2, 3}
        consumer.subscribe([topic])
    seen: set[bytes] = set()

    def step() -> None:
        # Not a tiny poll timeout: kafka-python drops a join whose answer comes after
        # its poll returned and joins again, and a leader's join starts a new
        # generation, so on a loaded machine 20 ms polls rebalance without end.
        for consumer in consumers:
            for batch in consumer.poll(timeout_ms=200).values():
                seen.update(r.value for r in batch)

    try:
        wait_for(lambda: len(seen) == 40 and all(c.assignment() for c in consumers) and
                 sum(len(c.assignment()) for c in consumers) == 4, step=step,
                 what="kafka-python to share the topic")
        pending = list(consumers)

        def commit_next() -> None:  # kafka-python refuses to commit mid-rebalance
            step()
            try:
                pending[0].commit()
            except Exception:
                return
            pending.pop(0)

        # Both consumers share this thread, so on a slow machine kafka-python's loop can
        # stall past a session timeout and a member must rejoin before it may commit.
        wait_for(lambda: not pending, step=commit_next, what="kafka-python's commits",
                 timeout_s=60)
    finally:
        for consumer in consumers:
            consumer.close()
    assert committed(broker.bootstrap, group) == {TopicPartition(topic, p): 10 for p in range(4)}


def test_aiokafka_group(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer

    topic = make_topic(broker.bootstrap, 2)
    produce(broker.bootstrap, topic, [(None, b"%d" % i, i % 2) for i in range(20)])
    group = unique("aiokafka")

    async def consume() -> set[bytes]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                    auto_offset_reset="earliest", session_timeout_ms=3000,
                                    heartbeat_interval_ms=100, enable_auto_commit=False)
        await consumer.start()
        seen: set[bytes] = set()
        try:
            async with asyncio.timeout(20):
                while len(seen) < 20:
                    batches = await consumer.getmany(timeout_ms=100)
                    seen.update(r.value for rs in batches.values() for r in rs)
            await consumer.commit()
        finally:
            await consumer.stop()
        return seen

    assert len(asyncio.run(consume())) == 20
    assert committed(broker.bootstrap, group) == {TopicPartition(topic, 0): 10,
                                                  TopicPartition(topic, 1): 10}


def test_kcat_balanced_consumer(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 3)
    produce(broker.bootstrap, topic, [(None, b"v%d" % i, i % 3) for i in range(9)])
    group = unique("kcat")
    out = run_kcat("-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                   "-e", "-f", "%p %o %s\\n", topic).stdout.decode()
    assert sorted(out.splitlines()) == sorted(f"{i % 3} {i // 3} v{i}" for i in range(9))
    assert committed(broker.bootstrap, group) == {TopicPartition(topic, p): 3 for p in range(3)}


def test_confluent_admin_client_reads_slog_groups(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 2)
    produce(broker.bootstrap, topic, [(None, b"x", p) for p in (0, 1, 1)])
    group = unique("admin")
    ours = group_consumer(broker.bootstrap, group, client_id="described")
    try:
        ours.subscribe([topic])
        wait_for(lambda: len(ours.assignment()) == 2 and ours.position(TopicPartition(topic, 1))
                 == 2, step=lambda: ours.poll(20), what="the assignment")
        ours.commit()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result()
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result()
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        [member] = described.members
        assert member.client_id == "described" and member.host == "/127.0.0.1"
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1]
        from confluent_kafka import ConsumerGroupTopicPartitions

        request = ConsumerGroupTopicPartitions(group, [ConfluentTP(topic, 0),
                                                       ConfluentTP(topic, 1)])
        offsets = admin.list_consumer_group_offsets([request])[group].result()
        assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == \
            [(0, 1), (1, 2)]
    finally:
        ours.close()
