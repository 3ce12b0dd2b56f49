"""The error table: every code slog can send is Kafka's, with Kafka's number and flags."""

from __future__ import annotations

import ast
import functools
import importlib
import pickle
from pathlib import Path

import pytest

from slog.client.errors import KafkaError
from slog.core.errors import SlogError
from slog.core.kafka_errors import (
    INVALID_METADATA,
    ErrorCode,
    KafkaApiError,
    error_name,
    invalid_metadata,
    retriable,
)
from slog.replication.controller import ControllerError

SLOG = Path(__file__).resolve().parents[2] / "slog"

# Kafka's numbers and (spot checks of) its retriable flags, as data: every code slog names
# must be listed, so a new one fails test_every_code_slog_names_is_kafkas_with_its_number
# until its number is checked against Kafka's table and added.
_ROWS = [line.split() for line in
         (Path(__file__).parent / "kafka_error_codes.txt").read_text().splitlines()
         if line.strip() and not line.startswith("#")]
KAFKA_NUMBERS = {name: int(number) for number, name, _ in _ROWS}
KAFKA_RETRIABLE = {name: flag == "yes" for _, name, flag in _ROWS if flag != "-"}


@functools.cache
def _slog_nodes() -> list[tuple[Path, ast.AST]]:
    """Every syntax node of slog's source, with its file (parsed once for the tests)."""
    return [(path, node) for path in sorted(SLOG.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(), str(path)))]


def test_every_code_slog_names_is_kafkas_with_its_number() -> None:
    named = {node.attr for _, node in _slog_nodes() if isinstance(node, ast.Attribute)
             and isinstance(node.value, ast.Name) and node.value.id == "ErrorCode"}
    assert len(named) > 40  # the walk found the handlers, controller and coordinator
    assert named - KAFKA_NUMBERS.keys() == set(), "add these codes' Kafka numbers above"
    for name in named:
        assert ErrorCode[name].value == KAFKA_NUMBERS[name], name


def test_the_enum_agrees_with_kafkas_numbers() -> None:
    for name, number in KAFKA_NUMBERS.items():
        assert ErrorCode(number) is ErrorCode[name]
    assert (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
            ErrorCode.fenced_leader_epoch) == (6, 3, 74)


def test_no_error_name_is_a_string_in_slog() -> None:
    """Kafka error names appear in slog only as enum members, never as string literals."""
    names = {m.name for m in ErrorCode} | {m.name.upper() for m in ErrorCode}
    names.discard("none")  # also an ordinary word
    found = [f"{path.relative_to(SLOG.parent)}:{node.lineno}: {node.value}"
             for path, node in _slog_nodes()
             if isinstance(node, ast.Constant) and node.value in names]
    assert found == []


def test_retriable_and_invalid_metadata_flags_follow_kafka() -> None:
    for name, expected in KAFKA_RETRIABLE.items():
        assert retriable(ErrorCode[name]) is expected, name
        assert KafkaApiError(ErrorCode[name]).retriable is expected, name
        assert KafkaError.for_code(ErrorCode[name]).retriable is expected, name
    assert all(code.retriable for code in INVALID_METADATA)  # Kafka's family is retriable
    assert invalid_metadata(ErrorCode.not_leader_or_follower)
    assert invalid_metadata(ErrorCode.fenced_leader_epoch)
    assert not invalid_metadata(ErrorCode.unknown_leader_epoch)  # retry without a refresh
    assert not invalid_metadata(ErrorCode.not_coordinator)
    assert not invalid_metadata(31999) and not retriable(31999)
    assert KafkaError.for_code(6).invalid_metadata and not KafkaError.for_code(36).invalid_metadata


def test_client_and_server_read_one_table() -> None:
    for code in ErrorCode:
        client = KafkaError.for_code(code)
        server = KafkaApiError(code)
        assert (client.name, client.retriable, client.invalid_metadata) == \
            (server.name, server.retriable, server.invalid_metadata) == \
            (error_name(code), retriable(code), invalid_metadata(code))
    assert error_name(31999) == "UNKNOWN_ERROR_31999"


def test_kafka_api_error_carries_a_member_not_a_name() -> None:
    exc = ControllerError(ErrorCode.invalid_config, "retention.ms must be a number")
    assert isinstance(exc, KafkaApiError) and isinstance(exc, SlogError)
    assert exc.code is ErrorCode.invalid_config and exc.name == "INVALID_CONFIG"
    assert str(exc) == exc.message == "retention.ms must be a number"
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is ControllerError and again.code is exc.code
    assert str(KafkaApiError(ErrorCode.not_controller)) == "not_controller"
    with pytest.raises(TypeError):
        KafkaApiError("invalid_config", "a name is not a code")  # type: ignore[arg-type]


def test_every_error_class_slog_raises_on_purpose_is_a_slog_error() -> None:
    """Outside the client (whose errors mirror Kafka's clients'), every public exception
    class slog defines derives from SlogError."""
    checked, stray = 0, []
    for path in sorted(SLOG.rglob("*.py")):
        if path.parent.name == "client" or path.stem == "__main__":
            continue
        module = importlib.import_module(
            ".".join(path.relative_to(SLOG.parent).with_suffix("").parts))
        for name, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, BaseException) \
                    and value.__module__ == module.__name__ and not name.startswith("_"):
                checked += 1
                if not issubclass(value, SlogError):
                    stray.append(f"{module.__name__}.{name}")
    assert checked > 30 and stray == []
