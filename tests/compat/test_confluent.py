"""confluent-kafka (librdkafka) Producer, Consumer and AdminClient against slog."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from tests.brokers import BrokerProcess
from tests.compat.clients import (
    RECENT_MS,
    Rec,
    confluent_consume,
    confluent_consume_partitions,
    confluent_deliver,
)

TIMEOUT_S = 15
RETENTION_DEFAULT = str(7 * 24 * 3600 * 1000)


@pytest.fixture(scope="module")
def admin(shared_broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def result(futures: dict[Any, Any]) -> dict[Any, Any]:
    """Wait for an AdminClient future dict; the values (or the exception raised)."""
    return {key: future.result(TIMEOUT_S) for key, future in futures.items()}


def kafka_error(exc_info: pytest.ExceptionInfo[KafkaException]) -> Any:
    return exc_info.value.args[0]


def create(admin: AdminClient, name: str, partitions: int = 1, **config: str) -> None:
    result(admin.create_topics([NewTopic(name, partitions, 1, config=config)]))


# ----------------------------------------------------------------------------- producer


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_producer_each_compression(shared_broker: BrokerProcess, admin: AdminClient,
                                              compression: str) -> None:
    topic = f"ck-produce-{compression}"
    create(admin, topic, partitions=2)
    records = [Rec(f"key-{i % 5}".encode(), f"{compression} value {i}".encode() * (i % 4 + 1),
                   (("i", str(i).encode()),), RECENT_MS + i) for i in range(60)]
    reports = confluent_deliver(shared_broker.bootstrap, topic, records, compression=compression)

    # Delivery reports: every partition's offsets run 0, 1, 2... in send order.
    by_partition: dict[int, list[tuple[int, Rec]]] = {}
    for (partition, offset), record in zip(reports, records, strict=True):
        by_partition.setdefault(partition, []).append((offset, record))
    assert set(by_partition) <= {0, 1}
    assert len(by_partition) == 2, "five keys should spread over two partitions"
    # And a consumer from OFFSET_BEGINNING finds each record exactly where its report said.
    got = confluent_consume_partitions(shared_broker.bootstrap, topic, [0, 1])
    assert all(c.create_time for c in got)
    for partition, sent in by_partition.items():
        assert [offset for offset, _ in sent] == list(range(len(sent))), partition
        assert [(c.offset, c.as_rec()) for c in got if c.partition == partition] == sent


def test_many_in_flight_batches_keep_order(shared_broker: BrokerProcess,
                                             admin: AdminClient) -> None:
    """Many small in-flight batches with idempotence: no gaps, no duplicates."""
    topic = "ck-inflight"
    create(admin, topic)
    records = [Rec(None, b"%d" % i) for i in range(2000)]
    reports = confluent_deliver(shared_broker.bootstrap, topic, records, partition=0,
                                **{"linger.ms": 0, "batch.num.messages": 7,
                                   "max.in.flight.requests.per.connection": 5})
    assert [offset for _, offset in reports] == list(range(2000))
    got = confluent_consume(shared_broker.bootstrap, topic, 0)
    assert [c.value for c in got] == [r.value for r in records]


# ----------------------------------------------------------------------------- admin


def test_create_list_describe_delete_topics(shared_broker: BrokerProcess,
                                            admin: AdminClient) -> None:
    name = "ck-admin-topic"
    assert result(admin.create_topics([NewTopic(name, 3, 1)])) == {name: None}

    listed = admin.list_topics(timeout=TIMEOUT_S)
    assert name in listed.topics
    assert sorted(listed.topics[name].partitions) == [0, 1, 2]
    assert {p.leader for p in listed.topics[name].partitions.values()} == \
        {shared_broker.broker_id}
    assert [b.id for b in listed.brokers.values()] == [shared_broker.broker_id]
    assert listed.controller_id == shared_broker.broker_id

    described = result(admin.describe_topics(TopicCollection([name])))[name]
    assert described.name == name
    assert described.topic_id is not None
    assert [p.id for p in described.partitions] == [0, 1, 2]
    for p in described.partitions:
        assert p.leader.id == shared_broker.broker_id
        assert [r.id for r in p.replicas] == [shared_broker.broker_id]
        assert [r.id for r in p.isr] == [shared_broker.broker_id]

    result(admin.create_partitions([NewPartitions(name, 5)]))
    assert len(admin.list_topics(name, timeout=TIMEOUT_S).topics[name].partitions) == 5

    assert result(admin.delete_topics([name])) == {name: None}
    deadline = time.monotonic() + TIMEOUT_S
    while name in admin.list_topics(timeout=TIMEOUT_S).topics:
        assert time.monotonic() < deadline, "deleted topic still listed"
        time.sleep(0.05)
    data_dirs = list((shared_broker.data_dir / "brokers").glob(f"*/logs/{name}-*"))
    assert not data_dirs, data_dirs


def test_admin_errors(admin: AdminClient) -> None:
    create(admin, "ck-exists")
    with pytest.raises(KafkaException) as exc:
        create(admin, "ck-exists")
    assert kafka_error(exc).code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as exc:
        create(admin, "bad/name")
    assert kafka_error(exc).code() == KafkaError.TOPIC_EXCEPTION
    with pytest.raises(KafkaException) as exc:
        result(admin.delete_topics(["ck-never-created"]))
    assert kafka_error(exc).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(KafkaException) as exc:
        create(admin, "ck-bad-config", **{"retention.ms": "soon"})
    assert kafka_error(exc).code() == KafkaError.INVALID_CONFIG


def describe(admin: AdminClient, topic: str) -> dict[str, Any]:
    [entries] = result(admin.describe_configs([ConfigResource("topic", topic)])).values()
    return dict(entries)


def test_describe_and_alter_configs(admin: AdminClient) -> None:
    topic = "ck-configs"
    create(admin, topic, **{"cleanup.policy": "compact"})
    configs = describe(admin, topic)
    assert configs["retention.ms"].value == RETENTION_DEFAULT
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert {"segment.bytes", "max.message.bytes", "min.insync.replicas"} <= set(configs)

    change = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
    ])
    result(admin.incremental_alter_configs([change]))
    configs = describe(admin, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "compact,delete"

    reset = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    result(admin.incremental_alter_configs([reset]))
    configs = describe(admin, topic)
    assert configs["retention.ms"].value == RETENTION_DEFAULT
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    bad = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        result(admin.incremental_alter_configs([bad]))
    assert kafka_error(exc).code() == KafkaError.INVALID_CONFIG
    assert describe(admin, topic)["retention.ms"].value == RETENTION_DEFAULT
