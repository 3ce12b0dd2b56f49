"""DescribeLogDirs (API 35) served by a slog broker, read by slog's admin and kafka-python."""

from __future__ import annotations

from typing import Any

from kafka.admin import KafkaAdminClient

from slog.client import Admin, NewTopic, Producer, TopicPartition
from tests.brokers import BrokerProcess


def _topic_with_records(broker: BrokerProcess, name: str, count: int) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 2, 1)])
    producer = Producer(broker.bootstrap)
    for i in range(count):
        producer.send(name, value=b"x" * 100, partition=0, key=b"%d" % i)
    producer.flush()
    producer.close()


def test_slog_admin_reads_partition_sizes(broker: BrokerProcess) -> None:
    _topic_with_records(broker, "sized", 200)
    with Admin(broker.bootstrap) as admin:
        found = admin.describe_log_dirs()
    assert list(found) == [1]
    replicas = found[1]
    full, empty = replicas[TopicPartition("sized", 0)], replicas[TopicPartition("sized", 1)]
    assert full.size > 200 * 100 and empty.size == 0
    assert full.offset_lag == 0  # a leader is never behind its own high watermark


def test_kafka_python_reads_log_dirs(broker: BrokerProcess) -> None:
    _topic_with_records(broker, "kp", 10)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        answer: Any = client.describe_log_dirs()
    finally:
        client.close()
    text = repr(answer)
    assert "kp" in text and "logs" in text, text[:500]
