"""Kafka 4.1 admin APIs that kafka-python's own suite calls: DescribeQuorum,
AlterReplicaLogDirs and ListConfigResources, against a real 3-broker cluster.

Before they were served, slog closed the connection on each (kafka-python,
told the broker is Kafka 4.1, sends them without asking ApiVersions first).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError
from kafka.structs import TopicPartitionReplica

from slog.client import Admin, NewTopic
from slog.client.connection import BrokerConnection
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster

TOPIC = "k41"


@pytest.fixture
def admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    with Admin(cluster.bootstrap) as slog_admin:
        slog_admin.create_topics([NewTopic(TOPIC, 2, 3)])
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, api_version=(4, 1),
                              request_timeout_ms=15_000)
    try:
        yield client
    finally:
        client.close()


def test_describe_quorum_names_the_controller_and_every_broker(cluster: Cluster,
                                                              admin: KafkaAdminClient) -> None:
    quorum = admin.describe_metadata_quorum()
    [topic] = quorum["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    [partition] = topic["partitions"]
    assert partition["error"] is None
    assert partition["leader_id"] == cluster.controller()
    assert partition["leader_epoch"] >= 1
    assert partition["high_watermark"] > 0  # the registrations and the topic, at least
    assert sorted(v["replica_id"] for v in partition["current_voters"]) == \
        sorted(cluster.brokers)
    answered = [v for v in partition["current_voters"] if v["log_end_offset"] >= 0]
    assert len(answered) == 1  # the broker that answered knows its own position only
    assert answered[0]["log_end_offset"] == partition["high_watermark"]
    assert sorted(n["node_id"] for n in quorum["nodes"]) == sorted(cluster.brokers)


def test_describe_quorum_of_another_topic_is_unknown(cluster: Cluster) -> None:
    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
    with BrokerConnection(host, int(port)).connect() as conn:
        answer = conn.request(ApiKey.DESCRIBE_QUORUM, {
            "topics": [{"topic_name": TOPIC, "partitions": [{"partition_index": 0}]},
                       {"topic_name": "__cluster_metadata",
                        "partitions": [{"partition_index": 1}]}]}, version=2)
    codes = [p.error_code for t in answer.topics for p in t.partitions]
    assert codes == [ErrorCode.unknown_topic_or_partition] * 2


def test_moving_a_replica_to_its_own_log_dir_is_a_no_op(admin: KafkaAdminClient) -> None:
    [described] = [d for d in admin.describe_log_dirs() if d["log_dirs"]][:1]
    broker_id, log_dir = described["broker"], described["log_dirs"][0]["log_dir"]
    here = TopicPartitionReplica(TOPIC, 0, broker_id)
    elsewhere = TopicPartitionReplica(TOPIC, 1, broker_id)
    missing = TopicPartitionReplica("no-such-topic", 0, broker_id)
    result = admin.alter_replica_log_dirs({here: log_dir, elsewhere: log_dir + "-other",
                                           missing: log_dir})
    assert result[here] is NoError
    assert result[elsewhere].errno == ErrorCode.log_dir_not_found
    assert result[missing].errno == ErrorCode.unknown_topic_or_partition


def test_list_config_resources_lists_topics_and_brokers(cluster: Cluster,
                                                        admin: KafkaAdminClient) -> None:
    listed = admin.list_config_resources()
    assert sorted(int(b) for b in listed["broker"]) == sorted(cluster.brokers)
    assert TOPIC in listed["topic"]
    only_brokers = admin.list_config_resources(["BROKER"])
    assert set(only_brokers) == {"broker"}
