"""Broker configuration and per-topic configuration, with Kafka's names and defaults.

Topic configs fall back to a broker default (``retention.ms`` ← ``log.retention.ms``),
exactly as in Kafka, so DescribeConfigs can say where each value came from. Two
take it from the first one set of several broker settings, as Kafka does:
``retention.ms`` ← ``log.retention.ms``, ``.minutes``, ``.hours`` (168 by default)
and ``segment.ms`` ← ``log.roll.ms``, ``log.roll.hours`` (168).

A broker setting resolves through Kafka's layers, highest first: this broker's
dynamic config, the cluster-wide dynamic default (both set at runtime through
the metadata log), the static ``--config k=v`` of this process, the built-in
default. Only :data:`DYNAMIC_BROKER_CONFIGS` may be set at runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import dropwhile
from pathlib import Path

from slog.core.errors import SlogError


class ConfigError(SlogError, ValueError):
    """An unknown config name or an unacceptable value."""


class ConfigSource(IntEnum):
    """DescribeConfigs' ConfigSource numbering."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8  # a group's own override (Kafka 4's GROUP resource)


_INT32_MAX = 2**31 - 1
_MINUTE_MS = 60 * 1000
_HOUR_MS = 60 * _MINUTE_MS

# KIP-392's selector, the one replica.selector.class value slog implements.
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _int(minimum: int | None = None, maximum: int = 2**63 - 1) -> Callable[[str], str]:
    """Kafka's LONG by default; pass ``maximum=_INT32_MAX`` for an INT config."""

    def check(value: str) -> str:
        try:
            number = int(value)
        except ValueError as exc:
            raise ConfigError(f"{value!r} is not an integer") from exc
        if minimum is not None and number < minimum:
            raise ConfigError(f"{number} is below the minimum {minimum}")
        if number > maximum:
            raise ConfigError(f"{number} is above the maximum {maximum}")
        return str(number)

    return check


def _unlimited_or_positive(maximum: int) -> Callable[[str], str]:
    """A broker retention time: -1 (or any negative) is unlimited, 0 is refused (Kafka
    refuses a broker retention of 0 at start-up; a topic's ``retention.ms=0`` is fine)."""
    within = _int(-1, maximum)

    def check(value: str) -> str:
        number = int(within(value))
        if number == 0:
            raise ConfigError("0 is neither -1 (unlimited) nor at least 1")
        return str(number)
    return check


def _bool(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{value!r} is not true or false")
    return lowered


def _choice(*options: str, many: bool = False) -> Callable[[str], str]:
    def check(value: str) -> str:
        items = [v.strip() for v in value.split(",")] if many else [value.strip()]
        for item in items:
            if item not in options:
                raise ConfigError(f"{item!r} is not one of {', '.join(options)}")
        return ",".join(items)

    return check


def _replica_selector(value: str) -> str:
    value = value.strip()
    if value not in ("", RACK_AWARE_REPLICA_SELECTOR):
        raise ConfigError(f"{value!r} is not a replica selector slog has: use "
                          f"{RACK_AWARE_REPLICA_SELECTOR} (or nothing: leader only)")
    return value


@dataclass(frozen=True)
class CoarserSetting:
    """A broker setting that gives a ``*.ms`` topic default in a coarser unit, read only
    when the settings before it are unset (Kafka's ``log.retention.hours``). As in
    Kafka, these are start-up settings: only the ``.ms`` one can change at runtime."""

    name: str
    unit_ms: int
    check: Callable[[str], str]


@dataclass(frozen=True)
class ConfigDef:
    name: str
    broker_key: str  # the broker setting that supplies the default (runtime-changeable)
    default: str
    check: Callable[[str], str]
    sensitive: bool = False
    # broker_key's synonyms, in precedence order; the last carries the default.
    coarser: tuple[CoarserSetting, ...] = ()
    # broker_key's own check where the broker is stricter than the topic config.
    broker_key_check: Callable[[str], str] | None = None

    @property
    def broker_keys(self) -> tuple[str, ...]:
        """Every broker setting that may supply the default, highest precedence first."""
        return (self.broker_key, *(c.name for c in self.coarser))

    def broker_check(self, key: str) -> Callable[[str], str]:
        if key == self.broker_key:
            return self.broker_key_check or self.check
        return next((c.check for c in self.coarser if c.name == key), self.check)

    def from_broker(self, key: str, value: str) -> str:
        """This config's value when broker setting ``key`` (one of :attr:`broker_keys`)
        supplies it: a coarser unit in milliseconds, any negative time unlimited (-1)."""
        for setting in self.coarser:
            if setting.name == key:
                millis = int(value) * setting.unit_ms
                return "-1" if millis < 0 else str(millis)
        return value

    def broker_defaults(self) -> dict[str, str]:
        """The built-in broker default that supplies this config (Kafka's: only the
        least precise setting has one, the others are unset)."""
        if not self.coarser:
            return {self.broker_key: self.default}
        last = self.coarser[-1]
        return {last.name: str(int(self.default) // last.unit_ms)}


# Topic-level configs slog honours. Defaults are Kafka's, except where the
# brief chooses local-friendly values.
TOPIC_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef(
            "cleanup.policy",
            "log.cleanup.policy",
            "delete",
            _choice("delete", "compact", many=True),
        ),
        ConfigDef("retention.ms", "log.retention.ms", str(7 * 24 * _HOUR_MS), _int(-1),
                  coarser=(CoarserSetting("log.retention.minutes", _MINUTE_MS,
                                          _unlimited_or_positive(_INT32_MAX)),
                           CoarserSetting("log.retention.hours", _HOUR_MS,
                                          _unlimited_or_positive(_INT32_MAX))),
                  broker_key_check=_unlimited_or_positive(2**63 - 1)),
        ConfigDef("retention.bytes", "log.retention.bytes", "-1", _int(-1)),
        ConfigDef("segment.bytes", "log.segment.bytes", str(64 * 1024 * 1024),
                  _int(14, _INT32_MAX)),
        ConfigDef("segment.ms", "log.roll.ms", str(7 * 24 * _HOUR_MS), _int(1),
                  coarser=(CoarserSetting("log.roll.hours", _HOUR_MS, _int(1, _INT32_MAX)),)),
        ConfigDef(
            "segment.index.bytes", "log.index.size.max.bytes", str(10 * 1024 * 1024),
            _int(8, _INT32_MAX),
        ),
        ConfigDef("index.interval.bytes", "log.index.interval.bytes", "4096", _int(0, _INT32_MAX)),
        ConfigDef("flush.messages", "log.flush.interval.messages", str(2**63 - 1), _int(1)),
        ConfigDef("flush.ms", "log.flush.interval.ms", str(2**63 - 1), _int(0)),
        ConfigDef("max.message.bytes", "message.max.bytes", "1048588", _int(0, _INT32_MAX)),
        ConfigDef(
            "message.timestamp.type",
            "log.message.timestamp.type",
            "CreateTime",
            _choice("CreateTime", "LogAppendTime"),
        ),
        ConfigDef("min.insync.replicas", "min.insync.replicas", "1", _int(1, _INT32_MAX)),
        ConfigDef(
            "unclean.leader.election.enable", "unclean.leader.election.enable", "false", _bool
        ),
        ConfigDef("preallocate", "log.preallocate", "false", _bool),
        # Redpanda's topic config; its cluster default is write_caching_default.
        ConfigDef("write.caching", "write.caching.default", "false", _bool),
        ConfigDef("delete.retention.ms", "log.cleaner.delete.retention.ms",
                  str(24 * 3600 * 1000), _int(0)),
        ConfigDef(
            "compression.type",
            "compression.type",
            "producer",
            _choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
        ),
    )
}

# Broker-only settings: (default, validator).
BROKER_SETTINGS: dict[str, tuple[str, Callable[[str], str]]] = {
    "socket.request.max.bytes": (str(100 * 1024 * 1024), _int(1)),
    "connections.max.idle.ms": (str(10 * 60 * 1000), _int(1)),
    "max.connections": ("1000", _int(1)),
    "num.partitions": ("1", _int(1)),
    "default.replication.factor": ("-1", _int(-1)),  # -1: min(3, live brokers)
    "auto.create.topics.enable": ("true", _bool),
    "delete.topic.enable": ("true", _bool),
    # DescribeTopicPartitions (KIP-966): at most this many partitions per response.
    "max.request.partition.size.limit": ("2000", _int(1, _INT32_MAX)),
    "log.retention.check.interval.ms": ("300000", _int(1)),
    "replica.lag.time.max.ms": ("10000", _int(1)),
    # KIP-227: incremental fetch sessions kept; 0 turns sessions off.
    "max.incremental.fetch.session.cache.slots": ("1000", _int(0, _INT32_MAX)),
    "broker.session.timeout.ms": ("9000", _int(1)),
    "auto.leader.rebalance.enable": ("true", _bool),
    "leader.imbalance.per.broker.percentage": ("10", _int(0)),
    "leader.imbalance.check.interval.seconds": ("300", _int(1)),
    "group.initial.rebalance.delay.ms": ("0", _int(0)),
    "offsets.topic.num.partitions": ("50", _int(1)),
    "offsets.topic.replication.factor": ("3", _int(1)),
    "group.max.size": ("2147483647", _int(1)),
    "group.min.session.timeout.ms": ("6000", _int(1)),
    "group.max.session.timeout.ms": ("1800000", _int(1)),
    # KIP-848 consumer-protocol groups (slog/groups/consumer_coordinator.py).
    "group.consumer.session.timeout.ms": ("45000", _int(1, _INT32_MAX)),
    "group.consumer.heartbeat.interval.ms": ("5000", _int(1, _INT32_MAX)),
    # Bounds of the per-group overrides (slog/core/group_config.py), Kafka's defaults.
    "group.consumer.min.session.timeout.ms": ("45000", _int(1, _INT32_MAX)),
    "group.consumer.max.session.timeout.ms": ("60000", _int(1, _INT32_MAX)),
    "group.consumer.min.heartbeat.interval.ms": ("5000", _int(1, _INT32_MAX)),
    "group.consumer.max.heartbeat.interval.ms": ("15000", _int(1, _INT32_MAX)),
    "group.consumer.assignors": ("uniform,range", _choice("uniform", "range", many=True)),
    "group.consumer.max.size": ("2147483647", _int(1, _INT32_MAX)),
    "group.consumer.migration.policy": (
        "bidirectional", _choice("disabled", "upgrade", "downgrade", "bidirectional")),
    "offsets.topic.segment.bytes": (str(100 * 1024 * 1024), _int(14)),
    "offsets.commit.timeout.ms": ("5000", _int(1)),
    "offsets.retention.minutes": ("10080", _int(1)),
    "offsets.retention.check.interval.ms": ("600000", _int(1)),
    "offset.metadata.max.bytes": ("4096", _int(0)),
    # Transactions (slog.transactions; Kafka's names and defaults).
    "transaction.state.log.num.partitions": ("50", _int(1)),
    "transaction.state.log.replication.factor": ("3", _int(1)),
    "transaction.state.log.min.isr": ("2", _int(1)),
    "transaction.state.log.segment.bytes": (str(100 * 1024 * 1024), _int(14)),
    "transaction.max.timeout.ms": ("900000", _int(1, _INT32_MAX)),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("10000", _int(1)),
    "transactional.id.expiration.ms": (str(7 * 24 * 3600 * 1000), _int(1, _INT32_MAX)),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("3600000", _int(1)),
    "log.cleaner.enable": ("true", _bool),
    "log.cleaner.backoff.ms": ("15000", _int(0)),
    "metadata.poll.interval.ms": ("50", _int(1)),  # only where the data dir cannot be watched
    # Client quotas (slog.broker.quotas): the samples of the window rates are measured over.
    "quota.window.num": ("11", _int(2)),
    "quota.window.size.seconds": ("1", _int(1)),
    # Security (docs/SECURITY.md): SASL on the listener, the ACL authorizer.
    "security.protocol": ("PLAINTEXT", _choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                               "SASL_SSL")),
    # Listeners (slog.core.listeners): empty `listeners` means --listen + security.protocol.
    "listeners": ("", str.strip),
    "advertised.listeners": ("", str.strip),
    "listener.security.protocol.map": ("", str.strip),  # empty: each name is its protocol
    "inter.broker.listener.name": ("", str.strip),
    "security.inter.broker.protocol": ("", str.strip),  # empty: the first listener
    # TLS (slog.protocol.tls), PEM files only.
    "ssl.keystore.type": ("PEM", _choice("PEM")),
    "ssl.keystore.location": ("", str.strip),  # private key and certificate chain
    "ssl.keystore.certificate.chain": ("", str.strip),  # a file, or the PEM text itself
    "ssl.keystore.key": ("", str.strip),  # a file, or the PEM text itself
    "ssl.key.password": ("", str),
    "ssl.truststore.type": ("PEM", _choice("PEM")),
    "ssl.truststore.location": ("", str.strip),  # CA bundle: client certs, other brokers
    "ssl.client.auth": ("none", _choice("none", "requested", "required")),
    "ssl.protocol": ("TLSv1.3", _choice("TLS", "TLSv1.2", "TLSv1.3")),
    "ssl.enabled.protocols": ("TLSv1.2,TLSv1.3", _choice("TLSv1.2", "TLSv1.3", many=True)),
    "ssl.endpoint.identification.algorithm": ("https", _choice("https", "")),
    "sasl.enabled.mechanisms": ("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                                _choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", many=True)),
    "sasl.credentials.file": ("", str.strip),  # empty: credentials.json in the data dir
    # The longest hold on the answer to a failed SASL login from one address, which
    # grows from 250 ms after 3 failures (slog.broker.login_throttle); 0: no hold.
    "connection.failed.authentication.delay.max.ms": ("8000", _int(0, 3_600_000)),
    "authorizer.class.name": ("", str.strip),  # any non-empty value turns ACLs on
    "super.users": ("", str.strip),  # User:a;User:b
    "allow.everyone.if.no.acl.found": ("false", _bool),
    # Rack awareness (docs/ARCHITECTURE.md, Placement; Data plane: Fetch).
    "broker.rack": ("", str.strip),  # empty: no rack (Kafka's null)
    "replica.selector.class": ("", _replica_selector),
    # Kafka's per-broker SASL/GSSAPI setting. slog has no GSSAPI, so, as on a Kafka
    # broker without it, the value is only stored and reported; clients' admin tests
    # (librdkafka's) use it as the example of a per-broker dynamic config.
    "sasl.kerberos.min.time.before.relogin": ("60000", _int(0)),
}

# Broker settings DescribeConfigs reports as sensitive, without their value (Kafka's rule).
SENSITIVE_BROKER_SETTINGS = frozenset({"ssl.key.password", "ssl.keystore.key"})


# The topic config each broker setting may supply (log.retention.hours -> retention.ms).
_SUPPLIES: dict[str, ConfigDef] = {
    key: d for d in TOPIC_CONFIGS.values() for key in d.broker_keys}

# Every broker setting slog knows, set or not.
BROKER_CONFIG_NAMES: frozenset[str] = frozenset(BROKER_SETTINGS) | frozenset(_SUPPLIES)


def topic_config_supplied_by(key: str) -> ConfigDef | None:
    """The topic config broker setting ``key`` is a default for, if any."""
    return _SUPPLIES.get(key)


# Broker settings Kafka lets an admin change at runtime (its DynamicBrokerConfig:
# every log.* default a topic config falls back to, though not the coarser
# log.retention.minutes/.hours and log.roll.hours, max.connections and the log
# cleaner's backoff), restricted to the ones slog has. The rest need a restart.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    {d.broker_key for d in TOPIC_CONFIGS.values()}
    | {"max.connections", "log.cleaner.backoff.ms", "sasl.kerberos.min.time.before.relogin"}
)
# Of those, the ones Kafka takes only for a named broker, never as the cluster default.
PER_BROKER_ONLY_CONFIGS: frozenset[str] = frozenset({"sasl.kerberos.min.time.before.relogin"})


def _broker_defaults() -> dict[str, str]:
    values = {key: default for key, (default, _) in BROKER_SETTINGS.items()}
    for definition in TOPIC_CONFIGS.values():
        values.update(definition.broker_defaults())
    return values


DEFAULTS: Mapping[str, str] = _broker_defaults()

# A DescribeConfigs synonym: (broker setting, its value, the layer that sets it).
Synonym = tuple[str, str, ConfigSource]
_Layers = Sequence[tuple[Mapping[str, str], ConfigSource]]


@dataclass
class BrokerConfig:
    """This broker's settings: four layers, the effective ``values`` they make (settings
    Kafka leaves unset by default, like ``log.retention.ms``, are absent) and the
    topic config defaults those give."""

    broker_id: int
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 9092
    static: dict[str, str] = field(default_factory=dict)  # --config at start-up
    dynamic_default: dict[str, str] = field(default_factory=dict)  # cluster-wide, runtime
    dynamic_broker: dict[str, str] = field(default_factory=dict)  # this broker, runtime
    values: dict[str, str] = field(default_factory=lambda: dict(DEFAULTS))
    # topic config -> (the broker default, its synonyms): resolved once per change.
    _topic_defaults: dict[str, tuple[str, list[Synonym]]] = field(
        init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._resolve()

    @classmethod
    def build(
        cls, broker_id: int, data_dir: Path, host: str, port: int, overrides: Mapping[str, str]
    ) -> BrokerConfig:
        config = cls(broker_id=broker_id, data_dir=data_dir, host=host, port=port)
        for key, value in overrides.items():
            config.set(key, value)
        return config

    def set(self, key: str, value: str) -> None:
        """A static setting (``--config``)."""
        self.static[key] = validate_broker_value(key, value)
        self._resolve()

    def set_dynamic(self, cluster_default: Mapping[str, str], this_broker: Mapping[str, str]
                    ) -> bool:
        """Replace both dynamic layers (from the metadata image); True if anything changed.

        Entries that are not (or no longer) valid dynamic settings are skipped:
        the controller validated them, but a newer slog may have written them."""
        default = _usable_dynamic(cluster_default, per_broker=False)
        broker = _usable_dynamic(this_broker, per_broker=True)
        if (default, broker) == (self.dynamic_default, self.dynamic_broker):
            return False
        self.dynamic_default, self.dynamic_broker = default, broker
        self._resolve()
        return True

    def _resolve(self) -> None:
        self.values = {**DEFAULTS, **self.static, **self.dynamic_default, **self.dynamic_broker}
        layers = self._layers()
        self._topic_defaults = {name: _supplied_default(d, layers)
                                for name, d in TOPIC_CONFIGS.items()}

    def _layers(self, own_dynamic: bool = True) -> _Layers:
        """Kafka's layers, highest precedence first; without this broker's dynamic one,
        what the controller decides by (see :meth:`cluster_value`)."""
        layers: list[tuple[Mapping[str, str], ConfigSource]] = [
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
            (DEFAULTS, ConfigSource.DEFAULT_CONFIG)]
        if own_dynamic:
            layers.insert(0, (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG))
        return layers

    def source(self, key: str) -> ConfigSource:
        """Which layer ``values[key]`` comes from (DEFAULT_CONFIG when unset, as Kafka)."""
        chain = self.synonyms(key)
        return chain[0][2] if chain else ConfigSource.DEFAULT_CONFIG

    def synonyms(self, key: str) -> list[Synonym]:
        """DescribeConfigs synonyms of broker setting ``key``, as Kafka lists them: the
        settings of its family (log.retention.ms/.minutes/.hours) layer by layer,
        from ``key``'s own highest entry on."""
        supplied = _SUPPLIES.get(key)
        return _synonym_chain(supplied.broker_keys if supplied else (key,), key,
                              self._layers())

    def cluster_value(self, key: str) -> str:
        """``key`` without this broker's own dynamic layer: what the controller decides by
        (the cluster-wide default, else the static config it runs with)."""
        for layer, _ in self._layers(own_dynamic=False):
            if key in layer:
                return layer[key]
        raise KeyError(key)

    def get_int(self, key: str) -> int:
        return int(self.values[key])

    def get_bool(self, key: str) -> bool:
        return self.values[key] == "true"

    @property
    def rack(self) -> str | None:
        return self.values["broker.rack"] or None

    @property
    def fetch_from_follower(self) -> bool:
        """KIP-392: may the leader send consumers to a replica in their rack?"""
        return self.values["replica.selector.class"] == RACK_AWARE_REPLICA_SELECTOR

    def topic_default(self, name: str) -> str:
        """Topic config ``name``'s value where the topic does not override it."""
        return self._topic_defaults[name][0]

    def topic_synonyms(self, name: str) -> list[Synonym]:
        """The broker settings that supply topic config ``name``, the one in effect first."""
        return self._topic_defaults[name][1]

    def effective_topic_config(
        self, overrides: Mapping[str, str]
    ) -> dict[str, tuple[str, ConfigSource]]:
        """Every topic config with its value and where the value came from."""
        result: dict[str, tuple[str, ConfigSource]] = {}
        for name, (value, chain) in self._topic_defaults.items():
            if name in overrides:
                result[name] = (overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
            else:
                result[name] = (value, chain[0][2])
        return result

    def topic_values(self, overrides: Mapping[str, str]) -> dict[str, str]:
        return {name: overrides.get(name, value)
                for name, (value, _) in self._topic_defaults.items()}

    def cluster_topic_value(self, overrides: Mapping[str, str], name: str) -> str:
        """A topic config as the controller resolves it (see :meth:`cluster_value`)."""
        if name in overrides:
            return overrides[name]
        return _supplied_default(TOPIC_CONFIGS[name], self._layers(own_dynamic=False))[0]


def _synonym_chain(names: Sequence[str], lead: str, layers: _Layers) -> list[Synonym]:
    """Kafka's synonym order for a family of broker settings: layer by layer, highest
    first, each layer's settings in precedence order; the entries before ``lead``'s
    first one are left out (they are not what the described setting is)."""
    chain = [(name, layer[name], source)
             for layer, source in layers for name in names if name in layer]
    return list(dropwhile(lambda synonym: synonym[0] != lead, chain))


def _supplied_default(definition: ConfigDef, layers: _Layers) -> tuple[str, list[Synonym]]:
    """A topic config's broker default and its synonyms, the one in effect first.

    As Kafka's KafkaConfig: the first of the config's broker settings set in any layer
    wins (log.retention.ms over .minutes over .hours), at its highest layer. Kafka's
    own DescribeConfigs starts the list at log.retention.ms and so shows nothing when
    only .hours is set; slog starts it at the winner, so the source is the true one."""
    lead = next(key for key in definition.broker_keys
                if any(key in layer for layer, _ in layers))
    chain = _synonym_chain(definition.broker_keys, lead, layers)
    key, value, _ = chain[0]
    return definition.from_broker(key, value), chain


def _usable_dynamic(configs: Mapping[str, str], per_broker: bool) -> dict[str, str]:
    usable = {}
    for key, value in configs.items():
        try:
            usable[key] = validate_dynamic_broker_config(key, value, per_broker=per_broker)
        except ConfigError:
            continue
    return usable


def validate_broker_value(key: str, value: str) -> str:
    """The normalised value of broker setting ``key``, or ConfigError."""
    check = _broker_validator(key)
    try:
        return check(value)
    except ConfigError as exc:
        raise ConfigError(f"invalid value for {key}: {exc}") from exc


def validate_dynamic_broker_config(key: str, value: str, *, per_broker: bool = True) -> str:
    """Like :func:`validate_broker_value`, and refuses settings that need a restart (and,
    for the cluster default, ``per_broker=False``, those only a named broker takes)."""
    if key in DYNAMIC_BROKER_CONFIGS:
        if not per_broker and key in PER_BROKER_ONLY_CONFIGS:
            raise ConfigError(f"{key} cannot be updated at the cluster default level: "
                              "name a broker id")
        return validate_broker_value(key, value)
    _broker_validator(key)  # an unknown name says so rather than "not dynamic"
    raise ConfigError(f"{key} cannot be updated dynamically: it takes effect at start-up "
                      "(pass --config)")


def _broker_validator(key: str) -> Callable[[str], str]:
    if key in BROKER_SETTINGS:
        return BROKER_SETTINGS[key][1]
    if key in _SUPPLIES:
        return _SUPPLIES[key].broker_check(key)
    raise ConfigError(f"unknown broker config {key!r}")


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str | None]:
    """Check names and values of topic config overrides (None means "delete")."""
    clean: dict[str, str | None] = {}
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"unknown topic config {name!r}")
        if value is None:
            clean[name] = None
            continue
        try:
            clean[name] = definition.check(str(value))
        except ConfigError as exc:
            raise ConfigError(f"invalid value for {name}: {exc}") from exc
    return clean


def parse_key_values(pairs: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` from the command line into a dict, with a clear error."""
    parsed: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value, got {pair!r}")
        parsed[key.strip()] = value.strip()
    return parsed
