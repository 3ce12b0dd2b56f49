"""Dynamic broker configs through real clients: confluent-kafka and kafka-python admin
(DescribeConfigs, IncrementalAlterConfigs, legacy AlterConfigs) against a real broker.

Every test leaves the broker without dynamic configs (the ``clean`` fixture), so
they do not depend on each other's order. The last section starts brokers with
Kafka's coarser time settings (``log.retention.hours=1``, as a quickstart
server.properties says ``log.retention.hours=168``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
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
from slog.client.errors import KafkaError as SlogKafkaError
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess, running_broker
from tests.cluster.conftest import wait_until

TIMEOUT_S = 15
BROKER = "1"
STATIC = {"log.retention.ms": "86400000"}  # a --config value the dynamic layers shadow


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("dynconf") / "data", **STATIC) as process:
        yield process


def _admin_of(broker: BrokerProcess) -> AdminClient:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.bootstrap = broker.bootstrap  # type: ignore[attr-defined]
    return client


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return _admin_of(broker)


@pytest.fixture(autouse=True)
def clean(broker: BrokerProcess) -> Iterator[None]:
    yield
    with Admin(broker.bootstrap) as slog_admin:
        for target in (None, 1):
            dynamic = [name for name, entry in slog_admin.describe_broker_configs(target).items()
                       if entry.source in ("DYNAMIC_BROKER_CONFIG",
                                           "DYNAMIC_DEFAULT_BROKER_CONFIG")]
            if dynamic:
                slog_admin.alter_broker_configs(target, delete=dynamic)


def result(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(TIMEOUT_S) for key, future in futures.items()}


def describe(admin: AdminClient, kind: str, name: str) -> dict[str, Any]:
    if kind == "broker" and name == "":
        return cluster_default(admin)
    [entries] = result(admin.describe_configs([ConfigResource(kind, name)])).values()
    return dict(entries)


def cluster_default(admin: AdminClient) -> dict[str, Any]:
    """The cluster-wide default ("" resource): confluent-kafka's ConfigResource refuses an
    empty name, so slog's admin client asks."""
    with Admin(admin.bootstrap) as slog_admin:  # type: ignore[attr-defined]
        return slog_admin.describe_broker_configs(None)


def alter(admin: AdminClient, kind: str, name: str, validate_only: bool = False,
          **changes: str | None) -> None:
    if kind == "broker" and name == "":
        with Admin(admin.bootstrap) as slog_admin:  # type: ignore[attr-defined]
            sets = {k.replace("_", "."): v for k, v in changes.items() if v is not None}
            deletes = [k.replace("_", ".") for k, v in changes.items() if v is None]
            slog_admin.alter_broker_configs(None, sets, deletes, validate_only)
        return
    entries = [ConfigEntry(key.replace("_", "."), value,
                           incremental_operation=AlterConfigOpType.DELETE if value is None
                           else AlterConfigOpType.SET)
               for key, value in changes.items()]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    result(admin.incremental_alter_configs([resource], validate_only=validate_only))


def error_of(exc: pytest.ExceptionInfo[KafkaException]) -> Any:
    return exc.value.args[0]


def wire_describe(broker: BrokerProcess, *keys: tuple[int, str, str]) -> list[Any]:
    """One config entry per (resource type, name, key), with its synonyms, read on the
    wire: confluent-kafka keys synonyms by name, which loses their order."""
    with BrokerConnection("127.0.0.1", broker.port).connect() as conn:
        response = conn.request(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": kind, "resource_name": name,
                           "configuration_keys": [key]} for kind, name, key in keys],
            "include_synonyms": True, "include_documentation": False})
    return [result.configs[0] for result in response.results]


def synonyms_of(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


# ------------------------------------------------------------------- confluent-kafka


def test_broker_describe_reports_static_and_default_sources(admin: AdminClient) -> None:
    configs = describe(admin, "broker", BROKER)
    assert configs["log.retention.ms"].value == STATIC["log.retention.ms"]
    assert configs["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not configs["log.retention.ms"].is_read_only  # dynamic: may be changed
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["num.partitions"].is_read_only  # needs a restart
    assert describe(admin, "broker", "") == {}  # no cluster-wide dynamic defaults yet


def test_cluster_default_then_per_broker_override(admin: AdminClient) -> None:
    alter(admin, "broker", "", log_retention_ms="7200000")
    configs = describe(admin, "broker", BROKER)
    assert configs["log.retention.ms"].value == "7200000"
    assert configs["log.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    default = describe(admin, "broker", "")
    assert default["log.retention.ms"].value == "7200000"

    alter(admin, "broker", BROKER, log_retention_ms="3600000")
    configs = describe(admin, "broker", BROKER)
    assert configs["log.retention.ms"].value == "3600000"
    assert configs["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    alter(admin, "broker", BROKER, log_retention_ms=None)  # back to the cluster default
    assert describe(admin, "broker", BROKER)["log.retention.ms"].value == "7200000"


def test_topics_without_an_override_follow_the_dynamic_default(admin: AdminClient) -> None:
    result(admin.create_topics([NewTopic("dyn-follow", 1, 1)]))
    result(admin.create_topics([NewTopic("dyn-own", 1, 1, config={"retention.ms": "1000"})]))
    alter(admin, "broker", "", log_retention_ms="5000000")
    follow = describe(admin, "topic", "dyn-follow")["retention.ms"]
    assert (follow.value, follow.source) == (
        "5000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    own = describe(admin, "topic", "dyn-own")["retention.ms"]
    assert (own.value, own.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def test_settings_that_need_a_restart_are_refused(admin: AdminClient) -> None:
    for key, value in (("num.partitions", "3"), ("security.protocol", "PLAINTEXT"),
                       ("log.retention.ms", "soon"), ("no.such.config", "1")):
        with pytest.raises(KafkaException) as exc:
            alter(admin, "broker", BROKER, **{key: value})
        # INVALID_REQUEST, as Kafka answers for broker configs (KAFKA-13609).
        assert error_of(exc).code() == KafkaError.INVALID_REQUEST, key
        if key in ("num.partitions", "security.protocol"):
            assert "cannot be updated dynamically" in error_of(exc).str()
    with pytest.raises(SlogKafkaError, match="cannot be updated dynamically") as slog_exc:
        alter(admin, "broker", "", num_partitions="3")
    assert slog_exc.value.code == ErrorCode.invalid_request
    assert describe(admin, "broker", "") == {}
    assert describe(admin, "broker", BROKER)["num.partitions"].value == "1"


def test_validate_only_changes_nothing(admin: AdminClient) -> None:
    alter(admin, "broker", "", validate_only=True, log_retention_ms="1234")
    alter(admin, "broker", BROKER, validate_only=True, log_retention_ms="1234")
    assert describe(admin, "broker", "") == {}
    assert describe(admin, "broker", BROKER)["log.retention.ms"].source == \
        ConfigSource.STATIC_BROKER_CONFIG.value
    with pytest.raises(KafkaException):
        alter(admin, "broker", BROKER, validate_only=True, log_retention_ms="-5")


def test_describe_synonyms_in_precedence_order(broker: BrokerProcess, admin: AdminClient
                                               ) -> None:
    result(admin.create_topics([NewTopic("dyn-synonyms", 1, 1,
                                         config={"retention.ms": "1000"})]))
    alter(admin, "broker", "", log_retention_ms="2000")
    alter(admin, "broker", BROKER, log_retention_ms="3000")
    entry, broker_entry = wire_describe(broker, (2, "dyn-synonyms", "retention.ms"),
                                        (4, BROKER, "log.retention.ms"))
    assert synonyms_of(entry) == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.ms", "3000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("log.retention.ms", "2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        ("log.retention.ms", STATIC["log.retention.ms"],
         ConfigSource.STATIC_BROKER_CONFIG.value),
        # As Kafka: the built-in default is log.retention.hours's, .ms is unset by default.
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value),
    ]
    assert (broker_entry.value, broker_entry.config_source) == (
        "3000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert [s.source for s in broker_entry.synonyms] == [2, 3, 4, 5]


def test_describe_another_brokers_id_is_refused(broker: BrokerProcess) -> None:
    with BrokerConnection("127.0.0.1", broker.port).connect() as conn:
        response = conn.request(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": 4, "resource_name": "7",
                           "configuration_keys": None},
                          {"resource_type": 4, "resource_name": "x",
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    assert [r.error_code for r in response.results] == [ErrorCode.invalid_request] * 2


def test_librdkafka_admin_test_broker_configs(admin: AdminClient) -> None:
    """What librdkafka's 0081 admin test alters: a per-broker SASL setting, with the legacy
    AlterConfigs (confluent-kafka's alter_configs) and IncrementalAlterConfigs, plus topic
    configs in the same request."""
    key = "sasl.kerberos.min.time.before.relogin"
    result(admin.create_topics([NewTopic("rdkafka-0081", 1, 1)]))
    legacy = [ConfigResource("broker", BROKER, set_config={key: "58000"}),
              ConfigResource("topic", "rdkafka-0081",
                             set_config={"compression.type": "gzip", "flush.ms": "12345678"})]
    with pytest.warns(DeprecationWarning):
        result(admin.alter_configs(legacy))
    assert describe(admin, "broker", BROKER)[key].value == "58000"
    topic = describe(admin, "topic", "rdkafka-0081")
    assert (topic["compression.type"].value, topic["flush.ms"].value) == ("gzip", "12345678")
    alter(admin, "broker", BROKER, **{key: "59000"})
    configs = describe(admin, "broker", BROKER)
    assert (configs[key].value, configs[key].source) == (
        "59000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    missing = ConfigResource("topic", "rdkafka-0081-missing", incremental_configs=[
        ConfigEntry("compression.type", "lz4", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        result(admin.incremental_alter_configs([missing]))
    assert error_of(exc).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # Kafka takes it only for a named broker.
    with pytest.raises(SlogKafkaError, match="name a broker id"):
        alter(admin, "broker", "", **{key: "58000"})


# ---------------------------------------------------------------------- kafka-python


@pytest.fixture
def kp_admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


def test_kafka_python_incremental_and_describe_broker(kp_admin: KafkaAdminClient) -> None:
    def alter(configs: dict[str, str]) -> str:
        outcome = kp_admin.alter_configs(
            [KpConfigResource(ConfigResourceType.BROKER, BROKER, configs=configs)],
            incremental=True, raise_on_unknown=False)
        return outcome["broker"][BROKER]

    def describe(key: str) -> dict[str, Any]:
        described = kp_admin.describe_configs(
            [KpConfigResource(ConfigResourceType.BROKER, BROKER, configs={key: None})],
            config_filter="all", include_synonyms=True)
        return described["broker"][BROKER][key]

    assert alter({"log.segment.bytes": "2000000"}) == "OK"
    segment = describe("log.segment.bytes")
    assert (segment["value"], segment["config_source"], segment["read_only"]) == (
        "2000000", "DYNAMIC_BROKER_CONFIG", False)
    assert [s["source"] for s in segment["synonyms"]] == ["DYNAMIC_BROKER_CONFIG",
                                                          "DEFAULT_CONFIG"]
    refused = alter({"num.partitions": "4"})
    assert "InvalidRequestError" in refused and "cannot be updated dynamically" in refused
    partitions = describe("num.partitions")
    assert (partitions["value"], partitions["read_only"]) == ("1", True)


def test_start_up_options_are_static_settings(broker: BrokerProcess,
                                              kp_admin: KafkaAdminClient) -> None:
    """`slog broker start --id --listen --data-dir` is a Kafka broker's server.properties:
    node.id, listeners, advertised.listeners and log.dirs, as kafka-python's own suite
    checks them (it asks for advertised.listeners as STATIC_BROKER_CONFIG)."""
    described = kp_admin.describe_configs([KpConfigResource(ConfigResourceType.BROKER, BROKER)],
                                          config_filter="all", include_synonyms=True)
    configs = described["broker"][BROKER]
    listener = f"PLAINTEXT://{broker.bootstrap}"
    expected = {"node.id": BROKER, "broker.id": BROKER, "listeners": listener,
                "advertised.listeners": listener,
                "log.dirs": str(broker.data_dir.resolve() / "brokers" / BROKER / "logs")}
    for key, value in expected.items():
        entry = configs[key]
        assert (entry["value"], entry["config_source"], entry["read_only"]) == \
            (value, "STATIC_BROKER_CONFIG", True), key
        assert [s["source"] for s in entry["synonyms"]] == ["STATIC_BROKER_CONFIG"], key


def test_kafka_python_legacy_alter_configs(kp_admin: KafkaAdminClient, admin: AdminClient
                                           ) -> None:
    def legacy(kind: ConfigResourceType, name: str, configs: dict[str, str]) -> str:
        outcome = kp_admin.alter_configs([KpConfigResource(kind, name, configs=configs)],
                                         incremental=False, raise_on_unknown=False)
        return outcome["broker" if kind == ConfigResourceType.BROKER else "topic"][name]

    assert legacy(ConfigResourceType.BROKER, BROKER, {"log.retention.ms": "4000000",
                                                       "max.connections": "500"}) == "OK"
    configs = describe(admin, "broker", BROKER)
    assert configs["max.connections"].value == "500"
    assert configs["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    # kafka-python re-sends the other dynamic keys itself, so both stay.
    assert legacy(ConfigResourceType.BROKER, BROKER, {"max.connections": "400"}) == "OK"
    configs = describe(admin, "broker", BROKER)
    assert configs["max.connections"].value == "400"
    assert configs["log.retention.ms"].value == "4000000"

    result(admin.create_topics([NewTopic("kp-legacy", 1, 1, config={"retention.ms": "1000"})]))
    assert legacy(ConfigResourceType.TOPIC, "kp-legacy", {"segment.bytes": "8888"}) == "OK"
    assert describe(admin, "topic", "kp-legacy")["segment.bytes"].value == "8888"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_alter_configs_replaces_the_whole_set(broker: BrokerProcess, admin: AdminClient,
                                                     version: int) -> None:
    """AlterConfigs (API 33) on the wire: keys the request leaves out are deleted."""
    topic = f"legacy-v{version}"
    result(admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "1000",
                                                              "segment.bytes": "9999"})]))
    alter(admin, "broker", BROKER, log_retention_ms="4000000", max_connections="500")

    def legacy(resource_type: int, name: str, configs: dict[str, str],
               validate_only: bool = False) -> Any:
        with BrokerConnection("127.0.0.1", broker.port).connect() as conn:
            response = conn.request(ApiKey.ALTER_CONFIGS, {
                "resources": [{"resource_type": resource_type, "resource_name": name,
                               "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "validate_only": validate_only}, version=version)
        [row] = response.responses
        return row.error_code

    assert legacy(4, BROKER, {"max.connections": "400"}) == ErrorCode.none
    configs = describe(admin, "broker", BROKER)
    assert configs["max.connections"].value == "400"
    assert configs["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    assert legacy(2, topic, {"segment.bytes": "8888"}, validate_only=True) == ErrorCode.none
    assert describe(admin, "topic", topic)["retention.ms"].value == "1000"
    assert legacy(2, topic, {"segment.bytes": "8888"}) == ErrorCode.none
    configs = describe(admin, "topic", topic)
    assert configs["segment.bytes"].value == "8888"
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    assert legacy(4, "", {"num.partitions": "2"}) == ErrorCode.invalid_request
    assert legacy(2, topic, {"segment.bytes": "x"}) == ErrorCode.invalid_config
    assert legacy(2, "no-such-topic", {}) == ErrorCode.unknown_topic_or_partition


# --------------------------------------------------------------------------- restart


def test_dynamic_configs_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_broker(data) as first, Admin(first.bootstrap) as slog_admin:
        slog_admin.alter_broker_configs(None, {"log.segment.bytes": "3000000"})
        slog_admin.alter_broker_configs(1, {"max.connections": "77"})
    with running_broker(data) as second, Admin(second.bootstrap) as slog_admin:
        configs = slog_admin.describe_broker_configs(1)
        assert (configs["log.segment.bytes"].value, configs["log.segment.bytes"].source) == (
            "3000000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert (configs["max.connections"].value, configs["max.connections"].source) == (
            "77", "DYNAMIC_BROKER_CONFIG")


# -------------------------------------------------------------- coarser time settings
HOUR_MS = 3_600_000
HOURS = {"log.retention.hours": "1", "log.roll.hours": "2",
         "log.retention.check.interval.ms": "200"}
STATIC_SOURCE, DEFAULT_SOURCE = (ConfigSource.STATIC_BROKER_CONFIG.value,
                                 ConfigSource.DEFAULT_CONFIG.value)


@pytest.fixture(scope="module")
def hours_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("hours") / "data", **HOURS) as process:
        yield process


@pytest.fixture(scope="module")
def hours_admin(hours_broker: BrokerProcess) -> AdminClient:
    return _admin_of(hours_broker)


def test_topic_retention_and_roll_come_from_the_static_hours(hours_broker: BrokerProcess,
                                                             hours_admin: AdminClient) -> None:
    result(hours_admin.create_topics([NewTopic("hours-follow", 1, 1)]))
    configs = describe(hours_admin, "topic", "hours-follow")
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        str(HOUR_MS), STATIC_SOURCE)
    assert (configs["segment.ms"].value, configs["segment.ms"].source) == (
        str(2 * HOUR_MS), STATIC_SOURCE)
    retention, roll = wire_describe(hours_broker, (2, "hours-follow", "retention.ms"),
                                    (2, "hours-follow", "segment.ms"))
    assert synonyms_of(retention) == [("log.retention.hours", "1", STATIC_SOURCE),
                                      ("log.retention.hours", "168", DEFAULT_SOURCE)]
    assert synonyms_of(roll) == [("log.roll.hours", "2", STATIC_SOURCE),
                                 ("log.roll.hours", "168", DEFAULT_SOURCE)]


def test_dynamic_retention_ms_wins_over_static_hours(hours_broker: BrokerProcess,
                                                     hours_admin: AdminClient) -> None:
    result(hours_admin.create_topics([
        NewTopic("hours-dynamic", 1, 1),
        NewTopic("hours-own", 1, 1, config={"retention.ms": "1000"})]))
    alter(hours_admin, "broker", "", log_retention_ms="5000000")
    try:
        retention = describe(hours_admin, "topic", "hours-dynamic")["retention.ms"]
        assert (retention.value, retention.source) == (
            "5000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        [own] = wire_describe(hours_broker, (2, "hours-own", "retention.ms"))
        assert synonyms_of(own) == [
            ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
            ("log.retention.ms", "5000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
            ("log.retention.hours", "1", STATIC_SOURCE),
            ("log.retention.hours", "168", DEFAULT_SOURCE)]
    finally:
        alter(hours_admin, "broker", "", log_retention_ms=None)
    assert describe(hours_admin, "topic", "hours-dynamic")["retention.ms"].value == str(HOUR_MS)


def test_broker_lists_the_hours_as_start_up_settings(hours_admin: AdminClient) -> None:
    configs = describe(hours_admin, "broker", BROKER)
    hours = configs["log.retention.hours"]
    assert (hours.value, hours.source, hours.is_read_only) == ("1", STATIC_SOURCE, True)
    minutes = configs["log.retention.minutes"]
    assert (minutes.value, minutes.source) == (None, DEFAULT_SOURCE)
    millis = configs["log.retention.ms"]  # unset, as in Kafka, but may be set at runtime
    assert (millis.value, millis.source, millis.is_read_only) == (None, DEFAULT_SOURCE, False)
    assert configs["log.roll.hours"].value == "2"
    with pytest.raises(KafkaException) as exc:
        alter(hours_admin, "broker", BROKER, log_retention_hours="2")
    assert error_of(exc).code() == KafkaError.INVALID_REQUEST
    assert "cannot be updated dynamically" in error_of(exc).str()


def test_retention_by_the_hour_deletes_older_segments(hours_broker: BrokerProcess,
                                                      hours_admin: AdminClient) -> None:
    topic = "hours-aging"
    result(hours_admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})]))
    two_hours_ago = int(time.time() * 1000) - 2 * HOUR_MS
    with Producer(hours_broker.bootstrap, acks=1, linger_ms=0) as producer:
        for _ in range(20):  # one batch each, so segments roll between them
            producer.send(topic, b"x" * 200, partition=0, timestamp_ms=two_hours_ago
                          ).result(timeout=TIMEOUT_S)
    tp = TopicPartition(topic, 0)
    with Admin(hours_broker.bootstrap) as slog_admin:
        wait_until(lambda: slog_admin.list_offsets({tp: "earliest"})[tp].offset > 0,
                   TIMEOUT_S, "retention (1 hour) to delete two-hour-old segments")


def test_minutes_win_over_hours(tmp_path: Path) -> None:
    settings = {"log.retention.minutes": "90", "log.retention.hours": "1"}
    with running_broker(tmp_path / "data", **settings) as minutes_broker:
        creator = _admin_of(minutes_broker)  # kept: futures fail once their client goes
        result(creator.create_topics([NewTopic("minutes", 1, 1)]))
        client = KafkaAdminClient(bootstrap_servers=minutes_broker.bootstrap,
                                  request_timeout_ms=10_000)
        try:
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
