"""The pure parts of the config handlers: BROKER resource names and how (Incremental)
AlterConfigs requests turn into changes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slog.broker.handlers.configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    _apply_ops,
    _replace_all,
    broker_resource_id,
)
from slog.core.kafka_errors import ErrorCode
from slog.replication.controller import ControllerError


@pytest.mark.parametrize(("name", "expected"), [("", None), ("3", 3), ("2147483647", 2**31 - 1)])
def test_broker_resource_names(name: str, expected: int | None) -> None:
    assert broker_resource_id(name) == expected


@pytest.mark.parametrize("name", ["x", "-1", "1.0", " 1", "2147483648", "\u0661\u0662"])
def test_bad_broker_resource_names(name: str) -> None:
    with pytest.raises(ValueError, match="invalid broker resource name"):
        broker_resource_id(name)


def _op(name: str, operation: int, value: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, config_operation=operation, value=value)


def test_incremental_operations() -> None:
    current = {"log.cleanup.policy": "delete", "log.retention.ms": "5"}
    changes = _apply_ops(current, [
        _op("log.cleanup.policy", OP_APPEND, "compact"),
        _op("log.retention.ms", OP_DELETE),
        _op("max.connections", OP_SET, "9"),
    ])
    assert changes == {"log.cleanup.policy": "delete,compact", "log.retention.ms": None,
                       "max.connections": "9"}
    assert _apply_ops(current, [_op("log.cleanup.policy", OP_SUBTRACT, "delete")]) == \
        {"log.cleanup.policy": None}
    with pytest.raises(ControllerError) as exc:
        _apply_ops(current, [_op("log.retention.ms", OP_APPEND, "1")])
    assert exc.value.code == ErrorCode.invalid_config
    with pytest.raises(ControllerError) as exc:
        _apply_ops(current, [_op("log.retention.ms", 9, "1")])
    assert exc.value.code == ErrorCode.invalid_request


def test_legacy_alter_replaces_the_whole_set() -> None:
    current = {"retention.ms": "1", "segment.bytes": "2000"}
    given = [SimpleNamespace(name="segment.bytes", value="3000"),
             SimpleNamespace(name="cleanup.policy", value=None)]
    assert _replace_all(current, given) == {"retention.ms": None, "segment.bytes": "3000"}
