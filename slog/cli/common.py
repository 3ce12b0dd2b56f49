"""Options and error handling shared by every command."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from slog.core.errors import SlogError

# Re-exported: the defaults live in core so that spark and tui can use them too.
from slog.core.names import DEFAULT_BOOTSTRAP as DEFAULT_BOOTSTRAP
from slog.core.names import default_data_dir as default_data_dir

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_FOUND = 4


class IsolationLevel(StrEnum):
    """Kafka's isolation levels (consume, spark-export)."""

    read_uncommitted = "read_uncommitted"
    read_committed = "read_committed"


class ArgumentError(SlogError, ValueError):
    """An argument a command cannot use, found after parsing (a usage error: exit 2)."""


DEBUG = {"on": bool(os.environ.get("SLOG_DEBUG"))}  # set by the global --debug too


def debug_enabled() -> bool:
    """``--debug`` or ``SLOG_DEBUG``: show tracebacks instead of one-line errors."""
    return DEBUG["on"]


def fail(message: str, hint: str | None = None, code: int = EXIT_FAILURE) -> NoReturn:
    """Print a one-line error (and a hint) on stderr and exit with ``code``."""
    print(f"error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    raise SystemExit(code)



BootstrapOption = Annotated[str, typer.Option(
    "--bootstrap", "-b", envvar="SLOG_BOOTSTRAP",
    help="Broker list host:port[,host:port...] (or a --profile's).")]

DataDirOption = Annotated[Path | None, typer.Option(
    "--data-dir", envvar="SLOG_DATA_DIR",
    help="Data directory shared by the brokers [default: ~/.local/share/slog].")]


# TLS client settings: option name -> the environment variable the client reads
# (slog.client.connection.tls_context_from_env). Every command with --bootstrap gets the
# options (see slog.cli.app.finish_help), so one definition covers them all.
TLS_SETTINGS: dict[str, str] = {"tls": "SLOG_TLS", "ca": "SLOG_TLS_CA",
                                "cert": "SLOG_TLS_CERT", "key": "SLOG_TLS_KEY"}
TLS_PANEL = "TLS (SSL and SASL_SSL listeners)"


def _export_tls_setting(ctx: Any, param: Any, value: Any) -> Any:
    """Hand a TLS option to the client through its environment variable; a CA or a
    certificate implies --tls."""
    if value in (None, False, ""):
        return value
    os.environ[TLS_SETTINGS[param.name]] = "1" if value is True else str(value)
    if param.name != "key":
        os.environ["SLOG_TLS"] = "1"
    return value


def tls_options() -> list[Any]:
    """--tls, --ca, --cert and --key, for a command that connects to brokers."""
    from typer.core import TyperOption

    def option(flag: str, help_text: str, **kwargs: Any) -> Any:
        name = flag.lstrip("-")
        return TyperOption(param_decls=[flag], envvar=TLS_SETTINGS[name], expose_value=False,
                           callback=_export_tls_setting, help=help_text,
                           rich_help_panel=TLS_PANEL, show_envvar=False, **kwargs)

    return [
        option("--tls", "Connect over TLS (an SSL or SASL_SSL listener).", is_flag=True,
               default=False),
        option("--ca", "CA bundle (PEM) the brokers' certificates are checked against; "
                       "implies --tls [default: the system's CAs].", metavar="PATH"),
        option("--cert", "Client certificate (PEM), for brokers with ssl.client.auth; "
                         "implies --tls.", metavar="PATH"),
        option("--key", "Private key (PEM) of --cert, when not in the same file.",
               metavar="PATH"),
    ]


def complete_topics(ctx: typer.Context, incomplete: str) -> list[str]:
    from slog.cli.complete import topic_names

    return topic_names(ctx, incomplete)


def complete_groups(ctx: typer.Context, incomplete: str) -> list[str]:
    from slog.cli.complete import group_names

    return group_names(ctx, incomplete)


def topic_argument(help_text: str) -> Any:
    """A positional TOPIC, completed from the cluster."""
    return typer.Argument(help=help_text, show_default=False, metavar="TOPIC",
                          autocompletion=complete_topics)


def group_argument(help_text: str) -> Any:
    """A positional GROUP, completed from the cluster."""
    return typer.Argument(help=help_text, show_default=False, metavar="GROUP",
                          autocompletion=complete_groups)


# Topics and groups are positional everywhere, completed from the cluster.
TopicsArgument = Annotated[list[str], topic_argument("Topic names.")]
OptionalTopicsArgument = Annotated[list[str] | None, topic_argument("Topic names (default: all).")]
# Destructive commands: never all by default; names, --regex or both are required.
ChosenTopicsArgument = Annotated[list[str] | None, topic_argument(
    "Topic names (required unless --regex is given; never all by default).")]
TopicArgument = Annotated[str, topic_argument("Topic name.")]
OptionalTopicArgument = Annotated[str | None, topic_argument("Topic name.")]
OptionalGroupsArgument = Annotated[list[str] | None, group_argument("Group ids (default: all).")]
ChosenGroupsArgument = Annotated[list[str] | None, group_argument(
    "Group ids (required unless --regex is given; never all by default).")]
GroupArgument = Annotated[str, group_argument("Group id.")]
RegexOption = Annotated[str | None, typer.Option(
    "--regex", "-r", help="Also every name matching this regular expression (Python re, "
                          "anchored at both ends).")]


def select_names(names: list[str] | None, regex: str | None, available: list[str]
                 ) -> list[str] | None:
    """``names`` plus those of ``available`` that ``regex`` matches completely, in order and
    without repeats; None when neither is given (meaning: all)."""
    import re

    if regex is None:
        return list(dict.fromkeys(names)) if names else None
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        fail(f"--regex {regex!r} is not a valid regular expression: {exc}", code=EXIT_USAGE)
    matched = [name for name in available if pattern.fullmatch(name)]
    return list(dict.fromkeys([*(names or []), *matched]))


def topics_by_name_or_regex(admin: Any, names: list[str] | None, regex: str | None
                            ) -> list[str]:
    """``names`` plus the topics ``regex`` matches (internal ones too); every topic but
    the internal ones when neither is given. Named topics are not checked to exist."""
    every = not names and regex is None
    available = [t.name for t in admin.list_topics(include_internal=bool(regex))] \
        if regex or every else []
    return available if every else select_names(names, regex, available) or []


@contextmanager
def client_errors(bootstrap: str) -> Iterator[None]:
    """Turn client exceptions into one-line errors with the documented exit codes."""
    from slog.cli.output import StdoutClosed, discard_stdout, stdout_reader_gone

    try:
        yield
    except StdoutClosed:
        raise typer.Exit(EXIT_OK) from None  # `slog ... | head`: as other Unix tools do
    except BrokenPipeError as exc:
        if stdout_reader_gone():
            discard_stdout()
            raise typer.Exit(EXIT_OK) from None
        explained = explain_error(exc, bootstrap)
        if explained is None:
            raise
        fail(*explained)
    except Exception as exc:
        explained = explain_error(exc, bootstrap)
        if explained is None:
            raise  # no row for it: a bug, which main() reports as unexpected
        fail(*explained)


def explain_error(exc: BaseException, bootstrap: str) -> tuple[str, str | None, int] | None:
    """(message, hint, exit code) from the first row of the error table matching ``exc``;
    None when no row does: a bug, not an answer."""
    from slog.client.errors import KafkaError

    for match, exit_code, message, hint in _error_table():
        if isinstance(match, int):
            if not (isinstance(exc, KafkaError) and exc.code == match):
                continue
        elif not isinstance(exc, match):
            continue
        text = str(exc)
        return (message.format(exc=text, first_line=text.splitlines()[0] if text else "",
                               bootstrap=bootstrap), hint, exit_code)
    return None


def _error_table() -> list[tuple[type[BaseException] | int, int, str, str | None]]:
    """The CLI's one table from an error a command did not handle to its exit code
    (docs/cli.md "Exit codes"): (exception type or Kafka error code, exit code, message
    template, hint). The first match wins, so codes and subclasses come before their
    bases. A ``ValueError`` is a usage error only when it says so (``ArgumentError``, or
    the client's ``InvalidArgumentError``): any other one is a bug, reported as unexpected."""
    from slog.client.connection import UnsupportedApiError
    from slog.client.errors import (
        BrokerUnavailableError,
        ErrorCode,
        InvalidArgumentError,
        KafkaError,
    )

    return [
        (BrokerUnavailableError, EXIT_UNREACHABLE, "{first_line}",
         "start one with `slog broker start --id 1` or pass --bootstrap"),
        (ErrorCode.unknown_topic_or_partition, EXIT_NOT_FOUND, "{exc}",
         "list topics with `slog topic list`"),
        (ErrorCode.unknown_topic_id, EXIT_NOT_FOUND, "{exc}", None),
        (ErrorCode.group_id_not_found, EXIT_NOT_FOUND, "{exc}", None),
        (ErrorCode.topic_already_exists, EXIT_FAILURE, "{exc}",
         "describe it with `slog topic describe NAME`"),
        (ErrorCode.invalid_replication_factor, EXIT_FAILURE, "{exc}",
         "the replication factor cannot exceed the live brokers"),
        (ErrorCode.invalid_topic_exception, EXIT_FAILURE, "{exc}",
         "topic names use only letters, digits, '.', '_' and '-'"),
        (KafkaError, EXIT_FAILURE, "{exc}", None),
        (InvalidArgumentError, EXIT_USAGE, "{exc}", None),
        (ArgumentError, EXIT_USAGE, "{exc}", None),
        # Another Kafka-protocol cluster may lack an API: say which, not "lost the connection".
        (UnsupportedApiError, EXIT_FAILURE, "{exc}", None),
        (ConnectionError, EXIT_UNREACHABLE, "lost the connection to {bootstrap}: {exc}", None),
        (TimeoutError, EXIT_UNREACHABLE, "lost the connection to {bootstrap}: {exc}", None),
    ]


# One long option name, one idea, in every command (--partition is a partition number,
# --partitions a count, --regex a name pattern ...), with the exceptions below. A few flags
# follow the tool their users know (rpk, kcat, Kafka's scripts) and so stand for different
# things in different commands. docs/cli.md lists them; tests/cli/test_help_and_docs.py
# fails when a flag gains a meaning that is not listed here.

# Short flag -> {long option it stands for: meaning}.
SHORT_FLAG_MEANINGS: dict[str, dict[str, str]] = {
    "-p": {"--partition": "a partition number",
           "--partitions": "a partition count (as `rpk topic create -p`)"},
    "-r": {"--regex": "a regular expression over topic or group names",
           "--replication-factor": "a replica count (as `rpk topic create -r`)"},
    "-f": {"--file": "a file to read records from",
           "--format": "a kcat `-f` format string"},
    "-o": {"--output": "table, json or yaml",
           "--offset": "where to start reading (kcat's `-o`)"},
    "-t": {"--topic": "a topic name",
           "--time": "a time to look offsets up at (kafka-get-offsets' `--time`)"},
    "-n": {"--brokers": "a broker count", "--max-messages": "a record limit",
           "--records": "a record count"},
}
# Long option -> {a command using it: meaning there}; one command per meaning.
LONG_OPTION_MEANINGS: dict[str, dict[str, str]] = {
    "--brokers": {"cluster up": "how many brokers to run",
                  "reassign generate": "the broker ids to place replicas on "
                                       "(kafka-reassign-partitions' `--broker-list`)"},
    "--format": {"consume": "a kcat format string for each record",
                 "spark-export": "the file format written (parquet, json, csv, orc)"},
    "--tls": {"cluster up": "serve TLS: SSL listeners with a local CA's certificates",
              "produce": "connect over TLS (every command that takes --bootstrap)"},
    "--state": {"group list": "a filter: only groups in these states",
                "group describe": "a flag: show the state view (as kafka-consumer-groups)"},
    "--type": {"elect-leaders": "the election type, preferred or unclean",
               "group list": "a filter: only groups of these types "
                             "(as kafka-consumer-groups `--list --type`)"},
}
