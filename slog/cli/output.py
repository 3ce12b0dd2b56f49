"""Printing data the same way in every command: a table for people, JSON or YAML for scripts.

Tables have upper-case headers and ``-`` for values that do not apply. Colour
appears only on a terminal and never when ``NO_COLOR`` is set. JSON and YAML go
to stdout with the stable field names of :mod:`slog.cli.schema`; errors always
go to stderr.
"""

from __future__ import annotations

import json
import os
import select
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import Enum, StrEnum
from typing import Annotated, Any

import typer


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"

    @property
    def structured(self) -> bool:
        """JSON or YAML: data for scripts, nothing else on stdout."""
        return self is not OutputFormat.table


OutputOption = Annotated[OutputFormat, typer.Option(
    "--output", "-o", help="table for people; json or yaml for scripts.")]
# `slog consume` keeps -o for --offset, as kcat does.
LongOutputOption = Annotated[OutputFormat, typer.Option(
    "--output", help="table (the --format text), json (one object per line) or yaml "
                     "(one document per record).")]


class StdoutClosed(Exception):
    """The reader of stdout went away (``slog consume ... | head``): end quietly, status 0."""


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe nobody reads any more (poll reports an error on it).

    Tells a closed stdout apart from a broken connection to a broker: both
    raise BrokenPipeError.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def discard_stdout() -> None:
    """Point stdout's descriptor at the null device, so the flushes still to come
    (``finally`` blocks, the one at exit) succeed instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


@contextmanager
def until_stdout_closes() -> Iterator[None]:
    """Around a loop streaming to stdout: its reader going away raises StdoutClosed,
    with stdout already discarded so clean-up code can still flush and close."""
    try:
        yield
    except BrokenPipeError:
        if not stdout_reader_gone():
            raise
        discard_stdout()
        raise StdoutClosed from None


def colour_enabled(stream: Any) -> bool:
    """Colour only on a terminal, and never with ``NO_COLOR`` set (https://no-color.org)."""
    return bool(stream.isatty()) and not os.environ.get("NO_COLOR")


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) if value else "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    colour = colour_enabled(stream)
    return Console(file=stream, no_color=not colour, highlight=False,
                   force_terminal=None if colour else False)


def print_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str],
                title: str | None = None) -> None:
    headers = [c.upper().replace("_", "-") for c in columns]
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    if not sys.stdout.isatty():
        _print_plain(headers, cells)
        return
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for header in headers:
        table.add_column(header)
    for line in cells:
        table.add_row(*line)
    console().print(table)


def _print_plain(headers: list[str], cells: list[list[str]]) -> None:
    """Aligned columns and nothing else, for pipes (awk, cut, grep)."""
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    for line in [headers, *cells]:
        text = "  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True))
        sys.stdout.write(text.rstrip() + "\n")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def print_json_line(data: Any) -> None:
    sys.stdout.write(json.dumps(data, separators=(",", ":"), default=_json_default) + "\n")


def print_yaml(data: Any, *, document: bool = False) -> None:
    """YAML of the same data as the JSON (a round trip through JSON keeps the types equal);
    ``document`` starts it with ``---`` for a stream of documents."""
    import yaml

    plain = json.loads(json.dumps(data, default=_json_default))
    text = yaml.safe_dump(plain, sort_keys=False, allow_unicode=True,
                          explicit_start=document, default_flow_style=False)
    sys.stdout.write(text)


def print_data(data: Any, output: OutputFormat) -> None:
    """A JSON or YAML document (``output`` must be structured)."""
    if output is OutputFormat.yaml:
        print_yaml(data)
    else:
        print_json(data)


def print_record(data: Any, output: OutputFormat) -> None:
    """One item of a stream: a JSON line, or a YAML document."""
    if output is OutputFormat.yaml:
        print_yaml(data, document=True)
    else:
        print_json_line(data)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Enum):
        return value.value
    raise TypeError(f"cannot serialise {type(value).__name__}")


def emit(rows: list[dict[str, Any]], columns: Sequence[str], output: OutputFormat,
         title: str | None = None) -> None:
    """Print ``rows`` as a table, or as a JSON/YAML list of objects."""
    if output.structured:
        print_data(rows, output)
    else:
        print_table(rows, columns, title)


class Progress:
    """A rich progress bar on stderr when it is a terminal (and the output is not for a
    script); every method does nothing otherwise."""

    def __init__(self, bar: Any = None, task: Any = None):
        self._bar = bar
        self._task = task

    def advance(self, amount: float) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, amount)

    def update(self, completed: float | None = None, description: str | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=completed,
                             **({"description": description} if description else {}))


@contextmanager
def progress_bar(description: str, total: float | None, unit: str = "",
                 output: OutputFormat = OutputFormat.table,
                 in_bytes: bool = False) -> Iterator[Progress]:
    """A bar of ``total`` (``unit``s, or bytes with rates when ``in_bytes``)."""
    if output.structured or not sys.stderr.isatty():
        yield Progress()
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )
    from rich.progress import Progress as RichProgress

    counts = [DownloadColumn(), TransferSpeedColumn()] if in_bytes else \
        [MofNCompleteColumn(), TextColumn(unit)]
    bar = RichProgress(TextColumn("{task.description}"), BarColumn(), *counts,
                       TimeElapsedColumn(), console=console(stderr=True), transient=True)
    with bar:
        yield Progress(bar, bar.add_task(description, total=total))
