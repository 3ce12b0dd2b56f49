from __future__ import annotations

from pathlib import Path

import pytest

from slog.core.config import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    parse_key_values,
    validate_dynamic_broker_config,
    validate_topic_configs,
)


def test_topic_values_fall_back_to_broker_settings() -> None:
    config = BrokerConfig.build(1, Path("/x"), "127.0.0.1", 9092, {"log.retention.ms": "1000"})
    effective = config.effective_topic_config({"cleanup.policy": "compact"})
    assert effective["retention.ms"] == ("1000", ConfigSource.STATIC_BROKER_CONFIG)
    assert effective["cleanup.policy"] == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert effective["segment.bytes"] == (str(64 * 1024 * 1024), ConfigSource.DEFAULT_CONFIG)


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.ms": "soon"}, "not an integer"),
        ({"min.insync.replicas": "0"}, "below the minimum"),
        ({"cleanup.policy": "forever"}, "not one of"),
        ({"no.such.thing": "1"}, "unknown topic config"),
    ],
)
def test_bad_topic_configs_are_named(configs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_topic_configs(configs)


def test_unknown_broker_setting_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown broker config"):
        BrokerConfig.build(1, Path("/x"), "h", 1, {"bogus": "1"})


def test_key_value_parsing() -> None:
    assert parse_key_values(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError):
        parse_key_values(["novalue"])


def test_rack_settings() -> None:
    from slog.core.config import RACK_AWARE_REPLICA_SELECTOR

    plain = BrokerConfig.build(1, Path("/data"), "h", 1, {})
    assert plain.rack is None and not plain.fetch_from_follower
    racked = BrokerConfig.build(1, Path("/data"), "h", 1, {
        "broker.rack": " eu-1a ", "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR})
    assert racked.rack == "eu-1a" and racked.fetch_from_follower
    with pytest.raises(ConfigError, match="RackAwareReplicaSelector"):
        BrokerConfig.build(1, Path("/data"), "h", 1,
                           {"replica.selector.class": "com.example.NearestSelector"})


# -- dynamic broker configs ---------------------------------------------------------------
def _layered() -> BrokerConfig:
    config = BrokerConfig.build(2, Path("/x"), "h", 1, {"log.retention.ms": "1000",
                                                         "max.connections": "50"})
    config.set_dynamic({"log.retention.ms": "2000", "log.segment.bytes": "4096"},
                       {"log.retention.ms": "3000"})
    return config


def test_layers_resolve_in_kafka_precedence() -> None:
    config = _layered()
    assert config.values["log.retention.ms"] == "3000"
    assert config.source("log.retention.ms") == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert config.synonyms("log.retention.ms") == [
        ("log.retention.ms", "3000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "1000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert config.source("log.segment.bytes") == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert config.source("max.connections") == ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("num.partitions") == ConfigSource.DEFAULT_CONFIG
    # The controller decides by the cluster-wide value, not its own broker's.
    assert config.cluster_value("log.retention.ms") == "2000"


def test_topic_configs_fall_back_through_dynamic_layers() -> None:
    config = _layered()
    effective = config.effective_topic_config({"segment.bytes": "8192"})
    assert effective["retention.ms"] == ("3000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert effective["segment.bytes"] == ("8192", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert config.topic_values({})["segment.bytes"] == "4096"
    assert config.cluster_topic_value({}, "retention.ms") == "2000"


def test_clearing_a_dynamic_layer_falls_back_to_static() -> None:
    config = _layered()
    assert config.set_dynamic({}, {}) is True
    assert config.values["log.retention.ms"] == "1000"
    assert config.set_dynamic({}, {}) is False  # nothing changed


def test_only_dynamic_settings_are_taken_from_the_metadata() -> None:
    config = BrokerConfig(1, Path("/x"))
    config.set_dynamic({"num.partitions": "9", "log.retention.ms": "bad", "bogus": "1"}, {})
    assert config.dynamic_default == {}
    assert config.values["num.partitions"] == "1"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num.partitions", "3", "cannot be updated dynamically"),
        ("no.such.thing", "1", "unknown broker config"),
        ("log.retention.ms", "soon", "not an integer"),
        ("log.retention.ms", "0", "neither -1"),  # Kafka's broker refuses it
        ("log.cleanup.policy", "forever", "not one of"),
    ],
)
def test_dynamic_validation(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_dynamic_broker_config(key, value)


def test_per_broker_only_settings_are_refused_at_the_cluster_default() -> None:
    key = "sasl.kerberos.min.time.before.relogin"
    assert validate_dynamic_broker_config(key, "58000") == "58000"
    with pytest.raises(ConfigError, match="name a broker id"):
        validate_dynamic_broker_config(key, "58000", per_broker=False)
    config = BrokerConfig(1, Path("/x"))
    config.set_dynamic({key: "1"}, {})
    assert config.source(key) == ConfigSource.DEFAULT_CONFIG


def test_dynamic_values_are_normalised() -> None:
    assert validate_dynamic_broker_config("unclean.leader.election.enable", " TRUE") == "true"
    assert validate_dynamic_broker_config("max.connections", "7") == "7"


# -- time synonyms: log.retention.ms/.minutes/.hours, log.roll.ms/.hours -----------------
HOUR_MS = 3600 * 1000


def _static(**settings: str) -> BrokerConfig:
    return BrokerConfig.build(1, Path("/x"), "h", 1,
                              {k.replace("_", "."): v for k, v in settings.items()})


def test_by_default_retention_and_roll_come_from_the_hours_settings() -> None:
    config = BrokerConfig(1, Path("/x"))
    assert config.topic_values({})["retention.ms"] == str(168 * HOUR_MS)
    assert config.topic_values({})["segment.ms"] == str(168 * HOUR_MS)
    assert config.topic_synonyms("retention.ms") == [
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert config.topic_synonyms("segment.ms") == [
        ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    # As Kafka: the .ms and .minutes settings are unset, so a broker listing has no value.
    assert "log.retention.ms" not in config.values
    assert "log.retention.minutes" not in config.values
    assert config.synonyms("log.retention.ms") == []
    assert config.source("log.retention.ms") == ConfigSource.DEFAULT_CONFIG


@pytest.mark.parametrize(
    ("settings", "retention", "winner"),
    [
        ({"log_retention_hours": "1"}, HOUR_MS, "log.retention.hours"),
        ({"log_retention_minutes": "30", "log_retention_hours": "1"}, 30 * 60_000,
         "log.retention.minutes"),
        ({"log_retention_ms": "5000", "log_retention_minutes": "30"}, 5000,
         "log.retention.ms"),
        ({"log_retention_ms": "5000", "log_retention_hours": "1"}, 5000, "log.retention.ms"),
    ],
)
def test_the_most_precise_retention_setting_wins(settings: dict[str, str], retention: int,
                                                 winner: str) -> None:
    config = _static(**settings)
    effective = config.effective_topic_config({})
    assert effective["retention.ms"] == (str(retention), ConfigSource.STATIC_BROKER_CONFIG)
    chain = config.topic_synonyms("retention.ms")
    assert chain[0] == (winner, settings[winner.replace(".", "_")],
                        ConfigSource.STATIC_BROKER_CONFIG)
    assert chain[-1] == ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)


def test_roll_ms_wins_over_roll_hours() -> None:
    assert _static(log_roll_hours="2").topic_values({})["segment.ms"] == str(2 * HOUR_MS)
    config = _static(log_roll_ms="60000", log_roll_hours="2")
    assert config.effective_topic_config({})["segment.ms"] == (
        "60000", ConfigSource.STATIC_BROKER_CONFIG)
    assert config.topic_synonyms("segment.ms") == [
        ("log.roll.ms", "60000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.roll.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG)]


@pytest.mark.parametrize("settings", [{"log_retention_hours": "-1"},
                                      {"log_retention_minutes": "-1", "log_retention_hours": "1"},
                                      {"log_retention_ms": "-1", "log_retention_hours": "1"}])
def test_minus_one_is_unlimited_in_any_unit(settings: dict[str, str]) -> None:
    assert _static(**settings).topic_values({})["retention.ms"] == "-1"


def test_dynamic_retention_ms_overrides_static_hours_in_kafka_synonym_order() -> None:
    config = _static(log_retention_hours="1")
    config.set_dynamic({"log.retention.ms": "2000"}, {"log.retention.ms": "3000"})
    assert config.topic_values({})["retention.ms"] == "3000"
    assert config.effective_topic_config({"retention.ms": "10"})["retention.ms"] == (
        "10", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert config.topic_synonyms("retention.ms") == [
        ("log.retention.ms", "3000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "1", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    # The controller goes by the cluster-wide layer, then the static hours.
    assert config.cluster_topic_value({}, "retention.ms") == "2000"
    config.set_dynamic({}, {"log.retention.ms": "3000"})
    assert config.cluster_topic_value({}, "retention.ms") == str(HOUR_MS)
    # A broker setting's own synonyms start at its own entry, as Kafka lists them.
    assert config.synonyms("log.retention.hours") == [
        ("log.retention.hours", "1", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert config.source("log.retention.hours") == ConfigSource.STATIC_BROKER_CONFIG


@pytest.mark.parametrize("key", ["log.retention.hours", "log.retention.minutes",
                                 "log.roll.hours"])
def test_coarser_time_settings_need_a_restart_as_in_kafka(key: str) -> None:
    with pytest.raises(ConfigError, match="cannot be updated dynamically"):
        validate_dynamic_broker_config(key, "1")
    config = _static(log_retention_hours="1")
    config.set_dynamic({key: "5"}, {key: "6"})  # a newer slog's record: skipped
    assert config.topic_values({})["retention.ms"] == str(HOUR_MS)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("log.retention.hours", "0", "neither -1 \\(unlimited\\) nor at least 1"),
        ("log.retention.minutes", "0", "neither -1"),
        ("log.retention.ms", "0", "neither -1"),
        ("log.retention.hours", "-2", "below the minimum -1"),
        ("log.retention.hours", "a week", "not an integer"),
        ("log.retention.minutes", str(2**31), "above the maximum 2147483647"),
        ("log.roll.hours", "0", "below the minimum 1"),
    ],
)
def test_bad_time_settings_are_refused(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"invalid value for {key}: .*{message}"):
        BrokerConfig.build(1, Path("/x"), "h", 1, {key: value})


def test_a_zero_retention_is_refused_for_the_broker_not_for_a_topic() -> None:
    # The broker's refusal: test_dynamic_validation and test_bad_time_settings_are_refused.
    assert validate_dynamic_broker_config("log.retention.ms", "1") == "1"
    assert validate_topic_configs({"retention.ms": "0"}) == {"retention.ms": "0"}
