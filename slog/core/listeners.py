"""Listeners with Kafka's names: ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map`` and the inter-broker listener.

A broker listens on one or more named endpoints (``PLAINTEXT://127.0.0.1:9092,
SSL://127.0.0.1:9192``); each name maps to a security protocol (by default the
name *is* the protocol). Without ``listeners`` the broker has the one listener
of ``--listen host:port`` with ``security.protocol``, as it always had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slog.core.config import BrokerConfig, ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Endpoint:
    """A named address with its security protocol (a listener, or what it advertises)."""

    name: str
    host: str
    port: int
    protocol: str

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def url(self) -> str:
        """As Kafka writes a listener: ``NAME://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"

    def to_record(self) -> dict[str, object]:
        return {"name": self.name, "host": self.host, "port": self.port,
                "security_protocol": self.protocol}

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> Endpoint:
        # A JSON value: int() raises TypeError or ValueError for a bad port.
        return cls(str(record["name"]), str(record["host"]), int(record["port"]),  # type: ignore[call-overload]
                   str(record.get("security_protocol", record["name"])))


def protocol_map(config: BrokerConfig) -> dict[str, str]:
    """``listener.security.protocol.map``; empty means each protocol names itself."""
    mapping = {p: p for p in PROTOCOLS}
    text = config.values["listener.security.protocol.map"]
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                              f"with PROTOCOL one of {', '.join(PROTOCOLS)}")
        mapping[name] = protocol
    return mapping


def parse_endpoints(text: str, setting: str, protocols: Mapping[str, str]) -> list[Endpoint]:
    """``NAME://host:port,...`` (an empty host means every interface; IPv6 in brackets)."""
    endpoints: list[Endpoint] = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, sep, address = item.partition("://")
        name = name.strip().upper()
        host, colon, port_text = address.rpartition(":")
        if not sep or not colon or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
            raise ConfigError(f"{setting}: {item!r} is not NAME://host:port")
        if name not in protocols:
            raise ConfigError(f"{setting}: listener {name!r} has no security protocol; add it "
                              "to listener.security.protocol.map")
        if any(e.name == name for e in endpoints):
            raise ConfigError(f"{setting}: listener {name} is named twice")
        endpoints.append(Endpoint(name, host.strip("[]"), int(port_text), protocols[name]))
    return endpoints


def configured_listeners(config: BrokerConfig) -> list[Endpoint]:
    """The listeners to bind: ``listeners``, else ``--listen`` with ``security.protocol``."""
    protocols = protocol_map(config)
    text = config.values["listeners"]
    if not text.strip():
        protocol = config.values["security.protocol"]
        return [Endpoint(protocol, config.host, config.port, protocol)]
    endpoints = parse_endpoints(text, "listeners", protocols)
    if not endpoints:
        raise ConfigError("listeners: no listener given")
    inter_broker_listener(config, endpoints)  # refuse a bad inter-broker name at start-up
    return endpoints


def inter_broker_listener(config: BrokerConfig, listeners: list[Endpoint]) -> str:
    """The listener other brokers use: ``inter.broker.listener.name``, else the one named
    by ``security.inter.broker.protocol``, else the first."""
    name = config.values["inter.broker.listener.name"].strip().upper()
    setting = "inter.broker.listener.name"
    if not name:
        name = config.values["security.inter.broker.protocol"].strip().upper()
        setting = "security.inter.broker.protocol"
    if not name:
        return listeners[0].name
    if not any(e.name == name for e in listeners):
        raise ConfigError(f"{setting}={name} names no listener of "
                          f"{', '.join(e.name for e in listeners)}")
    return name


def advertised(config: BrokerConfig, bound: list[Endpoint]) -> list[Endpoint]:
    """What clients are told, per listener: ``advertised.listeners`` where given, else the
    bound address (with the port the kernel chose for port 0)."""
    given = {e.name: e for e in parse_endpoints(config.values["advertised.listeners"],
                                                "advertised.listeners", protocol_map(config))}
    unknown = set(given) - {e.name for e in bound}
    if unknown:
        raise ConfigError(f"advertised.listeners names {', '.join(sorted(unknown))}, which "
                          "listeners does not define")
    result = []
    for endpoint in bound:
        if endpoint.name in given:
            result.append(Endpoint(endpoint.name, given[endpoint.name].host,
                                   given[endpoint.name].port, endpoint.protocol))
        else:
            result.append(endpoint)
    return result
