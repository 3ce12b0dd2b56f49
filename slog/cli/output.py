"""Printing data the same way in every command: a table for people, JSON for scripts.

Tables have upper-case headers and ``-`` for values that do not apply. Colour
appears only on a terminal and never when ``NO_COLOR`` is set. JSON goes to
stdout with stable field names; errors always go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum, StrEnum
from typing import Annotated, Any

import typer


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


OutputOption = Annotated[OutputFormat, typer.Option(
    "--output", "-o", help="table for people, json for scripts.")]
# `slog consume` keeps -o for --offset, as kcat does.
LongOutputOption = Annotated[OutputFormat, typer.Option(
    "--output", help="table (the --format text) or json (one object per line).")]


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
    colour = stream.isatty() and "NO_COLOR" not in os.environ
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


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Enum):
        return value.value
    raise TypeError(f"cannot serialise {type(value).__name__}")


def emit(rows: list[dict[str, Any]], columns: Sequence[str], output: OutputFormat,
         title: str | None = None) -> None:
    """Print ``rows`` as a table or as a JSON array of objects."""
    if output is OutputFormat.json:
        print_json(rows)
    else:
        print_table(rows, columns, title)
