"""Kafka's coarser time settings on a real broker, through confluent-kafka and kafka-python:
a broker started with ``log.retention.hours=1`` (the quickstart's server.properties
style) gives its topics retention.ms=3600000, DescribeConfigs says where it came from
with Kafka's synonyms, and retention deletes by it. ``log.retention.minutes`` wins over
``.hours``, ``log.retention.ms`` (the only dynamic one) over both.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from slog.client import Admin, Producer, TopicPartition
from slog.client.connection import BrokerConnection
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess, running_broker
from tests.cluster.conftest import wait_until

TIMEOUT_S = 15
HOUR_MS = 3_600_000
STATIC = {"log.retention.hours": "1", "log.roll.hours": "2",
          "log.retention.check.interval.ms": "200"}
STATIC_SOURCE, DEFAULT_SOURCE = (ConfigSource.STATIC_BROKER_CONFIG.value,
                                 ConfigSource.DEFAULT_CONFIG.value)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("hours") / "data", **STATIC) as process:
        yield process


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _result(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(TIMEOUT_S) for key, future in futures.items()}


def _create(admin: AdminClient, topic: str, **configs: str) -> None:
    _result(admin.create_topics([NewTopic(topic, 1, 1, config=configs)]))


def _describe(admin: AdminClient, kind: str, name: str) -> dict[str, Any]:
    [entries] = _result(admin.describe_configs([ConfigResource(kind, name)])).values()
    return dict(entries)


def _wire_synonyms(broker: BrokerProcess, topic: str, key: str) -> list[tuple[str, str, int]]:
    """confluent-kafka keys synonyms by name, losing their order: read the response."""
    with BrokerConnection("127.0.0.1", broker.port).connect() as conn:
        response = conn.request(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": 2, "resource_name": topic,
                           "configuration_keys": [key]}],
            "include_synonyms": True, "include_documentation": False})
    [entry] = response.results[0].configs
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def test_topic_retention_and_roll_come_from_the_static_hours(broker: BrokerProcess,
                                                             admin: AdminClient) -> None:
    _create(admin, "hours-follow")
    configs = _describe(admin, "topic", "hours-follow")
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        str(HOUR_MS), STATIC_SOURCE)
    assert (configs["segment.ms"].value, configs["segment.ms"].source) == (
        str(2 * HOUR_MS), STATIC_SOURCE)
    assert _wire_synonyms(broker, "hours-follow", "retention.ms") == [
        ("log.retention.hours", "1", STATIC_SOURCE),
        ("log.retention.hours", "168", DEFAULT_SOURCE)]
    assert _wire_synonyms(broker, "hours-follow", "segment.ms") == [
        ("log.roll.hours", "2", STATIC_SOURCE), ("log.roll.hours", "168", DEFAULT_SOURCE)]


def test_dynamic_retention_ms_wins_over_static_hours(broker: BrokerProcess,
                                                     admin: AdminClient) -> None:
    _create(admin, "hours-dynamic")
    _create(admin, "hours-own", **{"retention.ms": "1000"})
    with Admin(broker.bootstrap) as slog_admin:
        slog_admin.alter_broker_configs(None, {"log.retention.ms": "5000000"})
        try:
            retention = _describe(admin, "topic", "hours-dynamic")["retention.ms"]
            assert (retention.value, retention.source) == (
                "5000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
            assert _wire_synonyms(broker, "hours-own", "retention.ms") == [
                ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
                ("log.retention.ms", "5000000",
                 ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
                ("log.retention.hours", "1", STATIC_SOURCE),
                ("log.retention.hours", "168", DEFAULT_SOURCE)]
        finally:
            slog_admin.alter_broker_configs(None, delete=["log.retention.ms"])
    assert _describe(admin, "topic", "hours-dynamic")["retention.ms"].value == str(HOUR_MS)


def test_broker_lists_the_hours_as_start_up_settings(admin: AdminClient) -> None:
    configs = _describe(admin, "broker", "1")
    hours = configs["log.retention.hours"]
    assert (hours.value, hours.source, hours.is_read_only) == ("1", STATIC_SOURCE, True)
    assert (configs["log.retention.minutes"].value,
            configs["log.retention.minutes"].source) == (None, DEFAULT_SOURCE)
    millis = configs["log.retention.ms"]  # unset, as in Kafka; but may be set at runtime
    assert (millis.value, millis.source, millis.is_read_only) == (None, DEFAULT_SOURCE, False)
    assert configs["log.roll.hours"].value == "2"
    change = ConfigResource("broker", "1", incremental_configs=[ConfigEntry(
        "log.retention.hours", "2", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        _result(admin.incremental_alter_configs([change]))
    assert "cannot be updated dynamically" in exc.value.args[0].str()


def test_retention_by_the_hour_deletes_older_segments(broker: BrokerProcess,
                                                      admin: AdminClient) -> None:
    topic = "hours-aging"
    _create(admin, topic, **{"segment.bytes": "1024"})
    two_hours_ago = int(time.time() * 1000) - 2 * HOUR_MS
    with Producer(broker.bootstrap, acks=1, linger_ms=0) as producer:
        for _ in range(20):  # one batch each, so segments roll between them
            producer.send(topic, b"x" * 200, partition=0, timestamp_ms=two_hours_ago
                          ).result(timeout=TIMEOUT_S)
    tp = TopicPartition(topic, 0)
    with Admin(broker.bootstrap) as slog_admin:
        wait_until(lambda: slog_admin.list_offsets({tp: "earliest"})[tp].offset > 0,
                   TIMEOUT_S, "retention (1 hour) to delete two-hour-old segments")


def test_minutes_win_over_hours(tmp_path: Path) -> None:
    settings = {"log.retention.minutes": "90", "log.retention.hours": "1"}
    with running_broker(tmp_path / "data", **settings) as broker:
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        try:
            _create(AdminClient({"bootstrap.servers": broker.bootstrap}), "minutes")
            described = client.describe_configs(
                [KpConfigResource(ConfigResourceType.TOPIC, "minutes",
                                  configs={"retention.ms": None})],
                config_filter="all", include_synonyms=True)
        finally:
            client.close()
    retention = described["topic"]["minutes"]["retention.ms"]
    assert (retention["value"], retention["config_source"]) == (
        str(90 * 60_000), "STATIC_BROKER_CONFIG")
    assert [(s["name"], s["value"], s["source"]) for s in retention["synonyms"]] == [
        ("log.retention.minutes", "90", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "1", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG")]
