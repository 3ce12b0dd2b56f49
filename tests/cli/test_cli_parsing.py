"""Argument parsing and exit codes, without a broker (typer's CliRunner, in process)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from slog.cli.app import app
from slog.cli.consume_cmd import parse_offset, render
from slog.client.types import ConsumerRecord

runner = CliRunner()
NOWHERE = "127.0.0.1:1"  # nothing listens on port 1


@pytest.mark.parametrize(
    "args",
    [
        ["produce", "t", "--acks", "2", "-b", NOWHERE],
        ["produce", "t", "--compression", "brotli", "-b", NOWHERE],
        ["produce", "t", "-H", "novalue", "-b", NOWHERE],
        ["consume", "t", "--offset", "yesterday", "-b", NOWHERE],
        ["topic", "create", "t", "-c", "retention.ms", "-b", NOWHERE],
        ["topic", "create", "t", "--replica-assignment", "1:x", "-b", NOWHERE],
        ["topic", "alter", "t", "-b", NOWHERE],
        ["topic", "list", "--output", "xml", "-b", NOWHERE],
        ["produce", "t", "--output", "xml", "-b", NOWHERE],
        ["topic", "create"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args",
    [["topic", "list"], ["topic", "describe", "t"], ["topic", "delete", "t"],
     ["consume", "t", "-e"]],
)
def test_unreachable_broker_exits_3_with_a_hint(args: list[str]) -> None:
    result = runner.invoke(app, [*args, "-b", NOWHERE])
    assert result.exit_code == 3, result.output
    assert "slog broker start" in result.output


def test_offset_specs() -> None:
    assert parse_offset("beginning") == ("beginning", 0)
    assert parse_offset("end") == ("end", 0)
    assert parse_offset("42") == ("absolute", 42)
    assert parse_offset("-10") == ("relative", 10)
    assert parse_offset("@1700000000000") == ("timestamp", 1700000000000)


def test_kcat_format_tokens() -> None:
    record = ConsumerRecord("t", 2, 7, 1234, 0, b"k", b"v", (("h", b"x"),))
    assert render("%t %p %o %T %k %v %s %h %K %S%%\\n", record) == \
        "t 2 7 1234 k v v h=x 1 1%\n"
    null = ConsumerRecord("t", 0, 0, 0, 0, None, None, ())
    assert render("[%k][%v] %K %S", null) == "[][] -1 -1"


def test_the_exit_code_table() -> None:
    """cli/common's one table: a plain ValueError is a bug (no row), not a usage error."""
    from slog.cli.common import (
        EXIT_FAILURE,
        EXIT_NOT_FOUND,
        EXIT_UNREACHABLE,
        EXIT_USAGE,
        ArgumentError,
        explain_error,
    )
    from slog.client.errors import (
        BrokerUnavailableError,
        ErrorCode,
        InvalidArgumentError,
        KafkaError,
    )

    def exit_code(exc: BaseException) -> int | None:
        explained = explain_error(exc, NOWHERE)
        return None if explained is None else explained[2]

    assert explain_error(ValueError("a bug"), NOWHERE) is None
    assert explain_error(KeyError("a bug"), NOWHERE) is None
    assert exit_code(ArgumentError("--topic takes TOPIC")) == EXIT_USAGE
    assert exit_code(InvalidArgumentError("bad bootstrap address")) == EXIT_USAGE
    assert exit_code(BrokerUnavailableError("no broker")) == EXIT_UNREACHABLE
    assert exit_code(TimeoutError("slow")) == EXIT_UNREACHABLE
    for code in (ErrorCode.unknown_topic_or_partition, ErrorCode.group_id_not_found,
                 ErrorCode.unknown_topic_id):
        assert exit_code(KafkaError.for_code(code)) == EXIT_NOT_FOUND
    message, hint, code = explain_error(KafkaError.for_code(36, "t exists"), NOWHERE) or ()
    assert (message, code) == ("TOPIC_ALREADY_EXISTS: t exists", EXIT_FAILURE)
    assert hint is not None and "slog topic describe" in hint
    assert exit_code(KafkaError.for_code(31999)) == EXIT_FAILURE  # newer than kio: still 1


def test_a_plain_value_error_inside_a_command_is_reported_as_a_bug() -> None:
    from slog.cli.common import ArgumentError, client_errors

    with pytest.raises(ValueError, match="not the user's mistake"), client_errors(NOWHERE):
        raise ValueError("not the user's mistake")
    with pytest.raises(SystemExit) as exited, client_errors(NOWHERE):
        raise ArgumentError("--topic takes TOPIC or TOPIC:P,P")
    assert exited.value.code == 2
