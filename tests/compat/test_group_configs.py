"""Kafka 4's per-group configs (the GROUP config resource) through real clients.

librdkafka's own admin test (0081) sets and deletes ``consumer.session.timeout.ms``
of a group and describes a group that does not exist; a consumer-protocol group
then runs with its overrides, which live in the metadata log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka.admin import KafkaAdminClient

from slog.client.connection import BrokerConnection
from slog.core.config import ConfigSource
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess, running_broker
from tests.groups.helpers import heartbeat_when_ready, unique

TIMEOUT_S = 20
SETTINGS = {
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "2000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("groupconf") / "data", **SETTINGS) as process:
        yield process


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def alter(admin: AdminClient, group: str, key: str, value: str | None) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(key, value or "", incremental_operation=op)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def describe(admin: AdminClient, group: str) -> dict[str, Any]:
    [entries] = [f.result(TIMEOUT_S) for f in admin.describe_configs(
        [ConfigResource(ResourceType.GROUP, group)]).values()]
    return dict(entries)


def refusal(admin: AdminClient, group: str, key: str, value: str) -> Any:
    with pytest.raises(KafkaException) as caught:
        alter(admin, group, key, value)
    return caught.value.args[0]


def test_set_describe_and_delete_a_group_config(admin: AdminClient) -> None:
    group = unique("gc")  # no such group yet: it may still have configs, as in Kafka
    before = describe(admin, group)
    assert before["consumer.session.timeout.ms"].value == "6000"
    assert before["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert before["consumer.heartbeat.interval.ms"].value == "500"
    alter(admin, group, "consumer.session.timeout.ms", "50000")
    entry = describe(admin, group)["consumer.session.timeout.ms"]
    assert (entry.value, entry.source) == ("50000", ConfigSource.GROUP_CONFIG)
    alter(admin, group, "consumer.session.timeout.ms", None)
    entry = describe(admin, group)["consumer.session.timeout.ms"]
    assert (entry.value, entry.source) == ("6000", ConfigSource.DEFAULT_CONFIG)


def test_out_of_bounds_and_unknown_settings_are_refused(admin: AdminClient) -> None:
    group = unique("gc")
    above = refusal(admin, group, "consumer.session.timeout.ms", "70000")  # max 60000
    assert above.code() == ErrorCode.invalid_config and "60000" in above.str()
    below = refusal(admin, group, "consumer.heartbeat.interval.ms", "50")  # min 100
    assert below.code() == ErrorCode.invalid_config
    share = refusal(admin, group, "share.session.timeout.ms", "30000")
    assert share.code() == ErrorCode.invalid_config and "share" in share.str()
    # the heartbeat must stay shorter than the session (6000 by default)
    slow = refusal(admin, group, "consumer.heartbeat.interval.ms", "6000")
    assert slow.code() == ErrorCode.invalid_config
    entry = describe(admin, group)["consumer.session.timeout.ms"]
    assert (entry.value, entry.source) == ("6000", ConfigSource.DEFAULT_CONFIG)


def join(conn: BrokerConnection, group: str, topic: str, member: str = "m1") -> Any:
    body = {"group_id": group, "member_id": f"{member}-{group}", "member_epoch": 0,
            "rebalance_timeout": 30000, "subscribed_topic_names": [topic],
            "topic_partitions": []}
    # As a client does first: this creates __consumer_offsets on a fresh broker.
    conn.request(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, version=3)
    return heartbeat_when_ready(conn, body, TIMEOUT_S)


def test_a_consumer_group_runs_with_its_overrides_across_a_restart(
        broker: BrokerProcess, admin: AdminClient) -> None:
    topic, tuned, plain = unique("t"), unique("gc"), unique("gc")
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(TIMEOUT_S)
    alter(admin, tuned, "consumer.heartbeat.interval.ms", "1500")
    with BrokerConnection("127.0.0.1", broker.port).connect() as conn:
        assert join(conn, tuned, topic).heartbeat_interval.total_seconds() == 1.5
        assert join(conn, plain, topic).heartbeat_interval.total_seconds() == 0.5
    broker.stop()
    broker.start()
    with BrokerConnection("127.0.0.1", broker.port).connect() as conn:
        again = join(conn, tuned, topic, member="m2")
        assert again.error_code == ErrorCode.none
        assert again.heartbeat_interval.total_seconds() == 1.5


def test_kafka_python_lists_groups_with_configs(broker: BrokerProcess, admin: AdminClient
                                               ) -> None:
    group = unique("gc")
    alter(admin, group, "consumer.session.timeout.ms", "30000")
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=(4, 1))
    try:
        listed = client.list_config_resources(["GROUP"])
    finally:
        client.close()
    assert group in listed["group"]
