"""Authorized operations (Metadata v8+, DescribeCluster, DescribeGroups) as kafka-python
and confluent-kafka ask for them: without an authorizer, every operation Kafka defines
for the resource type, and never the "not requested" sentinel when a client asked."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, ConsumerGroupDescription, NewTopic

from slog.core.acls import Operation
from slog.protocol.apis import ApiKey
from tests.cluster.conftest import Cluster, wait_until

TOPIC_OPERATIONS = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER",
                    "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPERATIONS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                      "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
GROUP_OPERATIONS = {"READ", "DESCRIBE", "DELETE"}
NOT_REQUESTED = -(2**31)

pytestmark = pytest.mark.brokers(1)


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    """The module's cluster: these tests break no broker and create their own topics."""
    return shared_cluster


def _bits(names: set[str]) -> int:
    return sum(1 << Operation[name] for name in names)


def _create_topic(cluster: Cluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)


def test_kafka_python_admin_describes(cluster: Cluster) -> None:
    from kafka.admin import KafkaAdminClient

    _create_topic(cluster, "ops-kp")
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].bootstrap)
    try:
        [topic] = admin.describe_topics(["ops-kp"])
        assert topic["error_code"] == 0 and len(topic["partitions"]) == 2
        assert set(topic["authorized_operations"]) == TOPIC_OPERATIONS
        assert "ops-kp" in admin.list_topics()
        described = admin.describe_cluster()
        assert described["controller_id"] == 1
        assert set(described["authorized_operations"]) == CLUSTER_OPERATIONS
    finally:
        admin.close()


def test_confluent_kafka_describes_with_operations(cluster: Cluster) -> None:
    _create_topic(cluster, "ops-ck")
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    topic = admin.describe_topics(TopicCollection(["ops-ck"]),
                                  include_authorized_operations=True)["ops-ck"].result(30)
    assert {op.name for op in topic.authorized_operations} == TOPIC_OPERATIONS
    described = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert {op.name for op in described.authorized_operations} == CLUSTER_OPERATIONS

    def described_group() -> ConsumerGroupDescription | None:
        [group] = admin.describe_consumer_groups(
            ["ops-nobody"], include_authorized_operations=True).values()
        try:
            return group.result(30)
        except KafkaException:  # the offsets topic is still loading
            return None

    group = wait_until(described_group, 60, "the group coordinator")
    assert {op.name for op in group.authorized_operations} == GROUP_OPERATIONS
    assert all(isinstance(op, AclOperation) for op in described.authorized_operations)


@pytest.mark.parametrize("version", [8, 10, 11, 12])
def test_sentinel_only_when_not_requested(cluster: Cluster, version: int) -> None:
    _create_topic(cluster, f"ops-v{version}")
    with cluster.connect(1) as conn:
        for asked in (False, True):
            body = {"topics": [{"name": f"ops-v{version}", "topic_id": None}],
                    "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": asked,
                    "include_topic_authorized_operations": asked}
            response = conn.request(ApiKey.METADATA, body, version=version)
            [topic] = response.topics
            assert topic.topic_authorized_operations == \
                (_bits(TOPIC_OPERATIONS) if asked else NOT_REQUESTED)
            if version <= 10:  # v11 moved cluster operations to DescribeCluster
                assert response.cluster_authorized_operations == \
                    (_bits(CLUSTER_OPERATIONS) if asked else NOT_REQUESTED)
            described = conn.request(ApiKey.DESCRIBE_CLUSTER,
                                     {"include_cluster_authorized_operations": asked})
            assert described.cluster_authorized_operations == \
                (_bits(CLUSTER_OPERATIONS) if asked else NOT_REQUESTED)
