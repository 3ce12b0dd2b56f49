"""Per-partition storage settings, with Kafka's topic-config names and defaults.

``LogConfig`` holds only what the storage engine needs. The broker resolves
topic overrides against its own defaults and hands the result to
:meth:`LogConfig.from_topic_configs`; names the storage engine does not use
(``min.insync.replicas``, ``compression.type``, ...) are left to the broker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

MIB = 1024 * 1024
DAY_MS = 24 * 60 * 60 * 1000
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

# Kafka's smallest legal segment.bytes (the v0 record overhead); tests use tiny segments.
MIN_SEGMENT_BYTES = 14
CLEANUP_POLICIES = frozenset({"delete", "compact"})
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _parse_int(name: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(
            f"invalid value {value!r} for configuration {name}: not an integer"
        ) from None


def _parse_optional_long(name: str, value: str) -> int | None:
    """Kafka spells "never" as Long.MAX_VALUE for flush.messages and flush.ms."""
    number = _parse_int(name, value)
    return None if number == INT64_MAX else number


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(
            f"invalid value {value!r} for configuration {name}: expected true or false"
        )
    return lowered == "true"


def _parse_str(name: str, value: str) -> str:
    return value.strip()


def _format(value: Any) -> str:
    if value is None:
        return str(INT64_MAX)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Kafka topic-config name -> (LogConfig field, parser)
_TOPIC_CONFIGS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "segment.bytes": ("segment_bytes", _parse_int),
    "segment.ms": ("segment_ms", _parse_int),
    "segment.index.bytes": ("segment_index_bytes", _parse_int),
    "index.interval.bytes": ("index_interval_bytes", _parse_int),
    "retention.ms": ("retention_ms", _parse_int),
    "retention.bytes": ("retention_bytes", _parse_int),
    "flush.messages": ("flush_messages", _parse_optional_long),
    "flush.ms": ("flush_ms", _parse_optional_long),
    "preallocate": ("preallocate", _parse_bool),
    "cleanup.policy": ("cleanup_policy", _parse_str),
    "max.message.bytes": ("max_message_bytes", _parse_int),
    "message.timestamp.type": ("message_timestamp_type", _parse_str),
    "delete.retention.ms": ("delete_retention_ms", _parse_int),
    "write.caching": ("write_caching", _parse_bool),
}

TOPIC_CONFIG_NAMES = frozenset(_TOPIC_CONFIGS)


@dataclass(frozen=True)
class LogConfig:
    """Storage settings of one partition log; field names mirror Kafka's dotted names."""

    segment_bytes: int = 64 * MIB
    segment_ms: int = 7 * DAY_MS
    segment_index_bytes: int = 10 * MIB
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * DAY_MS  # -1 keeps data forever
    retention_bytes: int = -1  # -1 means no size limit
    flush_messages: int | None = None  # None: never flush because of a message count
    flush_ms: int | None = None  # None: never flush because of elapsed time
    # Kafka's default: a thousand partitions taking writes would otherwise hold a
    # thousand fallocated segment.bytes (64 GB) of disk. Segments grow in fallocated
    # steps instead, so a full disk still fails a write with StorageError, not SIGBUS.
    preallocate: bool = False
    cleanup_policy: str = "delete"
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    delete_retention_ms: int = DAY_MS  # how long the cleaner keeps tombstones
    # Redpanda's name. False: a produce is acknowledged (and the high watermark moves)
    # only once its records are fsynced (group commit); True: once they are in the page
    # cache, as in Kafka, with flush.messages/flush.ms deciding when they reach the disk.
    write_caching: bool = False

    def __post_init__(self) -> None:
        self._check_range("segment.bytes", self.segment_bytes, MIN_SEGMENT_BYTES, INT32_MAX)
        self._check_range("segment.ms", self.segment_ms, 1, INT64_MAX)
        self._check_range("segment.index.bytes", self.segment_index_bytes, 4, INT32_MAX)
        self._check_range("index.interval.bytes", self.index_interval_bytes, 0, INT32_MAX)
        self._check_range("retention.ms", self.retention_ms, -1, INT64_MAX)
        self._check_range("retention.bytes", self.retention_bytes, -1, INT64_MAX)
        if self.flush_messages is not None:
            self._check_range("flush.messages", self.flush_messages, 1, INT64_MAX)
        if self.flush_ms is not None:
            self._check_range("flush.ms", self.flush_ms, 0, INT64_MAX)
        self._check_range("max.message.bytes", self.max_message_bytes, 0, INT32_MAX)
        self._check_range("delete.retention.ms", self.delete_retention_ms, 0, INT64_MAX)
        flags = (("preallocate", self.preallocate), ("write.caching", self.write_caching))
        for name, flag in flags:
            if not isinstance(flag, bool):
                raise ValueError(f"invalid value {flag!r} for configuration {name}")
        policies = self.cleanup_policies
        if not policies or not policies <= CLEANUP_POLICIES:
            raise ValueError(
                f"invalid value {self.cleanup_policy!r} for configuration cleanup.policy: "
                "expected a list of delete and compact"
            )
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(
                f"invalid value {self.message_timestamp_type!r} for configuration "
                f"message.timestamp.type: expected one of {', '.join(TIMESTAMP_TYPES)}"
            )

    @staticmethod
    def _check_range(name: str, value: object, low: int, high: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"invalid value {value!r} for configuration {name}: not an integer")
        if not low <= value <= high:
            raise ValueError(
                f"invalid value {value} for configuration {name}: must be between {low} and {high}"
            )

    @cached_property
    def cleanup_policies(self) -> frozenset[str]:
        return frozenset(p.strip() for p in self.cleanup_policy.split(",") if p.strip())

    @cached_property  # read on every produce to a partition: worked out once per config
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policies

    @property
    def delete_enabled(self) -> bool:
        """Time and size retention apply only when cleanup.policy includes delete."""
        return "delete" in self.cleanup_policies

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_topic_configs(
        cls, configs: Mapping[str, str], *, defaults: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from Kafka-named string values on top of ``defaults``.

        Names outside :data:`TOPIC_CONFIG_NAMES` are ignored: they belong to other
        layers. Bad values raise ValueError naming the config and the value.
        """
        overrides: dict[str, Any] = {}
        for name, value in configs.items():
            entry = _TOPIC_CONFIGS.get(name)
            if entry is None:
                continue
            if not isinstance(value, str):
                raise ValueError(f"invalid value {value!r} for configuration {name}: not a string")
            field_name, parse = entry
            overrides[field_name] = parse(name, value)
        return dataclasses.replace(defaults or cls(), **overrides)

    def to_topic_configs(self) -> dict[str, str]:
        """The Kafka-named string form, the inverse of :meth:`from_topic_configs`."""
        return {name: _format(getattr(self, field)) for name, (field, _) in _TOPIC_CONFIGS.items()}
