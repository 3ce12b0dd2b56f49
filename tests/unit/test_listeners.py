"""Listener settings (Kafka's names), and endpoints in broker.json and metadata records
of this and older versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slog.core.config import BrokerConfig, ConfigError
from slog.core.datadir import BrokerInfo, read_broker_info, write_broker_info
from slog.core.listeners import Endpoint, advertised, configured_listeners, inter_broker_listener
from slog.core.metadata import MetadataImage
from slog.core.metadata_records import decode_record
from slog.core.names import DataDirLayout


def _config(**overrides: str) -> BrokerConfig:
    return BrokerConfig.build(1, Path("/nonexistent"), "127.0.0.1", 9092, overrides)


def test_without_listeners_the_listen_address_and_security_protocol_make_one() -> None:
    assert configured_listeners(_config()) == [
        Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    assert configured_listeners(_config(**{"security.protocol": "SASL_SSL"})) == [
        Endpoint("SASL_SSL", "127.0.0.1", 9092, "SASL_SSL")]


def test_listeners_with_a_protocol_map_and_an_inter_broker_listener() -> None:
    config = _config(**{
        "listeners": "INTERNAL://127.0.0.1:9000, EXTERNAL://:9001,SSL://[::1]:9002",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name": "internal"})
    listeners = configured_listeners(config)
    assert listeners == [Endpoint("INTERNAL", "127.0.0.1", 9000, "PLAINTEXT"),
                         Endpoint("EXTERNAL", "", 9001, "SASL_SSL"),
                         Endpoint("SSL", "::1", 9002, "SSL")]
    assert inter_broker_listener(config, listeners) == "INTERNAL"
    unnamed = [Endpoint("SSL", "", 1, "SSL"), Endpoint("PLAINTEXT", "", 2, "PLAINTEXT")]
    assert inter_broker_listener(_config(), unnamed) == "SSL"  # unset: the first


def test_advertised_listeners_replace_addresses_by_name() -> None:
    config = _config(**{"listeners": "PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9093",
                        "advertised.listeners": "SSL://broker1.example.com:443"})
    bound = [Endpoint("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT"),
             Endpoint("SSL", "0.0.0.0", 9093, "SSL")]
    assert advertised(config, bound) == [
        Endpoint("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT"),
        Endpoint("SSL", "broker1.example.com", 443, "SSL")]


@pytest.mark.parametrize(("settings", "message"), [
    ({"listeners": "PLAINTEXT:/127.0.0.1:9092"}, "NAME://host:port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:port"}, "NAME://host:port"),
    ({"listeners": "CLIENTS://127.0.0.1:9092"}, "no security protocol"),
    ({"listeners": "SSL://:1,SSL://:2"}, "named twice"),
    ({"listeners": "SSL://:1", "inter.broker.listener.name": "PLAINTEXT"}, "names no listener"),
    ({"listeners": "SSL://:1", "listener.security.protocol.map": "SSL:TLS"}, "NAME:PROTOCOL"),
])
def test_bad_listener_settings_are_refused_clearly(settings: dict[str, str],
                                                   message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        configured_listeners(_config(**settings))


def test_tls_setting_values_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.client\.auth"):
        _config(**{"ssl.client.auth": "always"})
    with pytest.raises(ConfigError, match=r"security\.protocol"):
        _config(**{"security.protocol": "TLS"})


def test_broker_json_of_an_older_version_still_loads(tmp_path: Path) -> None:
    layout = DataDirLayout(tmp_path)
    layout.broker_dir(1).mkdir(parents=True)
    layout.broker(1).info.write_text(json.dumps(
        {"broker_id": 1, "host": "127.0.0.1", "port": 9092, "pid": 5, "started_at": 1.0}))
    old = read_broker_info(layout, 1)
    assert old is not None and old.listeners == [] and old.port == 9092
    assert old.rack is None  # written before racks too
    endpoints = [Endpoint("SSL", "127.0.0.1", 9093, "SSL").to_record()]
    write_broker_info(layout, BrokerInfo(1, "127.0.0.1", 9093, 6, 2.0, listeners=endpoints))
    new = read_broker_info(layout, 1)
    assert new is not None and new.listeners == endpoints


def test_broker_records_with_and_without_endpoints() -> None:
    image = MetadataImage()
    image.apply(decode_record({"type": "broker", "broker_id": 1, "host": "h", "port": 1,
                               "controller_epoch": 0}))
    image.apply(decode_record({"type": "broker", "broker_id": 2, "host": "h", "port": 2,
                               "controller_epoch": 0, "endpoints": [
                                   {"name": "PLAINTEXT", "host": "h", "port": 2,
                                    "security_protocol": "PLAINTEXT"},
                                   {"name": "SSL", "host": "h", "port": 3,
                                    "security_protocol": "SSL"}]}))
    old, new = image.brokers[1], image.brokers[2]
    assert old.endpoint("SSL") == ("h", 1)  # an old record serves every listener
    assert new.endpoint("SSL") == ("h", 3) and new.endpoint("PLAINTEXT") == ("h", 2)
    assert new.endpoint("OTHER") is None  # left out of that listener's Metadata
    assert new.endpoint(None) == ("h", 2)
