"""``slog dashboard``: a live terminal view of brokers, partitions and groups."""

from __future__ import annotations

import re
import sys
from typing import Annotated

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    BootstrapOption,
    DataDirOption,
    default_data_dir,
    fail,
)

_INTERVAL = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m)?")
MIN_REFRESH_S = 0.1


def parse_interval(text: str) -> float:
    """``1s``, ``500ms``, ``2m`` or plain seconds → seconds."""
    match = _INTERVAL.fullmatch(text.strip().lower())
    if not match:
        raise ValueError(f"--refresh takes a duration like 1s or 500ms, not {text!r}")
    value = float(match.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}[match.group(2)]
    if value < MIN_REFRESH_S:
        raise ValueError(f"--refresh must be at least {MIN_REFRESH_S * 1000:.0f}ms")
    return value


def dashboard(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    refresh: Annotated[str, typer.Option(
        "--refresh", help="How often to refresh, e.g. 1s or 500ms.")] = "1s",
    data_dir: DataDirOption = None,
) -> None:
    """Watch a cluster live: brokers, ISR, partitions, consumer groups and events.

    Works against any Kafka-compatible cluster through the protocol; when the
    cluster's data dir is on this machine, events come from its metadata log.

    Example: slog dashboard -b 127.0.0.1:9092 --refresh 500ms
    """
    try:
        interval = parse_interval(refresh)
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE)
    if not sys.stdout.isatty():
        fail("slog dashboard needs a terminal", hint="use `slog cluster status` in scripts",
             code=EXIT_USAGE)
    from slog.tui.app import DashboardApp
    from slog.tui.collect import Collector

    source = Collector(bootstrap, data_dir=(data_dir or default_data_dir()).expanduser())
    DashboardApp(source, refresh_s=interval).run()
