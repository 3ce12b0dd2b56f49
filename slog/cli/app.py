"""The ``slog`` command: subcommand groups are registered here."""

from __future__ import annotations

import typer

from slog.cli import (
    broker_cmd,
    cluster_cmd,
    consume_cmd,
    demo,
    elect_cmd,
    group_cmd,
    produce_cmd,
    reassign_cmd,
    topic_cmd,
)

app = typer.Typer(
    name="slog",
    help="slog: a Kafka-compatible commit log for one machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(broker_cmd.app, name="broker")
app.add_typer(cluster_cmd.app, name="cluster")
app.add_typer(group_cmd.app, name="group")
app.add_typer(topic_cmd.app, name="topic")
app.command(name="produce")(produce_cmd.produce)
app.command(name="consume")(consume_cmd.consume)
app.command(name="demo")(demo.demo)
app.add_typer(reassign_cmd.app, name="reassign")
app.command(name="elect-leaders")(elect_cmd.elect_leaders)
app.command(name="preferred-leader-election")(elect_cmd.preferred_leader_election)


def main() -> None:
    """Entry point: no traceback reaches the user unless SLOG_DEBUG is set."""
    import os
    import sys

    try:
        app()
    except Exception as exc:
        if os.environ.get("SLOG_DEBUG"):
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        print("hint: rerun with SLOG_DEBUG=1 for the traceback, and please report it",
              file=sys.stderr)
        raise SystemExit(1) from None
