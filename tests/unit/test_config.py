from __future__ import annotations

from pathlib import Path

import pytest

from slog.core.config import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    parse_key_values,
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


def test_broker_json_without_a_rack_still_loads(tmp_path: Path) -> None:
    import json

    from slog.core.datadir import read_broker_info
    from slog.core.names import DataDirLayout

    layout = DataDirLayout(tmp_path)
    layout.broker_dir(1).mkdir(parents=True)
    (layout.broker_dir(1) / "broker.json").write_text(json.dumps(
        {"broker_id": 1, "host": "h", "port": 9, "pid": 5, "started_at": 1.0}))
    info = read_broker_info(layout, 1)
    assert info is not None and info.rack is None
