"""Per-group config overrides: names, the broker's bounds, heartbeat below session."""

from __future__ import annotations

import pytest

from slog.core.config import DEFAULTS, ConfigError
from slog.core.group_config import (
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    GroupSettings,
    effective_group_configs,
    group_settings,
    validate_group_configs,
)

BROKER = dict(DEFAULTS)  # session 45000 in [45000, 60000], heartbeat 5000 in [5000, 15000]


def test_an_override_within_the_bounds_is_normalized() -> None:
    assert validate_group_configs({SESSION_TIMEOUT: "050000"}, {}, BROKER) == \
        {SESSION_TIMEOUT: "50000"}
    assert validate_group_configs({SESSION_TIMEOUT: None}, {SESSION_TIMEOUT: "50000"},
                                  BROKER) == {SESSION_TIMEOUT: None}


@pytest.mark.parametrize(("changes", "current", "says"), [
    ({SESSION_TIMEOUT: "44999"}, {}, "between 45000"),
    ({SESSION_TIMEOUT: "60001"}, {}, "and 60000"),
    ({HEARTBEAT_INTERVAL: "4999"}, {}, "between 5000"),
    ({SESSION_TIMEOUT: "soon"}, {}, "not an integer"),
    ({"share.record.lock.duration.ms": "30000"}, {}, "no share or streams groups"),
    ({"consumer.session.timeout": "50000"}, {}, "unknown group config"),
])
def test_refused(changes: dict[str, str | None], current: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        validate_group_configs(changes, current, BROKER)


def test_the_heartbeat_stays_below_the_session_with_what_is_already_set() -> None:
    broker = {**BROKER, "group.consumer.max.heartbeat.interval.ms": "60000"}
    with pytest.raises(ConfigError, match="must be less than"):
        validate_group_configs({HEARTBEAT_INTERVAL: "50000"}, {SESSION_TIMEOUT: "50000"},
                               broker)
    assert validate_group_configs({HEARTBEAT_INTERVAL: "49999"}, {SESSION_TIMEOUT: "50000"},
                                  broker) == {HEARTBEAT_INTERVAL: "49999"}


def test_effective_values_come_from_the_group_else_the_broker() -> None:
    overrides = {SESSION_TIMEOUT: "50000"}
    assert effective_group_configs(overrides, BROKER) == {
        HEARTBEAT_INTERVAL: ("5000", False), SESSION_TIMEOUT: ("50000", True)}
    assert group_settings(overrides, BROKER) == GroupSettings(50000, 5000)
