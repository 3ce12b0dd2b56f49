"""``slog broker start|stop``: one broker daemon's lifecycle."""

from __future__ import annotations

from typing import Annotated

import typer

from slog.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    DataDirOption,
    default_data_dir,
    fail,
)
from slog.cli.output import OutputFormat, OutputOption, print_data

app = typer.Typer(help="Start and stop individual brokers.", no_args_is_help=True)
__all__ = ["DataDirOption", "app"]  # DataDirOption stays importable from here


@app.command()
def start(
    broker_id: Annotated[int, typer.Option("--id", help="Broker id (non-negative).")],
    data_dir: DataDirOption = None,
    listen: Annotated[str, typer.Option(help="host:port to listen on.")] = "127.0.0.1:9092",
    foreground: Annotated[bool, typer.Option(help="Run in this terminal instead.")] = False,
    config: Annotated[list[str] | None, typer.Option(
        "--config", "-c", help="Broker setting key=value (repeatable).")] = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Start broker N as a daemon (logs to brokers/N/broker.log).

    Example: slog broker start --id 1 --listen 127.0.0.1:9092
    """
    from slog.broker.__main__ import parse_listen
    from slog.broker.daemon import BrokerStartError, start_daemon
    from slog.core.config import BrokerConfig, ConfigError, parse_key_values
    from slog.core.errors import DataDirError
    from slog.core.listeners import configured_listeners

    root = (data_dir or default_data_dir()).expanduser().resolve()
    try:
        host, port = parse_listen(listen)
        overrides = parse_key_values(config or [])
        checked = BrokerConfig.build(broker_id, root, host, port, overrides)  # before forking
        configured_listeners(checked)  # listeners, protocol map, inter-broker listener
    except ConfigError as exc:
        fail(str(exc), code=EXIT_USAGE)
    if foreground:
        from slog.broker.main import run

        raise typer.Exit(run(BrokerConfig.build(broker_id, root, host, port, overrides)))
    try:
        info = start_daemon(broker_id, root, listen, overrides)
    except (BrokerStartError, DataDirError) as exc:
        fail(str(exc))
    if output.structured:
        print_data({"id": info.broker_id, "address": f"{info.host}:{info.port}",
                    "pid": info.pid, "status": "started"}, output)
    else:
        typer.echo(f"broker {info.broker_id} started on {info.host}:{info.port} "
                   f"(pid {info.pid})")


@app.command()
def stop(
    broker_id: Annotated[int, typer.Option("--id", help="Broker id.")],
    data_dir: DataDirOption = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Stop broker N cleanly (SIGTERM: flush, clean-shutdown marker, exit).

    Example: slog broker stop --id 1
    """
    from slog.broker.daemon import stop_daemon

    root = (data_dir or default_data_dir()).expanduser().resolve()
    if not stop_daemon(broker_id, root):
        fail(f"broker {broker_id} is not running on {root}", code=EXIT_NOT_FOUND)
    if output.structured:
        print_data({"id": broker_id, "status": "stopped"}, output)
    else:
        typer.echo(f"broker {broker_id} stopped")
