"""Per-group configs: Kafka 4's GROUP config resource for consumer-protocol groups.

``kafka-configs --entity-type groups`` (IncrementalAlterConfigs of a GROUP
resource) overrides, for one group, the session timeout and heartbeat interval
that KIP-848 groups otherwise take from the broker
(``group.consumer.session.timeout.ms`` and ``group.consumer.heartbeat.interval.ms``).
An override must lie within the broker's bounds
(``group.consumer.min/max.session.timeout.ms``, ``...min/max.heartbeat.interval.ms``),
and the heartbeat must stay shorter than the session, as Kafka checks. The
overrides live in the metadata log (``GroupConfigRecord``), so they outlive the
group and every coordinator sees them. slog has no share or streams groups, so
their settings are refused rather than kept without effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slog.core.config import ConfigError

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"


@dataclass(frozen=True)
class _Bounded:
    default: str  # the broker setting giving the value a group without an override has
    minimum: str  # ...and the broker settings bounding an override
    maximum: str


GROUP_CONFIGS: dict[str, _Bounded] = {
    SESSION_TIMEOUT: _Bounded("group.consumer.session.timeout.ms",
                              "group.consumer.min.session.timeout.ms",
                              "group.consumer.max.session.timeout.ms"),
    HEARTBEAT_INTERVAL: _Bounded("group.consumer.heartbeat.interval.ms",
                                 "group.consumer.min.heartbeat.interval.ms",
                                 "group.consumer.max.heartbeat.interval.ms"),
}


@dataclass(frozen=True)
class GroupSettings:
    """What one consumer-protocol group runs with."""

    session_timeout_ms: int
    heartbeat_interval_ms: int


def validate_group_configs(changes: Mapping[str, str | None], current: Mapping[str, str],
                           broker: Mapping[str, str]) -> dict[str, str | None]:
    """Check an alteration of a group's overrides (None deletes one) against the broker's
    settings ``broker``; the normalized changes, or ConfigError."""
    clean: dict[str, str | None] = {}
    for name, value in changes.items():
        bounded = GROUP_CONFIGS.get(name)
        if bounded is None:
            known = ", ".join(sorted(GROUP_CONFIGS))
            raise ConfigError(f"unknown group config {name!r}: slog's groups take {known} "
                              "(it has no share or streams groups)")
        if value is None:
            clean[name] = None
            continue
        try:
            number = int(value)
        except ValueError as exc:
            raise ConfigError(f"{name}: {value!r} is not an integer") from exc
        low, high = int(broker[bounded.minimum]), int(broker[bounded.maximum])
        if not low <= number <= high:
            raise ConfigError(f"{name} must be between {low} ({bounded.minimum}) and {high} "
                              f"({bounded.maximum}), not {number}")
        clean[name] = str(number)
    after = {**current, **clean}
    settings = group_settings({k: v for k, v in after.items() if v is not None}, broker)
    if settings.heartbeat_interval_ms >= settings.session_timeout_ms:
        raise ConfigError(f"{HEARTBEAT_INTERVAL} ({settings.heartbeat_interval_ms}) must be "
                          f"less than {SESSION_TIMEOUT} ({settings.session_timeout_ms})")
    return clean


def effective_group_configs(overrides: Mapping[str, str], broker: Mapping[str, str]
                            ) -> dict[str, tuple[str, bool]]:
    """Every group config: its value and whether the group overrides it."""
    return {name: (overrides[name], True) if name in overrides
            else (broker[bounded.default], False)
            for name, bounded in sorted(GROUP_CONFIGS.items())}


def group_settings(overrides: Mapping[str, str], broker: Mapping[str, str]) -> GroupSettings:
    values = effective_group_configs(overrides, broker)
    return GroupSettings(session_timeout_ms=int(values[SESSION_TIMEOUT][0]),
                         heartbeat_interval_ms=int(values[HEARTBEAT_INTERVAL][0]))
