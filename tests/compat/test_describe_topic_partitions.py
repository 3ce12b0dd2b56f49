"""DescribeTopicPartitions (API 75, KIP-966) against a real broker: Kafka's order, paging
by cursor, topic ids, authorized operations, and the errors for unknown topics and bad
cursors, asked through slog's client codec and by confluent-kafka's admin client."""

from __future__ import annotations

from typing import Any

import pytest

from slog.client.connection import BrokerConnection
from slog.core.acls import Operation
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster

pytestmark = pytest.mark.brokers(1)

TOPICS = {"dtp-b": 3, "dtp-a": 2, "dtp-c": 1}
EVERY_TOPIC_OPERATION = sum(1 << op for op in (
    Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
    Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS))


def _create(cluster: Cluster) -> None:
    for name, partitions in TOPICS.items():
        cluster.create_topic(name, partitions, 1)


@pytest.fixture(scope="module")
def cluster(shared_cluster: Cluster) -> Cluster:
    """One cluster with the module's topics, made once: the tests only describe them."""
    _create(shared_cluster)
    return shared_cluster


def _describe(conn: BrokerConnection, names: list[str], limit: int = 2000,
              cursor: tuple[str, int] | None = None) -> Any:
    body = {"topics": [{"name": n} for n in names], "response_partition_limit": limit,
            "cursor": None if cursor is None else
            {"topic_name": cursor[0], "partition_index": cursor[1]}}
    return conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, body, version=0)


def _pages(conn: BrokerConnection, names: list[str], limit: int) -> list[list[tuple[str, int]]]:
    """Every page until the cursor runs out: the (topic, partition) pairs of each."""
    pages, cursor = [], None
    while True:
        response = _describe(conn, names, limit, cursor)
        pages.append([(t.name, p.partition_index) for t in response.topics
                      for p in t.partitions])
        if response.next_cursor is None:
            return pages
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
        assert len(pages) < 20, "the cursor never ran out"


def test_topics_sorted_with_ids_operations_and_errors(cluster: Cluster) -> None:
    with cluster.connect(1) as conn:
        metadata = conn.request(ApiKey.METADATA, {"topics": [{"name": n} for n in TOPICS]})
        ids = {t.name: t.topic_id for t in metadata.topics}
        response = _describe(conn, ["dtp-c", "dtp-missing", "dtp-b", "dtp-a", "dtp-a",
                                    "bad/name"])
    assert response.next_cursor is None
    assert [t.name for t in response.topics] == \
        ["bad/name", "dtp-a", "dtp-b", "dtp-c", "dtp-missing"]
    by_name = {t.name: t for t in response.topics}
    assert by_name["bad/name"].error_code == ErrorCode.invalid_topic_exception
    assert by_name["dtp-missing"].error_code == ErrorCode.unknown_topic_or_partition
    assert by_name["dtp-missing"].topic_id is None  # kio reads the zero uuid as None
    assert not by_name["dtp-missing"].partitions
    for name, partitions in TOPICS.items():
        topic = by_name[name]
        assert topic.error_code == ErrorCode.none and topic.topic_id == ids[name]
        assert topic.topic_authorized_operations == EVERY_TOPIC_OPERATION
        assert [p.partition_index for p in topic.partitions] == list(range(partitions))
        for p in topic.partitions:
            assert p.error_code == ErrorCode.none and p.leader_id == 1
            assert p.leader_epoch >= 0 and list(p.replica_nodes) == list(p.isr_nodes) == [1]


@pytest.mark.broker_config({"max.request.partition.size.limit": "5"})
def test_cursor_pages_through_named_and_all_topics(own_cluster: Cluster) -> None:
    _create(own_cluster)
    everything = [(name, i) for name in sorted(TOPICS) for i in range(TOPICS[name])]
    with own_cluster.connect(1) as conn:
        # A limit of 2 ends the first page exactly at dtp-a's end: the cursor names the
        # next topic's partition 0; then dtp-b is cut inside.
        assert _pages(conn, list(TOPICS), 2) == [
            everything[0:2], everything[2:4], everything[4:6]]
        assert _pages(conn, list(TOPICS), 4) == [everything[0:4], everything[4:6]]
        # The broker's max.request.partition.size.limit (5 here) caps a larger ask.
        assert _pages(conn, list(TOPICS), 1000) == [everything[0:5], everything[5:6]]
        # No topic named: every topic (the offsets topic may be among them).
        every = [pair for page in _pages(conn, [], 3) for pair in page]
        assert [pair for pair in every if pair[0].startswith("dtp-")] == everything
        # A cursor picks up where it says, also from the middle of a topic.
        response = _describe(conn, list(TOPICS), cursor=("dtp-b", 1))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics] \
            == [("dtp-b", [1, 2]), ("dtp-c", [0])]


def test_bad_cursors_are_invalid_requests(cluster: Cluster) -> None:
    with cluster.connect(1) as conn:
        for cursor in (("dtp-c", 0), ("dtp-a", -1)):
            response = _describe(conn, ["dtp-a", "dtp-b"], cursor=cursor)
            assert [(t.name, t.error_code) for t in response.topics] == [
                ("dtp-a", ErrorCode.invalid_request), ("dtp-b", ErrorCode.invalid_request)]
        # The connection still serves.
        assert _describe(conn, ["dtp-a"]).topics[0].error_code == ErrorCode.none


def test_kafka_python_admin_pages_through(cluster: Cluster) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].bootstrap)
    try:
        seen, cursor = [], None
        while True:
            page = admin.describe_topic_partitions(list(TOPICS), response_partition_limit=4,
                                                   cursor=cursor)
            seen += [(t["name"], p["partition_index"]) for t in page["topics"]
                     for p in t["partitions"]]
            assert all(t["error_code"] == 0 for t in page["topics"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [(name, i) for name in sorted(TOPICS) for i in range(TOPICS[name])]
    finally:
        admin.close()
