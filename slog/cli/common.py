"""Options and error handling shared by every command."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_FOUND = 4


def default_data_dir() -> Path:
    """``$SLOG_DATA_DIR``, else ``$XDG_DATA_HOME/slog`` (``~/.local/share/slog``)."""
    configured = os.environ.get("SLOG_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "slog"


def fail(message: str, hint: str | None = None, code: int = EXIT_FAILURE) -> NoReturn:
    """Print a one-line error (and a hint) on stderr and exit with ``code``."""
    print(f"error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    raise SystemExit(code)


DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

BootstrapOption = Annotated[str, typer.Option(
    "--bootstrap", "-b", envvar="SLOG_BOOTSTRAP",
    help="Broker list host:port[,host:port...].")]


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
