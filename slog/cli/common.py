"""Options and error handling shared by every command."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

# Re-exported: the defaults live in core so that spark and tui can use them too.
from slog.core.names import DEFAULT_BOOTSTRAP as DEFAULT_BOOTSTRAP
from slog.core.names import default_data_dir as default_data_dir

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_FOUND = 4


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


@contextmanager
def client_errors(bootstrap: str) -> Iterator[None]:
    """Turn client exceptions into one-line errors with the documented exit codes."""
    from slog.client.errors import BrokerUnavailableError, KafkaError

    try:
        yield
    except BrokerUnavailableError as exc:
        fail(str(exc).splitlines()[0] or f"no broker at {bootstrap}",
             hint="start one with `slog broker start --id 1` or pass --bootstrap",
             code=EXIT_UNREACHABLE)
    except KafkaError as exc:
        code = EXIT_NOT_FOUND if exc.name in _NOT_FOUND else EXIT_FAILURE
        fail(str(exc), hint=_HINTS.get(exc.name), code=code)
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE)
    except (ConnectionError, TimeoutError) as exc:
        fail(f"lost the connection to {bootstrap}: {exc}", code=EXIT_UNREACHABLE)


_NOT_FOUND = {"UNKNOWN_TOPIC_OR_PARTITION", "GROUP_ID_NOT_FOUND", "UNKNOWN_TOPIC_ID"}
_HINTS = {
    "UNKNOWN_TOPIC_OR_PARTITION": "list topics with `slog topic list`",
    "TOPIC_ALREADY_EXISTS": "describe it with `slog topic describe NAME`",
    "INVALID_REPLICATION_FACTOR": "the replication factor cannot exceed the live brokers",
    "INVALID_TOPIC_EXCEPTION": "topic names use only letters, digits, '.', '_' and '-'",
}


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
}
