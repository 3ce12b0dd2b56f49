"""Admin client round trips against a real broker, errors included."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slog.client import Admin, NewTopic, Producer, TopicPartition
from slog.client.errors import (
    BrokerUnavailableError,
    InvalidConfigError,
    InvalidPartitionsError,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)


def test_create_list_describe_delete(admin: Admin) -> None:
    created = admin.create_topics([NewTopic("adm-a", partitions=3),
                                   NewTopic("adm-b", configs={"retention.ms": "60000"})])
    assert created["adm-a"].partitions == 3 and created["adm-a"].topic_id
    assert created["adm-b"].partitions == 1 and created["adm-b"].replication_factor == 1
    listed = {t.name: t for t in admin.list_topics()}
    assert listed["adm-a"].partitions == 3 and not listed["adm-a"].is_internal
    [described] = admin.describe_topics(["adm-a"])
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    for p in described.partitions:
        assert p.leader == 1 and p.replicas == (1,) and p.isr == (1,)
        assert (p.log_start_offset, p.high_watermark, p.log_end_offset) == (0, 0, 0)
    admin.delete_topics(["adm-a", "adm-b"])
    assert not {"adm-a", "adm-b"} & {t.name for t in admin.list_topics()}


def test_create_errors_are_per_topic(admin: Admin) -> None:
    admin.create_topics([NewTopic("adm-exists")])
    with pytest.raises(TopicAlreadyExistsError) as info:
        admin.create_topics([NewTopic("adm-new"), NewTopic("adm-exists"),
                             NewTopic("bad/name")])
    error = info.value
    assert error.name == "TOPIC_ALREADY_EXISTS" and error.item == "adm-exists"
    assert set(error.errors) == {"adm-exists", "bad/name"}
    assert error.errors["bad/name"].name == "INVALID_TOPIC_EXCEPTION"
    assert set(error.results) == {"adm-new"}  # the good one was created
    with pytest.raises(KafkaError, match=r"INVALID_CONFIG|INVALID_REQUEST"):
        admin.create_topics([NewTopic("adm-badcfg", configs={"no.such.config": "1"})])
    with pytest.raises(KafkaError):
        admin.create_topics([NewTopic("adm-zero", partitions=0)])
    assert set(admin.create_topics([NewTopic("adm-dry")], validate_only=True)) == {"adm-dry"}
    assert "adm-dry" not in {t.name for t in admin.list_topics()}


def test_unknown_topics(admin: Admin) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["adm-never"])
    with pytest.raises(UnknownTopicOrPartitionError) as info:
        admin.describe_topics(["adm-never", "adm-exists-too"])
    assert set(info.value.errors) == {"adm-never", "adm-exists-too"}
    with pytest.raises(KafkaError):
        admin.describe_configs("adm-never")
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.list_offsets({TopicPartition("adm-never", 0): "latest"})


def test_partitions_and_configs(admin: Admin, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=1, **{"cleanup.policy": "compact"})
    admin.create_partitions(topic, 4)
    [described] = admin.describe_topics([topic])
    assert len(described.partitions) == 4
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions(topic, 2)
    configs = admin.describe_configs(topic)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"].source in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    assert not configs["segment.bytes"].sensitive
    admin.alter_configs(topic, set={"retention.ms": "12345"}, delete=["cleanup.policy"])
    configs = admin.describe_configs(topic)
    assert configs["retention.ms"].value == "12345"
    assert configs["cleanup.policy"].source != "DYNAMIC_TOPIC_CONFIG"
    with pytest.raises(InvalidConfigError):
        admin.alter_configs(topic, set={"retention.ms": "soon"})
    assert admin.describe_configs(topic)["retention.ms"].value == "12345"


def test_offsets_and_cluster(bootstrap: str, admin: Admin,
                             make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    with Producer(bootstrap, linger_ms=0) as producer:
        for i in range(10):
            producer.send(topic, b"v", timestamp_ms=1_000_000 + i * 1000).result(10)
    tp = TopicPartition(topic, 0)
    assert admin.list_offsets({tp: "earliest"})[tp].offset == 0
    assert admin.list_offsets({tp: "latest"})[tp].offset == 10
    at = admin.list_offsets({tp: 1_004_500})[tp]
    assert (at.offset, at.timestamp) == (5, 1_005_000)
    assert admin.list_offsets({tp: 9_999_999_999})[tp].offset == -1
    [described] = admin.describe_topics([topic])
    assert described.partitions[0].high_watermark == 10
    cluster = admin.describe_cluster()
    assert cluster.cluster_id and cluster.controller_id == 1
    assert [b.node_id for b in cluster.brokers] == [1]
    assert cluster.brokers[0].address == bootstrap
    with pytest.raises(ValueError):
        admin.list_offsets({tp: "yesterday"})


def test_no_broker_is_a_clear_error() -> None:
    from tests.brokers import free_port

    port = free_port()
    with Admin(f"127.0.0.1:{port}") as admin, \
            pytest.raises(BrokerUnavailableError, match=f"no broker at 127.0.0.1:{port}"):
        admin.list_topics()
