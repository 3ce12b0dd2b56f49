"""The ``slog`` command: subcommand groups are registered here."""

from __future__ import annotations

import typer

from slog.cli import broker_cmd, demo

app = typer.Typer(
    name="slog",
    help="slog: a Kafka-compatible commit log for one machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(broker_cmd.app, name="broker")
app.command(name="demo")(demo.demo)


def main() -> None:
    app()
